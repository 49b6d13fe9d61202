"""Activation offload to host memory (issue 13 item 4): the bytes each module offloads against hand derivations,
the in-flight activations with offload against the simulated count plus the transit buffer, the exposed copy
time from the profile's host link, the host bytes at the peak, the flag errors, and Megatron-LM's flags read back
by its parser."""

from __future__ import annotations

import pytest

from pplan.cost.memory import plan_memory
from pplan.cost.passtime import layer_pass_times, offload_copy_s
from pplan.cost.pipeline import activation_peaks, chunk_activation_bytes, warmup_peaks
from pplan.errors import ConfigError
from pplan.explain import explain
from pplan.launchers.megatron import megatron_args, megatron_env
from pplan.launchers.megatron_validate import validate_megatron
from pplan.model import activations as act
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import OffloadModule
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.schedules.timeline import peak_in_flight
from pplan.search import SearchRequest
from tests.cli_run import run_pplan

LLAMA70 = load_model("llama3-70b")
H100 = load_hardware("h100-sxm-80gb")
# Llama 3 70B at t = 8 with sequence parallelism, s = 8192, b = 1: q·b·h/sp = 8192·8192/8 elements of 2 bytes.
QBH_SP = 8192 * 8192 // 8
NORM_INPUT = 2 * QBH_SP  # attention/norm_input, attention/qkv_input, mlp/norm_input: 16,777,216 bytes each
Q = 2 * 8192 * 64 * 128 // 8  # a·d_h/t = 1024 per token: also the projection input
KV = 2 * 8192 * 8 * 128 // 8  # g·d_h/t = 128 per token: 1,048,576 elements, at megatron-core's threshold
LSE = 4 * 64 * 8192 // 8  # 65,536 FP32 elements: under the threshold, stays on the GPU
FULL_LAYER = 4 * NORM_INPUT + 2 * Q + 2 * KV + LSE + 2 * 8192 * 2 * 28672 // 8 + 2 * 8192 * 28672 // 8
WORKED: tuple[OffloadModule, ...] = ("attn_norm", "qkv_linear", "mlp_norm")


def _counts(plan: Plan) -> tuple[int, ...]:
    """Micro-batches in flight per rank at its peak, off the explicit schedule (one stage per rank)."""
    return tuple(round(x) for x in peak_in_flight(plan.explicit_schedule(), [1.0] * plan.pp)[1])


