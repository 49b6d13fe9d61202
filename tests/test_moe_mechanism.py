"""The MoE layer's mechanisms (pplan.cost.moe_dispatch, pplan.cost.host), each against a hand derivation from
its public figure (the sources in those modules' docstrings), and the MoE knobs reaching the Megatron-LM flags.

Qwen3-30B-A3B: h 2048, 128 experts of width 768, top-8, 48 layers (HF config)."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from math import comb
from typing import Any

import pytest

from pplan.cost import host, moe_dispatch
from pplan.cost.passtime import layer_pass_times
from pplan.cost.steptime import step_time
from pplan.errors import ConfigError
from pplan.launchers.megatron import megatron_args
from pplan.launchers.megatron_validate import parse_megatron_args
from pplan.plan.configuration import make_plan
from pplan.plan.copies import settings_read
from pplan.plan.records import PlanRequest
from pplan.plan.shape import MoeKnobs, Shape
from pplan.profiles.catalog import load_hardware, load_model
from pplan.validation.recent import applied_recipe, predict_row, row_model

QWEN = load_model("qwen3-30b-a3b")
GB200 = load_hardware("gb200-nvl72")
H100 = load_hardware("h100-sxm-80gb")
CUT: dict[str, Any] = {
    "gpus": 8, "global_batch": 512, "seq_len": 4096, "tp": 1, "pp": 1, "ep": 8, "micro_batch": 4,
    "precision": "mxfp8", "moe_force_balance": True,
}  # fmt: skip
"""Megatron-Bridge's Qwen3-30B-A3B GB200 cut: 8 GPUs, EP8, b4 at 4,096 tokens: n = 16,384 tokens per rank."""


def _shape(**knobs: Any) -> Shape:
    return make_plan(QWEN, PlanRequest(**CUT | knobs)).shape


def test_deduplicated_copies_are_the_expected_distinct_ranks() -> None:
    """E 256, k 8, ep 8: 8·(1 − C(224, 8)/C(256, 8)) = 5.32 (facts §8.1 quotes 5.3); 128 experts at ep 8 the same
    blocks of 16: 8·(1 − C(112, 8)/C(128, 8))."""
    assert moe_dispatch.distinct_ranks(256, 8, 8) == pytest.approx(8 * (1 - comb(224, 8) / comb(256, 8)))
    assert moe_dispatch.distinct_ranks(256, 8, 8) == pytest.approx(5.3, abs=0.05)
    assert moe_dispatch.dispatch_copies(QWEN, _shape(moe_dispatcher="hybridep")) == pytest.approx(
        8 * (1 - comb(112, 8) / comb(128, 8))
    )
    assert moe_dispatch.dispatch_copies(QWEN, _shape()) == 8  # NCCL all-to-all: k copies


def test_hybridep_dispatch_time_by_hand() -> None:
    """HybridEP on GB200, EP8 within the NVL72 domain: n·k_eff·h·2 bytes, 7/8 leaving the rank, at 0.58 × 900 GB/s,
    plus 10 µs."""
    shape = _shape(moe_dispatcher="hybridep")
    k_eff = 8 * (1 - comb(112, 8) / comb(128, 8))
    nbytes = 16384 * k_eff * 2048 * 2
    expected = 10e-6 + nbytes * 7 / 8 / (0.58 * 900e9)
    assert moe_dispatch.dispatch_s(QWEN, GB200, shape) == pytest.approx(expected)


