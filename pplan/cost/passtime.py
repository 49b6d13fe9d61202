"""Seconds per pass: forward F, input-gradient I and weight-gradient W of every model chunk, itemised.

Per GPU, per micro-batch, per layer (symbols as in flops.py; t tensor parallel, P the BF16 peak in FLOP/s):
- GEMMs (QKV, projection, MLP): flops / t / (P · e_matmul) + one kernel overhead each;
- attention core: flops / t / (P · e_attention); flash attention skips the masked half of a causal score matrix
  (so it runs half the counted FLOPs), its backward recomputes QKᵀ (`FLASH_BACKWARD_MATMULS`), and each pass
  ends with its busiest thread block alone on one SM (`attention_tail_s`); under a stack that runs cuDNN's fused
  attention (`cudnn_attention`), flops / t / (P · e_attention_cudnn) plus a fixed time per pass instead; without
  flash, the a·q·s·b/t score elements stream through HBM: 8 bytes each in the forward (13 with attention
  dropout), twice that in the backward;
- memory-bound kernels (norms, residual adds, activation function, dropout): bytes / (HBM bandwidth · e_hbm),
  counted as the tensors each kernel reads and writes, forward and backward (I): q·b·h/sp elements of 2 bytes for
  the norms, residual adds and dropouts (`HIDDEN_TENSORS`, `DROPOUT_TENSORS`), q·b·f/t for the activation
  function (`ACTIVATION_TENSORS`), and the unfused attention core's scores (`SCORE_BYTES`); the query and key
  heads' rotary embedding (`ROPE_BYTES`: fused or not, as the stack runs it) and, with QK-norm, their per-head
  norms (`QK_NORM_TENSORS`), on q·b·a·d_h/t and q·b·g·d_h/t elements (`qk_elementwise`);
- tensor-parallel collectives: per layer 2 all-reduces (or 2 all-gather + reduce-scatter pairs under sequence
  parallelism) in F, on the critical path; in I the same again, less what a stack that overlaps them with the
  column-parallel layers' gradient GEMMs hides (`tp_backward`, pplan.profiles.stacks); the forward's again under
  full recompute (links.py); W has none;
- context parallelism (ring attention, as Megatron's and Llama 3's cp): each of the cp − 1 ring steps passes
  this rank's K and V (q·b·2·g·d_h·2/t bytes; with MLA the up-projected per-head keys and values,
  `flops.kv_elements_per_token`) to the next CP rank in F, and K, V and their gradients in I; the
  exchange overlaps the attention core, so only what exceeds the core's time is exposed ("cp-comm");
- recomputation adds to I, the pass that needs it, the forward of every recomputed layer (full: its GEMMs,
  kernels and the two tensor-parallel collectives it repeats) or of the re-run modules (selective: the attention
  core; the two norms' memory-bound passes; the MLP's GEMMs, activation function and the one collective pair
  that gathers its input under tensor parallelism). Under block recompute only the first N layers of a chunk
  pay it (`layout_pass_times`).
- activation offload (Megatron-LM --offload-modules): each layer's offloaded bytes (pplan.model.activations.
  offloaded_layer) go device → host in F and host → device in I as one copy over the profile's `host_link`
  (latency + bytes / (bandwidth × efficiency)). megatron-core copies on their own CUDA streams (`d2h_stream`,
  `h2d_stream` in `pipeline_parallel/fine_grained_activation_offload.py`), overlapping compute, so what a layer's
  pass exposes is max(0, copy time − that pass's time for the layer without the copy) ("offload"); layers that
  are full-recompute checkpoints save nothing and copy nothing. Layer offload (--cpu-offloading-num-layers N)
  copies each of the first N layers' whole activations, spread over the whole pass by Transformer Engine's
  offload handler (`layer_offload_times`).
Shape dependence: every GEMM kernel pays `kernel_overhead_us` on top of flops / (P · e_matmul), so the
effective GEMM efficiency is e_matmul / (1 + overhead · P · e_matmul / flops): small micro-batches and thin
tensor-parallel shards (fewer FLOPs per kernel) run further below peak.
Ends: the output layer and loss run a V-wide GEMM (flops.logits_flops) in each of F, I and W plus the FP32
cross-entropy over the logits in F and I (memory-bound, `LOSS_BYTES`, at `efficiency.loss_hbm` of the HBM
bandwidth: on Hopper 0.65, measured, where its row reductions over the vocabulary and in-place FP32 passes run
below the streaming kernels' 0.8). The input embedding is memory-bound
(`embedding_pass_times`): its lookup in F, and in W its weight gradient, a dense V/t × h tensor per micro-batch
(PyTorch's embedding backward zero-fills it and adds the q·b rows in), added into the rank's main gradient where
the stack accumulates one (`main_grad_accumulation`). Under tensor parallelism both ends run collectives of one
q·b·h buffer (`end_collectives_s`): the embedding's vocabulary-parallel output is reduced (an all-reduce, or under
sequence parallelism a reduce-scatter in F and its all-gather back in W); under sequence parallelism the output
layer's input is all-gathered in F, and in I its input gradient is all-reduced (reduce-scattered under sequence
parallelism) behind the output layer's weight-gradient GEMM where the stack overlaps that (`tp_backward_overlap`).
The loss's three all-reduces of q·b values are not timed.
This module owns a layer's passes and the ends'; beside it, the pass-time record and the rates
(pplan.cost.passes), the tensor-parallel collectives and what overlap hides of them (pplan.cost.tensor_parallel),
the attention core's terms beyond its FLOPs (pplan.cost.attention) and the sums per model chunk
(pplan.cost.chunktimes).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pplan.cost.attention import CUDNN_BACKWARD, attention_tail_s, cudnn_attention, cudnn_rate, qk_elementwise
from pplan.cost.experts import ExpertComm, expert_rows, routing_bytes
from pplan.cost.host import exposed_host_s, host_terms, routed_kernels
from pplan.cost.links import cp_group, message_s
from pplan.cost.memory import GRAD_BYTES
from pplan.cost.moe_dispatch import expert_comm_by_knobs, expert_gemm_s, exposed_comm
from pplan.cost.passes import PassTimes, linear_rate, rates
from pplan.cost.tensor_parallel import (
    end_collectives_s,
    tp_backward,
    tp_collective_s,
    tp_forward_s,
)
from pplan.frozen import changed
from pplan.model.activations import fp8_cast_elements, offloaded_layer
from pplan.model.flops import (
    ATTENTION_CORE,
    attention_keys,
    kv_elements_per_token,
    layer_flops,
    logits_flops,
    mtp_projection_flops,
)
from pplan.model.precision import CAST_BYTES
from pplan.plan.knobs import GradDtype
from pplan.plan.shape import DEFAULT_MOE_KNOBS, LayerSetting, Shape
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS, overlaps_tp_backward

GEMMS_PER_LAYER = {"F": 4, "I": 4, "W": 4}
"""QKV, projection, fc1 (gate+up fused), fc2 per pass."""
ELEMENTWISE_KERNELS = {"F": 6, "I": 10, "W": 0}
NORM_TENSORS = 4
"""The two norms of a layer read and write one q·b·h/sp tensor each (what recomputing them costs)."""
LOSS_BYTES = (38, 14)
"""HBM bytes per logit element of the vocabulary-parallel cross-entropy (Megatron-Core's
`VocabParallelCrossEntropy`), forward and backward. Forward: the BF16 logits cast to FP32 (read 2, write 4), the
max over the vocabulary (read 4), the max subtracted (read 4, write 4), exp (read 4, write 4), the sum (read 4) and
the division that leaves the FP32 softmax for the backward (read 4, write 4). Backward: the softmax scaled by the
loss gradient (read 4, write 4) and cast to BF16 for the output layer's GEMMs (read 4, write 2)."""
LOSS_KERNELS = (6, 2)
"""Kernels of that forward and backward (each pays `kernel_overhead_us`)."""
HIDDEN_TENSORS = (10, 12)
"""Forward and backward tensors of q·b·h/sp elements the norms and residual adds of a layer move: forward, each
norm reads x and writes y (2 × 2) and each residual add reads two and writes one (2 × 3); backward, each norm reads
x and dy and writes dx (2 × 3) and the gradients of the two branches of each residual are summed (2 × 3)."""
DROPOUT_TENSORS = 6
"""Two hidden-state dropouts, each reading one tensor and writing one plus a 1-byte mask, forward or backward
(counted as 3 tensors each)."""
FUSED_DROPOUT_TENSORS = 1
"""The same two dropouts fused into the bias-and-residual add kernel: only their 1-byte masks (2 × 0.5 tensor)."""
ACTIVATION_TENSORS = {False: (2, 3), True: (3, 5)}
"""Forward and backward tensors of q·b·f/t elements the activation function moves: GeLU / squared ReLU read x and
write y, and their backward reads x and dy and writes dx; SwiGLU reads gate and up and writes one, and its backward
reads gate, up and dy and writes both gradients."""
SCORE_BYTES = (8, 14)
"""HBM bytes per attention-score element in an unfused core, forward and backward. Forward: the QKᵀ GEMM writes
it (2), the fused scale-mask-softmax reads and writes it (4), the PV GEMM reads it (2). Backward: the dP GEMM
writes dP (2), the softmax backward reads P and dP and writes dS (6), the dQ and dK GEMMs read dS (4), the dV GEMM
reads P (2)."""
FLASH_BACKWARD_MATMULS = 5
"""Score-sized matmuls a flash-attention backward runs: it keeps no s×s scores, so it recomputes S = QKᵀ before
dV = PᵀdO, dP = dO·Vᵀ, dQ = dS·K and dK = dSᵀ·Q (Dao et al. 2022, arXiv 2205.14135, Algorithm 4; Dao 2023,
arXiv 2307.08691, Algorithm 2). The input-gradient FLOPs of `flops.layer_flops` (the model-FLOPs convention)
count the four gradient matmuls, so the flash backward's core runs 5/4 of them; an unfused core keeps its scores
and runs the four."""
EMBEDDING_ROW_TENSORS = (2, 3)
"""Tensors of q·b·h BF16 elements the embedding moves per micro-batch: the lookup reads the q·b rows and writes
its output (F); the backward reads the output gradient and reads and writes the q·b rows of the dense gradient it
adds them into (W)."""
EMBEDDING_DENSE_GRAD_BYTES = 4
"""HBM bytes per element of the dense V/t × h embedding gradient each micro-batch makes: zero-filled in BF16
(write 2) and read once (2) by what consumes it: the main-gradient add, or FSDP2's reduce-scatter copy-in."""
EMBEDDING_KERNELS = (1, 3)
"""Kernels of the lookup (F) and of the weight gradient (W): zero fill, row add, main-gradient add."""
SCORE_KERNELS = 2
"""Memory-bound kernels an unfused attention core runs on its scores (scale-mask-softmax, dropout)."""
SCORE_BYTES_DROPOUT = (13, 19)
"""With attention dropout: plus the dropout kernel's read, write and 1-byte mask (5), forward or backward."""


