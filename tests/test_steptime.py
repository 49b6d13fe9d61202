"""Step time: the breakdown sums to the step, and each part matches a hand derivation."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from pplan.cost.memory import rank_param_items
from pplan.cost.passtime import layer_pass_times
from pplan.cost.sensitivity import sensitivities
from pplan.cost.steptime import step_time
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from tests.cli_run import run_pplan

LLAMA = load_model("llama3-70b")
GPT3 = load_model("gpt3-175b")
H100 = load_hardware("h100-sxm-80gb")

CASES = [
    dict(gpus=2048, global_batch=1024, tp=8, pp=4),
    dict(gpus=2048, global_batch=1024, tp=8, pp=4, schedule="interleaved-1f1b", vp=5),
    dict(gpus=2048, global_batch=1024, tp=8, pp=4, schedule="zbv"),
    dict(gpus=2048, global_batch=1024, tp=8, pp=4, schedule="dualpipev"),
    dict(gpus=2048, global_batch=1024, tp=8, pp=4, schedule="dualpipe"),
    dict(gpus=256, global_batch=256, tp=8, pp=4, schedule="gpipe", overlap_grad_reduce=False, zero_stage=1,
         overlap_param_gather=False, recompute="full"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_breakdown_sums_to_the_step(case: dict[str, object]) -> None:
    plan = make_plan(LLAMA, PlanRequest(**case))  # type: ignore[arg-type]
    st = step_time(LLAMA, H100, plan)
    assert sum(st.breakdown_s.values()) == pytest.approx(st.step_s, rel=1e-9)
    assert all(v >= -1e-12 for v in st.breakdown_s.values()), st.breakdown_s


def test_no_data_parallel_traffic_without_replicas() -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=32, global_batch=16, tp=8, pp=4))
    assert step_time(LLAMA, H100, plan).breakdown_s["dp_comm"] == 0


def test_exposed_all_reduce_without_overlap_by_hand() -> None:
    # ZeRO 0, no overlap: the worst rank's ring all-reduce, 2(n−1)/n of its FP32 gradients over InfiniBand
    # (t·d = 8·8 > 8 GPUs per node), plus 2(n−1) latencies; the rank with the most parameters finishes last.
    plan = make_plan(LLAMA, PlanRequest(gpus=256, global_batch=64, tp=8, pp=4, overlap_grad_reduce=False))
    st = step_time(LLAMA, H100, plan)
    ib = H100.inter_node
    n = 8
    per_rank = []
    for r in range(4):
        params = sum(x for _, x in rank_param_items(LLAMA, plan, r))
        buckets = math.ceil(params / 40e6)  # Megatron's buckets of max(40M, 1M × 8) parameters
        per_rank.append(
            buckets * 2 * (n - 1) * ib.latency_us * 1e-6
            + 2 * (n - 1) / n * params * 4 / (ib.bandwidth_gb_per_s * 1e9 * ib.efficiency)
        )
    tl = st.run.summary
    ends = list(tl.last_end_per_rank)
    expected = max(e + x for e, x in zip(ends, per_rank, strict=True)) - tl.makespan
    assert st.breakdown_s["dp_comm"] == pytest.approx(expected, rel=1e-9)


def test_optimizer_step_by_hand() -> None:
    # Distributed optimizer: each GPU updates params/(d) parameters at 80 % of HBM bandwidth, 24 + 6 + 3 × 4 bytes
    # each: the FP32 master weights and both moments read and written (24), the BF16 weights refreshed from the
    # master (read 4, write 2), and the FP32 gradient read by the norm, read by Adam and zeroed (3 × 4).
    plan = make_plan(LLAMA, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4, zero_stage=1))
    st = step_time(LLAMA, H100, plan)
    worst = max(sum(x for _, x in rank_param_items(LLAMA, plan, r)) for r in range(4))
    expected = worst / 64 * 42 / (H100.gpu.hbm_bandwidth_gb_per_s * 1e9 * 0.8)
    assert st.breakdown_s["optimizer"] == pytest.approx(expected, rel=1e-9)


def test_mfu_uses_model_flops() -> None:
    # Korthikanti et al. App. A: model FLOPs 72·B·L·s·h²·(1 + s/(6h) + V/(12hL)).
    B, s, L, h, V = 256, 2048, 96, 12288, 51200
    plan = make_plan(GPT3, PlanRequest(gpus=128, global_batch=B, tp=4, pp=8, vp=12, schedule="interleaved-1f1b",
                                       zero_stage=1))  # fmt: skip
    st = step_time(GPT3, H100, plan)
    flops = 72 * B * L * s * h**2 * (1 + s / (6 * h) + V / (12 * h * L))
    assert st.mfu == pytest.approx(flops / (st.step_s * 128 * 989.4e12), rel=1e-9)
    assert st.tokens_per_s == pytest.approx(B * s / st.step_s)


def test_faster_gemms_give_a_shorter_step() -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4))
    slow = step_time(LLAMA, H100, plan).step_s
    eff = H100.efficiency.model_copy(update={"matmul": 0.8})
    fast = step_time(LLAMA, H100.model_copy(update={"efficiency": eff}), plan).step_s
    assert fast < slow


def test_explain_json_performance_block(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "explain", "--json", "--train-tokens", "1e12").json()
    perf = doc["performance"]
    for key in (
        "step_s",
        "tokens_per_s",
        "model_tflops_per_gpu",
        "hardware_tflops_per_gpu",
        "mfu",
        "breakdown_s",
    ):
        assert key in perf
    assert sum(perf["breakdown_s"].values()) == pytest.approx(perf["step_s"])
    assert perf["time_to_train_s"] == pytest.approx(1e12 / perf["tokens_per_s"])
    gemm = next(s for s in perf["sensitivity"] if s["input"] == "GEMM efficiency")
    assert gemm["minus_10pct_step_change"] > 0 > gemm["plus_10pct_step_change"]


@pytest.mark.xdist_group("validate")  # shares the fits (tests/conftest.py)
def test_validate_command_reports_in_and_out_of_sample(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "validate", "--json").json()
    assert doc["schema"] == "pplan.validate/3"
    # each set's figures are those of its rows: in sample and with the set left out of the fit
    for s in doc["sets"]:
        assert s["mape"] == pytest.approx(sum(abs(r["error"]) for r in s["rows"]) / len(s["rows"]))
        assert s["worst"] == pytest.approx(max(abs(r["error"]) for r in s["rows"]))
        assert s["left_out_mape"] == pytest.approx(
            sum(abs(r["left_out_error"]) for r in s["rows"]) / len(s["rows"])
        )


def test_breakdown_separates_the_recomputed_forward() -> None:
    # Unpipelined, full recompute: the busiest (only) rank re-runs every layer's forward once per micro-batch in
    # its backward; the breakdown's recompute is L × m × that forward, and the parts still sum to the step.
    plan = make_plan(LLAMA, PlanRequest(gpus=64, global_batch=64, tp=8, recompute="full", zero_stage=1))
    st = step_time(LLAMA, H100, plan)
    layer = layer_pass_times(LLAMA, H100, plan.shape)
    expected = LLAMA.num_layers * plan.num_microbatches * dict(layer.i)["recompute"]
    assert st.breakdown_s["recompute"] == pytest.approx(expected, rel=1e-9)
    assert dict(layer.i)["recompute"] == pytest.approx(layer.f_s)
    assert sum(st.breakdown_s.values()) == pytest.approx(st.step_s)
    none = step_time(LLAMA, H100, make_plan(LLAMA, PlanRequest(gpus=64, global_batch=64, tp=8, zero_stage=1)))
    assert none.breakdown_s["recompute"] == 0.0


def test_sensitivity_names_the_latency_terms() -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4))
    names = {s.input for s in sensitivities(LLAMA, H100, plan, step_time(LLAMA, H100, plan).step_s)}
    assert {"inter-node latency", "intra-node latency", "HBM efficiency"} <= names


def test_deepspeed_pipeline_engine_reduces_after_the_step() -> None:
    # DeepSpeed's pipeline engine reduces gradients after the last backward: the same plan exposes what megatron-core
    # hides, as a plan without --overlap-grad-reduce does
    req = PlanRequest(gpus=256, global_batch=64, tp=8, pp=4)
    ds = step_time(LLAMA, H100, make_plan(LLAMA, replace(req, stack="deepspeed")))
    unoverlapped = step_time(
        LLAMA, H100, make_plan(LLAMA, replace(req, stack="deepspeed", overlap_grad_reduce=False))
    )
    mcore = step_time(LLAMA, H100, make_plan(LLAMA, req))
    assert ds.breakdown_s["dp_comm"] == pytest.approx(unoverlapped.breakdown_s["dp_comm"])
    assert ds.breakdown_s["dp_comm"] > mcore.breakdown_s["dp_comm"]


def test_straggler_allowance_by_hand() -> None:
    # with a coefficient of variation c per rank, the step waits c · busy · √(2 ln G) for the slowest of G GPUs
    # (busy: the busiest rank's pass time, the simulated busy time); the rest of the step and its breakdown stay
    req = PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4)
    base = step_time(LLAMA, H100, make_plan(LLAMA, req))
    jittered = step_time(LLAMA, H100, make_plan(LLAMA, replace(req, jitter=0.02)))
    busy = max(base.run.summary.busy_per_rank)
    allowance = 0.02 * busy * math.sqrt(2 * math.log(2048))
    assert jittered.step_s - base.step_s == pytest.approx(allowance, rel=1e-12)
    assert jittered.breakdown_s == {**base.breakdown_s, "jitter": pytest.approx(allowance, rel=1e-12)}
    assert "jitter" not in base.breakdown_s
