"""`recommend`'s search is exact: its bounds are proven (never below what the simulation gives, memory equal to
what the explicit schedule holds), its top N equals a brute-force ranking of every configuration, and pinning an
axis never finds a faster plan than the unconstrained search."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import replace
from typing import Any

import pytest

from pplan.cost.memory import plan_memory, plan_memory_totals, plan_static_totals
from pplan.cost.pipeline import activation_peaks, tuned_lists
from pplan.cost.steptime import step_time, sync_floor, sync_floor_s
from pplan.cost.usable import usable_bytes
from pplan.errors import PplanError
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.schedules import SCHEDULE_NAMES, schedule_family
from pplan.schedules.timeline import peak_in_flight
from pplan.search import SearchRequest, brute_force, top_configurations
from pplan.search.rank import distinct, throughput_bound
from pplan.search.space import Candidate, layer_splits

H100 = load_hardware("h100-sxm-80gb")
A100 = load_hardware("a100-sxm-80gb")


def _random_plans(count: int, seed: int) -> list[tuple[str, PlanRequest]]:
    rng = random.Random(seed)
    out: list[tuple[str, PlanRequest]] = []
    while len(out) < count:
        model = rng.choice(["llama3-8b", "llama3-70b", "gpt3-175b", "gpt-1.7b"])
        name = rng.choice(SCHEDULE_NAMES)
        fam = schedule_family(name)
        t, cp, p = rng.choice([1, 2, 4, 8]), rng.choice([1, 2]), rng.choice([1, 2, 3, 4, 6, 8])
        d, b = rng.choice([1, 2, 4, 8]), rng.choice([1, 2])
        m = rng.choice([1, 2, 3, p, 2 * p, 4 * p + 2, 6 * p, 16 * p])
        v = rng.choice([2, 3, 4]) if fam.fixed_v is None else None
        req = PlanRequest(
            gpus=t * p * d * cp, global_batch=m * b * d, micro_batch=b, tp=t, pp=p, vp=v, cp=cp, schedule=name,
            seq_len=rng.choice([2048, 4096]), recompute=rng.choice(["none", "selective", "full"]),
            zero_stage=rng.choice([0, 1, 2, 3]), grad_dtype=rng.choice(["fp32", "bf16"]),
            overlap_grad_reduce=rng.random() < 0.8,
        )  # fmt: skip
        try:
            make_plan(load_model(model), req)
        except PplanError:
            continue
        out.append((model, req))
    return out


@pytest.mark.parametrize(("model_name", "req"), _random_plans(120, seed=9))
def test_bound_is_never_below_the_simulation(model_name: str, req: PlanRequest) -> None:
    model = load_model(model_name)
    hw = H100 if hash(req) % 2 else A100
    plan = make_plan(model, req)
    exact = step_time(model, hw, plan, split_p2p=False).tokens_per_s
    assert throughput_bound(model, hw, plan) >= exact * (1 - 1e-12)


@pytest.mark.parametrize(("model_name", "req"), _random_plans(120, seed=21))
def test_data_parallel_floor_is_never_above_the_step(model_name: str, req: PlanRequest) -> None:
    """What the search defers ZeRO-3's gathers with (pplan.search.Query.sync_bound): the step is at least the
    busiest rank's data-parallel traffic plus the slowest optimizer step, and the static bytes never exceed
    what a rank needs (pplan.search.Query.static_miss)."""
    model = load_model(model_name)
    hw = H100 if hash(req) % 2 else A100
    plan = make_plan(model, req)
    step = step_time(model, hw, plan, split_p2p=False)
    floor = sync_floor(model, hw, plan)
    traffic, optimizer = sync_floor_s(floor, plan.num_microbatches)
    assert traffic + optimizer <= step.step_s * (1 + 1e-12)
    assert optimizer <= step.breakdown_s["optimizer"] * (1 + 1e-12)
    totals = plan_memory_totals(model, plan, activation_peaks(model, plan, hw), 0.15)
    assert all(s <= t for s, t in zip(plan_static_totals(model, plan), totals, strict=True))


@pytest.mark.parametrize(("model_name", "req"), _random_plans(40, seed=22))
def test_the_data_parallel_floor_reads_m_alone_of_the_micro_batch(model_name: str, req: PlanRequest) -> None:
    """What lets the search share a cut's `sync_floor` between its micro-batch sizes: the floor of the same plan
    with half the micro-batch size (twice the micro-batches), priced at its own m, is this plan's floor at that
    m."""
    model = load_model(model_name)
    hw = H100 if hash(req) % 2 else A100
    if req.micro_batch % 2:
        req = replace(req, global_batch=req.global_batch * 2, micro_batch=req.micro_batch * 2)
    plan = make_plan(model, req)
    other = make_plan(model, replace(req, micro_batch=req.micro_batch // 2))
    assert other.num_microbatches == 2 * plan.num_microbatches
    mine = sync_floor_s(sync_floor(model, hw, plan), other.num_microbatches)
    theirs = sync_floor_s(sync_floor(model, hw, other), other.num_microbatches)
    assert mine == pytest.approx(theirs, rel=1e-12)


@pytest.mark.parametrize(("model_name", "req"), _random_plans(60, seed=13))
def test_from_zero_1_up_a_higher_stage_is_never_faster(model_name: str, req: PlanRequest) -> None:
    """What the search's ZeRO chain relies on (pplan.search._stage_key): stage 2 no faster than 1, 3 no faster
    than 2, on the same plan; and BF16 gradients never slower than FP32 (the dominance it prunes by)."""
    model = load_model(model_name)
    hw = H100 if hash(req) % 2 else A100
    if schedule_family(req.schedule).tuned:
        # auto: the memory a higher stage frees raises its memory limit, so it may be faster (the search does
        # not chain it: pplan.search._Chains.place)
        return

    def tokens(**change: object) -> float:
        plan = make_plan(model, replace(req, **change))  # type: ignore[arg-type]
        return step_time(model, hw, plan, split_p2p=False).tokens_per_s

    one, two, three = (tokens(zero_stage=z) for z in (1, 2, 3))
    assert one >= two * (1 - 1e-12) and two >= three * (1 - 1e-12)
    assert tokens(grad_dtype="bf16") >= tokens(grad_dtype="fp32") * (1 - 1e-12)


@pytest.mark.parametrize(("model_name", "req"), _random_plans(40, seed=4))
def test_screened_memory_is_what_the_explicit_schedule_holds(model_name: str, req: PlanRequest) -> None:
    # The in-flight peaks the search screens with, against a walk over the explicit action lists.
    model = load_model(model_name)
    plan = make_plan(model, req)
    peaks = activation_peaks(model, plan, H100)
    # auto's (tuned) lists are the ones built for this plan on this hardware
    schedule = tuned_lists(model, H100, plan) if plan.kind.tuned else plan.explicit_schedule()
    from pplan.model import activations as act

    per_layer = act.layer_activations(model, plan).total_bytes
    layers = [plan.layout.chunks[c].layers * per_layer for c in plan.stage_chunks]
    _, per_rank = peak_in_flight(schedule, layers)
    assert peaks.activation_bytes == tuple(round(x) for x in per_rank)
    per_stage, _ = peak_in_flight(schedule, [1.0] * len(plan.placement))
    assert peaks.in_flight_per_stage == tuple(round(x) for x in per_stage)
    ranks = plan_memory(model, plan, usable_bytes(H100, model, plan), peaks, 0.15)
    assert all(r.activation_bytes == peaks.activation_bytes[r.rank] for r in ranks)


# The brute force simulates every configuration (every partial recompute N included): four spaces take seconds
# (acceptance tier); the pinned ones keep the comparison (ZeRO stages, gradient-dtype twins, partial recompute made
# on demand, offload) in the fast tier.
SPLIT_EXPERTS = SearchRequest(
    gpus=8, global_batch=32, seq_len=4096, tp=2, ep=1, schedules=("1f1b", "dualpipev"), zero_stages=(1, 3), top_n=5
)  # fmt: skip
"""Experts split over the tensor-parallel ranks without expert parallelism (etp = t, ep = 1)."""
SMALL_QUERIES = [
    # end chunks of the embedding or the loss alone (--empty-end-chunks): Llama 3 8B's 32 layers on 2 × 5 chunks
    # split 0, 4, …, 4, 0, a cut the default search has no split for
    (
        "llama3-8b",
        H100,
        SearchRequest(
            gpus=16,
            global_batch=64,
            pp=2,
            max_vp=5,
            schedules=("interleaved-1f1b",),
            empty_end_chunks=True,
            zero_stages=(1,),
            grad_dtypes=("bf16",),
            top_n=5,
        ),
    ),
    pytest.param(
        "llama3-8b", H100, SearchRequest(gpus=8, global_batch=64, top_n=8), marks=pytest.mark.acceptance
    ),
    pytest.param(
        "llama3-8b",
        H100,
        SearchRequest(gpus=16, global_batch=128, schedules=tuple(SCHEDULE_NAMES), max_vp=4),
        marks=pytest.mark.acceptance,
    ),
    pytest.param(
        "gpt-1.7b",
        A100,
        SearchRequest(gpus=32, global_batch=256, seq_len=2048, top_n=12, zero_stages=(0, 1, 2, 3)),
        marks=pytest.mark.acceptance,
    ),
    pytest.param(
        "llama3-70b",
        H100,
        SearchRequest(gpus=64, global_batch=128, tp=8, headroom_fraction=0.1, max_vp=4),
        marks=pytest.mark.acceptance,
    ),
    # where no recompute is out of memory and the least partial recompute differs by ZeRO stage (ZeRO-3: the first
    # 2 layers of every chunk, ZeRO-2: 5): the chains of partial recomputes made on demand
    ("llama3-8b", H100, SearchRequest(gpus=16, global_batch=128, tp=1, pp=2, schedules=("dualpipe", "1f1b"))),
    # a straggler allowance grows with each plan's busy time, not its bubble: the bounds leave it out (it is ≥ 0), so
    # the search stays exact with it
    (
        "llama3-8b",
        H100,
        SearchRequest(gpus=16, global_batch=128, pp=2, schedules=("1f1b", "zbv"), jitter=0.05),
    ),
    (  # activation offload as an axis: none and one module set
        "llama3-70b",
        H100,
        SearchRequest(
            gpus=64,
            global_batch=128,
            tp=8,
            pp=2,
            headroom_fraction=0.2,
            max_vp=2,
            schedules=("1f1b", "zbv", "interleaved-1f1b"),
            offload=((), ("attn_norm", "qkv_linear", "mlp_norm")),
        ),
    ),
    # sharding variants made on demand: hybrid sharding within a node (t = 1: groups of 8 of the 32) and ZeRO-3's
    # gathered weights kept, both in the top N (ZeRO-3 only: they then hide all the data-parallel traffic)
    (
        "llama3-8b",
        H100,
        SearchRequest(gpus=32, global_batch=128, tp=1, schedules=("1f1b", "zbv"), max_vp=2, zero_stages=(3,)),
    ),
    # where ZeRO-1 fits fully sharded but not within the node, and ZeRO-2 within the node beats it: the next stage
    # over the same shard group is made when the group's stage below is out of memory (its base waits forever)
    (
        "llama3-70b",
        H100,
        SearchRequest(
            gpus=64, global_batch=1024, tp=2, pp=4, cp=4, micro_batch=1, schedules=("zbv", "1f1b"), top_n=4
        ),
    ),
    # auto: every ZeRO stage, gradient dtype and partial recompute is its own configuration (the memory each frees
    # raises auto's memory limit), bounded by the memory-cycle bound as well
    pytest.param(
        "llama3-70b",
        H100,
        SearchRequest(
            gpus=32, global_batch=64, tp=4, pp=4, schedules=("auto", "zb-h1"), zero_stages=(1, 2, 3), top_n=6
        ),
        marks=pytest.mark.acceptance,
    ),
    # routed models: expert parallelism and the GEMM precision as axes, DualPipe hiding the all-to-all, dense
    # and routed layers bounded by the cheaper kind
    pytest.param(
        "qwen3-30b-a3b",
        H100,
        SearchRequest(
            gpus=8,
            global_batch=32,
            seq_len=4096,
            schedules=("1f1b", "dualpipev"),
            max_vp=2,
            precisions=("bf16", "fp8"),
            zero_stages=(1, 2),
            top_n=6,
        ),
        marks=pytest.mark.acceptance,
    ),
    # experts split over the tensor-parallel ranks without expert parallelism (etp = t, ep = 1): the expert
    # gathers are communication DualPipeV's paired passes hide
    ("qwen3-30b-a3b", H100, SPLIT_EXPERTS),
    pytest.param(
        "mixtral-8x7b",
        H100,
        SearchRequest(
            gpus=16,
            global_batch=64,
            seq_len=4096,
            tp=1,
            schedules=("1f1b", "dualpipe"),
            zero_stages=(1, 2, 3),
            top_n=6,
        ),
        marks=pytest.mark.acceptance,
    ),
]


def _identity(c: Candidate) -> tuple[object, ...]:
    return (
        c.family.name,
        c.t,
        c.p,
        c.cp,
        c.d,
        c.v,
        c.b,
        c.m,
        c.first_layers,
        c.last_layers,
        c.recompute,
        c.zero,
        c.grad_dtype,
        c.recompute_layers,
        c.offload_modules,
        c.shard_group,
        c.reshard,
        c.ep,
        c.etp,
        c.precision,
    )


@pytest.mark.parametrize(("model_name", "hw", "req"), SMALL_QUERIES)
def test_top_n_is_the_brute_force_top_n(model_name: str, hw: object, req: SearchRequest) -> None:
    model = load_model(model_name)
    assert hw is H100 or hw is A100
    found = top_configurations(model, hw, req)
    reference, _ = distinct(brute_force(model, hw, req), req.top_n)
    assert [_identity(r.candidate) for r in found.candidates] == [_identity(s.candidate) for s in reference]
    for rec, ref in zip(found.candidates, reference, strict=True):
        assert rec.scored.tokens_per_s == pytest.approx(ref.tokens_per_s, rel=1e-12)
    # every enumerated configuration is accounted for exactly once
    assert found.enumerated == len(found.candidates) + sum(
        n for reason, n in found.rejected.items() if reason.name not in ("SEQUENCE_SPLIT", "GPUS_TCP", "GPUS_TPCP",
                                                                          "STAGES_LAYERS", "PIPELINE_CAP", "BATCH_SPLIT",
                                                                          "FEW_MICROBATCHES", "P_RULE", "LAYER_SPLIT", "EP_SPLIT",
                                                                          "M_RULE")
    )  # fmt: skip


@pytest.mark.parametrize("axis", ["tp", "pp", "cp", "micro_batch", "schedules", "recompute"])
def test_pinning_an_axis_never_beats_the_unconstrained_best(axis: str) -> None:
    model = load_model("llama3-8b")
    base = SearchRequest(gpus=32, global_batch=128, top_n=1, split_p2p=False)
    best = top_configurations(model, H100, base).candidates[0].scored
    values: dict[str, list[Any]] = {
        "tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8], "cp": [1, 2, 4], "micro_batch": [1, 2, 4],
        "schedules": [(n,) for n in ("1f1b", "interleaved-1f1b", "zb-h1", "zbv", "dualpipev")],
        "recompute": [("none",), ("selective",), ("full",)],
    }  # fmt: skip
    for value in values[axis]:
        pinned = top_configurations(model, H100, dataclasses.replace(base, **{axis: value}))
        if pinned.candidates:
            got = pinned.candidates[0].scored
            assert got.tokens_per_s <= best.tokens_per_s * (1 + 1e-12), (axis, value)


def test_cheap_bound_is_above_the_proven_bound_and_the_exact_value() -> None:
    from collections import Counter

    from pplan.search import Query
    from pplan.search.space import enumerate_candidates

    model = load_model("llama3-70b")
    req = SearchRequest(gpus=256, global_batch=512, schedules=tuple(SCHEDULE_NAMES), max_vp=4)
    query = Query(model, H100, req)
    cands = list(enumerate_candidates(model, H100, req, query.seq, Counter()))
    rng = random.Random(7)
    for index, cand in enumerate(rng.sample(cands, 150)):
        plan = make_plan(model, cand.request(req, query.seq))
        proven = throughput_bound(model, H100, plan)
        exact = step_time(model, H100, plan, split_p2p=False).tokens_per_s
        assert query.cheap_bound(cand) >= proven * (1 - 1e-12) >= exact * (1 - 2e-12), (index, cand.summary())


ROUTED_KNOBS = [
    {},
    # the knobs a recipe sets: no device-host sync and no eager launch under a whole-step graph, deduplicated
    # dispatch, EP overlap and the fused MLP; the bounds price every plan with them, as its exact step does
    {
        "moe_dispatcher": "hybridep",
        "cuda_graph_scope": ("full_iteration",),
        "moe_permute_fusion": True,
        "moe_router_fusion": True,
        "moe_ep_overlap": True,
        "moe_fused_grouped_mlp": True,
    },
    {"moe_dispatcher": "deepep", "cuda_graph_scope": ("attn", "moe_router"), "moe_imbalance": 1.3},
]


@pytest.mark.parametrize("knobs", ROUTED_KNOBS)
def test_routed_cheap_and_sync_bounds_are_above_the_proven_bound_and_the_exact_value(
    knobs: dict[str, Any],
) -> None:
    # DeepSeek-V3: three dense layers before 58 routed ones, so the cheap bound counts each rank's layers by kind
    from collections import Counter

    from pplan.search import Query
    from pplan.search.space import enumerate_cuts

    model = load_model("deepseek-v3")
    hw = load_hardware("h800-sxm-80gb")
    req = SearchRequest(gpus=256, global_batch=128, seq_len=4096, max_vp=2, zero_stages=(1, 3), **knobs)
    query = Query(model, hw, req)
    cuts = list(enumerate_cuts(model, hw, req, query.seq, Counter()))
    rng = random.Random(3)
    for index, cut in enumerate(rng.sample(cuts, 30)):
        cand = cut.cell(rng.randrange(len(cut)))
        plan = make_plan(model, cand.request(req, query.seq))
        proven = throughput_bound(model, hw, plan)
        exact = step_time(model, hw, plan, split_p2p=False).tokens_per_s
        cheap, sync = query.cheap_bound(cand), query.sync_bound(cand)
        assert cheap >= sync >= exact * (1 - 2e-12), (index, cand.summary())
        assert cheap >= proven * (1 - 1e-12) >= exact * (1 - 2e-12), (index, cand.summary())


def test_empty_end_chunks_are_tried_only_when_asked() -> None:
    """`layer_splits` by hand: DeepSeek-V3's 61 layers on 32 chunks (1, 2 × 30, 0) and Llama 3.1 405B's 126 on
    128 (0, 1 × 126, 0) only with empty ends; 126 on 64 (1, 2 × 62, 1) either way. The search asked for them
    finds the 8B's 0, 4, …, 4, 0 split at v = 5 among its cuts."""
    assert layer_splits(61, 32) == [] and layer_splits(61, 32, empty_ends=True) == [(1, 0)]
    assert layer_splits(126, 128) == [] and layer_splits(126, 128, empty_ends=True) == [(0, 0)]
    assert layer_splits(126, 64) == layer_splits(126, 64, empty_ends=True) == [(1, 1)]
    assert 1 + 30 * 2 + 0 == 61 and 0 + 126 * 1 + 0 == 126
    model = load_model("llama3-8b")
    req = SearchRequest(gpus=16, global_batch=64, pp=2, vp=5, schedules=("interleaved-1f1b",), top_n=3)
    assert not top_configurations(model, H100, req).candidates
    found = top_configurations(model, H100, replace(req, empty_end_chunks=True))
    assert found.candidates
    assert all(c.request.first_stage_layers == 0 == c.request.last_stage_layers for c in found.candidates)
