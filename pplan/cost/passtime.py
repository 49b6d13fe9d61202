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
  are full-recompute checkpoints save nothing and copy nothing.
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
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from pplan.cost.experts import ROUTING_KERNELS, ExpertComm, expert_comm, expert_rows, routing_bytes
from pplan.cost.links import all_gather_s, all_reduce_s, cp_group, message_s, tp_group
from pplan.cost.memory import GRAD_BYTES
from pplan.errors import ProfileError
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
from pplan.plan.configuration import LayerSetting, Plan, Shape
from pplan.plan.knobs import GradDtype
from pplan.plan.layout import Chunk
from pplan.profiles.specs import HardwareSpec, ModelSpec
from pplan.profiles.stacks import STACKS, UserbufferOverlap, overlaps_tp_backward

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
SCORE_KERNELS = 2
"""Memory-bound kernels an unfused attention core runs on its scores (scale-mask-softmax, dropout)."""
ATTENTION_BLOCK_ROWS = 128
"""Queries (forward) or keys (backward) one flash-attention thread block handles at head width 128: FlashAttention-2
splits the sequence into blocks of 64-128 rows (Dao 2023, arXiv 2307.08691, §3.1 and §3.3); 128 reproduces the
H200's timings (`attention_tail_s`)."""
SCORE_BYTES_DROPOUT = (13, 19)
"""With attention dropout: plus the dropout kernel's read, write and 1-byte mask (5), forward or backward."""


