"""FP8 plans (pplan.model.precision), each figure derived by hand from Llama 3 8B's published shape: h 4096, 32
heads, 8 KV heads of 128, SwiGLU width 14336, 32 layers (Dubey et al. 2024, Table 3)."""

from __future__ import annotations

import dataclasses

import pytest

from pplan.cost.memory import plan_fp8_cache_bytes
from pplan.cost.passtime import layer_pass_times
from pplan.errors import ConfigError
from pplan.model.activations import layer_activations
from pplan.model.precision import Precision
from pplan.plan.configuration import check_precision, make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_hardware, load_model

LLAMA = load_model("llama3-8b")
H100 = load_hardware("h100-sxm-80gb")
S, H, F = 8192, 4096, 14336


def _plan(precision: Precision, pp: int = 1) -> Plan:
    return make_plan(LLAMA, PlanRequest(gpus=8, global_batch=8, pp=pp, seq_len=S, precision=precision))


def test_fp8_keeps_each_linears_input_in_one_byte() -> None:
    """QKV, projection and fc1 inputs (s·h each) and the fc2 input (s·f) drop from 2 bytes to 1."""
    saved = (
        layer_activations(LLAMA, _plan("bf16")).total_bytes
        - layer_activations(LLAMA, _plan("fp8")).total_bytes
    )
    assert saved == 3 * S * H + S * F


def test_fp8_weight_caches_are_two_bytes_per_linear_weight() -> None:
    """Per layer: QKV 4096·(32+16)·128, projection 4096², SwiGLU 3·4096·14336; 32 layers on one rank."""
    linear = H * 48 * 128 + H * H + 3 * H * F
    assert plan_fp8_cache_bytes(LLAMA, _plan("fp8")) == (2 * 32 * linear,)
    assert plan_fp8_cache_bytes(LLAMA, _plan("bf16")) == (0,)


def test_fp8_linears_run_at_the_fp8_rate_and_the_core_stays_bf16() -> None:
    """The forward's GEMM item: the Linears' 2·s·(weights) FLOPs at 1978.9 TFLOP/s × the FP8 efficiency (the
    profile's GEMM efficiency where none is fitted), plus four kernel overheads; the attention item unchanged."""
    linear_flops = 2 * S * (H * 48 * 128 + H * H + 3 * H * F)
    eff = H100.efficiency
    fp8_rate = 1978.9e12 * (eff.fp8_matmul if eff.fp8_matmul is not None else eff.matmul)
    fp8 = dict(layer_pass_times(LLAMA, H100, _plan("fp8").shape).f)
    bf16 = dict(layer_pass_times(LLAMA, H100, _plan("bf16").shape).f)
    assert fp8["gemm"] == pytest.approx(linear_flops / fp8_rate + 4 * eff.kernel_overhead_us * 1e-6)
    assert fp8["attention"] == bf16["attention"]
    assert fp8["memory-bound"] > bf16["memory-bound"]  # the casts


@pytest.mark.parametrize(("hardware", "precision"), [("a100-sxm-80gb", "fp8"), ("h100-sxm-80gb", "mxfp8")])
def test_a_gpu_without_the_precision_is_refused(hardware: str, precision: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_precision(load_hardware(hardware), precision)
    assert info.value.field == "--precision"


def test_blackwell_takes_mxfp8_with_its_scales() -> None:
    """MXFP8 adds one E8M0 scale byte per 32 elements to each kept input and to both weight copies."""
    check_precision(load_hardware("b200-180gb"), "mxfp8")
    linear = H * 48 * 128 + H * H + 3 * H * F
    assert plan_fp8_cache_bytes(LLAMA, _plan("mxfp8")) == (round(32 * linear * (2 + 2 / 32)),)


def test_nemo_fp8_rows_turn_tokens_per_gpu_into_step_time() -> None:
    """NeMo 24.07's Llama 2 70B FP8 row: 128 sequences × 4096 tokens / (64 GPUs × 1707 tokens/s/GPU)."""
    from pplan.profiles.catalog import load_published_runs
    from pplan.validation.published import validate_set

    data = next(s for s in load_published_runs()["sets"] if s["name"] == "nemo-2407-h100-fp8-llama2-70b")
    (row,) = validate_set(data, load_model, H100).rows
    assert row.published_s == pytest.approx(128 * 4096 / (64 * 1707))


def test_explain_derives_the_fp8_speedup_from_both_steps() -> None:
    """The derivation's value is step(bf16) / step(fp8) of the same plan, each as explain computes it."""
    from pplan.cost.steptime import step_time
    from pplan.explain import explain

    model = load_model("llama2-70b")
    req = PlanRequest(
        gpus=64,
        global_batch=128,
        tp=4,
        pp=4,
        vp=20,
        schedule="interleaved-1f1b",
        zero_stage=1,
        precision="fp8",
    )
    report = explain(model, H100, req)
    (speedup,) = [d for d in report.derivations if d.quantity == "fp8_speedup"]
    bf16 = step_time(model, H100, make_plan(model, dataclasses.replace(req, precision="bf16")))
    assert report.performance is not None
    assert speedup.value == pytest.approx(bf16.step_s / report.performance.step_s)
    assert speedup.value > 1


@pytest.mark.parametrize(
    ("precision", "hardware", "fmt", "recipe", "arch"),
    [("fp8", "h100-sxm-80gb", "hybrid", "delayed", 9), ("mxfp8", "b200-180gb", "e4m3", "mxfp8", 10)],
)
def test_megatron_reads_the_fp8_flags_as_the_plan_means(
    precision: Precision, hardware: str, fmt: str, recipe: str, arch: int
) -> None:
    """Megatron-LM's own parser (core_v0.16.1 option table) and validate_args rules accept the flags, and read
    Transformer Engine's format and recipe from them."""
    from pplan.launchers.megatron import megatron_args, megatron_env
    from pplan.launchers.megatron_validate import validate_megatron

    check_precision(load_hardware(hardware), precision)
    plan = make_plan(LLAMA, PlanRequest(gpus=64, global_batch=128, tp=4, pp=2, precision=precision))
    check = validate_megatron(megatron_args(LLAMA, plan), plan.gpus, megatron_env(plan), device_arch=arch)
    assert check.failures == ()
    assert (check.namespace.fp8, check.namespace.fp8_recipe, check.namespace.bf16) == (fmt, recipe, True)


def test_torchtitan_refuses_fp8_rather_than_run_bf16() -> None:
    from pplan.launchers.support import check_supported

    with pytest.raises(ConfigError) as info:
        check_supported("torchtitan", _plan("fp8", pp=2))
    assert "FP8" in str(info.value)


def test_bf16_moments_make_optimizer_state_eight_bytes() -> None:
    from pplan.cost.memory import bytes_per_param

    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=8, moment_dtype="bf16"))
    assert bytes_per_param(plan).optimizer == 4 + 2 + 2