def layer_pass_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    """One layer, one micro-batch, one GPU (with the exposed part of its activation offload copies). Remembered
    per layer shape; a dense layer (`model.moe` None: a dense model's, or a routed model's dense part) reads none
    of a shape's expert fields (ep, etp and the expert all-to-all's overlap enter only through the routed
    experts, `_routed_layer`), so its shapes are remembered with those at their defaults: the dense layers of
    every ep and etp a search tries of a routed model share one figure."""
    if (
        model.moe is None
        and isinstance(plan, Shape)
        and (
            (plan.ep, plan.etp, plan.expert_comm_overlap) != _NO_EXPERTS
            or plan.moe_knobs != DEFAULT_MOE_KNOBS
        )
    ):
        plan = _without_experts(plan)
    return _layer_pass_times(model, hw, plan)


_NO_EXPERTS = (1, 1, False)
"""A shape's (ep, etp, expert_comm_overlap) at their defaults."""


@lru_cache(maxsize=8192)
def _without_experts(shape: Shape) -> Shape:
    """`shape` with (ep, etp, expert_comm_overlap) and the MoE knobs at their defaults (remembered: a shape's hash
    is kept)."""
    return changed(shape, ep=1, etp=1, expert_comm_overlap=False, moe_knobs=DEFAULT_MOE_KNOBS)


