"""Hybrid sharding (HSDP) and ZeRO-3's gathered weights kept, as search axes: which shard group is tried, which
variants a configuration has, when keeping the gathered weights can cost less memory, and that the search shows
them when they are faster (its top N against the brute force: tests/test_search_exact.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pplan.cost.memory import plan_gathered_weights_bytes
from pplan.cost.steptime import step_time
from pplan.explain import explain
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.hardware_spec import PodSpec
from pplan.recommend import recommendations
from pplan.schedules import schedule_family
from pplan.search import SearchRequest, brute_force, top_configurations
from pplan.search.lattice import keeping_may_cost_less
from pplan.search.rank import distinct
from pplan.search.space import Candidate, node_shard_group, sharding_variants

H100 = load_hardware("h100-sxm-80gb")


@pytest.mark.parametrize(
    ("t", "d", "cp", "per_node", "expected"),
    [
        (1, 64, 1, 8, 8),  # eight data-parallel GPUs per node: groups of 8, 8 replicas
        (2, 8, 1, 8, 4),  # t = 2: four per node
        (2, 2, 2, 8, None),  # d·cp = 4 = the node's four: that is full sharding
        (8, 64, 1, 8, None),  # one data-parallel GPU per node: nothing to shard within it
        (3, 16, 1, 8, None),  # t does not divide the node
        (1, 12, 1, 8, None),  # 8 does not divide d·cp = 12
    ],
)
def test_node_shard_group(t: int, d: int, cp: int, per_node: int, expected: int | None) -> None:
    assert node_shard_group(t, d, cp, per_node) == expected


def _cell(zero: int, t: int = 1, d: int = 32) -> Candidate:
    return Candidate(schedule_family("1f1b"), t, 1, 1, d, 1, 1, 4, None, None, "none", zero, "bf16")


def test_sharding_variants_step_up_one_choice_at_a_time() -> None:
    req = SearchRequest(gpus=32, global_batch=128)
    assert sharding_variants(_cell(0), req, 8) == []  # ZeRO-0 shards nothing
    assert [(v.shard_group, v.reshard) for v in sharding_variants(_cell(1), req, 8)] == [(8, True)]
    assert [(v.shard_group, v.reshard) for v in sharding_variants(_cell(3), req, 8)] == [
        (8, True),
        (None, False),
    ]
    hybrid = replace(_cell(3), shard_group=8)
    assert [(v.shard_group, v.reshard) for v in sharding_variants(hybrid, req, 8)] == [(8, False)]
    assert sharding_variants(replace(_cell(3), reshard=False), req, 8) == []
    off = replace(req, hybrid_sharding=False, keep_gathered=False)
    assert sharding_variants(_cell(3), off, 8) == []


def test_keeping_the_gathered_weights_can_cost_less_on_a_rank_of_two_units() -> None:
    """The two-unit prefetch buffer of a rank holding one layer and the output layer is the rank's whole weights
    (BF16); kept, they cost 2·P − 2·P/S beyond the shard: less. On a rank of many layers keeping costs more."""
    model = load_model("llama3-8b")
    few = make_plan(model, PlanRequest(gpus=64, global_batch=64, pp=32, zero_stage=3))  # 1 layer per rank
    kept = plan_gathered_weights_bytes(model, replace(few, reshard_after_forward=False))
    assert any(k < g for k, g in zip(kept, plan_gathered_weights_bytes(model, few), strict=True))
    assert keeping_may_cost_less(model, few)
    many = make_plan(model, PlanRequest(gpus=16, global_batch=64, pp=2, zero_stage=3))  # 16 layers per rank
    assert not keeping_may_cost_less(model, many)
    assert not keeping_may_cost_less(model, replace(many, zero_stage=2))


def test_the_search_shows_hybrid_sharding_where_it_is_faster() -> None:
    """ZeRO-3 at t = 4 on 64 GPUs with s = 512 (Llama 3 8B): the per-micro-batch gathers and reduce-scatters
    outlast the passes; sharded within the node (S = 2) they run on NVLink, sharded over all d·cp = 16 they cross
    nodes on the two NICs of each node's two members. The shown plan is hybrid-sharded, says so, and its
    full-sharding twin (explained on its own) is slower."""
    model = load_model("llama3-8b")
    req = SearchRequest(
        gpus=64, global_batch=64, tp=4, pp=1, micro_batch=1, zero_stages=(3,), seq_len=512, top_n=1
    )
    best = recommendations(model, H100, req).candidates[0]
    assert best.request.shard_group == 2
    full = step_time(model, H100, make_plan(model, replace(best.request, shard_group=None)), split_p2p=False)
    assert best.report.performance is not None
    assert best.report.performance.tokens_per_s > full.tokens_per_s
    assert any(note.startswith("hybrid sharding (groups of 2 GPUs, 8 replicas)") for note in best.knobs)
    off = recommendations(model, H100, replace(req, hybrid_sharding=False)).candidates[0]
    assert off.request.shard_group is None
    assert off.report.performance is not None
    slower = step_time(model, H100, make_plan(model, off.request), split_p2p=False)
    assert off.report.performance.tokens_per_s == pytest.approx(slower.tokens_per_s, rel=1e-12)
    assert off.report.performance.tokens_per_s < best.report.performance.tokens_per_s


def test_zero_2_within_the_node_is_searched_after_zero_1_within_it_runs_out() -> None:
    """A hybrid-sharded configuration out of memory makes its successors over the same shard group (the next ZeRO
        stage: `group_successors`): on a fabric where crossing nodes is slow (one node per pod, 1:8 above), Llama 3 70B
        t2 p4 cp4 on 64 GPUs runs ZeRO-1 within the node out of memory while ZeRO-2 within it fits, and the search's top is
    the brute force's."""
    model = load_model("llama3-70b")
    slow = H100.model_copy(update={"pod": PodSpec(gpus=8, oversubscription=8)})
    req = SearchRequest(
        gpus=64, global_batch=1024, tp=2, pp=4, cp=4, micro_batch=1, schedules=("zbv",), top_n=3
    )
    got = top_configurations(model, slow, req).candidates
    want, _ = distinct(brute_force(model, slow, req), req.top_n)
    assert [c.request for c in got] == [s.candidate.request(req, model.seq_len) for s in want]
    in_node = explain(
        model, slow, replace(got[0].request, zero_stage=1, shard_group=4), with_sensitivity=False
    )
    assert not in_node.memory.fits
    successor = explain(
        model, slow, replace(got[0].request, zero_stage=2, shard_group=4), with_sensitivity=False
    )
    assert successor.memory.fits


def test_a_notch_down_that_needs_less_says_less() -> None:
    # beside a ZeRO-3 plan keeping its gathered weights, ZeRO-2 can need less memory: the note says "less"
    from pplan.search.knobs import _verdict

    assert _verdict("ZeRO-2", (int(69.5e9), int(82e9)), int(74.6e9)) == (
        "ZeRO-2 needs 5.1 GB less, fits (69.5 of 82.0 GB), not faster"
    )
    assert _verdict("ZeRO-1", (int(90e9), int(82e9)), int(80e9)).startswith(
        "ZeRO-1 needs 10.0 GB more, does not"
    )