def test_fp8_primary_weights_drop_the_bf16_copy_of_the_linears() -> None:
    """With --fp8-param-gather on one rank holding all of Llama 3 8B (t = 1), the BF16 weights are only the
    non-Linear ones: two 128256 × 4096 vocabulary matrices and the norms (2h per layer, h at the end), 2 bytes each;
    the FP8 copies are 2 bytes per Linear weight (32 layers of QKV, projection and SwiGLU)."""
    from pplan.cost.memory import plan_memory
    from pplan.cost.pipeline import activation_peaks

    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=8, precision="fp8", fp8_param_gather=True))
    (rank,) = plan_memory(LLAMA, plan, 10**12, activation_peaks(LLAMA, plan), 0.0)
    linear = 32 * (H * 48 * 128 + H * H + 3 * H * F)
    other = 2 * 128256 * H + 32 * 2 * H + H
    assert rank.fp8_weight_cache_bytes == 2 * linear
    assert rank.weights_bytes == pytest.approx(2 * other, abs=2)


def test_a_rank_holding_both_ends_keeps_one_tied_embedding() -> None:
    """GPT-3 ties its output layer to the embedding; ZB-V puts both ends on rank 0, which then holds the 51200 × 12288
    matrix once (split by t = 8), not a second copy to synchronise: rank 0 holds what rank 1 does (12 layers each)
    plus the embedding, the learned 2048-row position table (replicated) and the final LayerNorm (2h)."""
    from pplan.cost.memory import plan_rank_params

    gpt3 = load_model("gpt3-175b")
    req = PlanRequest(gpus=64, global_batch=64, tp=8, pp=8, schedule="zbv")
    first, middle = plan_rank_params(gpt3, make_plan(gpt3, req))[:2]
    assert first - middle == pytest.approx(51200 * 12288 / 8 + 2048 * 12288 + 2 * 12288, rel=1e-9)


def test_fp8_primary_weights_are_gathered_in_one_byte() -> None:
    """ZeRO-1 over 8 replicas of Llama 3 8B (t = 1): with --fp8-param-gather the distributed optimizer all-gathers
    the Linears' FP8 weights (1 byte each) and the other weights in BF16; without it every weight in BF16. The
    reduce-scatter of the FP32 gradients is the same either way."""
    from pplan.cost.links import all_gather_s, dp_group
    from pplan.cost.memory import plan_gathered_fp8_params
    from pplan.cost.steptime import rank_sync, sync_calls

    linear = 32 * (H * 48 * 128 + H * H + 3 * H * F)
    other = 2 * 128256 * H + 32 * 2 * H + H
    req = PlanRequest(gpus=8, global_batch=8, precision="fp8", zero_stage=1)
    for gather_fp8, weight_bytes in ((False, 2 * (linear + other)), (True, linear + 2 * other)):
        plan = make_plan(LLAMA, dataclasses.replace(req, fp8_param_gather=gather_fp8))
        link = dp_group(1, 1, 8).link(H100)
        calls = sync_calls(plan, linear + other, 1)
        sync = rank_sync(H100, plan, linear + other, fp8=(linear, 0.0) if gather_fp8 else (0.0, 0.0))
        assert sync.gather_s == pytest.approx(all_gather_s(link, weight_bytes, 8, calls), rel=1e-9)
        assert sync.last_s == pytest.approx(all_gather_s(link, 4 * (linear + other), 8, calls), rel=1e-9)
        # the step reads the rank's FP8 Linears from the plan: the same count
        assert plan_gathered_fp8_params(LLAMA, plan) == (((linear, 0.0),) if gather_fp8 else ((0.0, 0.0),))