@lru_cache(maxsize=8192)
def _layer_pass_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    if (
        model.moe is not None
        and isinstance(plan, Shape)
        and (plan.ep > 1 or plan.expert_comm_overlap)
        and plan.recompute != "selective"
    ):
        # the expert all-to-alls are the one item ep and their overlap change (pplan.cost.experts): a search's
        # many ep of one shape share the rest; full recompute only re-runs the forward in I, so it shares the
        # routed layer's items with no recompute (which neither the expert GEMMs nor the all-to-alls read)
        full = plan.recompute == "full"
        times = _routed_times(model, hw, changed(plan, recompute="none") if full else plan)
        return with_offload(model, hw, plan, _full_recompute(times) if full else times)
    return with_offload(model, hw, plan, _layer_compute_times(model, hw, plan))


@lru_cache(maxsize=8192)
def _routed_times(model: ModelSpec, hw: HardwareSpec, plan: Shape) -> PassTimes:
    """A routed layer's items without recompute or offload (`plan.recompute` is "none"), its expert GEMMs and
    all-to-alls those of its own ep (`_layer_pass_times`)."""
    alone = _layer_compute_times(model, hw, changed(plan, ep=1, expert_comm_overlap=False))
    return with_expert_parallel(model, hw, plan, alone)


def with_expert_parallel(model: ModelSpec, hw: HardwareSpec, plan: Shape, alone: PassTimes) -> PassTimes:
    """A routed layer's items at `plan` without recompute or offload, from `alone`: its items at `plan` with ep 1
    and without the expert overlap (`layer_pass_times` of that shape). Only the expert GEMMs and all-to-alls read
    ep and the overlap: they are those of `plan`'s own ep."""
    experts = _expert_gemm(model, hw, plan)
    return _with_expert_comm(alone, expert_comm_by_knobs(model, hw, plan), plan, hw, experts)


