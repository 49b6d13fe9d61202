"""Pass times: GEMM efficiency falls with smaller kernels; context parallelism's exchange hides behind attention."""

from __future__ import annotations

from pplan.cost.passtime import layer_pass_times
from pplan.model.flops import layer_flops
from pplan.plan.configuration import PlanRequest, make_plan
from pplan.profiles.catalog import load_hardware, load_model

LLAMA = load_model("llama3-70b")
H100 = load_hardware("h100-sxm-80gb")


def _gemm_efficiency(tp: int, micro_batch: int, seq_len: int = 4096) -> float:
    plan = make_plan(LLAMA, PlanRequest(gpus=tp, global_batch=micro_batch, micro_batch=micro_batch, tp=tp,
                                        seq_len=seq_len))  # fmt: skip
    gemm_s = dict(layer_pass_times(LLAMA, H100, plan).f)["gemm"]
    fl = layer_flops(LLAMA, seq_len, micro_batch).f
    flops = (fl.get("attention/qkv") + fl.get("attention/proj") + fl.get("mlp")) / tp
    return flops / gemm_s / (H100.gpu.peak_bf16_tflops * 1e12)


def test_thin_shards_and_small_microbatches_run_below_peak() -> None:
    assert _gemm_efficiency(1, 4) > _gemm_efficiency(8, 4) > _gemm_efficiency(8, 1, seq_len=512)
    assert _gemm_efficiency(1, 4) < H100.efficiency.matmul


def test_context_parallel_exchange_is_exposed_only_when_attention_is_short() -> None:
    long = make_plan(LLAMA, PlanRequest(gpus=16, global_batch=1, tp=8, cp=2, seq_len=65536))
    assert "cp-comm" not in dict(layer_pass_times(LLAMA, H100, long).i)
    short = make_plan(LLAMA, PlanRequest(gpus=64, global_batch=1, tp=8, cp=8, seq_len=1024))
    assert dict(layer_pass_times(LLAMA, H100, short).i).get("cp-comm", 0) > 0


def test_tensor_parallel_collectives_cross_nodes_when_t_exceeds_a_node() -> None:
    # A 16-way TP group spans two 8-GPU nodes: its ring runs at the InfiniBand rate and takes longer.
    model = load_model("gpt3-175b")
    p8 = make_plan(model, PlanRequest(gpus=8, global_batch=1, tp=8, seq_len=4096))
    p16 = make_plan(model, PlanRequest(gpus=16, global_batch=1, tp=16, seq_len=4096, sequence_parallel=True))
    tp8 = dict(layer_pass_times(model, H100, p8).f)["tp-comm"]
    tp16 = dict(layer_pass_times(model, H100, p16).f)["tp-comm"]
    assert tp16 > 5 * tp8
