"""Seconds of the tensor-parallel collectives of a layer and of the model's ends, one micro-batch, one GPU, and
what a stack's overlap hides of them (pplan.cost.passtime adds what is exposed to each pass).

Per layer: 2 all-reduces (or 2 all-gather + reduce-scatter pairs under sequence parallelism) in F, on the
critical path, or pipelined with the GEMMs they feed or follow under the stack's TP overlap (`tp_forward_s`,
`TpOverlap`); in I the same again, less what a stack that overlaps them with the column-parallel layers' gradient
GEMMs hides (`tp_backward`, pplan.profiles.stacks); W has none. At the ends (`end_collectives_s`) one q·b·h buffer
over the tensor-parallel group: the embedding's vocabulary-parallel output is reduced (an all-reduce, or under
sequence parallelism a reduce-scatter in F and its all-gather back in W); under sequence parallelism the output
layer's input is all-gathered in F, and in I its input gradient is all-reduced (reduce-scattered under sequence
parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pplan.cost.links import all_gather_s, all_reduce_s, tp_group
from pplan.cost.passes import linear_rate, rates
from pplan.errors import ProfileError
from pplan.model.flops import layer_flops
from pplan.plan.shape import LayerSetting
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS, UserbufferOverlap, overlaps_tp_backward


@lru_cache(maxsize=8192)
def tp_collective_s(model: ModelSpec, hw: HardwareSpec, plan: LayerSetting) -> float:
    """One of the per-layer tensor-parallel collectives (an all-reduce, or an all-gather/reduce-scatter pair)."""
    if plan.tp == 1:
        return 0.0
    link = tp_group(plan.tp).link(hw)
    if plan.sequence_parallel:
        return 2 * all_gather_s(link, tp_buffer_bytes(model, plan), plan.tp)
    return all_reduce_s(link, tp_buffer_bytes(model, plan), plan.tp)


def layer_gemms_s(
    model: ModelSpec, hw: HardwareSpec, plan: LayerSetting
) -> tuple[float, float, float, float]:
    """Seconds of a layer's QKV, output projection, MLP first (gate and up) and second GEMMs on one GPU in the
    forward; each one's input-gradient and weight-gradient GEMMs take the same (+ one kernel overhead each)."""
    _, _, _, overhead = rates(hw)
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
    gather = all_gather_s(tp_group(plan.tp).link(hw), tp_buffer_bytes(model, plan), plan.tp)
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


def tp_buffer_bytes(model: ModelSpec, plan: LayerSetting) -> float:
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
        gather = all_gather_s(link, tp_buffer_bytes(model, plan), plan.tp)
        over = TpOverlap(STACKS[plan.stack].userbuffers, hw, plan.tp)
        row = sum(over.ring(gather, g) for g in (gemms[1], gemms[3]))  # output gradients' all-gathers: dgrad
        column = sum(2 * over.bulk(gather, g) for g in (gemms[0], gemms[2]))  # re-gather: dgrad; RS: wgrad
        return TpBackward(row + column, max(0.0, 6 * gather - row - column))
    if not overlaps_tp_backward(plan.stack, plan.splits_backward):
        return TpBackward(whole, 0.0)
    grad_gemm = (gemms[0], gemms[2])
    if plan.sequence_parallel:
        gather = all_gather_s(link, tp_buffer_bytes(model, plan), plan.tp)
        exposed = sum(gather + 2 * max(0.0, gather - g) for g in grad_gemm)
        return TpBackward(exposed, 3 * len(grad_gemm) * gather - exposed)
    reduce = all_reduce_s(link, tp_buffer_bytes(model, plan), plan.tp)
    exposed = sum(max(0.0, reduce - g) for g in grad_gemm)
    return TpBackward(exposed, len(grad_gemm) * reduce - exposed)


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
    link, buffer = tp_group(plan.tp).link(hw), tp_buffer_bytes(model, plan)
    one = all_gather_s(link, buffer, plan.tp)  # an all-gather, or a reduce-scatter: the same ring volume
    if plan.sequence_parallel:
        return EndCollectives((one, one), (one, one))
    reduce = all_reduce_s(link, buffer, plan.tp)
    return EndCollectives((reduce, 0.0), (0.0, reduce))
