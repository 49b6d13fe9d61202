"""pplan.collector: the pause nests, re-enables only at the outermost exit, and freezes what it kept; the search,
which runs paused, leaves no reference cycle behind (what freezing its objects relies on)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pplan.collector import collector_paused
from pplan.profiles.catalog import load_hardware, load_model
from pplan.search import SearchRequest, top_configurations


@pytest.fixture(autouse=True)
def _restore_collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_pause_nests_and_only_the_outermost_exit_re_enables() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner exit leaves the outer pause in force
    assert gc.isenabled()


def test_a_pause_entered_with_the_collector_off_leaves_it_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_what_the_pause_kept_is_frozen() -> None:
    gc.enable()
    before = gc.get_freeze_count()
    with collector_paused():
        kept = [[i] for i in range(10_000)]  # 10,001 tracked lists, alive after the pause
    assert gc.get_freeze_count() >= before + len(kept) + 1
    assert gc.isenabled()


def test_a_search_leaves_no_reference_cycle() -> None:
    gc.collect()
    gc.disable()  # the pause then neither freezes nor re-enables: what the search left is still collectable
    result = top_configurations(
        load_model("llama3-8b"), load_hardware("h100-sxm-80gb"), SearchRequest(gpus=8, global_batch=128)
    )
    assert result.candidates
    assert gc.collect() == 0