def _plan(**kw: object) -> Plan:
    base: dict[str, object] = dict(gpus=64, global_batch=64, tp=8, pp=4)
    return make_plan(LLAMA70, PlanRequest(**{**base, **kw}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("modules", "offloaded"),
    [
        (("attn_norm",), NORM_INPUT),
        (("qkv_linear",), NORM_INPUT),
        (("mlp_norm",), NORM_INPUT),
        (WORKED, 3 * NORM_INPUT),
        (("core_attn",), Q + 2 * KV),  # q, k, v; the log-sum-exp is under the threshold
        (("core_attn", "attn_proj"), 2 * Q + 2 * KV),
    ],
)
def test_offloaded_bytes_per_layer_by_hand(modules: tuple[str, ...], offloaded: int) -> None:
    plan = _plan(offload_modules=modules)
    assert act.offloaded_layer(LLAMA70, plan.shape).total_bytes == offloaded
    assert act.layer_activations(LLAMA70, plan.shape).total_bytes == FULL_LAYER - offloaded
    assert act.offload_buffer_bytes(LLAMA70, plan.shape) == 2 * offloaded
    assert chunk_activation_bytes(LLAMA70, plan) == (20 * (FULL_LAYER - offloaded),) * 4


def test_the_worked_example_is_50_mb_per_layer() -> None:
    assert 3 * NORM_INPUT == 50_331_648


def test_modules_are_kept_in_canonical_order() -> None:
    assert _plan(offload_modules=("mlp_norm", "attn_norm", "qkv_linear")).offload_modules == WORKED


def test_block_recompute_offloads_from_the_layers_it_keeps() -> None:
    plan = _plan(recompute="full", recompute_method="block", recompute_layers=5, offload_modules=WORKED)
    kept = 15 * (FULL_LAYER - 3 * NORM_INPUT)
    assert chunk_activation_bytes(LLAMA70, plan) == (5 * NORM_INPUT + kept,) * 4
    peaks = activation_peaks(LLAMA70, plan)
    counts = _counts(plan)
    assert peaks.host_bytes == tuple(n * 15 * 3 * NORM_INPUT for n in counts)


def test_in_flight_bytes_are_the_simulated_count_times_what_stays_plus_the_transit_buffer() -> None:
    plan = _plan(offload_modules=WORKED)
    peaks = activation_peaks(LLAMA70, plan)
    counts = _counts(plan)
    assert counts == (4, 3, 2, 1)  # 1F1B at p = 4, m = 16
    kept = FULL_LAYER - 3 * NORM_INPUT
    assert peaks.activation_bytes == tuple(n * 20 * kept for n in counts)
    assert peaks.host_bytes == tuple(n * 20 * 3 * NORM_INPUT for n in counts)
    ranks = plan_memory(LLAMA70, plan, 80 * 2**30, peaks, 0.1)
    for r in ranks:
        assert r.offload_buffer_bytes == 2 * 3 * NORM_INPUT
        assert r.dynamic_bytes == r.activation_bytes + r.extra_activation_bytes + r.offload_buffer_bytes
        assert r.fragmentation_bytes == -(-r.dynamic_bytes // 10)
    # the search's lower bound stays below the exact peaks
    low = warmup_peaks(LLAMA70, plan)
    assert all(a <= b for a, b in zip(low.activation_bytes, peaks.activation_bytes, strict=True))


def test_offload_saves_gpu_memory_and_reports_host_bytes() -> None:
    base = explain(LLAMA70, H100, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4))
    off = explain(
        LLAMA70, H100, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4, offload_modules=WORKED)
    )
    assert off.plan.offload_modules == list(WORKED)
    assert off.memory.offload_bytes_per_layer == 3 * NORM_INPUT
    assert set(off.memory.offload_items_per_layer) == {
        "attention/norm_input",
        "attention/qkv_input",
        "mlp/norm_input",
    }
    # stage 0 of 1F1B at p = 4 holds 4 micro-batches of 20 layers
    assert off.memory.host_offload_bytes == 4 * 20 * 3 * NORM_INPUT == off.memory.stages[0].host_offload_bytes
    for b, o in zip(base.memory.stages, off.memory.stages, strict=True):
        assert b.activation_bytes - o.activation_bytes == o.host_offload_bytes
        assert o.offload_buffer_bytes == 2 * 3 * NORM_INPUT
    assert base.memory.host_offload_bytes == 0 and base.plan.offload_modules == []


def test_exposed_copy_time_by_hand_from_the_host_link() -> None:
    plan = _plan(offload_modules=WORKED)
    link = H100.host_link
    assert link is not None
    copy = link.latency_us * 1e-6 + 3 * NORM_INPUT / (link.bandwidth_gb_per_s * 1e9 * link.efficiency)
    assert offload_copy_s(LLAMA70, H100, plan.shape) == pytest.approx(copy, rel=1e-12)
    assert copy == pytest.approx(10e-6 + 50_331_648 / 51.2e9)  # ≈ 0.993 ms over PCIe Gen5 at 80 %
    with_offload = layer_pass_times(LLAMA70, H100, plan.shape)
    without = layer_pass_times(LLAMA70, H100, _plan().shape)
    f_exposed = max(0.0, copy - without.f_s)
    i_exposed = max(0.0, copy - without.i_s)
    assert dict(with_offload.f)["offload"] == pytest.approx(f_exposed)
    assert dict(with_offload.i)["offload"] == pytest.approx(i_exposed)
    assert with_offload.w == without.w
    # a slow host link exposes what the layer's pass cannot hide
    slow = H100.model_copy(update={"host_link": link.model_copy(update={"bandwidth_gb_per_s": 1.0})})
    slow_copy = 10e-6 + 50_331_648 / 0.8e9
    slow_times = layer_pass_times(LLAMA70, slow, plan.shape)
    assert dict(slow_times.f)["offload"] == pytest.approx(slow_copy - without.f_s)
    assert dict(slow_times.i)["offload"] == pytest.approx(slow_copy - without.i_s)


