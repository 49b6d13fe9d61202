"""Pausing Python's cyclic garbage collector around pure, allocation-heavy computations (generating and reading
schedule lists, the search). Pure: no I/O."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: these computations allocate hundreds of thousands of short-lived,
    acyclic objects (freed by reference counting) while large caches stay alive, and each automatic collection
    walks every object alive (10-20 % of a search's time). Nothing is lost: whatever cycles appear are collected
    once it runs again. Nests: only the outermost pause re-enables it.

    Before re-enabling, every object alive is moved to the collector's permanent generation (`gc.freeze`):
    otherwise the first allocation after the pause starts a collection of everything the pause allocated and
    kept (all of it still in the youngest generation), about 0.1 s after a large search. Frozen objects are
    still freed by reference counting; only reference cycles among them would never be collected, and these
    computations make none (a search leaves no unreachable object: `gc.collect()` after one finds 0)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.freeze()
            gc.enable()