def _with_expert_comm(
    times: PassTimes,
    comm: ExpertComm,
    plan: LayerSetting,
    hw: HardwareSpec,
    experts: tuple[float, float, float],
) -> PassTimes:
    """A routed layer's `times` (without recompute) with its expert GEMM items `experts` and its F and I expert
    all-to-all items those of `comm`, behind the items before them under DualPipe's pairing or EP overlap
    (`_layer_compute_times`' items, in the same order)."""

    def swapped(
        items: tuple[tuple[str, float], ...], gemm: float, a2a: float | None
    ) -> tuple[tuple[str, float], ...]:
        out: list[tuple[str, float]] = []
        before = 0.0  # the items before the all-to-all, summed in order
        for name, x in items:
            if name == "experts":
                x = gemm
            elif name == "ep-comm" and a2a is not None:
                x = (
                    max(0.0, a2a - before)
                    if plan.expert_comm_overlap
                    else exposed_comm(a2a, before, hw, plan)
                )
                a2a = None  # the first all-to-all item only
            out.append((name, x))
            before += x
        return tuple(out)

    return PassTimes(
        swapped(times.f, experts[0], comm.forward_s),
        swapped(times.i, experts[1], comm.backward_s),
        swapped(times.w, experts[2], None),
    )


def _full_recompute(base: PassTimes) -> PassTimes:
    """`base` with full recompute: I re-runs the forward."""
    return PassTimes(base.f, (*base.i, ("recompute", base.f_s)), base.w)


