"""Pass times: GEMM efficiency falls with smaller kernels; context parallelism's exchange hides behind attention;
the backward's tensor-parallel overlap, the memory-bound bytes and what recomputation re-runs, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pplan.cost.attention import attention_tail_s, qk_elementwise
from pplan.cost.chunktimes import chunk_pass_times
from pplan.cost.passtime import layer_pass_times, output_pass_times
from pplan.cost.tensor_parallel import layer_gemms_s, tp_backward
from pplan.errors import ConfigError
from pplan.model.flops import layer_flops
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import Recompute
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.stacks import StackName

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
    # A 16-way TP group spans two 8-GPU nodes: its ring runs 8 channels, each crossing nodes on its own NIC
    # (8 × 48.5 GB/s, capped by NVLink's 369 GB/s) and pays the inter-node latency per step: an all-gather and a
    # reduce-scatter of s·b·h·2 bytes each, 15 steps of (1/16 of the buffer + 5 µs).
    model = load_model("gpt3-175b")
    p8 = make_plan(model, PlanRequest(gpus=8, global_batch=1, tp=8, seq_len=4096))
    p16 = make_plan(model, PlanRequest(gpus=16, global_batch=1, tp=16, seq_len=4096, sequence_parallel=True))
    tp8 = dict(layer_pass_times(model, H100, p8).f)["tp-comm"]
    tp16 = dict(layer_pass_times(model, H100, p16).f)["tp-comm"]
    buffer = 4096 * 12288 * 2
    rate = min(8 * H100.inter_node.achievable_bytes_per_s, H100.intra_node.achievable_bytes_per_s)
    one = 15 * H100.inter_node.latency_s + 15 / 16 * buffer / rate
    assert tp16 == pytest.approx(2 * 2 * one)  # two collective pairs per forward
    assert tp16 > tp8


# --- issue 14: recomputation, overlap and fusion terms, each against a hand derivation --------------------------
GPT22 = load_model("gpt-22b")  # Korthikanti et al. Table 4's layer: h = 6144, a = 64, GeLU, dropout
A100 = load_hardware("a100-sxm-80gb")


def _t4(
    recompute: Recompute = "none",
    sp: bool = False,
    schedule: str = "1f1b",
    stack: StackName = "megatron-core",
) -> Plan:
    return make_plan(GPT22, PlanRequest(gpus=8, global_batch=4, micro_batch=4, tp=8, seq_len=2048,
                                        recompute=recompute, sequence_parallel=sp, flash_attention=False,
                                        schedule=schedule, stack=stack))  # fmt: skip


def _link_s(n_bytes: float, steps_fraction: float, steps: int) -> float:
    link = A100.intra_node
    return steps * link.latency_us * 1e-6 + steps_fraction * n_bytes / (
        link.bandwidth_gb_per_s * 1e9 * link.efficiency
    )


def _grad_gemms_s() -> list[float]:
    # wgrad of QKV (h × 3h) and of the MLP's first GEMM (h × 4h) on one of t = 8 GPUs, plus one kernel overhead
    q, h, t = 2048 * 4, 6144, 8
    rate = A100.gpu.peak_bf16_tflops * 1e12 * A100.efficiency.matmul
    overhead = A100.efficiency.kernel_overhead_us * 1e-6
    return [2 * q * h * 3 * h / t / rate + overhead, 2 * q * h * 4 * h / t / rate + overhead]


def test_backward_all_reduce_hides_behind_the_weight_gradient_gemm() -> None:
    # Without sequence parallelism the two input-gradient all-reduces (8192 × 6144 × 2 bytes, ring over 8 GPUs)
    # overlap QKV's and fc1's weight-gradient GEMMs: exposed max(0, all-reduce − GEMM) each; with a stack that does
    # not overlap (torchtitan) or a schedule that splits the backward (ZB-H1), both are exposed.
    buffer = 2048 * 4 * 6144 * 2
    reduce = _link_s(buffer, 2 * 7 / 8, 14)
    split = tp_backward(GPT22, A100, _t4())
    assert split.exposed_s == pytest.approx(sum(max(0.0, reduce - g) for g in _grad_gemms_s()), rel=1e-9)
    assert split.exposed_s + split.hidden_s == pytest.approx(2 * reduce, rel=1e-9)
    for plan in (_t4(stack="torchtitan"), _t4(schedule="zb-h1")):
        assert tp_backward(GPT22, A100, plan).exposed_s == pytest.approx(2 * reduce, rel=1e-9)
        assert dict(layer_pass_times(GPT22, A100, plan.shape).i)["tp-comm"] == pytest.approx(2 * reduce)


def test_backward_under_sequence_parallelism_exposes_the_row_parallel_gather() -> None:
    # SP: per column-parallel layer X, the all-gather of the output gradient before it is exposed, the re-gather of
    # X's input hides behind X's input-gradient GEMM and the reduce-scatter behind its weight-gradient GEMM.
    gather = _link_s(2048 * 4 * 6144 * 2, 7 / 8, 7)
    expected = sum(gather + 2 * max(0.0, gather - g) for g in _grad_gemms_s())
    assert tp_backward(GPT22, A100, _t4(sp=True)).exposed_s == pytest.approx(expected, rel=1e-9)


def test_memory_bound_bytes_by_hand() -> None:
    # Forward, no SP, megatron-core (fused bias-dropout-add): hidden-size tensors 10 (norms 4, residual adds 6)
    # + 1 (two dropout masks), the GeLU's 2 tensors of q·b·f/t, and 13 bytes per score element (8192 × 2048 × 64
    # heads / 8); backward 12 + 1, GeLU 3, scores 19. Kernels: 6 forward, 10 backward, at 4 µs each.
    q, h, f, a, s, t = 8192, 6144, 4 * 6144, 64, 2048, 8
    hbm = A100.gpu.hbm_bandwidth_gb_per_s * 1e9 * A100.efficiency.hbm
    overhead = A100.efficiency.kernel_overhead_us * 1e-6
    scores = a * q * s / t
    fwd = (11 * q * h * 2 + 2 * q * f * 2 / t + 13 * scores) / hbm + 6 * overhead
    bwd = (13 * q * h * 2 + 3 * q * f * 2 / t + 19 * scores) / hbm + 10 * overhead
    times = layer_pass_times(GPT22, A100, _t4().shape)
    assert dict(times.f)["memory-bound"] == pytest.approx(fwd, rel=1e-9)
    assert dict(times.i)["memory-bound"] == pytest.approx(bwd, rel=1e-9)
    # unfused (a stack without the fusion): each dropout reads and writes a tensor and its mask, 3 tensors
    unfused = layer_pass_times(GPT22, A100, _t4(stack="deepspeed").shape)
    assert dict(unfused.f)["memory-bound"] == pytest.approx(
        fwd, rel=1e-9
    )  # deepspeed runs Megatron's fused kernels
    titan = layer_pass_times(GPT22, A100, _t4(stack="torchtitan").shape)
    assert dict(titan.f)["memory-bound"] == pytest.approx(fwd + 5 * q * h * 2 / hbm, rel=1e-9)


def test_selective_recompute_re_runs_the_unfused_score_kernels() -> None:
    # Selective recompute of the attention core without flash attention re-runs the two score GEMMs and the
    # softmax and dropout kernels over the scores: the forward's attention item plus 13 bytes per score element
    # and two kernel overheads (Korthikanti et al. Table 4: 13.2 − 11.9 = 1.3 ms for this layer).
    q, s, a, t = 8192, 2048, 64, 8
    hbm = A100.gpu.hbm_bandwidth_gb_per_s * 1e9 * A100.efficiency.hbm
    base = layer_pass_times(GPT22, A100, _t4().shape)
    sel = layer_pass_times(GPT22, A100, _t4("selective").shape)
    expected = (
        dict(base.f)["attention"] + 13 * a * q * s / t / hbm + 2 * A100.efficiency.kernel_overhead_us * 1e-6
    )
    assert dict(sel.i)["recompute"] == pytest.approx(expected, rel=1e-9)
    assert dict(sel.i)["recompute"] * 1e3 == pytest.approx(1.3, rel=0.1)


def test_full_recompute_repeats_the_forward_and_its_collectives() -> None:
    # the recomputed forward runs synchronously (its all-reduces included): I gains exactly F
    base = layer_pass_times(GPT22, A100, _t4().shape)
    full = layer_pass_times(GPT22, A100, _t4("full").shape)
    assert dict(full.i)["recompute"] == pytest.approx(base.f_s, rel=1e-12)
    assert full.i_s - base.i_s == pytest.approx(base.f_s, rel=1e-12)


def test_tp_comm_overlap_runs_each_collective_as_transformer_engine_userbuffers_do() -> None:
    # Llama 3 70B at t = 8, s = 8192, SP: each all-gather / reduce-scatter moves 7/8 of 8192 × 8192 × 2 bytes.
    # megatron-core (TE userbuffers defaults: 16 communication SMs of the H100's 132, 4 pipeline splits):
    # forward: QKV and MLP-first all-gathers by ring exchange, max(0, c − g) + 7 extra chunk kernels; projection
    # and MLP-second reduce-scatters pipelined: 3 · (max(g/4 · 132/116, c/4) − g/4) + c/4 + 3 kernels;
    # backward: the row-parallel all-gathers by ring exchange, the column-parallel re-gather and reduce-scatter in
    # bulk beside their GEMMs: max(c, g + c · 16/132) − g each.
    model = load_model("llama3-70b")
    req = PlanRequest(gpus=8, global_batch=1, tp=8, seq_len=8192)
    plain = make_plan(model, req)
    over = make_plan(model, replace(req, tp_comm_overlap=True))
    link = H100.intra_node
    c = 7 * link.latency_s + 7 / 8 * 8192 * 8192 * 2 / link.achievable_bytes_per_s
    o = H100.efficiency.kernel_overhead_us * 1e-6
    qkv, proj, fc1, fc2 = layer_gemms_s(model, H100, over.shape)

    def ring(g: float) -> float:
        return max(0.0, c - g) + 7 * o

    def pipeline(g: float) -> float:
        return 3 * (max(g / 4 * 132 / 116, c / 4) - g / 4) + c / 4 + 3 * o

    def bulk(g: float) -> float:
        return max(c, g + c * 16 / 132) - g

    forward = ring(qkv) + pipeline(proj) + ring(fc1) + pipeline(fc2)
    assert dict(layer_pass_times(model, H100, over.shape).f)["tp-comm"] == pytest.approx(forward, rel=1e-12)
    back = ring(proj) + ring(fc2) + 2 * bulk(qkv) + 2 * bulk(fc1)
    assert tp_backward(model, H100, over.shape).exposed_s == pytest.approx(back, rel=1e-12)
    assert dict(layer_pass_times(model, H100, plain.shape).f)["tp-comm"] == pytest.approx(4 * c)
    # torchtitan's async TP takes no SMs: each collective is exposed only where it outlasts its GEMM
    titan = make_plan(model, replace(req, tp_comm_overlap=True, stack="torchtitan"))
    gemms = layer_gemms_s(model, H100, titan.shape)
    assert dict(layer_pass_times(model, H100, titan.shape).f)["tp-comm"] == pytest.approx(
        sum(max(0.0, c - g) for g in gemms)
    )


def test_flash_attention_backward_recomputes_the_scores() -> None:
    # Flash attention's backward runs QKᵀ again before its four gradient matmuls (Dao et al. 2022, Algorithm 4):
    # its core time is 5/4 of the four counted input-gradient matmuls, i.e. 2.5 × the forward core's, with the
    # two kernel overheads each pass pays; an unfused core runs exactly twice the forward's matmuls.
    model = load_model("llama3-8b")
    o = H100.efficiency.kernel_overhead_us * 1e-6
    for flash, ratio in ((True, 2.5), (False, 2.0)):
        plan = make_plan(model, PlanRequest(gpus=1, global_batch=1, seq_len=8192, flash_attention=flash))
        times = layer_pass_times(model, H100, plan.shape)
        core_f = dict(times.f)["attention"] - 2 * o
        assert dict(times.i)["attention"] - 2 * o == pytest.approx(ratio * core_f, rel=1e-12)


def test_tp_comm_overlap_needs_a_stack_that_can_and_sequence_parallelism() -> None:
    model = load_model("llama3-8b")
    req = PlanRequest(gpus=8, global_batch=8, tp=8, tp_comm_overlap=True)
    with pytest.raises(ConfigError, match="deepspeed"):
        make_plan(model, replace(req, stack="deepspeed"))
    with pytest.raises(ConfigError, match="sequence parallelism"):
        make_plan(model, replace(req, sequence_parallel=False))
    assert not make_plan(
        model, replace(req, tp=1, gpus=1, global_batch=1)
    ).tp_comm_overlap  # nothing to overlap


def test_a_profile_with_too_few_sms_for_the_overlap_is_refused() -> None:
    # 16 SMs go to a pipelined or bulk collective: a GPU of 16 or fewer has none left for the GEMM beside it
    from pplan.errors import ProfileError

    model = load_model("llama3-70b")
    few = H100.model_copy(update={"gpu": H100.gpu.model_copy(update={"sms": 16})})
    plan = make_plan(model, PlanRequest(gpus=8, global_batch=1, tp=8, seq_len=8192, tp_comm_overlap=True))
    with pytest.raises(ProfileError, match=r"gpu\.sms"):
        layer_pass_times(model, few, plan.shape)


def test_embedding_gradient_by_hand() -> None:
    # Llama 3 70B, t = 8, s = 8192, b = 1: the first stage's W adds the dense V/t × h gradient (zero-filled, 2;
    # read by the main-gradient add, 2; the FP32 main gradient read and written, 8) and the 8192 rows' three
    # tensors; F adds the lookup's two. Kernels: 1 forward, 3 backward, at 4 µs each. BF16 main gradients move
    # 4 instead of 8; FSDP2 (torchtitan) accumulates after its reduce-scatter, so no add over the table.
    v, h, q, t = 128256, 8192, 8192, 8
    hbm = H100.gpu.hbm_bandwidth_gb_per_s * 1e9 * H100.efficiency.hbm
    overhead = H100.efficiency.kernel_overhead_us * 1e-6
    rows, table = q * h * 2, v * h / t
    plan = make_plan(LLAMA, PlanRequest(gpus=32, global_batch=4, tp=t, pp=4, seq_len=q))
    first, middle, *_ = chunk_pass_times(LLAMA, H100, plan)
    assert dict(first.f)["embedding"] == pytest.approx(2 * rows / hbm + overhead, rel=1e-12)
    assert dict(first.w)["embedding"] == pytest.approx(
        (3 * rows + 12 * table) / hbm + 3 * overhead, rel=1e-12
    )
    assert "embedding" not in dict(middle.w)
    # the first stage is the middle one plus the embedding and its gradient's all-gather (both hold 20 layers)
    extra = dict(first.w)["embedding"] + dict(first.w)["tp-comm"]
    assert first.w_s - middle.w_s == pytest.approx(extra, rel=1e-9)
    bf16 = chunk_pass_times(LLAMA, H100, replace(plan, grad_dtype="bf16"))[0]
    assert dict(bf16.w)["embedding"] == pytest.approx((3 * rows + 8 * table) / hbm + 3 * overhead, rel=1e-12)
    titan = chunk_pass_times(LLAMA, H100, make_plan(LLAMA, PlanRequest(gpus=32, global_batch=4, tp=t, pp=4,
                                                                        seq_len=q, stack="torchtitan")))[0]  # fmt: skip
    assert dict(titan.w)["embedding"] == pytest.approx((3 * rows + 4 * table) / hbm + 3 * overhead, rel=1e-12)


def test_end_collectives_by_hand() -> None:
    # Llama 3 70B, t = 8 under sequence parallelism: one ring reduce-scatter or all-gather of the 8192 × 8192
    # BF16 buffer, 7 latencies + 7/8 of it over NVLink. The embedding reduce-scatters in F and all-gathers its
    # gradient back in W; the output layer all-gathers its input in F, and its input gradient's reduce-scatter in
    # I hides behind the output layer's weight-gradient GEMM (megatron-core), which is longer.
    link = H100.intra_node
    one = 7 * link.latency_us * 1e-6 + 7 / 8 * 8192 * 8192 * 2 / (
        link.bandwidth_gb_per_s * 1e9 * link.efficiency
    )
    plan = make_plan(LLAMA, PlanRequest(gpus=32, global_batch=4, tp=8, pp=4, seq_len=8192))
    first, *_, last = chunk_pass_times(LLAMA, H100, plan)
    # the embedding's reduce-scatter and the output layer's all-gather move the same ring volume
    assert dict(first.f)["tp-comm"] - dict(last.f)["tp-comm"] == pytest.approx(0.0, abs=1e-12)
    middle = chunk_pass_times(LLAMA, H100, plan)[1]
    assert dict(first.f)["tp-comm"] - dict(middle.f)["tp-comm"] == pytest.approx(one, rel=1e-9)
    assert dict(first.w)["tp-comm"] == pytest.approx(one, rel=1e-12)
    assert dict(last.f)["tp-comm"] - dict(middle.f)["tp-comm"] == pytest.approx(one, rel=1e-9)
    assert dict(last.i)["tp-comm"] == pytest.approx(dict(middle.i)["tp-comm"], rel=1e-12)
    # without sequence parallelism: the embedding's all-reduce (2 × 7 latencies + 14/8 of the buffer) in F, and
    # the output layer's backward all-reduce, exposed where the stack does not overlap it (zero-bubble splits)
    both = 2 * one
    no_sp = make_plan(LLAMA, PlanRequest(gpus=32, global_batch=4, tp=8, pp=4, seq_len=8192,
                                         sequence_parallel=False, schedule="zb-h1"))  # fmt: skip
    first, mid, *_, last = chunk_pass_times(LLAMA, H100, no_sp)
    assert dict(first.f)["tp-comm"] - dict(mid.f)["tp-comm"] == pytest.approx(both, rel=1e-9)
    assert "tp-comm" not in dict(first.w)
    assert dict(last.i)["tp-comm"] - dict(mid.i)["tp-comm"] == pytest.approx(both, rel=1e-9)


def test_rotary_embedding_and_qk_norm_bytes_by_hand() -> None:
    # Llama 3 70B at t = 8, s = 8192: the rotary embedding rotates 64/8 query and 8/8 key heads of 128 per token;
    # fused (megatron-core) it reads and writes each element once per pass (4 bytes), unfused (torchtitan's eager
    # complex form) 20; two kernels fused, six unfused. Qwen3 adds QK-norm on the same elements: 2 tensors forward,
    # 3 backward, two kernels.
    q = 8192
    rotated = q * (64 + 8) * 128 / 8
    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, tp=8, seq_len=q))
    assert qk_elementwise(LLAMA, plan.shape) == ((4 * rotated, 4 * rotated), 2)
    titan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, tp=8, seq_len=q, stack="torchtitan"))
    assert qk_elementwise(LLAMA, titan.shape) == ((20 * rotated, 20 * rotated), 6)
    qwen = load_model("qwen3-30b-a3b")
    on_qwen = make_plan(qwen, PlanRequest(gpus=4, global_batch=1, tp=4, seq_len=4096))
    elements = 4096 * (32 + 4) * 128 / 4
    assert qk_elementwise(qwen, on_qwen.shape) == (
        (4 * elements + 2 * 2 * elements, 4 * elements + 3 * 2 * elements),
        4,
    )
    # MLA (DeepSeek-V3): only the rotary dimensions, 64 per query head (128 heads / t) and one shared key head
    dsv3 = load_model("deepseek-v3")
    on_dsv3 = make_plan(dsv3, PlanRequest(gpus=8, global_batch=1, tp=8, seq_len=4096, ep=8))
    mla = 4096 * 128 * 64 / 8 + 4096 * 64
    assert qk_elementwise(dsv3, on_dsv3.shape) == ((4 * mla, 4 * mla), 2)
    # learned positions (GPT-3) rotate nothing
    gpt = load_model("gpt3-175b")
    assert qk_elementwise(gpt, make_plan(gpt, PlanRequest(gpus=8, global_batch=1, tp=8)).shape) == (
        (0.0, 0.0),
        0,
    )


def test_the_loss_runs_at_the_profiles_loss_fraction_of_hbm_else_at_hbm() -> None:
    """The cross-entropy over q·V/t FP32 logits moves 38 bytes per logit forward and 14 backward, plus 6 and 2
    kernels: on the H100 at 0.65 of 3,350 GB/s (`loss_hbm`, measured); on the A100, which gives none, at its
    memory-bound fraction (0.8 of 2,039 GB/s)."""
    plan = make_plan(LLAMA, PlanRequest(gpus=1, global_batch=1, micro_batch=1, seq_len=4096))
    logits = 4096 * LLAMA.vocab_size
    for hw, rate in ((H100, 3350e9 * 0.65), (A100, 2039e9 * 0.8)):
        ends = output_pass_times(LLAMA, hw, plan.shape)
        k = hw.efficiency.kernel_overhead_us * 1e-6
        assert dict(ends.f)["loss"] == pytest.approx(38 * logits / rate + 6 * k, rel=1e-12)
        assert dict(ends.i)["loss"] == pytest.approx(14 * logits / rate + 2 * k, rel=1e-12)


def test_the_attention_core_pays_its_busiest_block_alone_on_one_sm() -> None:
    """Llama 3 70B at t = 8, s = 4096, b = 1 on the H100 (132 SMs, the core at 0.339 of 989.4 TFLOP/s): one rank's 8
    heads; a query row's forward core over all 4,096 keys is 4 · 4,096 · 128 FLOPs per head (QKᵀ and PV), and the
    busiest block takes 128 such rows on one SM: 128 · 4 · 4,096 · 128 / (989.4e12 · 0.339 / 132) s. The backward's
    block does 2.5 times the work (four gradient matmuls and the recomputed scores). No SM count, no tail."""
    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, micro_batch=1, tp=8, seq_len=4096))
    per_sm = 989.4e12 * 0.339 / 132
    want_f = 128 * 4 * 4096 * 128 / per_sm
    row_f = 4 * 4096 * 128 * 8  # the rank's 8 heads
    assert attention_tail_s(LLAMA, H100, plan.shape, row_f) == pytest.approx(want_f, rel=1e-12)
    f = dict(layer_pass_times(LLAMA, H100, plan.shape).f)["attention"]
    i = dict(layer_pass_times(LLAMA, H100, plan.shape).i)["attention"]
    core_f = 4 * 4096 * 4096 * 128 * 8 / 2 / (989.4e12 * 0.339)  # the causal half of the rank's core
    assert f == pytest.approx(core_f + want_f + 2 * 4e-6, rel=1e-9)
    assert i == pytest.approx(2.5 * core_f + 2.5 * want_f + 2 * 4e-6, rel=1e-9)
    no_sms = H100.model_copy(update={"gpu": H100.gpu.model_copy(update={"sms": None})})
    assert attention_tail_s(LLAMA, no_sms, plan.shape, row_f) == 0.0


def test_cudnn_attention_by_hand_and_its_fallback() -> None:
    """Under megatron-bridge (cuDNN's fused attention) the attention item is the causal half of the core's FLOPs
    over 0.554 of the BF16 peak plus 41.4 µs forward and 2.5 × 41.4 µs backward (the H100 profile's measured
    figures), by hand: Llama 3 8B t1, b = 1, s = 8192, 32 heads of 128: the forward's score and context GEMMs are
    2 · 2 · s² · a · d FLOPs, half of them masked; its backward 2.5 times that. On a GPU whose profile has no cuDNN
    rate (B200) the stack is priced as FlashAttention-2, exactly as megatron-core."""
    model = load_model("llama3-8b")
    s, a, d = 8192, 32, 128
    req = PlanRequest(gpus=1, global_batch=1, seq_len=s, stack="megatron-bridge")
    times = layer_pass_times(model, H100, make_plan(model, req).shape)
    rate = 989.4e12 * 0.554
    forward = 4 * s * s * a * d / 2
    assert dict(times.f)["attention"] == pytest.approx(forward / rate + 41.4e-6, rel=1e-9)
    assert dict(times.i)["attention"] == pytest.approx(2.5 * forward / rate + 2.5 * 41.4e-6, rel=1e-9)
    b200 = load_hardware("b200-180gb")
    assert b200.efficiency.attention_cudnn is None
    bridge = layer_pass_times(model, b200, make_plan(model, req).shape)
    core = layer_pass_times(model, b200, make_plan(model, replace(req, stack="megatron-core")).shape)
    assert bridge == core
