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
    once it runs again. Nests: only the outermost pause re-enables it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
