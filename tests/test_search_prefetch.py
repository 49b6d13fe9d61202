"""Structures built ahead in a forked child (pplan.search.prefetch) are the ones the search would build itself,
and a search with the child gives the same answer as one without."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from pplan.profiles.catalog import load_hardware, load_model
from pplan.recommend import recommendations
from pplan.schedules import periodic
from pplan.schedules.periodic import StructureKey, structure_key
from pplan.schedules.periodic.structure import STRUCTURES
from pplan.schedules.timeline import Durations
from pplan.search import SearchRequest
from pplan.search.prefetch import Prefetch, available

pytestmark = pytest.mark.skipif(not available(), reason="needs fork and a second CPU")


def test_the_child_sends_what_building_here_gives() -> None:
    """Each structure the child sends plays a step exactly as one built here does (unequal passes, a hop)."""
    cases = [("zbv", 8, 2, 64), ("1f1b", 4, 1, 32), ("dualpipe", 8, None, 128)]
    keys = [structure_key(*case) for case in cases]
    wanted = [k for k in keys if k is not None]
    assert len(wanted) == len(cases)
    durations = Durations(f=1.0, i=1.3, w=0.7)
    prefetch = Prefetch(lambda: iter(wanted))
    try:
        for (name, p, v, m), key in zip(cases, wanted, strict=True):
            deadline = time.monotonic() + 60
            while not prefetch.claimed(key) and time.monotonic() < deadline:
                time.sleep(0.001)
            got = prefetch.provide(key)  # claimed: waits for it
            assert got is not None
            periodic.clear_caches()
            STRUCTURES[key] = got[0]
            via_child = periodic.summarise(name, p, v, m, durations, 0.05)
            periodic.clear_caches()
            assert via_child == periodic.summarise(name, p, v, m, durations, 0.05)
        assert prefetch.provide(("1f1b", 16, 1, 0)) is None  # never claimed: the caller builds it
    finally:
        prefetch.close()
        periodic.clear_caches()


def test_the_child_skips_what_the_search_built() -> None:
    """A key the search asked for before the child claimed it (so built it itself) is not built again there."""
    first, second = structure_key("zbv", 8, 2, 64), structure_key("1f1b", 4, 1, 32)
    assert first is not None and second is not None
    gate = os.pipe()  # the child's key walk waits until the search has asked for `first`

    def keys() -> Iterator[StructureKey]:
        os.read(gate[0], 1)
        yield first
        yield second

    prefetch = Prefetch(keys)
    try:
        assert prefetch.provide(first) is None  # not claimed yet: the search builds it, and says so
        os.write(gate[1], b"x")
        deadline = time.monotonic() + 60
        while not prefetch.claimed(second) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert prefetch.provide(second) is not None
        assert not prefetch.claimed(first)  # skipped: never announced, never sent
    finally:
        prefetch.close()
        os.close(gate[0])
        os.close(gate[1])
        periodic.clear_caches()


def test_a_search_with_the_child_gives_the_same_answer() -> None:
    model, hw = load_model("llama3-70b"), load_hardware("h100-sxm-80gb")
    req = SearchRequest(gpus=2048, global_batch=1024)
    with_child = recommendations(model, hw, req)
    without = recommendations(model, hw, replace(req, prefetch=False))
    assert [r.request for r in with_child.candidates] == [r.request for r in without.candidates]
    assert [r.report.performance for r in with_child.candidates] == [
        r.report.performance for r in without.candidates
    ]
    assert with_child.rejected == without.rejected
