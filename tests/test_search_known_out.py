"""A configuration out of memory at micro-batch size b0 is out at every larger b (`Engine.known_out`): the memory
lower bound that claim rests on grows with b, and a search that skips those bounds answers exactly as one that
computes them (top N, every count, the nearest misses)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator

import pytest

import pplan.search.engine as engine
from pplan.plan.configuration import make_plan
from pplan.profiles.catalog import load_hardware, load_model
from pplan.search import Query, SearchRequest, top_configurations
from pplan.search.bounds import ROUNDING_BYTES
from pplan.search.result import Ranking
from pplan.search.space import Candidate, enumerate_cuts

H100 = load_hardware("h100-sxm-80gb")


def _same_but_b(model_name: str, req: SearchRequest) -> tuple[Query, list[list[Candidate]]]:
    """Each configuration of the query's cuts (every cell) at each of its micro-batch sizes, smallest b first."""
    model = load_model(model_name)
    query = Query(model, H100, req)
    groups: dict[tuple[object, ...], list[Candidate]] = {}
    for cut in enumerate_cuts(model, H100, req, query.seq, Counter()):
        for i in range(len(cut)):
            cell = cut.cell(i)
            key = engine._b_free_key(cell)
            if key is not None:
                groups.setdefault(key, []).append(cell)
    return query, [sorted(cells, key=lambda c: c.b) for cells in groups.values() if len(cells) > 1]


@pytest.mark.parametrize(
    ("model_name", "gpus", "global_batch", "count", "schedules"),
    [
        ("qwen3-30b-a3b", 8, 32, 20, ("1f1b",)),
        pytest.param("mixtral-8x7b", 16, 64, 400, None, marks=pytest.mark.acceptance),
        pytest.param("qwen3-30b-a3b", 16, 64, 400, None, marks=pytest.mark.acceptance),
    ],
)
def test_the_memory_lower_bound_grows_with_the_micro_batch(
    model_name: str, gpus: int, global_batch: int, count: int, schedules: tuple[str, ...] | None
) -> None:
    """On every rank, the bound at a larger b is at least the bound at a smaller one, less the rounding slack
    the search allows for (b·k(m) never falls as b rises, m = B / (b·d)). A seeded sample of configurations."""
    req = SearchRequest(gpus=gpus, global_batch=global_batch, prefetch=False)
    if schedules is not None:
        req = SearchRequest(gpus=gpus, global_batch=global_batch, prefetch=False, schedules=schedules)
    query, groups = _same_but_b(model_name, req)
    sample = random.Random(45).sample(groups, min(count, len(groups)))
    for cells in sample:
        totals = [query.fit(c, 0).totals for c in cells]
        for small, large in itertools.pairwise(totals):
            assert all(x >= y - ROUNDING_BYTES for x, y in zip(large, small, strict=True)), cells[0].summary()


def _answer(
    monkeypatch: pytest.MonkeyPatch, model_name: str, req: SearchRequest, skip: bool
) -> tuple[Ranking, int]:
    """The search's answer, with or without skipping (`skip`), and how many configurations it skipped."""
    skipped = 0
    known_out = engine.Engine.known_out

    def counted(self: engine.Engine, *args: object) -> None:
        nonlocal skipped
        skipped += 1
        known_out(self, *args)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(engine.Engine, "known_out", counted)
        if not skip:
            patch.setattr(engine, "_b_free_key", lambda c: None)
        found = top_configurations(load_model(model_name), H100, req)
    return found, skipped


def _facts(found: Ranking) -> Iterator[object]:
    yield [(r.candidate.order, r.candidate.shard_group, r.candidate.reshard) for r in found.candidates]
    yield [r.scored.tokens_per_s for r in found.candidates]
    yield found.rejected
    yield found.closest_misses
    yield found.enumerated, found.bounded, found.simulated


@pytest.mark.parametrize(
    ("model_name", "gpus", "global_batch", "schedules"),
    [
        ("qwen3-30b-a3b", 8, 32, ("1f1b",)),
        pytest.param("qwen3-30b-a3b", 8, 32, None, marks=pytest.mark.acceptance),
        pytest.param("mixtral-8x7b", 16, 64, None, marks=pytest.mark.acceptance),
    ],
)
def test_skipping_larger_micro_batches_changes_no_answer(
    monkeypatch: pytest.MonkeyPatch,
    model_name: str,
    gpus: int,
    global_batch: int,
    schedules: tuple[str, ...] | None,
) -> None:
    """The same top N, counts and nearest misses whether the larger micro-batches are bounded or skipped; and
    some are skipped (else this tests nothing)."""
    req = SearchRequest(gpus=gpus, global_batch=global_batch, prefetch=False)
    if schedules is not None:
        req = SearchRequest(gpus=gpus, global_batch=global_batch, prefetch=False, schedules=schedules)
    computed, none_skipped = _answer(monkeypatch, model_name, req, skip=False)
    skipping, skipped = _answer(monkeypatch, model_name, req, skip=True)
    assert none_skipped == 0
    assert skipped > 0
    assert list(_facts(skipping)) == list(_facts(computed))


def test_a_copied_plan_is_the_plan_make_plan_builds() -> None:
    """`Query.plan` copies a configuration's plan to its other micro-batch sizes and recomputes
    (`Query._plan_at_b`): each copy equals `make_plan`'s (every field, the layer shape too), over a seeded sample
    of configurations asked in random order; and some were copied (else this tests nothing)."""
    req = SearchRequest(gpus=8, global_batch=32, prefetch=False, schedules=("1f1b", "interleaved-1f1b"))
    query, groups = _same_but_b("qwen3-30b-a3b", req)
    cells = [c for cells in random.Random(46).sample(groups, min(60, len(groups))) for c in cells]
    random.Random(47).shuffle(cells)
    for c in cells:
        got, want = query.plan(c), make_plan(query.model, c.request(req, query.seq))
        assert got == want and got.shape == want.shape, c.summary()
    assert len(query._plans) > len(query._plans_but_b)
