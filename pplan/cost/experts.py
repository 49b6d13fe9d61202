"""What a routed (mixture-of-experts) layer costs beyond its attention: expert all-to-all, expert GEMMs, routing.

Symbols as in pplan.model.flops; E routed experts, k per token, f_e expert width, ep expert parallel, etp expert
tensor parallel. Balanced routing (every expert receives the same number of tokens; Megatron-Bridge's published
runs force it) unless a plan says otherwise. Per micro-batch, per routed layer, per GPU:
- Tokens: each rank routes its n = q·b/t tokens (sequence parallel shards them; megatron-core requires it with
  t > 1 in a routed model), k copies each.
- Dispatch and combine (megatron-core's all-to-all token dispatcher): each is an all-to-all over the ep ranks of
  n·k·h·2 bytes (BF16) per rank, (ep−1)/ep of it to other ranks; the forward runs both, the input-gradient pass
  both again (gradients), W neither. With etp > 1 the dispatched tokens are also all-gathered (and the outputs
  reduce-scattered) over the etp ranks of each expert. An all-to-all over a group that spans nodes sends each
  peer's share over NVLink or over the GPU's own NIC (one per GPU on DGX nodes): time = latency + max(NVLink
  share / NVLink rate, network share / NIC rate) (`all_to_all_s`).
- Overlap: schedules that pair a forward chunk with another micro-batch's backward chunk (DualPipe, DualPipeV;
  `ScheduleFamily.overlaps_expert_comm`) run each pass's all-to-all behind the paired pass's compute; pplan
  counts max(0, all-to-all − the pass's own compute of the layer) as exposed (the paired chunk is of the same
  layers, so its compute is the same to first order; the warm-up and cool-down passes, which have no partner,
  are counted as overlapped too: an optimistic bound, said by `explain`). Other schedules expose all of it.
- Expert GEMMs: the layer's expert FLOPs / t at the profile's grouped-GEMM efficiency (`EfficiencySpec.
  grouped_gemm`), one grouped kernel per expert matrix and pass.
- Memory-bound routing kernels: the router's FP32 scores (`ROUTER_BYTES` per token and expert), the permutation
  before dispatch and the probability-weighted un-permutation after combine (`PERMUTE_TENSORS` tensors of
  n·h BF16 elements), and the experts' activation function (pplan.cost.passtime's tensors, over k·n·etp rows
  of f_e/etp).
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.cost.links import GroupShape, all_gather_s
from pplan.plan.shape import LayerSetting
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

ACT_BYTES = 2
ROUTER_BYTES = (16, 16)
"""FP32 bytes per token and expert the router's kernels move, forward and backward: the logits written by the
router GEMM are read by the score function (softmax or sigmoid: read 4, write 4), the top-k selection reads the
scores (4) and the probabilities are written back as a dense map (4); the backward mirrors it."""
PERMUTE_TENSORS = 2
"""Per token copy and per direction: the permutation reads the token and writes its k copies, the un-permutation
reads k copies and writes one weighted sum; so (1 + k) + (k + 1) tensors of n·h elements, written here as
2·(1 + k), forward, and the same in the backward."""
ROUTING_KERNELS = (6, 6)
"""Kernels of the router's score, top-k, the permutation and un-permutation, forward and backward."""


def routed_tokens(plan: LayerSetting) -> float:
    """n: tokens one rank routes per micro-batch (sequence-parallel shard of the context-parallel chunk)."""
    return plan.seq_len // plan.cp * plan.micro_batch / plan.tp


def dispatch_bytes(model: ModelSpec, plan: LayerSetting) -> float:
    """Bytes one rank's dispatch all-to-all carries per micro-batch: n·k token copies of h BF16 elements (the
    combine carries the same back)."""
    assert model.moe is not None
    return routed_tokens(plan) * model.moe.top_k * model.hidden_size * ACT_BYTES


def ep_group(plan: LayerSetting) -> GroupShape:
    """The expert-parallel group: ep ranks spaced etp apart (megatron-core's expert rank order: etp, then ep,
    then expert data parallel, inside the t·cp·d ranks of a stage)."""
    return GroupShape(plan.ep, plan.etp)


def all_to_all_s(hardware: HardwareSpec, group: GroupShape, nbytes: float) -> float:
    """One all-to-all in which every member sends `nbytes` in total, 1/n to each member (itself included).

    Inside a node: (n−1)/n of it over NVLink. Across nodes, with k members per node: (k−1)/n over NVLink and
    (n−k)/n over the GPU's own NIC, concurrently; 1/oversubscription of the NIC rate where the group spans
    pods. One latency of the slower tier."""
    n = group.size
    if n <= 1:
        return 0.0
    intra, inter = hardware.intra_node, hardware.inter_node
    if n * group.stride <= hardware.gpus_per_node:
        return intra.latency_s + nbytes * (n - 1) / n / intra.achievable_bytes_per_s
    per_node = group.rails(hardware.gpus_per_node)
    nic = inter.achievable_bytes_per_s
    pod = hardware.pod
    if pod is not None and n * group.stride > pod.gpus:
        nic /= pod.oversubscription
    near = nbytes * (per_node - 1) / n / intra.achievable_bytes_per_s
    far = nbytes * (n - per_node) / n / nic
    return inter.latency_s + max(near, far)


@dataclass(frozen=True, slots=True)
class ExpertComm:
    """One routed layer's expert-parallel communication per micro-batch, seconds."""

    forward_s: float
    """Dispatch + combine (and the etp gathers) in the forward."""
    backward_s: float
    """Their gradients in the input-gradient pass."""


def expert_comm(model: ModelSpec, hardware: HardwareSpec, plan: LayerSetting) -> ExpertComm:
    """Dispatch and combine of one routed layer, by the plan's dispatcher (pplan.cost.moe_dispatch), before any
    overlap."""
    from pplan.cost.moe_dispatch import expert_comm_by_knobs  # it builds on this module

    return expert_comm_by_knobs(model, hardware, plan)


def alltoall_comm(model: ModelSpec, hardware: HardwareSpec, plan: LayerSetting) -> ExpertComm:
    """Dispatch and combine all-to-alls of one routed layer (module docstring)."""
    nbytes = dispatch_bytes(model, plan)
    a2a = all_to_all_s(hardware, ep_group(plan), nbytes)
    gather = 0.0
    if (
        plan.etp > 1
    ):  # the etp ranks of an expert share their dispatched tokens, and reduce-scatter the outputs
        gather = 2 * all_gather_s(GroupShape(plan.etp, 1).link(hardware), nbytes * plan.etp, plan.etp)
    per_pass = 2 * a2a + gather
    return ExpertComm(per_pass, per_pass)


def routing_bytes(model: ModelSpec, plan: LayerSetting) -> tuple[float, float]:
    """HBM bytes of the router's scores and the (un)permutations, forward and backward (module docstring)."""
    moe = model.moe
    assert moe is not None
    n = routed_tokens(plan)
    scores = n * moe.num_experts
    hidden = n * model.hidden_size * ACT_BYTES * PERMUTE_TENSORS * (1 + moe.top_k)
    return ROUTER_BYTES[0] * scores + hidden, ROUTER_BYTES[1] * scores + hidden


def expert_rows(model: ModelSpec, plan: LayerSetting) -> float:
    """Token copies one rank's experts process per micro-batch: k·n, times etp (each of an expert's etp ranks
    sees all its tokens)."""
    assert model.moe is not None
    return routed_tokens(plan) * model.moe.top_k * plan.etp
