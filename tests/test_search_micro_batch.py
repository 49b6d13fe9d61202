"""The micro-batch axis: every size that divides the local batch is tried (not only 1, 2, 4, 8), and the two
facts the search prunes the larger ones with hold: a cut's most frugal cells bound every cell's memory from
below (`Query.stages_out`), and the cheap bound never rises with more recompute (`Engine.push_cut`)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import replace

import pytest

from pplan.plan.configuration import make_plan
from pplan.plan.knobs import Recompute
from pplan.profiles.catalog import load_hardware, load_model
from pplan.search import Query, SearchRequest, brute_force, top_configurations
from pplan.search.rank import distinct
from pplan.search.space import Candidate, Cut, enumerate_cuts, sharding_variants

H100 = load_hardware("h100-sxm-80gb")
A100 = load_hardware("a100-sxm-80gb")


def test_every_divisor_of_the_local_batch_is_a_micro_batch() -> None:
    """8 GPUs at t = p = cp = 1: d = 8 and a global batch of 96 leaves 12 sequences per replica, so b runs over
    1, 2, 3, 4, 6 and 12 (m = 12, 6, 4, 3, 2, 1); at d = 4 (t = 2), 24 per replica: 1, 2, 3, 4, 6, 8, 12, 24."""
    model = load_model("llama3-8b")
    req = SearchRequest(gpus=8, global_batch=96, pp=1, cp=1, schedules=("1f1b",))
    query = Query(model, H100, req)
    cuts = list(enumerate_cuts(model, H100, req, query.seq, Counter()))
    by_d: dict[int, set[tuple[int, int]]] = {}
    for cut in cuts:
        by_d.setdefault(cut.d, set()).add((cut.b, cut.m))
    assert by_d[8] == {(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)}
    assert {b for b, _ in by_d[4]} == {1, 2, 3, 4, 6, 8, 12, 24}


def test_a_batch_that_does_not_split_over_d_is_rejected_once_per_cut_shape() -> None:
    """96 sequences do not split over d = 64 replicas (64 GPUs, t = p = cp = 1): one rejection, whatever b."""
    model = load_model("llama3-8b")
    req = SearchRequest(gpus=64, global_batch=96, tp=1, pp=1, cp=1, schedules=("1f1b",))
    rejected: Counter[object] = Counter()
    query = Query(model, H100, req)
    assert list(enumerate_cuts(model, H100, req, query.seq, rejected)) == []  # type: ignore[arg-type]
    assert sum(rejected.values()) == 1


def _sample_cuts(model_name: str, req: SearchRequest, count: int, seed: int) -> tuple[Query, list[Cut]]:
    model = load_model(model_name)
    query = Query(model, H100, req)
    cuts = list(enumerate_cuts(model, H100, req, query.seq, Counter()))
    return query, random.Random(seed).sample(cuts, min(count, len(cuts)))


def _exact_totals(query: Query, cut: Cut, i: int) -> list[tuple[int, ...]]:
    """Exact per-rank bytes of cell i and of its sharding variants."""
    out = []
    cells = [cut.cell(i)]
    cells += sharding_variants(cells[0], query.req, H100.gpus_per_node)
    for cell in cells:
        out.append(query.fit_exactly(query.fit(cell, i)).totals)
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_the_frugal_cells_bound_every_cells_memory(seed: int) -> None:
    """For each ZeRO stage of a cut, the cell recomputing the most with the fewest gradient bytes has a memory
    bound, per rank, no higher than the exact memory of any cell at that stage (less recompute, partial
    recompute, FP32 gradients, hybrid sharding): what lets `stages_out` drop a whole ZeRO stage of a cut."""
    req = SearchRequest(gpus=64, global_batch=768, max_vp=2, schedules=("1f1b", "interleaved-1f1b", "zb-h1"))
    query, cuts = _sample_cuts("llama3-70b", req, 12, seed)
    checked = 0
    for cut in cuts:
        per_option = len(cut.zeros) * len(cut.grads)
        frugal = [o for o, (_, mode, n) in enumerate(cut.options) if mode == "full" and n is None]
        assert frugal, "full recompute is asked"
        for z in range(len(cut.zeros)):
            bound = query.fit(cut.cell(frugal[0] * per_option + z * len(cut.grads)), 0).totals
            for o in range(len(cut.options)):
                for g in range(len(cut.grads)):
                    i = o * per_option + z * len(cut.grads) + g
                    for exact in _exact_totals(query, cut, i):
                        assert all(lo <= hi for lo, hi in zip(bound, exact, strict=True)), (cut.prefix, i)
                        checked += 1
            partial = cut.cell(z * len(cut.grads)).partial(1, 2) if cut.most_layers > 1 else None
            if partial is not None:
                exact = query.fit_exactly(query.fit(partial, 0)).totals
                assert all(lo <= hi for lo, hi in zip(bound, exact, strict=True)), (cut.prefix, "partial")
    assert checked > 100


@pytest.mark.parametrize("seed", [3, 4])
def test_the_cheap_bound_never_rises_along_the_recompute_chains(seed: int) -> None:
    """Along what waits on what (pplan.search.lattice.recompute_predecessor): no recompute ≥ selective, and no
    recompute ≥ the first layer ≥ the first two ≥ every layer recomputed, in the cheap bound of one cut."""
    req = SearchRequest(gpus=64, global_batch=768, max_vp=2, schedules=("1f1b", "interleaved-1f1b", "zbv"))
    query, cuts = _sample_cuts("llama3-70b", req, 40, seed)
    for cut in cuts:
        head = cut.cell(0)
        chains = [[_bound(query, head, "none"), _bound(query, head, "selective")]]
        partials = [_bound(query, head, "full", n) for n in range(1, min(cut.most_layers, 3))]
        chains.append([_bound(query, head, "none"), *partials, _bound(query, head, "full")])
        for chain in chains:
            assert all(a >= b * (1 - 1e-12) for a, b in itertools.pairwise(chain)), (cut.prefix, chain)


def _bound(query: Query, head: Candidate, mode: Recompute, n: int | None = None) -> float:
    """The cheap bound of `head` with recompute `mode` (N = `n` layers of every chunk)."""
    return query.cheap_bound(replace(head, recompute=mode, recompute_layers=n))


def _identity(c: object) -> tuple[object, ...]:
    names = ("t", "p", "cp", "d", "v", "b", "m", "first_layers", "last_layers", "recompute", "zero", "grad_dtype",
             "recompute_layers", "shard_group", "reshard")  # fmt: skip
    return (c.family.name, *(getattr(c, n) for n in names))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("model_name", "req"),
    [
        (
            "gpt-1.7b",
            SearchRequest(gpus=4, global_batch=36, top_n=6, schedules=("1f1b",), zero_stages=(0, 1)),
        ),
        pytest.param(
            "gpt-1.7b",
            SearchRequest(gpus=8, global_batch=72, top_n=8, schedules=("1f1b", "zb-h1")),
            marks=pytest.mark.acceptance,
        ),
        pytest.param(
            "llama3-8b",
            SearchRequest(gpus=16, global_batch=48, seq_len=4096, top_n=8, max_vp=2),
            marks=pytest.mark.acceptance,
        ),
    ],
)
def test_top_n_over_odd_micro_batches_is_the_brute_force_top_n(model_name: str, req: SearchRequest) -> None:
    """Batches with factors of 3 (36 = 2²·3², 72 = 2³·3², 48 = 2⁴·3): the search's top N is the brute force's
    over every micro-batch size (the larger queries in the acceptance tier)."""
    model = load_model(model_name)
    hw = H100
    found = top_configurations(model, hw, req)
    every = brute_force(model, hw, req)
    assert any(s.candidate.b not in (1, 2, 4, 8) for s in every)  # the new sizes are in the space compared
    reference, _ = distinct(every, req.top_n)
    assert [_identity(r.candidate) for r in found.candidates] == [_identity(s.candidate) for s in reference]


def test_530b_on_5128_a100s_runs_three_sequences_per_micro_batch() -> None:
    """Megatron-Turing-style 530B on 5,128 A100s at global batch 1,923 = 3 × 641: d = 641 leaves 3 sequences per
    replica, so b = 3 (one micro-batch, no pipeline) is tried, and pplan's own model rates it above every b = 1
    plan (the best b = 1 plan is the search pinned to it)."""
    model = load_model("gpt-529.6b")
    req = SearchRequest(gpus=5128, global_batch=1923, top_n=1, prefetch=False)
    best = top_configurations(model, A100, req).candidates[0]
    pinned = top_configurations(
        model, A100, SearchRequest(gpus=5128, global_batch=1923, top_n=1, micro_batch=1, prefetch=False)
    )
    assert best.candidate.b == 3 and best.candidate.d == 641
    assert best.scored.tokens_per_s > pinned.candidates[0].scored.tokens_per_s
    plan = make_plan(model, best.candidate.request(req, 2048))
    assert plan.num_microbatches == 1


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved-1f1b", "zb-h1", "zbv", "dualpipev", "gpipe"])
def test_the_memory_bound_grows_with_the_micro_batch(schedule: str) -> None:
    """What `stages_out` remembers across micro-batch sizes: at fixed t, p, cp, d, v, layer split, recompute and
    ZeRO stage, each rank's memory bound (what it holds at its first backward) never falls as b grows and m =
    B / (b·d) falls with it."""
    model = load_model("llama3-8b")
    req = SearchRequest(gpus=16, global_batch=480, tp=2, cp=1, schedules=(schedule,), max_vp=2)
    query = Query(model, H100, req)
    shapes: dict[tuple[object, ...], list[tuple[int, tuple[int, ...]]]] = {}
    for cut in enumerate_cuts(model, H100, req, query.seq, Counter()):
        for i in range(0, len(cut), len(cut.grads)):  # every recompute option and ZeRO stage, BF16 gradients
            cell = cut.cell(i)
            key: tuple[object, ...] = (
                *cut.prefix[:3],
                *cut.prefix[4:],
                cell.recompute,
                cell.recompute_layers,
                cell.zero,
            )
            shapes.setdefault(key, []).append((cut.b, query.fit(cell, 0).totals))
    assert len(shapes) > 10
    for key, bounds in shapes.items():
        bounds.sort()
        assert len(bounds) > 3, key
        for (_, smaller), (_, larger) in itertools.pairwise(bounds):
            assert all(a <= b for a, b in zip(smaller, larger, strict=True)), key


def _stage_counts(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[int, int]]:
    """What `Query.stages_out` answers during a search: (ZeRO stages out, stages asked) per expanded cut."""
    seen: Counter[tuple[int, int]] = Counter()
    original = Query.stages_out

    def counted(self: Query, cut: Cut, base: int, dropped: tuple[bool, ...] | None = None) -> object:
        got = original(self, cut, base, dropped)
        if got is not None:
            seen[got[0], len(cut.zeros)] += 1
        return got

    monkeypatch.setattr(Query, "stages_out", counted)
    return seen


A100_40 = load_hardware("a100-sxm-40gb")


@pytest.mark.parametrize(
    ("model_name", "launcher", "req"),
    [
        (
            "gpt-7.5b", "megatron",
            SearchRequest(gpus=8, global_batch=8, top_n=6, max_vp=2, schedules=("1f1b", "interleaved-1f1b"),
                          launcher="megatron", prefetch=False),
        ),
        pytest.param(
            "gpt-7.5b", None, SearchRequest(gpus=8, global_batch=24, top_n=8, prefetch=False),
            marks=pytest.mark.acceptance,
        ),
        pytest.param(
            "qwen3-30b-a3b", "megatron",
            SearchRequest(gpus=16, global_batch=48, seq_len=4096, top_n=8, max_vp=2, launcher="megatron",
                          prefetch=False),
            marks=pytest.mark.acceptance,
        ),
    ],
)  # fmt: skip
def test_dropping_the_zero_stages_that_cannot_fit_keeps_the_brute_force_top_n(
    model_name: str, launcher: str | None, req: SearchRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 40 GB A100s a 7.5B's ZeRO-0 and ZeRO-1 hold too much on most cuts (and a routed 30B's up to every stage):
    the search drops those stages of a cut at once (`Query.stages_out`, the cut going on with the rest) and its
    top N is still the brute force's, with and without Megatron-LM's filter."""
    from pplan.launchers.support import SearchFilter, request_unsupported_reason

    model = load_model(model_name)
    seen = _stage_counts(monkeypatch)
    shown = SearchFilter(launcher, model, req.tp_comm_overlap, req.recompute_modules) if launcher else None
    found = top_configurations(model, A100_40, req, launcher=shown)
    assert any(0 < out < stages for out, stages in seen)  # cuts went on with the stages left
    reason = (
        (lambda name, r, m: request_unsupported_reason(name, r, m, model.num_layers, model))
        if launcher
        else None
    )
    reference, _ = distinct(brute_force(model, A100_40, req, reason), req.top_n)
    seq = Query(model, A100_40, req).seq
    assert [r.request for r in found.candidates] == [s.candidate.request(req, seq) for s in reference]
