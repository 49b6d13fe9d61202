"""Structures built ahead in a forked child (pplan.search.prefetch) are the ones the search would build itself,
and a search with the child gives the same answer as one without."""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from pplan.errors import PplanError
from pplan.frozen import changed
from pplan.profiles.catalog import load_hardware, load_model
from pplan.recommend import recommendations
from pplan.schedules import periodic
from pplan.schedules.periodic import StructureKey, structure_key
from pplan.schedules.periodic.structure import STRUCTURES
from pplan.schedules.timeline import Durations
from pplan.search import SearchRequest
from pplan.search.bounds import Query
from pplan.search.engine import CutEntry, Engine, Entry, prefetch_keys
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


def _every_head_key(query: Query, req: SearchRequest, heap: list[Entry]) -> list[StructureKey]:
    """The child's walk done the long way: every head of every entry, best cheap bound first, bounded for memory
    (itself, else its ZeRO-3 form), the structure of its own plan where one passes; repeats dropped."""
    keys: list[StructureKey] = []
    for *_, item in sorted(heap, key=lambda e: (e[0], e[3])):
        assert isinstance(item, CutEntry)
        for i in item.lattice.heads:
            head = item.cut.cell(i)
            sharded = 3 in req.zero_stages and head.d * head.cp > 1 and head.zero < 3
            for cand in [head, changed(head, zero=3)] if sharded else [head]:
                try:
                    fit = query.fit(cand, item.base + i)
                except PplanError:
                    break
                if fit.fits(req.headroom_fraction):
                    plan = fit.plan
                    key = structure_key(plan.kind.name, plan.pp, plan.generator_v, plan.num_microbatches)
                    if key is not None and key not in keys:
                        keys.append(key)
                    break
    return keys


@pytest.mark.parametrize(
    ("model", "gpus", "batch", "schedules"),
    [
        ("llama3-70b", 256, 512, ("1f1b", "interleaved-1f1b", "zbv", "dualpipev", "zb-h1")),
        ("mixtral-8x7b", 64, 256, ("1f1b", "interleaved-1f1b", "dualpipe")),
    ],
)
def test_the_child_walks_the_structures_every_head_names(
    model: str, gpus: int, batch: int, schedules: tuple[str, ...]
) -> None:
    """`prefetch_keys` passes over entries whose structure is already named without bounding their heads: the
    same keys, in the same order, as bounding every head of every entry (the walk before)."""
    spec, hw = load_model(model), load_hardware("h100-sxm-80gb")
    req = SearchRequest(gpus=gpus, global_batch=batch, schedules=schedules)
    engine = Engine(spec, hw, req)
    engine.enumerate()
    heapq.heapify(engine.heap)
    walked = list(prefetch_keys(Query(spec, hw, req), engine.heap, req))
    assert len(walked) >= 3
    assert walked == _every_head_key(Query(spec, hw, req), req, engine.heap)