def test_every_bundled_profile_states_its_host_link() -> None:
    for name in (
        "a100-sxm-40gb",
        "a100-sxm-80gb",
        "b200-180gb",
        "h100-sxm-80gb",
        "h200-sxm-141gb",
        "h800-sxm-80gb",
    ):
        assert load_hardware(name).host_link is not None, name


def test_a_profile_without_a_host_link_loads_but_cannot_offload() -> None:
    bare = HardwareSpec.model_validate({**H100.model_dump(), "host_link": None})
    assert bare.host_link is None
    explain(LLAMA70, bare, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4))
    with pytest.raises(ConfigError) as err:
        explain(LLAMA70, bare, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4, offload_modules=WORKED))
    assert "host_link" in err.value.message and err.value.fix


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        (dict(offload_modules=("attn_proj",)), "attn_proj needs core_attn"),
        (dict(offload_modules=("expert_fc1",)), "mixture-of-experts"),
        (dict(offload_modules=("moe_act",)), "mixture-of-experts"),
        (dict(offload_modules=("mlp",)), "is not one of"),
        (dict(offload_modules=("mlp_norm",), recompute="full"), "nothing left to offload"),
        (
            dict(offload_modules=("mlp_norm",), recompute="full", recompute_layers=2),
            "nothing left to offload",
        ),
        (
            dict(offload_modules=("qkv_linear",), recompute="selective", recompute_modules=("layernorm",)),
            "already drops",
        ),
    ],
)
def test_flag_errors_name_the_flag_and_the_fix(kw: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, **kw)  # type: ignore[arg-type]
    assert err.value.field == "--offload-modules" and needle in err.value.message


def test_what_offload_may_go_with() -> None:
    _plan(offload_modules=("core_attn",), recompute="selective")  # q, k, v are the checkpoint's inputs: kept
    _plan(offload_modules=("qkv_linear",), recompute="selective", recompute_modules=("mlp",))
    with pytest.raises(ConfigError, match="Korthikanti"):
        _plan(offload_modules=WORKED, activation_model="korthikanti")
    with pytest.raises(ConfigError) as err:
        SearchRequest(gpus=64, global_batch=64, offload=((), ("attn_proj",)))
    assert err.value.field == "--offload-modules"


def test_megatron_flags_round_trip_through_its_parser() -> None:
    plan = _plan(offload_modules=("core_attn", "attn_proj", "attn_norm"), zero_stage=1)
    args = megatron_args(LLAMA70, plan)
    check = validate_megatron(args, plan.gpus, megatron_env(plan))
    assert check.failures == ()
    assert check.namespace.fine_grained_activation_offloading is True
    assert check.namespace.offload_modules == ["attn_norm", "core_attn", "attn_proj"]
    assert "--fine-grained-activation-offloading" not in megatron_args(LLAMA70, _plan())


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("attn_proj", "attn_proj needs core_attn"),
        ("expert_fc1", "mixture-of-experts"),
        ("nope", "unknown value"),
    ],
)
def test_the_cli_refuses_bad_offload_flags_in_one_line_with_exit_2(
    capsys: pytest.CaptureFixture[str], value: str, needle: str
) -> None:
    res = run_pplan(capsys, "explain", "--offload-modules", value)
    assert res.code == 2 and needle in res.err and "--offload-modules" in res.err
    assert len(res.err.strip().splitlines()) == 1


def test_the_cli_explains_and_writes_offload(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "explain", "--json", "--offload-modules", "attn_norm,mlp_norm,qkv_linear").json()
    assert doc["plan"]["offload_modules"] == list(WORKED)
    assert doc["memory"]["offload_bytes_per_layer"] == 3 * NORM_INPUT
    text = run_pplan(capsys, "explain", "--offload-modules", "qkv_linear").out
    assert "offload" in text and "host memory per GPU at the peak" in text
    flags = run_pplan(capsys, "explain", "--offload-modules", "qkv_linear", "--format", "megatron").out
    assert "--fine-grained-activation-offloading" in flags and "--offload-modules qkv_linear" in flags
