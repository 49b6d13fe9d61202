"""Layer-granular activation offload (Megatron-LM `--cpu-offloading-num-layers N`): the first N layers' saved
activations live in host memory, their copies priced where the pass does not hide them, the rules megatron-core
states, and the launchers (issue 46 item 3)."""

from __future__ import annotations

import pytest

from pplan.cost.chunktimes import chunk_pass_times, layer_offload_times
from pplan.cost.memory import fp8_any_layout, plan_memory_totals
from pplan.cost.passtime import layer_pass_times
from pplan.cost.pipeline import activation_peaks
from pplan.errors import ConfigError
from pplan.launchers.megatron import megatron_args, megatron_env
from pplan.launchers.megatron_validate import validate_megatron
from pplan.launchers.support import request_unsupported_reason
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.stacks import STACKS

LLAMA70 = load_model("llama3-70b")
GB200 = load_hardware("gb200-nvl72")
N_OFFLOADED = 20

# Llama 3 70B, BF16, b1, s 8192, t1 (flash attention, no dropout): per layer the attention norm's, QKV's, output
# projection's, MLP norm's and fc1's inputs and q (2·qb·h each, a·d_h = h), k and v (2·qb·g·d_h each, g·d_h = 1024),
# the FP32 log-sum-exp (4·qb·a), fc1's SwiGLU output (2·qb·2f) and the activation output (2·qb·f):
# qb·(12h + 4·1024 + 4·64 + 6f) = 8192·(98,304 + 4,096 + 256 + 172,032)
LAYER_BYTES = 8192 * (12 * 8192 + 4 * 1024 + 4 * 64 + 6 * 28672)
assert LAYER_BYTES == 2_250_244_096


def _plan(**kw: object) -> Plan:
    base: dict[str, object] = dict(gpus=64, global_batch=64, seq_len=8192, zero_stage=3, pp=1, tp=1)
    return make_plan(LLAMA70, PlanRequest(**(base | kw)))  # type: ignore[arg-type]


def test_offloaded_layers_leave_the_gpu_for_the_host() -> None:
    plain, offloaded = _plan(), _plan(offload_layers=N_OFFLOADED)
    kept, held = activation_peaks(LLAMA70, plain, GB200), activation_peaks(LLAMA70, offloaded, GB200)
    assert kept.activation_bytes == (80 * LAYER_BYTES,)  # one micro-batch in flight at p = 1
    assert held.activation_bytes == (60 * LAYER_BYTES,)
    assert held.host_bytes == (20 * LAYER_BYTES,)
    any_layout = fp8_any_layout(GB200)
    fraction = GB200.memory.dynamic_fragmentation_fraction
    need = plan_memory_totals(LLAMA70, plain, kept, fraction, any_layout)[0]
    less = plan_memory_totals(LLAMA70, offloaded, held, fraction, any_layout)[0]
    assert need - less == pytest.approx(20 * LAYER_BYTES * (1 + fraction), abs=2)


def test_copies_hide_behind_the_pass_on_a_fast_link_and_show_on_a_slow_one() -> None:
    offloaded = _plan(offload_layers=N_OFFLOADED)
    layer = layer_pass_times(LLAMA70, GB200, offloaded.shape)
    f, b = layer.f_s, layer.i_s
    # NVLink-C2C at 225 GB/s × 0.8 + 10 µs: 12.5 ms a layer, shorter than a layer's pass (20 copies in 80 layers)
    fast = layer_offload_times(LLAMA70, GB200, offloaded.shape, N_OFFLOADED, 80)
    assert fast.f_s == 0 and fast.i_s == 0
    slow_link = GB200.host_link.model_copy(update={"bandwidth_gb_per_s": 10.0})  # type: ignore[union-attr]
    slow = GB200.model_copy(update={"host_link": slow_link})
    copy = 10e-6 + LAYER_BYTES / (10e9 * 0.8)  # 281 ms a layer: the copies outrun the pass
    assert copy > f and copy > b
    times = layer_offload_times(LLAMA70, slow, offloaded.shape, N_OFFLOADED, 80)
    assert times.f_s == pytest.approx(f + 20 * copy - 80 * f, rel=1e-9)
    assert times.i_s == pytest.approx(20 * copy - 79 * b, rel=1e-9)
    chunk = chunk_pass_times(LLAMA70, slow, offloaded)[0]
    assert dict(chunk.f)["offload"] == pytest.approx(times.f_s, rel=1e-12)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"pp": 2}, "pipeline parallelism"),
        ({"recompute": "selective"}, "--recompute selective"),
        ({"offload_modules": ("core_attn",)}, "--offload-modules"),
        ({"offload_layers": -1}, "count of layers"),
    ],
)
def test_megatron_cores_rules_refuse_in_one_line(kw: dict[str, object], says: str) -> None:
    base: dict[str, object] = dict(gpus=64, global_batch=64, offload_layers=N_OFFLOADED)
    with pytest.raises(ConfigError) as caught:
        PlanRequest(**(base | kw))  # type: ignore[arg-type]
    assert caught.value.field == "--offload-layers" and says in str(caught.value)


def test_fewer_layers_than_the_model_holds() -> None:
    with pytest.raises(ConfigError, match="fewer layers than the model's 80"):
        _plan(offload_layers=80)


def test_megatron_writes_the_flag_its_parser_reads_and_torchtitan_refuses_it() -> None:
    plan = _plan(offload_layers=N_OFFLOADED, stack="megatron-core")
    args = megatron_args(LLAMA70, plan)
    at = args.index("--cpu-offloading-num-layers")
    assert args[at + 1] == "20"
    check = validate_megatron(args, plan.gpus, megatron_env(plan))
    assert check.namespace.cpu_offloading_num_layers == N_OFFLOADED
    req = PlanRequest(gpus=64, global_batch=64, zero_stage=3, offload_layers=N_OFFLOADED)
    reason = request_unsupported_reason("torchtitan", req, 1)
    assert reason is not None and "activation offload" in reason


def test_the_bridge_stack_keeps_bf16_logits_under_te_cross_entropy() -> None:
    """Transformer Engine's fused cross-entropy overwrites the BF16 logits with their gradient and saves that:
    2·qb·V/t bytes on the last stage, not the 4·qb·V/t of an FP32 copy (V = 128,256, qb = 8192, t = 1)."""
    assert STACKS["megatron-bridge"].te_cross_entropy and not STACKS["megatron-core"].te_cross_entropy
    core = activation_peaks(LLAMA70, _plan(stack="megatron-core"), GB200).extra_activation_bytes[0]
    bridge = activation_peaks(LLAMA70, _plan(stack="megatron-bridge"), GB200).extra_activation_bytes[0]
    assert core - bridge == 2 * 8192 * 128_256