def offload_copy_s(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> float:
    """Seconds to copy one layer's offloaded bytes over the host link, one way (0 without offload)."""
    nbytes = offloaded_layer(model, plan).total_bytes
    if plan.recompute == "full" or not nbytes:
        return 0.0
    return message_s(hw.require_host_link(), nbytes)


def with_offload(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting, times: PassTimes) -> PassTimes:
    """`times` of one layer plus the exposed offload copies: max(0, copy − the pass's time) in F and in I."""
    copy = offload_copy_s(model, hw, plan)
    if not copy:
        return times
    return PassTimes(
        (*times.f, ("offload", max(0.0, copy - times.f_s))),
        (*times.i, ("offload", max(0.0, copy - times.i_s))),
        times.w,
    )


@lru_cache(maxsize=8192)
def _layer_compute_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    """One layer, one micro-batch, one GPU, without activation offload."""
    bf16_rate, attn_rate, hbm_rate, overhead = rates(hw)
    gemm_rate = linear_rate(hw, plan)
    t = plan.tp
    sp = t if plan.sequence_parallel else 1
    fl = layer_flops(model, plan.seq_len, plan.micro_batch, plan.cp)
    gemm = {"F": fl.f, "I": fl.i, "W": fl.w}
    q = plan.seq_len // plan.cp
    tokens = q * plan.micro_batch
    h, f = model.hidden_size, tensor_parallel_mlp_width(model)
    act_tensors = ACTIVATION_TENSORS[model.mlp == "swiglu"]
    inner = tokens * f * 2 / t  # the MLP's inner width is split over t with or without sp
    act_bytes = act_tensors[0] * inner
    routed = _routed_layer(model, hw, plan, act_tensors)
    cast_bytes = CAST_BYTES * fp8_cast_elements(model, plan)
    dropout = (FUSED_DROPOUT_TENSORS if STACKS[plan.stack].fused_bias_dropout_add else DROPOUT_TENSORS) * (
        model.dropout
    )
    qk_bytes, qk_kernels = qk_elementwise(model, plan)
    fwd_elem_bytes = (HIDDEN_TENSORS[0] + dropout) * tokens * h * 2 / sp + act_bytes + qk_bytes[0]
    bwd_elem_bytes = (
        (HIDDEN_TENSORS[1] + dropout) * tokens * h * 2 / sp + act_tensors[1] * inner + qk_bytes[1]
    )
    # flash attention skips what a causal mask hides (half of a full score matrix; a window is causal already)
    keys = attention_keys(model, plan.seq_len)
    core_fraction = attention_keys(model, plan.seq_len, causal=True) / keys if plan.flash_attention else 1.0
    per_score = (
        (SCORE_BYTES_DROPOUT if model.dropout else SCORE_BYTES) if not plan.flash_attention else (0, 0)
    )
    scores = model.num_attention_heads * tokens * plan.seq_len / t
    softmax_bytes, softmax_bwd_bytes = per_score[0] * scores, per_score[1] * scores
    tp_coll = tp_collective_s(model, hw, plan)
    tp_back = tp_backward(model, hw, plan).exposed_s
    tp_fwd = tp_forward_s(model, hw, plan)
    cp_step = 0.0
    if plan.cp > 1:
        kv_bytes = tokens * kv_elements_per_token(model) * 2 / t
        cp_step = message_s(cp_group(t, plan.cp).link(hw), kv_bytes)

    def items(kind: str) -> tuple[tuple[str, float], ...]:
        passf = gemm[kind]
        core = (passf.get("attention/scores") + passf.get("attention/context")) / t
        mm = sum(n for name, n in passf.items if name not in BF16_OR_OWN_ITEMS) / t
        router = passf.get("moe/router") / t / bf16_rate  # the router stays BF16 (pplan.model.precision)
        out = [("gemm", mm / gemm_rate + router + gemm_kernels(model) * overhead)]
        if core:
            rerun = FLASH_BACKWARD_MATMULS / 4 if plan.flash_attention and kind == "I" else 1.0
            flops = core * core_fraction * rerun
            if cudnn_attention(hw, plan):
                fixed = (
                    hw.efficiency.attention_cudnn_fixed_us * 1e-6 * (1.0 if kind == "F" else CUDNN_BACKWARD)
                )
                out.append(
                    ("attention", flops / cudnn_rate(hw) + fixed)
                )  # the fixed time holds its overheads
            else:
                tail = (
                    attention_tail_s(model, hw, plan, core * rerun / tokens) if plan.flash_attention else 0.0
                )
                out.append(("attention", flops / attn_rate + tail + 2 * overhead))
        if routed is not None:
            out.append(("experts", routed.gemm_s["FIW".index(kind)]))
        elem = {"F": fwd_elem_bytes + softmax_bytes, "I": bwd_elem_bytes + softmax_bwd_bytes, "W": 0.0}[kind]
        if elem:
            kernels = ELEMENTWISE_KERNELS[kind] + qk_kernels
            kernels += routed.kernels[kind == "I"] if routed is not None else 0
            if cast_bytes:  # the FP8 GEMMs' input casts (forward) and output-gradient casts (backward)
                elem += cast_bytes
                kernels += gemm_kernels(model)
            elem += routed.memory_bytes[kind == "I"] if routed is not None else 0.0
            out.append(("memory-bound", elem / hbm_rate + kernels * overhead))
        if kind != "W" and tp_coll:
            out.append(("tp-comm", tp_fwd if kind == "F" else tp_back))
        if kind != "W" and routed is not None:
            a2a = routed.comm.forward_s if kind == "F" else routed.comm.backward_s
            if plan.expert_comm_overlap:
                a2a = max(0.0, a2a - sum(x for _, x in out))
            else:  # megatron-core's EP overlap (pplan.cost.moe_dispatch)
                a2a = exposed_comm(a2a, sum(x for _, x in out), hw, plan)
            out.append(("ep-comm", a2a))
        if kind != "W" and cp_step:
            rounds = (plan.cp - 1) * (1 if kind == "F" else 2)
            exposed = rounds * cp_step - dict(out).get("attention", 0.0)
            if exposed > 0:
                out.append(("cp-comm", exposed))
        if routed is not None and kind != "W":  # the host's launches and syncs (pplan.cost.host)
            terms = host_terms(plan)
            host = exposed_host_s(terms, sum(x for _, x in out), kind == "I") + (
                terms.sync_s if kind == "F" else 0.0
            )
            if host:
                out.append(("host", host))
        return tuple(out)

    base = PassTimes(items("F"), items("I"), items("W"))
    if plan.recompute == "full":
        return _full_recompute(base)
    if plan.recompute == "selective":
        module_s = {
            "core_attn": dict(base.f).get("attention", 0.0)
            + (softmax_bytes / hbm_rate + SCORE_KERNELS * overhead if softmax_bytes else 0.0),
            "layernorm": NORM_TENSORS * tokens * h * 2 / sp / hbm_rate + 2 * overhead,
            "mlp": gemm["F"].get("mlp") / t / gemm_rate + 2 * overhead + act_bytes / hbm_rate + overhead + tp_coll,
            "mla_up_proj": gemm["F"].get("attention/qkv") / t / gemm_rate + 2 * overhead,
            "moe_act": 0.0,
            "moe": 0.0,
            "shared_experts": 0.0,
        }  # fmt: skip
        if (
            routed is not None
        ):  # megatron-core's `mlp` re-runs dense MLPs only; a routed layer's block is `moe`
            # the shared experts: two GEMMs, their activation and, under TP, the collective pair around them
            module_s["shared_experts"] = (
                gemm["F"].get("moe/shared_experts") / t / gemm_rate + 2 * overhead + act_bytes / hbm_rate + overhead
                + tp_coll
            ) if act_bytes else 0.0  # fmt: skip
            # the whole block: router, shared and routed experts, and their traffic
            module_s["moe"] = (
                module_s["mlp"] + gemm["F"].get("moe/router") / t / bf16_rate
                + gemm["F"].get("moe/shared_experts") / t / gemm_rate
                + routed.gemm_s[0] + routed.memory_bytes[0] / hbm_rate + routed.kernels[0] * overhead
                + routed.comm.forward_s
            )  # fmt: skip
            module_s["mlp"] = 0.0
            module_s["moe_act"] = routed.activation_bytes[0] / hbm_rate + overhead
        return PassTimes(
            base.f, (*base.i, ("recompute", sum(module_s[x] for x in plan.recompute_modules))), base.w
        )
    return base


BF16_OR_OWN_ITEMS = (*ATTENTION_CORE, "moe/experts", "moe/router")
"""Layer FLOP items not in the Linears' GEMM item: the attention core and the router (BF16), the routed experts
(their own grouped GEMMs)."""


def tensor_parallel_mlp_width(model: ModelSpec) -> int:
    """Inner width of the MLP tensor parallelism splits: the dense MLP's, or a routed layer's shared experts'."""
    if model.moe is None:
        return model.ffn_hidden_size
    return model.moe.shared_expert_ffn_hidden_size


def gemm_kernels(model: ModelSpec) -> int:
    """GEMM kernels per pass of one layer, routed experts aside: the attention's projections (QKV and output; MLA:
    the down- and up-projections and the output) and the MLP's two (fused gate and up, down), or a routed layer's
    router and its shared experts' two."""
    mla = model.mla
    attention = 2 if mla is None else (5 if mla.q_lora_rank is not None else 4)
    if model.moe is None:
        return attention + 2
    return attention + 1 + (2 if model.moe.shared_expert_ffn_hidden_size else 0)


@dataclass(frozen=True, slots=True)
class RoutedLayer:
    """What a routed layer adds per pass (pplan.cost.experts): grouped expert GEMMs, routing bytes and kernels
    (forward, backward), and the expert all-to-alls."""

    gemm_s: tuple[float, float, float]
    """The grouped expert GEMMs of F, I and W (pplan.cost.moe_dispatch `expert_gemm_s`)."""
    memory_bytes: tuple[float, float]
    """Routing and the experts' activation function, forward and backward."""
    activation_bytes: tuple[float, float]
    """Of `memory_bytes`, the experts' activation function (what `moe_act` recompute re-runs)."""
    kernels: tuple[int, int]
    comm: ExpertComm


def _routed_layer(
    model: ModelSpec, hw: HardwareSpec, plan: LayerSetting, act_tensors: tuple[int, int]
) -> RoutedLayer | None:
    """A routed layer's expert work per pass (F, I and W each run the experts' GEMMs once); None when dense."""
    moe = model.moe
    if moe is None:
        return None
    gemm_s = _expert_gemm(model, hw, plan)
    inner = expert_rows(model, plan) * moe.expert_ffn_hidden_size / plan.etp * 2
    routing = routing_bytes(model, plan)
    activation = (act_tensors[0] * inner, act_tensors[1] * inner)
    memory = (routing[0] + activation[0], routing[1] + activation[1])
    _, router, permute, _ = routed_kernels(plan)
    kernels = (router[0] + permute[0], router[1] + permute[1])
    return RoutedLayer(gemm_s, memory, activation, kernels, expert_comm_by_knobs(model, hw, plan))


def _expert_gemm(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> tuple[float, float, float]:
    """The routed experts' grouped GEMMs of F, I and W: grouped GEMMs reach grouped_gemm / matmul of what plain
    GEMMs of the same precision reach, at large groups (pplan.cost.moe_dispatch `expert_gemm_s`)."""
    flops = layer_flops(model, plan.seq_len, plan.micro_batch, plan.cp).f.get("moe/experts") / plan.tp
    rate = linear_rate(hw, plan) * hw.efficiency.grouped_gemm_fraction / hw.efficiency.matmul
    return expert_gemm_s(model, plan, flops, rate, hw.efficiency.kernel_overhead_us * 1e-6)


@lru_cache(maxsize=8192)
def output_pass_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    """The output layer and loss for one micro-batch on the last chunk, and each multi-token-prediction module.
    The output layer and loss read none of a shape's expert fields, so they are remembered with those at their
    defaults (`output_end_times`): only an MTP module's layer (routed, for a routed model) differs between the ep,
    etp and expert overlaps a search tries."""
    if isinstance(plan, Shape) and (plan.ep, plan.etp, plan.expert_comm_overlap) != _NO_EXPERTS:
        ends = output_end_times(model, hw, _without_experts(plan))
    else:
        ends = output_end_times(model, hw, plan)
    return with_mtp_modules(model, hw, plan, ends)


def with_mtp_modules(
    model: ModelSpec, hw: HardwareSpec, plan: LayerSetting, ends: PassTimes, layer: PassTimes | None = None
) -> PassTimes:
    """`output_pass_times` of `plan` from its output layer and loss (`ends`: `output_end_times` of `plan`, or of
    any shape that differs from it only in the expert fields, which those read none of): `ends` with each
    multi-token-prediction module. `layer`: the modules' layer at `plan` (`layer_pass_times` of
    `model.mtp_layer`), when at hand."""
    if not model.mtp_layers:
        return ends
    gemm_rate, _, _, overhead = rates(hw)
    # each multi-token-prediction module: its 2h → h projection, one layer, and the output layer and loss again
    proj = (
        mtp_projection_flops(model, plan.seq_len, plan.micro_batch, plan.cp) / plan.tp / gemm_rate + overhead
    )
    if layer is None:
        layer = layer_pass_times(model.mtp_layer, hw, plan)
    module = (
        ends.f_s + proj + layer.f_s,
        ends.i_s + proj + layer.i_s,
        ends.w_s + proj + layer.w_s,
    )
    k = model.mtp_layers
    return PassTimes(
        (*ends.f, ("mtp", k * module[0])),
        (*ends.i, ("mtp", k * module[1])),
        (*ends.w, ("mtp", k * module[2])),
    )


@lru_cache(maxsize=8192)
def output_end_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    """The output layer and loss alone (`output_pass_times` without its MTP modules)."""
    gemm_rate, _, _, overhead = rates(hw)
    loss_rate = hw.gpu.hbm_bandwidth_gb_per_s * 1e9 * hw.efficiency.loss_hbm_fraction
    logit = logits_flops(model, plan.seq_len, plan.micro_batch, plan.cp) / plan.tp
    elements = plan.seq_len // plan.cp * plan.micro_batch * model.vocab_size / plan.tp
    loss_f = LOSS_BYTES[0] * elements / loss_rate + LOSS_KERNELS[0] * overhead
    loss_i = LOSS_BYTES[1] * elements / loss_rate + LOSS_KERNELS[1] * overhead
    g = logit / gemm_rate + overhead
    gather, back = end_collectives_s(model, hw, plan).output
    if overlaps_tp_backward(plan.stack, plan.splits_backward):
        back = max(0.0, back - g)  # behind the output layer's weight-gradient GEMM
    return PassTimes(
        (("logits", g), ("loss", loss_f), *_tp_item(gather)),
        (("logits", g), ("loss", loss_i), *_tp_item(back)),
        (("logits", g),),
    )


@lru_cache(maxsize=8192)
def embedding_pass_times(
    model: ModelSpec, hw: HardwareSpec, plan: LayerSetting, grad_dtype: GradDtype = "fp32"
) -> PassTimes:
    """The input embedding for one micro-batch on the first chunk: the lookup in F; in W the weight gradient,
    a dense V/t × h tensor (`EMBEDDING_DENSE_GRAD_BYTES`) with the micro-batch's rows added in, then added into
    the main gradient (read and write at `grad_dtype`) by a stack that accumulates one (megatron-core's DDP hook
    `main_grad.add_(grad)`, DeepSpeed's BF16 optimizer; pplan.profiles.stacks)."""
    _, _, hbm_rate, overhead = rates(hw)
    rows = plan.seq_len // plan.cp * plan.micro_batch * model.hidden_size * 2
    table = model.vocab_size * model.hidden_size / plan.tp
    per_element = EMBEDDING_DENSE_GRAD_BYTES
    if STACKS[plan.stack].main_grad_accumulation:
        per_element += 2 * GRAD_BYTES[grad_dtype]
    lookup = EMBEDDING_ROW_TENSORS[0] * rows / hbm_rate + EMBEDDING_KERNELS[0] * overhead
    moved = EMBEDDING_ROW_TENSORS[1] * rows + per_element * table
    grad = moved / hbm_rate + EMBEDDING_KERNELS[1] * overhead
    reduce, gather = end_collectives_s(model, hw, plan).embedding
    return PassTimes((("embedding", lookup), *_tp_item(reduce)), (), (("embedding", grad), *_tp_item(gather)))


def _tp_item(seconds: float) -> tuple[tuple[str, float], ...]:
    """An end's exposed tensor-parallel time as a pass item, none when there is none."""
    return (("tp-comm", seconds),) if seconds > 0 else ()
