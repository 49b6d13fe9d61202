"""The attention core's terms of a layer's pass times beyond its FLOPs (pplan.cost.passtime): the memory-bound
work on the query and key heads (rotary embedding, QK-norm: `qk_elementwise`), whether and at what rate the core
runs as cuDNN's fused attention (`cudnn_attention`, `cudnn_rate`), and a flash-attention core's tail, its busiest
thread block alone on one SM (`attention_tail_s`)."""

from __future__ import annotations

from pplan.plan.shape import LayerSetting
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS

ROPE_BYTES = {True: (4, 4), False: (20, 20)}
"""HBM bytes per query or key element of the rotary embedding, forward and backward, fused (`Stack.fused_rope`:
Transformer Engine's fused RoPE reads the tensor and writes the rotated one, and its backward the same) or not
(the eager complex form of Meta's Llama reference, as torchtitan runs it: cast to FP32, read 2 + write 4; the
complex multiply, read 4 + write 4; cast back, read 4 + write 2; its backward the three in reverse)."""
ROPE_KERNELS = {True: 2, False: 6}
"""Kernels per pass for the query and the key: one each fused, three each unfused."""
QK_NORM_TENSORS = (2, 3)
"""Tensors of the query's and the key's elements QK-norm (a norm over each head's d_h) moves: it reads x and
writes y forward; its backward reads x and dy and writes dx."""
QK_NORM_KERNELS = 2
ATTENTION_BLOCK_ROWS = 128
"""Queries (forward) or keys (backward) one flash-attention thread block handles at head width 128: FlashAttention-2
splits the sequence into blocks of 64-128 rows (Dao 2023, arXiv 2307.08691, §3.1 and §3.3); 128 reproduces the
H200's timings (`attention_tail_s`)."""


def qk_elementwise(model: ModelSpec, plan: LayerSetting) -> tuple[tuple[float, float], int]:
    """HBM bytes (forward, backward) and kernels per pass of the memory-bound work on a layer's query and key
    heads: the rotary embedding (`ROPE_BYTES`, on the rotary dimensions only under MLA: d_h^R of each query head
    and of the one shared key head) and QK-norm (`QK_NORM_TENSORS`, on the whole heads)."""
    tokens = plan.seq_len // plan.cp * plan.micro_batch
    a, t = model.num_attention_heads, plan.tp
    mla = model.mla
    fwd = bwd = 0.0
    kernels = 0
    if model.position_embedding == "rope":
        fused = STACKS[plan.stack].fused_rope
        rotated = (
            tokens * a * mla.qk_rope_head_dim / t + tokens * mla.qk_rope_head_dim
            if mla
            else (tokens * (a + model.kv_heads) * model.head_size / t)
        )
        fwd += ROPE_BYTES[fused][0] * rotated
        bwd += ROPE_BYTES[fused][1] * rotated
        kernels += ROPE_KERNELS[fused]
    if model.qk_norm and mla is None:
        normed = tokens * (a + model.kv_heads) * model.head_size / t * 2
        fwd += QK_NORM_TENSORS[0] * normed
        bwd += QK_NORM_TENSORS[1] * normed
        kernels += QK_NORM_KERNELS
    return (fwd, bwd), kernels


CUDNN_BACKWARD = 2.5
"""cuDNN's fused attention backward pays this many times the forward's fixed time, as its FLOPs are 2.5 times the
forward's (fitted with the rate to the H200's twelve causal cores, pplan's benchmarks/device/2026-12-04-h200)."""


def cudnn_attention(hw: HardwareSpec, plan: LayerSetting) -> bool:
    """Whether the attention core runs as cuDNN's fused attention: the plan's stack runs it
    (`Stack.attention_kernel`), the core is fused (flash) and the hardware profile has its rate."""
    return (
        plan.flash_attention
        and STACKS[plan.stack].attention_kernel == "cudnn"
        and hw.efficiency.attention_cudnn is not None
    )


def cudnn_rate(hw: HardwareSpec) -> float:
    """FLOP/s of cuDNN's fused attention core (`efficiency.attention_cudnn` of the BF16 peak)."""
    return (
        hw.gpu.peak_bf16_tflops * 1e12 * (hw.efficiency.attention_cudnn or hw.efficiency.attention_fraction)
    )


def attention_tail_s(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting, row_flops: float) -> float:
    """The flash-attention core's tail: the one thread block with the most work, which runs on one SM after the
    others have drained. A block takes `ATTENTION_BLOCK_ROWS` queries of one head (forward) or keys (backward)
    against every key (query) that row sees, so its FLOPs are that many times one row's: `row_flops` is the pass's
    core FLOPs per query row of the rank (all its heads, every key it sees: the full count, not the causal half),
    divided by the rank's heads. It runs at one SM's share of the core's rate, P · e_attention / SMs. Zero where
    the profile gives no SM count. Under context parallelism the ring's cp kernels each see s/cp keys, so their
    tails add up to about one over s (assumed). Checked on an H200 (pplan's benchmarks/device/2026-12-04-h200):
    with FlashAttention-2's sourced rate and no fitted constant, the twelve causal cores of README and Llama 3
    shards (7-32 heads, s = 4,096 and 8,192) are reproduced within 4.5 % RMS, 6.6 % at worst."""
    sms = hw.gpu.sms
    if sms is None:
        return 0.0
    heads = max(1, model.num_attention_heads // plan.tp)
    rate = hw.gpu.peak_bf16_tflops * 1e12 * hw.efficiency.attention_fraction
    return row_flops / heads * ATTENTION_BLOCK_ROWS / (rate / sms)