@dataclass(frozen=True, slots=True)
class PassTimes:
    """Seconds of F, I and W for one micro-batch, each itemised as (name, seconds)."""

    f: tuple[tuple[str, float], ...]
    i: tuple[tuple[str, float], ...]
    w: tuple[tuple[str, float], ...]
    f_s: float = field(init=False, compare=False)
    """The sum of `f` (computed once: the search reads pass totals far more often than it builds them)."""
    i_s: float = field(init=False, compare=False)
    w_s: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "f_s", sum([x for _, x in self.f]))
        object.__setattr__(self, "i_s", sum([x for _, x in self.i]))
        object.__setattr__(self, "w_s", sum([x for _, x in self.w]))

    def scaled(self, k: float) -> PassTimes:
        def sc(items: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
            return tuple((n, x * k) for n, x in items)

        return PassTimes(sc(self.f), sc(self.i), sc(self.w))

    def plus(self, other: PassTimes) -> PassTimes:
        def add(
            a: tuple[tuple[str, float], ...], b: tuple[tuple[str, float], ...]
        ) -> tuple[tuple[str, float], ...]:
            out: dict[str, float] = {}
            for n, x in (*a, *b):
                out[n] = out.get(n, 0.0) + x
            return tuple(out.items())

        return PassTimes(add(self.f, other.f), add(self.i, other.i), add(self.w, other.w))


ZERO = PassTimes((), (), ())


def _rates(hw: HardwareSpec) -> tuple[float, float, float, float]:
    peak = hw.gpu.peak_bf16_tflops * 1e12
    eff = hw.efficiency
    return (
        peak * eff.matmul,
        peak * eff.attention_fraction,
        hw.gpu.hbm_bandwidth_gb_per_s * 1e9 * eff.hbm,
        eff.kernel_overhead_us * 1e-6,
    )


def linear_rate(hw: HardwareSpec, plan: LayerSetting) -> float:
    """FLOP/s of the layers' Linear GEMMs: the BF16 rate, or under FP8 the FP8 peak × `efficiency.fp8_matmul`
    (pplan.model.precision)."""
    if plan.precision == "bf16" or hw.gpu.peak_fp8_tflops is None:
        return hw.gpu.peak_bf16_tflops * 1e12 * hw.efficiency.matmul
    return hw.gpu.peak_fp8_tflops * 1e12 * hw.efficiency.fp8_matmul_fraction


@lru_cache(maxsize=8192)
def tp_collective_s(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> float:
    """One of the per-layer tensor-parallel collectives (an all-reduce, or an all-gather/reduce-scatter pair)."""
    if plan.tp == 1:
        return 0.0
    link = tp_group(plan.tp).link(hw)
    if plan.sequence_parallel:
        return 2 * all_gather_s(link, _tp_buffer(model, plan), plan.tp)
    return all_reduce_s(link, _tp_buffer(model, plan), plan.tp)


def layer_gemms_s(
    model: ModelSpec, hw: HardwareSpec, plan: LayerSetting
) -> tuple[float, float, float, float]:
    """Seconds of a layer's QKV, output projection, MLP first (gate and up) and second GEMMs on one GPU in the
    forward; each one's input-gradient and weight-gradient GEMMs take the same (+ one kernel overhead each)."""
    _, _, _, overhead = _rates(hw)
    gemm_rate = linear_rate(hw, plan)
    fl = layer_flops(model, plan.seq_len, plan.micro_batch, plan.cp).f
    matrices = 3 if model.mlp == "swiglu" else 2
    mlp = fl.get("mlp") + fl.get("moe/shared_experts")  # the tensor-parallel MLP of a routed layer: shared
    parts = (
        fl.get("attention/qkv"),
        fl.get("attention/proj"),
        mlp * (matrices - 1) / matrices,
        mlp / matrices,
    )
    return (
        parts[0] / plan.tp / gemm_rate + overhead,
        parts[1] / plan.tp / gemm_rate + overhead,
        parts[2] / plan.tp / gemm_rate + overhead,
        parts[3] / plan.tp / gemm_rate + overhead,
    )


def tp_forward_s(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> float:
    """The forward's exposed tensor-parallel collectives of one layer: both collective pairs, or with the stack's
    TP overlap (`tp_comm_overlap`; under sequence parallelism) each all-gather pipelined with the column-parallel
    GEMM it feeds (QKV, the MLP's first) and each reduce-scatter with the row-parallel GEMM it follows (the
    projection, the MLP's second) (Wang et al. 2022, "Overlap communication with dependent computation via
    decomposition"): as the stack's userbuffers run them (`TpOverlap`: ring exchange for the all-gathers, pipelined
    splits for the reduce-scatters; megatron-core), or Σ max(0, collective − its GEMM) (PyTorch's async TP)."""
    whole = 2 * tp_collective_s(model, hw, plan)
    if not plan.tp_comm_overlap or plan.tp == 1:
        return whole
    gather = all_gather_s(tp_group(plan.tp).link(hw), _tp_buffer(model, plan), plan.tp)
    qkv, proj, fc1, fc2 = layer_gemms_s(model, hw, plan)
    over = TpOverlap(STACKS[plan.stack].userbuffers, hw, plan.tp)
    return (
        over.ring(gather, qkv)
        + over.pipeline(gather, proj)
        + over.ring(gather, fc1)
        + over.pipeline(gather, fc2)
    )


@dataclass(frozen=True, slots=True)
class TpOverlap:
    """Exposed seconds of one tensor-parallel collective of `c` seconds run beside a GEMM of `g` seconds by a stack's
    userbuffers (pplan.profiles.stacks.UserbufferOverlap; k = its `comm_sms`, S = the GPU's SMs, o = the kernel
    overhead; without an SM count in the profile the SMs taken are not modelled). A stack without userbuffers
    (`ub` None: async TP's copy-engine micro-pipelining) exposes max(0, c − g) in every method. With them:
    - ring(c, g) = max(0, c − g) + (t − 1)·o: the GEMM as t chunks beside copy-engine sends;
    - pipeline(c, g) = (n − 1)·(max(g'/n, c/n) − g/n) + c/n + (n − 1)·o with n splits and g' = g·S/(S − k): each
      of the first n − 1 chunks' reduce-scatters runs beside the next chunk, which runs on S − k SMs; the last runs
      alone;
    - bulk(c, g) = max(c, g + c·k/S) − g: the GEMM loses k of its S SMs while the collective runs beside it."""

    ub: UserbufferOverlap | None
    hw: HardwareSpec
    tp: int

    @property
    def _overhead(self) -> float:
        return self.hw.efficiency.kernel_overhead_us * 1e-6

    def _taken(self, ub: UserbufferOverlap) -> float:
        """k / S: the fraction of the GPU's SMs a pipeline or bulk collective takes."""
        sms = self.hw.gpu.sms
        if sms is not None and sms <= ub.comm_sms:
            raise ProfileError(
                "gpu.sms",
                f"{sms} in profile {self.hw.name} leaves no SM for a GEMM beside a {ub.comm_sms}-SM collective",
                "give the GPU's real SM count, or drop it from the profile",
            )
        return ub.comm_sms / sms if sms else 0.0

    def ring(self, c: float, g: float) -> float:
        if self.ub is None:
            return max(0.0, c - g)
        return max(0.0, c - g) + (self.tp - 1) * self._overhead

    def pipeline(self, c: float, g: float) -> float:
        if self.ub is None:
            return max(0.0, c - g)
        n = self.ub.pipeline_splits
        slowed = g / n / (1 - self._taken(self.ub))
        return (n - 1) * (max(slowed, c / n) - g / n) + c / n + (n - 1) * self._overhead

    def bulk(self, c: float, g: float) -> float:
        if self.ub is None:
            return max(0.0, c - g)
        return max(c, g + c * self._taken(self.ub)) - g


def _tp_buffer(model: ModelSpec, plan: LayerSetting) -> float:
    """Bytes of one tensor-parallel collective's whole buffer: the micro-batch's q·b·h BF16 activations."""
    return plan.seq_len // plan.cp * plan.micro_batch * model.hidden_size * 2


@dataclass(frozen=True, slots=True)
class TpBackward:
    """A layer's tensor-parallel collectives in its backward pass (I), in seconds (module docstring)."""

    exposed_s: float
    """What the backward waits for."""
    hidden_s: float
    """What runs behind the column-parallel layers' own gradient GEMMs (`tp_backward_overlap`)."""


def tp_backward(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> TpBackward:
    """The backward's tensor-parallel collectives of one layer, split into exposed and hidden time.

    Without overlap: the two collectives (or collective pairs) of the forward, run again in reverse, all exposed.
    With the stack's overlap (pplan.profiles.stacks), per column-parallel layer X (QKV; the MLP's first GEMM, or its
    fused gate and up GEMMs):
    - without sequence parallelism the input gradient's all-reduce runs behind X's weight-gradient GEMM:
      exposed max(0, all-reduce − wgrad_X);
    - with it, the row-parallel layer before X in the backward all-gathers its output gradient (exposed), X
      re-gathers its sequence-sharded input behind its input-gradient GEMM and reduce-scatters the input gradient
      behind its weight-gradient GEMM: exposed all-gather + max(0, all-gather − dgrad_X) + max(0, reduce-scatter −
      wgrad_X) (the reduce-scatter moves the all-gather's volume).
    With the stack's full TP overlap (`tp_comm_overlap`) the row-parallel all-gathers also run behind the input
    gradient GEMMs of the projection and the MLP's second GEMM: every one of the six is exposed only where it
    outlasts its GEMM.
    wgrad_X = dgrad_X = X's forward FLOPs / t / (peak · e_matmul) + one kernel overhead (`layer_gemms_s`)."""
    if plan.tp == 1:
        return TpBackward(0.0, 0.0)
    whole = 2 * tp_collective_s(model, hw, plan)
    link = tp_group(plan.tp).link(hw)
    gemms = layer_gemms_s(model, hw, plan)
    if plan.tp_comm_overlap:  # every collective behind a GEMM of the same pass (sequence parallel)
        gather = all_gather_s(link, _tp_buffer(model, plan), plan.tp)
        over = TpOverlap(STACKS[plan.stack].userbuffers, hw, plan.tp)
        row = sum(over.ring(gather, g) for g in (gemms[1], gemms[3]))  # output gradients' all-gathers: dgrad
        column = sum(2 * over.bulk(gather, g) for g in (gemms[0], gemms[2]))  # re-gather: dgrad; RS: wgrad
        return TpBackward(row + column, max(0.0, 6 * gather - row - column))
    if not overlaps_tp_backward(plan.stack, plan.splits_backward):
        return TpBackward(whole, 0.0)
    grad_gemm = (gemms[0], gemms[2])
    if plan.sequence_parallel:
        gather = all_gather_s(link, _tp_buffer(model, plan), plan.tp)
        exposed = sum(gather + 2 * max(0.0, gather - g) for g in grad_gemm)
        return TpBackward(exposed, 3 * len(grad_gemm) * gather - exposed)
    reduce = all_reduce_s(link, _tp_buffer(model, plan), plan.tp)
    exposed = sum(max(0.0, reduce - g) for g in grad_gemm)
    return TpBackward(exposed, len(grad_gemm) * reduce - exposed)


def layer_pass_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    """One layer, one micro-batch, one GPU (with the exposed part of its activation offload copies). Remembered
    per layer shape; a dense layer (`model.moe` None: a dense model's, or a routed model's dense part) reads none
    of a shape's expert fields (ep, etp and the expert all-to-all's overlap enter only through the routed
    experts, `_routed_layer`), so its shapes are remembered with those at their defaults: the dense layers of
    every ep and etp a search tries of a routed model share one figure."""
    if (
        model.moe is None
        and isinstance(plan, Shape)
        and (plan.ep, plan.etp, plan.expert_comm_overlap) != _NO_EXPERTS
    ):
        plan = _without_experts(plan)
    return _layer_pass_times(model, hw, plan)


_NO_EXPERTS = (1, 1, False)
"""A shape's (ep, etp, expert_comm_overlap) at their defaults."""


@lru_cache(maxsize=8192)
def _without_experts(shape: Shape) -> Shape:
    """`shape` with (ep, etp, expert_comm_overlap) at their defaults (remembered: a shape's hash is kept)."""
    return changed(shape, ep=1, etp=1, expert_comm_overlap=False)


@lru_cache(maxsize=8192)
def _layer_pass_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    if (
        model.moe is not None
        and isinstance(plan, Shape)
        and (plan.ep > 1 or plan.expert_comm_overlap)
        and plan.recompute != "selective"
    ):
        # the expert all-to-alls are the one item ep and their overlap change (pplan.cost.experts): a search's
        # many ep of one shape share the rest
        alone = _layer_compute_times(
            model, hw, changed(plan, ep=1, expert_comm_overlap=False, recompute="none")
        )
        times = _with_expert_comm(alone, expert_comm(model, hw, plan), plan.expert_comm_overlap)
        return with_offload(model, hw, plan, _full_recompute(times) if plan.recompute == "full" else times)
    return with_offload(model, hw, plan, _layer_compute_times(model, hw, plan))


def _with_expert_comm(times: PassTimes, comm: ExpertComm, overlap: bool) -> PassTimes:
    """A routed layer's `times` (without recompute) with its F and I expert all-to-all items those of `comm`,
    behind the items before them when `overlap` (`_layer_compute_times`' items, in the same order)."""

    def swapped(items: tuple[tuple[str, float], ...], a2a: float) -> tuple[tuple[str, float], ...]:
        at = [name for name, _ in items].index("ep-comm")
        if overlap:
            a2a = max(0.0, a2a - sum(x for _, x in items[:at]))
        return (*items[:at], ("ep-comm", a2a), *items[at + 1 :])

    return PassTimes(swapped(times.f, comm.forward_s), swapped(times.i, comm.backward_s), times.w)


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
    bf16_rate, attn_rate, hbm_rate, overhead = _rates(hw)
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
            out.append(("experts", routed.gemm_s))
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
            out.append(("ep-comm", a2a))
        if kind != "W" and cp_step:
            rounds = (plan.cp - 1) * (1 if kind == "F" else 2)
            exposed = rounds * cp_step - dict(out).get("attention", 0.0)
            if exposed > 0:
                out.append(("cp-comm", exposed))
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
        }  # fmt: skip
        if (
            routed is not None
        ):  # a routed layer's MLP is its router, shared and routed experts, and their traffic
            shared = (
                gemm["F"].get("moe/router") / t / bf16_rate
                + gemm["F"].get("moe/shared_experts") / t / gemm_rate
            )
            module_s["mlp"] += (
                shared + routed.gemm_s + routed.memory_bytes[0] / hbm_rate + routed.kernels[0] * overhead
                + routed.comm.forward_s
            )  # fmt: skip
            module_s["moe_act"] = routed.activation_bytes[0] / hbm_rate + overhead
        return PassTimes(
            base.f, (*base.i, ("recompute", sum(module_s[x] for x in plan.recompute_modules))), base.w
        )
    return base


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


BF16_OR_OWN_ITEMS = (*ATTENTION_CORE, "moe/experts", "moe/router")
"""Layer FLOP items not in the Linears' GEMM item: the attention core and the router (BF16), the routed experts
(their own grouped GEMMs)."""


def tensor_parallel_mlp_width(model: ModelSpec) -> int:
    """Inner width of the MLP tensor parallelism splits: the dense MLP's, or a routed layer's shared experts'."""
    if model.moe is None:
        return model.ffn_hidden_size
    return model.moe.shared_expert_ffn_hidden_size


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

    gemm_s: float
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
    overhead = hw.efficiency.kernel_overhead_us * 1e-6
    flops = layer_flops(model, plan.seq_len, plan.micro_batch, plan.cp).f.get("moe/experts") / plan.tp
    # grouped GEMMs reach grouped_gemm / matmul of what plain GEMMs of the same precision reach
    grouped = hw.efficiency.grouped_gemm_fraction / hw.efficiency.matmul
    gemm_s = flops / (linear_rate(hw, plan) * grouped) + 2 * overhead
    inner = expert_rows(model, plan) * moe.expert_ffn_hidden_size / plan.etp * 2
    routing = routing_bytes(model, plan)
    activation = (act_tensors[0] * inner, act_tensors[1] * inner)
    memory = (routing[0] + activation[0], routing[1] + activation[1])
    return RoutedLayer(gemm_s, memory, activation, ROUTING_KERNELS, expert_comm(model, hw, plan))


@lru_cache(maxsize=8192)
def output_pass_times(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    """The output layer and loss for one micro-batch on the last chunk, and each multi-token-prediction module.
    The output layer and loss read none of a shape's expert fields, so they are remembered with those at their
    defaults (`_output_ends`): only an MTP module's layer (routed, for a routed model) differs between the ep,
    etp and expert overlaps a search tries."""
    if isinstance(plan, Shape) and (plan.ep, plan.etp, plan.expert_comm_overlap) != _NO_EXPERTS:
        ends = _output_ends(model, hw, _without_experts(plan))
    else:
        ends = _output_ends(model, hw, plan)
    if not model.mtp_layers:
        return ends
    gemm_rate, _, _, overhead = _rates(hw)
    # each multi-token-prediction module: its 2h → h projection, one layer, and the output layer and loss again
    proj = (
        mtp_projection_flops(model, plan.seq_len, plan.micro_batch, plan.cp) / plan.tp / gemm_rate + overhead
    )
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
def _output_ends(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> PassTimes:
    """The output layer and loss alone (`output_pass_times` without its MTP modules)."""
    gemm_rate, _, _, overhead = _rates(hw)
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
    _, _, hbm_rate, overhead = _rates(hw)
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


@dataclass(frozen=True, slots=True)
class EndCollectives:
    """Seconds of the tensor-parallel collectives at the model's ends, one micro-batch (module docstring)."""

    embedding: tuple[float, float]
    """The embedding's output reduced in F; under sequence parallelism its gradient all-gathered back in W."""
    output: tuple[float, float]
    """Under sequence parallelism the output layer's input all-gathered in F; its input gradient all-reduced
    (reduce-scattered under sequence parallelism) in I, before any overlap."""


def end_collectives_s(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> EndCollectives:
    """The ends' collectives of one q·b·h BF16 buffer over the tensor-parallel group (Megatron-Core's
    `VocabParallelEmbedding` and output `ColumnParallelLinear`; torchtitan's row- and column-wise plans for them)."""
    if plan.tp == 1:
        return EndCollectives((0.0, 0.0), (0.0, 0.0))
    link, buffer = tp_group(plan.tp).link(hw), _tp_buffer(model, plan)
    one = all_gather_s(link, buffer, plan.tp)  # an all-gather, or a reduce-scatter: the same ring volume
    if plan.sequence_parallel:
        return EndCollectives((one, one), (one, one))
    reduce = all_reduce_s(link, buffer, plan.tp)
    return EndCollectives((reduce, 0.0), (0.0, reduce))


def chunk_pass_times(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> tuple[PassTimes, ...]:
    """F, I, W per model chunk, in model order."""
    chunks = plan.layout.chunks
    recomputed = tuple(plan.recomputed_layers(c.layers) for c in chunks)
    return layout_pass_times(model, hw, plan.shape, chunks, recomputed, plan.grad_dtype)


@lru_cache(maxsize=8192)
def layout_pass_times(
    model: ModelSpec,
    hw: HardwareSpec,
    shape: Shape,
    chunks: tuple[Chunk, ...],
    recomputed: tuple[int, ...] | None = None,
    grad_dtype: GradDtype = "fp32",
) -> tuple[PassTimes, ...]:
    """F, I, W per chunk of `chunks` for one layer setting (cached: a search asks for the same ones often). Under
    full recompute `recomputed[c]` of chunk c's layers re-run their forward (all of them when not given): the
    chunk's first layers, so a routed model's dense layers (which come first) before its routed ones. The first
    chunk adds the input embedding (`embedding_pass_times`, its gradient accumulated at `grad_dtype`), the last
    the output layer and loss."""
    kinds = [(model, layer_pass_times(model, hw, shape))]
    if model.moe is not None and any(c.dense_layers for c in chunks):
        kinds.append((model.dense_part, layer_pass_times(model.dense_part, hw, shape)))
    full = shape.recompute == "full"
    kept = [layer_pass_times(m, hw, replace(shape, recompute="none")) if full else t for m, t in kinds]
    out = output_pass_times(model, hw, shape)
    result = []
    alike: dict[
        tuple[int, int, int, bool, bool], PassTimes
    ] = {}  # chunks come in a few sizes: each done once
    for c, chunk in enumerate(chunks):
        n = chunk.layers if recomputed is None or not full else recomputed[c]
        key = (chunk.layers, chunk.dense_layers, n, chunk.has_output, chunk.has_embedding)
        if key not in alike:
            dense_rerun = min(n, chunk.dense_layers)
            counts = (
                (chunk.routed_layers, n - dense_rerun),  # (layers, of which re-run) per kind, routed first
                (chunk.dense_layers, dense_rerun),
            )
            times = ZERO
            for (layers, rerun), (_, layer), kept_layer in zip(counts, kinds, kept, strict=False):
                if rerun:
                    times = layer.scaled(rerun) if times is ZERO else times.plus(layer.scaled(rerun))
                if layers > rerun:
                    rest = kept_layer.scaled(layers - rerun)
                    times = rest if times is ZERO else times.plus(rest)
            if chunk.has_embedding:
                embedding = embedding_pass_times(model, hw, shape, grad_dtype)
                times = embedding if times is ZERO else times.plus(embedding)
            alike[key] = times.plus(out) if chunk.has_output else times
        result.append(alike[key])
    return tuple(result)
