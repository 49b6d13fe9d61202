"""Hybrid sharding (a shard group S of the d·cp data-parallel GPUs) and ZeRO-3 without resharding after the
forward, checked by hand: bytes per GPU from the parameters a rank holds, traffic from the ring formulas
(pplan.cost.links), and the one-line refusals."""

from __future__ import annotations

import math

import pytest

from pplan.cost.comm import data_parallel_bytes_per_step
from pplan.cost.memory import bytes_per_param, plan_gathered_weights_bytes, plan_rank_params
from pplan.cost.steptime import rank_sync, step_time
from pplan.cost.usable import plan_communicators
from pplan.errors import ConfigError
from pplan.explain import explain
from pplan.launchers.megatron import megatron_args
from pplan.launchers.torchtitan import data_parallel_degrees, torchtitan_args
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from tests.cli_run import run_pplan

LLAMA = load_model("llama3-70b")
LLAMA8 = load_model("llama3-8b")
H100 = load_hardware("h100-sxm-80gb")
# Llama 3 70B, t8 p4 d64 (2,048 GPUs, m = 16), ZeRO-3
BASE = {"gpus": 2048, "global_batch": 1024, "tp": 8, "pp": 4, "zero_stage": 3}


def _plan(**kw: object) -> Plan:
    return make_plan(LLAMA, PlanRequest(**{**BASE, **kw}))  # type: ignore[arg-type]


def test_states_are_divided_by_the_shard_group() -> None:
    plan = _plan(shard_group=8)
    assert (plan.shards, plan.shard_replicas) == (8, 8)
    bpp = bytes_per_param(plan)
    assert (bpp.weights, bpp.grads, bpp.optimizer, bpp.shards) == (2 / 8, 4 / 8, 12 / 8, 8)
    report = explain(LLAMA, H100, PlanRequest(**{**BASE, "shard_group": 8}))  # type: ignore[arg-type]
    for stage, params in zip(report.memory.stages, plan_rank_params(LLAMA, plan), strict=True):
        assert stage.weights_bytes == math.ceil(params * 2 / 8)
        assert stage.grads_bytes == math.ceil(params * 4 / 8)
        assert stage.optimizer_bytes == math.ceil(params * 12 / 8)
    assert report.plan.shard_group == 8 and report.plan.shard_replicas == 8
    assert any("hybrid sharding (HSDP)" in a for a in report.assumptions)


def test_a_shard_group_of_all_replicas_is_plain_sharding() -> None:
    assert _plan(shard_group=64) == _plan()
    assert _plan().shard_group is None and _plan().shards == 64


def test_traffic_within_the_group_and_across_replicas() -> None:
    plan = _plan(shard_group=8)
    m = plan.num_microbatches
    params = plan_rank_params(LLAMA, plan)[0]
    grads, weights = 4 * params, 2 * params
    # t = 8 fills a node: the shard group (8 GPUs, stride 8) and the replicas (stride 64) both cross nodes
    link = H100.inter_node
    bw, lat = link.achievable_bytes_per_s, link.latency_s
    # each phase in max(buckets, 1) collectives: buckets of max(40M, 1M × 64) parameters, each paying the latency
    k = math.ceil(params / 64e6)
    scatter = k * 7 * lat + 7 / 8 * grads / bw  # ring reduce-scatter over S = 8
    gather = k * 7 * lat + 7 / 8 * weights / bw  # ring all-gather over S = 8
    across = k * 2 * 7 * lat + 2 * 7 / 8 * (grads / 8) / bw  # ring all-reduce of the shard over R = 8
    sync = rank_sync(H100, plan, params)
    assert sync.last_s == pytest.approx(scatter + gather + across)
    assert sync.step_s == pytest.approx(m * (scatter + 2 * gather) + across)
    assert sync.gather_s == 0.0
    sent = m * (7 / 8 * grads + 2 * 7 / 8 * weights) + 2 * 7 / 8 * grads / 8
    assert data_parallel_bytes_per_step(plan, params) == int(sent)


def test_a_shard_group_inside_a_node_runs_on_nvlink() -> None:
    plan = make_plan(LLAMA8, PlanRequest(gpus=64, global_batch=64, zero_stage=1, shard_group=8))
    params = plan_rank_params(LLAMA8, plan)[0]
    grads = 4 * params
    intra, inter = H100.intra_node, H100.inter_node
    # ZeRO-1 reduces in Megatron's buckets of max(40M, 1M × 64) parameters: each bucket pays the ring latency
    calls = math.ceil(params / 64e6)
    scatter = calls * 7 * intra.latency_s + 7 / 8 * grads / intra.achievable_bytes_per_s
    across = calls * 2 * 7 * inter.latency_s + 2 * 7 / 8 * (grads / 8) / inter.achievable_bytes_per_s
    sync = rank_sync(H100, plan, params)
    assert sync.step_s == pytest.approx(scatter + across)
    gather = calls * 7 * intra.latency_s + 7 / 8 * 2 * params / intra.achievable_bytes_per_s
    assert sync.gather_s == pytest.approx(gather)


