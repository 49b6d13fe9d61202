"""Bytes on the wire: pipeline point-to-point messages, tensor-parallel collectives, data-parallel gradient sync.

Symbols as in activations.py; B_act = 2 bytes (BF16).
- P2P (Megatron `get_tensor_shapes`): one message per stage boundary per micro-batch per direction, of
  (s/cp)·b·h·B_act bytes, ÷ t under sequence parallelism. Cross-rank crossings per step, each direction: m per
  boundary between chunks on different ranks (loop placement: p·v − 1 boundaries; V placement: the middle one is
  local; DualPipe: p − 1 per direction of travel, each micro-batch travelling one way).
- Tensor parallel (Narayanan et al. 2021 §3.2; Korthikanti et al. 2022 §4.2.2): per layer 2 collectives in the
  forward and 2 in the backward (all-reduces, or all-gather + reduce-scatter pairs of the same volume under
  sequence parallelism), each on the (s/cp)·b·h·B_act activation; full recompute re-runs the forward's 2 on every
  layer it recomputes, selective recompute of the MLP its input's 1. A ring
  moves 2(t−1)/t of the buffer per GPU for an all-reduce and (t−1)/t for an all-gather or a reduce-scatter.
  The ends add the embedding's forward all-reduce (first stage) and, on the last stage, the output layer's input
  gather and its backward reduce-scatter.
- Data parallel (per step, per GPU, over the N = d·cp replicas): a ring all-reduce of the gradients moves
  2(N−1)/N × gradient bytes; with ZeRO-1 that is a reduce-scatter ((N−1)/N) plus a BF16 parameter all-gather
  ((N−1)/N × 2 bytes per parameter); ZeRO-2 keeps only a gradient shard, so it reduce-scatters after each of the
  m micro-batches' backward (m reduce-scatters, then the parameter all-gather); ZeRO-3 also gathers the
  parameters for each micro-batch's forward and again for its backward (m × (reduce-scatter + 2 all-gathers);
  Rajbhandari et al. 2020, arXiv:1910.02054 §7.2; pplan.cost.steptime); without resharding after the forward,
  one all-gather per micro-batch. Hybrid sharding over shard groups of S GPUs (R = N/S replicas): the
  reduce-scatters and all-gathers move (S−1)/S, and once per step the shard's gradients (1/S of them) are
  all-reduced across the R replicas, 2(R−1)/R × gradient bytes / S (pplan.cost.steptime).
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.cost.memory import GRAD_BYTES, gathered_weight_bytes
from pplan.plan.records import Plan
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS

ACT_BYTES = 2


def p2p_message_bytes(model: ModelSpec, plan: Plan) -> int:
    """Bytes one GPU sends in one activation (or gradient) message across a stage boundary: the t tensor-parallel
    ranks each send 1/t of it under sequence parallelism (their shards) or where the stack scatters the message
    (`p2p_scatter_gather`, pplan.profiles.stacks), the whole of it otherwise."""
    tokens = plan.seq_len // plan.cp * plan.micro_batch
    split = plan.sequence_parallel or STACKS[plan.stack].p2p_scatter_gather
    return tokens * model.hidden_size * ACT_BYTES // (plan.tp if split else 1)


def p2p_boundaries(plan: Plan) -> int:
    """Cross-rank chunk boundaries a micro-batch crosses in one direction of travel."""
    p, v = plan.pp, plan.vp
    if p == 1:
        return 0
    if plan.kind.placement == "v":
        return 2 * p - 2
    if plan.kind.placement == "dual":
        return p - 1
    return p * v - 1


def p2p_messages_per_step(plan: Plan) -> int:
    """Messages per step over the whole pipeline: forward activations plus backward gradients."""
    return 2 * plan.num_microbatches * p2p_boundaries(plan)


@dataclass(frozen=True, slots=True)
class TensorParallelTraffic:
    """Bytes one GPU sends per micro-batch for tensor parallelism."""

    per_layer_bytes: int
    """A layer that recomputes (all of them, unless block recompute leaves some out)."""
    collectives_per_layer: int
    layers_bytes: int
    """All L layers (what one GPU of a TP group moves as one micro-batch passes through the whole model)."""
    per_rank_bytes: tuple[int, ...]
    """Per pipeline rank, its own layers plus its model ends."""


def _ring_allreduce(buffer_bytes: int, n: int) -> int:
    return 2 * (n - 1) * buffer_bytes // n


def tensor_parallel_traffic(model: ModelSpec, plan: Plan) -> TensorParallelTraffic:
    t = plan.tp
    buffer = plan.seq_len // plan.cp * plan.micro_batch * model.hidden_size * ACT_BYTES
    repeated = {"full": 2, "selective": int("mlp" in plan.recompute_modules)}.get(plan.recompute, 0)
    collectives = 4 + repeated
    per_collective = _ring_allreduce(buffer, t)
    per_layer = collectives * per_collective
    per_rank = []
    for rank, chunk_ids in enumerate(plan.layout.rank_chunks):
        total = plan.layout.rank_layers(rank) * 4 * per_collective
        for c in chunk_ids:
            chunk = plan.layout.chunks[c]
            rerun = plan.recomputed_layers(chunk.layers) if plan.recompute == "full" else chunk.layers
            total += rerun * repeated * per_collective
            if chunk.has_embedding:
                total += per_collective
            if chunk.has_output and plan.sequence_parallel:
                total += per_collective  # gather (t−1)/t forward + reduce-scatter (t−1)/t backward
        per_rank.append(total)
    return TensorParallelTraffic(
        per_layer_bytes=per_layer,
        collectives_per_layer=collectives,
        layers_bytes=model.num_layers * 4 * per_collective
        + sum(
            (plan.recomputed_layers(c.layers) if plan.recompute == "full" else c.layers) * repeated
            for c in plan.layout.chunks
        )
        * per_collective,
        per_rank_bytes=tuple(per_rank),
    )


def data_parallel_bytes_per_step(plan: Plan, params_per_gpu: float, fp8_params: float = 0.0) -> int:
    """Bytes one GPU sends per step to synchronise gradients (and gather parameters) across replicas; `fp8_params`
    of the parameters are gathered as FP8 (`fp8_param_gather`: 1 byte each, pplan.cost.memory)."""
    n = plan.dp * plan.cp
    if n == 1:
        return 0
    grads = params_per_gpu * GRAD_BYTES[plan.grad_dtype]
    if plan.zero_stage == 0:
        return int(2 * (n - 1) * grads / n)
    s, r = plan.shards, plan.shard_replicas
    gather = (s - 1) * gathered_weight_bytes(params_per_gpu, fp8_params) / s
    scatter = (s - 1) * grads / s
    across = 2 * (r - 1) * grads / s / r  # the shard's all-reduce across replicas (0 without hybrid sharding)
    m = plan.num_microbatches
    if plan.zero_stage == 1:
        return int(scatter + gather + across)
    if plan.zero_stage == 2:
        return int(m * scatter + gather + across)
    gathers = 2 if plan.reshard_after_forward else 1
    return int(m * (scatter + gathers * gather) + across)