def test_deepep_crosses_the_network_once_per_destination_node() -> None:
    """DeepSeek-V3 at ep 32 over four 8-GPU B200 nodes, b1 at 4,096 tokens: DeepEP sends a token once per remote
    node, D_rem = 3·(1 − C(192, 8)/C(256, 8)) copies, at the NIC's achievable 0.97 × 50 GB/s, against the local
    ranks' 7/32 of k_eff copies at 0.45 × 900 GB/s; HybridEP keeps one copy per remote rank (24/32 of k_eff)."""
    dsv3, b200 = load_model("deepseek-v3"), load_hardware("b200-180gb")
    cut: dict[str, Any] = {
        "gpus": 256,
        "global_batch": 1024,
        "seq_len": 4096,
        "tp": 1,
        "pp": 1,
        "ep": 32,
        "micro_batch": 1,
    }
    token = 4096 * 7168 * 2
    k_eff = 32 * (1 - comb(248, 8) / comb(256, 8))
    d_rem = 3 * (1 - comb(192, 8) / comb(256, 8))
    assert moe_dispatch.remote_domains(256, 8, 4) == pytest.approx(d_rem)
    near = token * k_eff * 7 / 32 / (0.45 * 900e9)
    far = token * d_rem / (0.97 * 50e9)
    deepep = make_plan(dsv3, PlanRequest(**cut, moe_dispatcher="deepep")).shape
    assert moe_dispatch.dispatch_s(dsv3, b200, deepep) == pytest.approx(10e-6 + max(near, far))
    hybridep = make_plan(dsv3, PlanRequest(**cut, moe_dispatcher="hybridep")).shape
    far_ranks = token * k_eff * 24 / 32 / (0.97 * 50e9)
    assert moe_dispatch.dispatch_s(dsv3, b200, hybridep) == pytest.approx(10e-6 + far_ranks)


def test_alltoall_dispatch_is_the_nccl_all_to_all_of_k_copies() -> None:
    """NCCL all-to-all at the profile's achievable NVLink rate (0.80 × 900 GB/s) and latency (3 µs)."""
    nbytes = 16384 * 8 * 2048 * 2
    expected = 3e-6 + nbytes * 7 / 8 / (0.80 * 900e9)
    assert moe_dispatch.dispatch_s(QWEN, GB200, _shape()) == pytest.approx(expected)


def test_imbalance_scales_the_busiest_rank_and_capacity_caps_it() -> None:
    assert MoeKnobs(imbalance=1.3).overload == 1.3
    assert MoeKnobs(imbalance=1.3, capacity_factor=1.1).overload == 1.1
    assert MoeKnobs(imbalance=1.3, force_balance=True).overload == 1.0
    balanced = moe_dispatch.dispatch_s(QWEN, GB200, _shape(moe_force_balance=False))
    skewed = moe_dispatch.dispatch_s(QWEN, GB200, _shape(moe_force_balance=False, moe_imbalance=1.5))
    assert skewed - 3e-6 == pytest.approx(1.5 * (balanced - 3e-6))


def test_ep_overlap_hides_at_most_the_overlappable_part() -> None:
    """37 % of the dispatch hidden, no more than the compute beside it, plus the SM tax 16/(148 − 16) on B200."""
    shape = _shape(moe_dispatcher="hybridep", moe_ep_overlap=True)
    tax = 16 / ((GB200.gpu.sms or 132) - 16)
    assert moe_dispatch.exposed_comm(1.0, 10.0, GB200, shape) == pytest.approx(0.63 + 0.37 * tax)
    assert moe_dispatch.exposed_comm(1.0, 0.1, GB200, shape) == pytest.approx(0.9 + 0.1 * tax)
    assert moe_dispatch.exposed_comm(1.0, 10.0, GB200, _shape(moe_dispatcher="hybridep")) == 1.0


def test_graphs_remove_launch_cost_and_full_iteration_the_sync() -> None:
    """Router unfused 72 kernels, fused 31 (facts §2); TE scopes capture attention, router and permutation; the
    whole-step graph leaves no eager kernel and no sync."""
    eager = host.host_terms(_shape())
    assert sum(eager.eager) == 40 + 72 + 16 + 70 and eager.syncs == 1
    fused = host.host_terms(_shape(moe_router_fusion=True, moe_permute_fusion=True))
    assert sum(fused.eager) == 40 + 31 + 4 + 70
    scoped = host.host_terms(_shape(cuda_graph_scope=("attn", "moe_router", "moe_preprocess")))
    assert sum(scoped.eager) == 70 and scoped.syncs == 1
    whole = host.host_terms(_shape(cuda_graph_scope=("full_iteration",)))
    assert whole.eager == (0, 0) and whole.sync_s == 0
    assert host.exposed_host_s(eager, 0.0, False) == pytest.approx(eager.eager[0] * host.LAUNCH_S)
    assert host.exposed_host_s(eager, 1.0, False) == 0.0  # the GPU's work covers the launches