def test_without_resharding_the_rank_keeps_its_weights_gathered() -> None:
    plan = _plan(shard_group=8, reshard_after_forward=False)
    gathered = plan_gathered_weights_bytes(LLAMA, plan)
    for held, params in zip(gathered, plan_rank_params(LLAMA, plan), strict=True):
        assert held == math.ceil(2 * params) - math.ceil(2 * params / 8)  # whole BF16 weights less the shard
    assert min(gathered) > max(plan_gathered_weights_bytes(LLAMA, _plan(shard_group=8)))
    params = plan_rank_params(LLAMA, plan)[0]
    link = H100.inter_node
    bw, lat = link.achievable_bytes_per_s, link.latency_s
    k = math.ceil(params / 64e6)  # collectives per phase (buckets of max(40M, 1M × 64) parameters)
    scatter = k * 7 * lat + 7 / 8 * 4 * params / bw
    gather = k * 7 * lat + 7 / 8 * 2 * params / bw
    across = k * 2 * 7 * lat + 2 * 7 / 8 * (4 * params / 8) / bw
    sync = rank_sync(H100, plan, params)
    assert sync.step_s == pytest.approx(
        plan.num_microbatches * (scatter + gather) + across
    )  # one gather each
    assert sync.last_s == pytest.approx(scatter + across)  # the backward re-gather is skipped
    sent = plan.num_microbatches * 7 / 8 * (4 * params + 2 * params) + 2 * 7 / 8 * 4 * params / 8
    assert data_parallel_bytes_per_step(plan, params) == int(sent)


def test_hybrid_sharding_trades_memory_for_a_shorter_ring() -> None:
    full, hybrid = _plan(), _plan(shard_group=8)
    assert step_time(LLAMA, H100, hybrid, split_p2p=False).step_s > 0
    mem_full = explain(LLAMA, H100, PlanRequest(**BASE)).memory.stages[0].total_bytes  # type: ignore[arg-type]
    mem_hybrid = explain(LLAMA, H100, PlanRequest(**{**BASE, "shard_group": 8})).memory.stages[0]  # type: ignore[arg-type]
    assert mem_hybrid.total_bytes > mem_full
    assert {c.name for c in plan_communicators(LLAMA, hybrid)} >= {"shard", "shard replicas"}
    assert not {"shard", "shard replicas"} & {c.name for c in plan_communicators(LLAMA, full)}


@pytest.mark.parametrize(
    ("kw", "field", "words"),
    [
        ({"zero_stage": 0, "shard_group": 8}, "--shard-group", "ZeRO-0 shards nothing"),
        ({"shard_group": 0}, "--shard-group", "must be an integer"),
        ({"zero_stage": 2, "reshard_after_forward": False}, "--no-reshard-after-forward", "ZeRO-3"),
    ],
)
def test_request_refusals(kw: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        PlanRequest(**{**BASE, **kw})  # type: ignore[arg-type]
    assert err.value.field == field and words in str(err.value) and err.value.fix


def test_a_shard_group_must_divide_d_cp() -> None:
    with pytest.raises(ConfigError) as err:
        _plan(shard_group=7)
    assert err.value.field == "--shard-group" and "[2, 4, 8]" in str(err.value)


def test_cli_flags_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(
        capsys, "explain", "--zero-stage", "3", "--shard-group", "8", "--no-reshard-after-forward"
    )
    assert res.code == 0, res.err
    out = " ".join(res.out.split())
    assert "shard group 8 GPUs × 8 replicas" in out and "no reshard after forward" in out
    res = run_pplan(capsys, "explain", "--shard-group", "8")
    assert res.code != 0 and "--shard-group" in res.err and "--zero-stage" in res.err


def test_launchers() -> None:
    hybrid = _plan(shard_group=8)
    assert data_parallel_degrees(hybrid) == (8, 8)
    args = torchtitan_args(LLAMA, hybrid)
    assert args[args.index("--parallelism.fsdp_reshard_after_forward") + 1] == "always"
    kept = torchtitan_args(LLAMA, _plan(reshard_after_forward=False))
    assert kept[kept.index("--parallelism.fsdp_reshard_after_forward") + 1] == "never"
    cp = make_plan(LLAMA, PlanRequest(**{**BASE, "gpus": 4096, "cp": 2, "shard_group": 4}))  # type: ignore[arg-type]
    assert data_parallel_degrees(cp) == (32, 2)  # FSDP shards over shard × cp
    odd = make_plan(LLAMA, PlanRequest(**{**BASE, "gpus": 4096, "cp": 2, "shard_group": 1}))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="multiple of cp"):
        torchtitan_args(LLAMA, odd)
    zero1 = _plan(zero_stage=1, shard_group=8)
    args = megatron_args(LLAMA, zero1)
    assert args[args.index("--num-distributed-optimizer-instances") + 1] == "8"
    for refused in (hybrid, _plan(reshard_after_forward=False)):
        with pytest.raises(ConfigError) as err:
            megatron_args(LLAMA, refused)
        assert err.value.field == "--launcher"


def test_zero3_gathers_layer_by_layer_and_each_gather_pays_the_ring_latency() -> None:
    # ZeRO-3 over d = 2,048 data-parallel GPUs (t = 1): a rank holding 80 layers and the model ends issues 81
    # all-gathers per forward, each of 2,047 ring steps; the latency alone is 81 × 2,047 × 5 µs ≈ 0.83 s, which
    # is why hybrid sharding pays at scale
    plan = make_plan(LLAMA, PlanRequest(gpus=2048, global_batch=2048, zero_stage=3, seq_len=4096))
    params = plan_rank_params(LLAMA, plan)[0]
    units = LLAMA.num_layers + 1
    buckets = math.ceil(
        params / 2048e6
    )  # what a bucketed stage would issue: buckets of 1M × 2,048 parameters
    assert units > buckets
    bucketed = rank_sync(H100, plan, params, units=1)
    per_layer = rank_sync(H100, plan, params, units=units)
    lat = H100.inter_node.latency_s
    # per micro-batch: a reduce-scatter and two gathers, each with units − buckets more latencies of 2,047 steps
    extra = plan.num_microbatches * 3 * (units - buckets) * 2047 * lat
    assert per_layer.step_s - bucketed.step_s == pytest.approx(extra)
    assert units * 2047 * lat == pytest.approx(0.83, rel=0.01)