def test_grouped_gemm_efficiency_from_rows_per_expert() -> None:
    """r = n·k/E_l = 16384·8/16 = 8192 rows: r/(r + 110); the fused MLP 1.3× forward, 2.1× backward."""
    shape = _shape()
    assert moe_dispatch.rows_per_expert(QWEN, shape) == 8192
    assert moe_dispatch.grouped_efficiency(QWEN, shape) == pytest.approx(8192 / 8302)
    plain = moe_dispatch.expert_gemm_s(QWEN, shape, 1e12, 1e15, 0.0)
    fused = moe_dispatch.expert_gemm_s(QWEN, _shape(moe_fused_grouped_mlp=True), 1e12, 1e15, 0.0)
    assert plain[0] / fused[0] == pytest.approx(1.3) and plain[1] / fused[1] == pytest.approx(2.1)


def test_the_layer_itemises_host_and_dispatch() -> None:
    times = layer_pass_times(QWEN, GB200, _shape(moe_dispatcher="hybridep"))
    assert dict(times.f)["host"] == pytest.approx(host.SYNC_S, rel=0.01)
    assert "host" not in dict(layer_pass_times(QWEN, GB200, _shape(cuda_graph_scope=("full_iteration",))).f)


def _recent() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (resources.files("pplan.validation") / "recent_runs.json").read_text(encoding="utf-8")
    )
    return data


@pytest.mark.parametrize(
    ("workload", "published"),
    [("DeepSeekV3-MXFP8-256", -0.14), ("Qwen3_30B_a3B-MXFP8-8", -0.36), ("Qwen3_235B_a22B-MXFP8-256", -0.23)],
)
def test_the_26_06_knobs_change_the_step_as_published(workload: str, published: float) -> None:
    """Same cut, 26.04.01 → 26.06 on GB200 MXFP8: the 26.04.01 run's plan with each release's recipe knobs
    (`applied_recipe`); pplan's change has the published sign and at least half its size (no per-release
    constant)."""
    data = next(s for s in _recent()["sets"] if s["name"] == "megatron-bridge-performance-summary")
    rows = {row["id"]: row for row in data["rows"]}
    old, new = rows[f"mb-26.04.01-DGX-GB200-{workload}"], rows[f"mb-26.06-DGX-GB200-{workload}"]
    base = predict_row(data, old, load_model, load_hardware).request
    assert base is not None
    model = row_model(old, load_model)
    steps = [
        step_time(
            model, GB200, make_plan(model, dataclasses.replace(base, **settings_read(applied_recipe(row))))
        )
        for row in (old, new)
    ]
    change = steps[1].step_s / steps[0].step_s - 1
    assert change < 0
    assert abs(change) >= abs(published) / 2


def test_knobs_reach_the_megatron_flags_its_parser_takes() -> None:
    plan = make_plan(
        QWEN,
        PlanRequest(
            **CUT | {"moe_dispatcher": "hybridep", "moe_ep_overlap": True, "moe_permute_fusion": True,
                     "moe_router_fusion": True, "cuda_graph_scope": ("attn", "moe_router"),
                     "moe_capacity_factor": 1.5}
        ),
    )  # fmt: skip
    args = megatron_args(QWEN, plan)
    ns = parse_megatron_args(args)
    assert ns.moe_token_dispatcher_type == "flex" and ns.moe_flex_dispatcher_backend == "hybridep"
    assert ns.overlap_moe_expert_parallel_comm and ns.moe_permute_fusion and ns.moe_router_fusion
    assert ns.cuda_graph_impl == "transformer_engine" and list(ns.cuda_graph_scope) == ["attn", "moe_router"]
    assert ns.moe_expert_capacity_factor == 1.5 and ns.moe_router_force_load_balancing


@pytest.mark.parametrize(
    "knob",
    [
        {"moe_dispatcher": "ncclep"},
        {"moe_fused_grouped_mlp": True},
        {"cuda_graph_scope": ("full_iteration",)},
    ],
)
def test_megatron_refuses_what_core_0_16_1_lacks(knob: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        megatron_args(QWEN, make_plan(QWEN, PlanRequest(**CUT | knob)))


def test_a_whole_graph_scope_stands_alone() -> None:
    with pytest.raises(ConfigError, match="alone"):
        PlanRequest(**CUT | {"cuda_graph_scope": ("attn", "full_iteration")})
