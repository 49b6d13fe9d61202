"""Memory of every pipeline rank: weights, gradients, optimizer states, activations in flight, and the verdict.

Bytes per parameter (mixed precision with Adam; Megatron-LM's distributed-optimizer document):
weights 2 (BF16); gradients 2 (BF16, the 16 bytes per parameter of Rajbhandari et al. 2020, arXiv:1910.02054
§3.1) or 4 (FP32 accumulation, Megatron's default with BF16); optimizer 12 (FP32 master copy 4 + Adam m 4 + Adam
v 4). So 16 or 18 bytes per parameter unsharded.
Sharding over the N = d·cp data-parallel replicas (Megatron's distributed optimizer shards over dp × cp):
ZeRO-1 / distributed optimizer divides the optimizer states (18 → 6 + 12/N), ZeRO-2 also the gradients,
ZeRO-3 (FSDP) also the weights. Hybrid sharding (HSDP: PyTorch FSDP's `ShardingStrategy.HYBRID_SHARD`, FSDP2's
2-D mesh; torchtitan's data_parallel_replicate_degree × data_parallel_shard_degree; Megatron-LM's
`--num-distributed-optimizer-instances`) shards over a group of S of the N GPUs instead (N/S copies of each shard):
the sharded parts are divided by S (`Plan.shards`).
Optimizer CPU offload (ZeRO-1, megatron-core 0.16 `HybridDeviceOptimizer`, megatron/core/optimizer/cpu_offloading/
hybrid_optimizer.py): the first parameters of each rank's shard, up to a fraction f of its elements, get an FP32
copy in pinned host memory and their Adam moments there, updated by a CPU Adam; the rest keep the FP32 master copy
and moments on the GPU. So a GPU keeps (1 − f) of its optimizer states: 12 (1 − f) / N bytes per parameter
(`BytesPerParam.optimizer`), and the host holds f of them plus a pinned FP32 copy of their gradients (not GPU
memory). pplan takes f as exact; the hybrid optimizer moves whole shard tensors, so it offloads f and at most one
tensor more.
Activations on a rank are the peak, over the simulated step, of Σ over the micro-batches in flight on its chunks
of (the chunk's layers × bytes per layer per micro-batch) (pplan.cost.pipeline), plus what the model ends add to
that peak (`extra_activation_bytes`), plus the transient of one recomputed checkpoint (pplan.model.activations),
plus (ZeRO-3) the gathered
weights of the unit running and the one prefetched (the rank's two largest: layers, embedding, output layer), or
without resharding after the forward the rank's whole weights less its shard (`plan_gathered_weights_bytes`),
plus (activation offload) the offload's transit buffer: one layer's offloaded tensors being copied out and one
layer's reloaded ahead (pplan.model.activations.offload_buffer_bytes; the offloaded tensors themselves are not in
the activations in flight). Those five are the dynamic bytes, allocated and freed every step; the caching allocator's fragmentation is
a fraction of them (the profile's `memory.dynamic_fragmentation_fraction`), added to the rank's need as its own
item (`fragmentation_bytes`). What the HBM leaves usable for all this is pplan.cost.usable's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from pplan.model import activations as act
from pplan.model.params import (
    ParamItem,
    embedding_params,
    is_expert_item,
    layer_params,
    output_params,
    position_table_rows,
)
from pplan.model.precision import PRIMARY_BYTES, is_fp8_linear, weight_copy_bytes
from pplan.plan.layout import Chunk, Layout
from pplan.plan.records import Plan
from pplan.plan.shape import Shape
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

WEIGHT_BYTES = 2
FP8_WEIGHT_BYTES = 1
"""An FP8 primary weight (`fp8_param_gather`): what the distributed optimizer gathers per FP8 Linear parameter."""


def gathered_weight_bytes(params: float, fp8_params: float = 0.0) -> float:
    """Bytes of `params` weights a distributed optimizer all-gathers, `fp8_params` of them FP8 primary weights
    (`plan_gathered_fp8_params`) and the rest BF16."""
    return params * WEIGHT_BYTES - fp8_params * (WEIGHT_BYTES - FP8_WEIGHT_BYTES)


MASTER_BYTES = 4
MOMENT_BYTES = {"fp32": 4, "bf16": 2}
"""Bytes of each of Adam's two moments by dtype: optimizer state = FP32 master + 2 moments (12, or 8 with BF16
moments)."""
GRAD_BYTES = {"bf16": 2, "fp32": 4}


@dataclass(frozen=True, slots=True)
class BytesPerParam:
    """Bytes each parameter costs a GPU after sharding over `shards` data-parallel GPUs (d·cp, or the shard
    group S under hybrid sharding)."""

    weights: float
    grads: float
    optimizer: float
    shards: int

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer


def bytes_per_param(plan: Plan, expert: bool = False) -> BytesPerParam:
    """Bytes per parameter after sharding; routed experts' states shard over the expert data-parallel ranks
    (`Plan.expert_dp`: megatron-core's distributed optimizer shards expert parameters over their own group)."""
    n = plan.expert_dp if expert else plan.shards
    return _bytes_per_param(
        n, plan.zero_stage, plan.grad_dtype, plan.moment_dtype, plan.optimizer_offload_fraction
    )


@lru_cache(maxsize=1024)
def _bytes_per_param(
    n: int, z: int, grad_dtype: str, moment_dtype: str, offloaded: float = 0.0
) -> BytesPerParam:
    """`bytes_per_param` of `n` shards, ZeRO stage `z`, the dtypes and the fraction of optimizer states offloaded
    to the host (remembered: the search asks for it for every plan it checks)."""
    grad = GRAD_BYTES[grad_dtype]
    optimizer = (MASTER_BYTES + 2 * MOMENT_BYTES[moment_dtype]) * (1.0 - offloaded)
    return BytesPerParam(
        weights=WEIGHT_BYTES / n if z >= 3 else WEIGHT_BYTES,
        grads=grad / n if z >= 2 else grad,
        optimizer=optimizer / n if z >= 1 else optimizer,
        shards=n,
    )


@dataclass(frozen=True, slots=True)
class RankMemory:
    """One pipeline rank (one GPU of it: parameters already divided by t)."""

    rank: int
    layers: int
    params: float
    """Parameters held by one GPU of this rank (after tensor parallelism, before data-parallel sharding)."""
    param_items: tuple[tuple[str, float], ...]
    weights_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    """Transformer layers' activations for all micro-batches in flight."""
    extra_activation_bytes: int
    """Embedding, output-layer, logits and loss buffers for the micro-batches in flight."""
    recompute_working_bytes: int
    gathered_weights_bytes: int
    """ZeRO-3 only: one layer's weights gathered for use plus the next one prefetched (BF16, after TP); without
    resharding after the forward, the rank's whole BF16 weights less its own shard."""
    offload_buffer_bytes: int
    """Activation offload only: one layer's offloaded tensors in transit to the host plus one layer's reloaded
    ahead of its backward (0 without offload, or when every layer of the rank is a full-recompute checkpoint)."""
    fragmentation_bytes: int
    """The caching allocator's fragmentation: a fraction of the dynamic bytes (`dynamic_bytes`)."""
    in_flight_chunk_microbatches: tuple[int, ...]
    in_flight_microbatches: float
    """Peak micro-batches in flight, in units of one average stage (L/p layers)."""
    usable_bytes: int
    fp8_weight_cache_bytes: int = 0
    """FP8 only: the quantised copies of the Linears' weights kept through the step (pplan.model.precision)."""

    @property
    def total_bytes(self) -> int:
        return (
            self.fp8_weight_cache_bytes
            + self.weights_bytes
            + self.grads_bytes
            + self.optimizer_bytes
            + self.activation_bytes
            + self.extra_activation_bytes
            + self.recompute_working_bytes
            + self.gathered_weights_bytes
            + self.offload_buffer_bytes
            + self.fragmentation_bytes
        )

    @property
    def dynamic_bytes(self) -> int:
        """What is allocated and freed every step: activations in flight, the model ends' buffers, the
        recompute transient, ZeRO-3's gathered weights and the offload's transit buffer."""
        return (
            self.activation_bytes
            + self.extra_activation_bytes
            + self.recompute_working_bytes
            + self.gathered_weights_bytes
            + self.offload_buffer_bytes
        )

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.usable_bytes

    @property
    def headroom_bytes(self) -> int:
        return self.usable_bytes - self.total_bytes


@dataclass(frozen=True, slots=True)
class ActivationPeaks:
    """Per rank, what its schedule keeps at the peak (bytes are per GPU)."""

    activation_bytes: tuple[int, ...]
    """Peak bytes of transformer-layer activations held at once."""
    extra_activation_bytes: tuple[int, ...]
    """What the embedding / output-layer / logits buffers add to that peak."""
    in_flight_stage_units: tuple[float, ...]
    """Peak micro-batches in flight, in units of one average stage (L/p layers)."""
    in_flight_per_stage: tuple[int, ...]
    """Peak micro-batches in flight per virtual stage."""
    host_bytes: tuple[int, ...] = ()
    """Activation offload: peak bytes of offloaded activations held in host memory for one GPU of each rank
    (empty or zeros without offload)."""


def fp8_any_layout(hw: HardwareSpec) -> bool:
    """Whether `hw`'s FP8 GEMMs take any operand layout, so a per-tensor-scaled FP8 weight needs no transpose
    (pplan.model.precision.ANY_LAYOUT_CACHE_BYTES): Blackwell, the GPUs with block-scaled FP8 tensor cores
    (`gpu.block_scaled_fp8`; Transformer Engine's `is_non_tn_fp8_gemm_supported` is sm_100 on)."""
    return hw.gpu.block_scaled_fp8


def gathered_fp8_bytes(plan: Plan, any_layout: bool = False) -> float:
    """Bytes a gathered ZeRO-3 unit holds per FP8 Linear parameter while it runs: its quantised copies
    (`weight_copy_bytes`) gathered as FP8 primary weights (`fp8_param_gather`: Megatron-FSDP gathers the FP8
    weight and makes the other layout from it), or the gathered BF16 weight and the copies cast from it (FSDP with
    BF16 primary weights, torchtitan's float8 and Megatron without `fp8_param_gather`); 2 (BF16) under bf16."""
    copies = weight_copy_bytes(plan.precision, any_layout)
    if not copies:
        return float(WEIGHT_BYTES)
    return copies if plan.fp8_param_gather else WEIGHT_BYTES + copies


def gathered_weights_bytes(model: ModelSpec, plan: Plan, rank: int = 0) -> int:
    """ZeRO-3 (FSDP) materialises one wrapped unit's full weights to run it and prefetches the next: the two
    largest units `rank` holds (a transformer layer; the embedding and the output layer are units of their own,
    as torchtitan and Megatron-FSDP wrap them), in BF16 per tensor-parallel rank (FP8 Linears: with their
    quantised copies, `gathered_fp8_bytes`), beyond the shards; zero for ZeRO-0/1/2. The output layer can outweigh
    a layer (Llama 3 8B: 525 M against 218 M parameters at t = 1)."""
    return plan_gathered_weights_bytes(model, plan)[rank]


def plan_gathered_weights_bytes(model: ModelSpec, plan: Plan, any_layout: bool = False) -> tuple[int, ...]:
    """`gathered_weights_bytes` of every rank (`any_layout`: the GPU's FP8 GEMMs take any layout,
    `fp8_any_layout`).

    Without resharding after the forward (`Plan.reshard_after_forward` False; FSDP2's
    `reshard_after_forward=False`, torchtitan's `fsdp_reshard_after_forward = "never"`), each unit keeps its
    gathered weights from its forward until its backward. Under pipelining some micro-batch is between its forward
    and its backward on the rank for the whole step, so the model is the rank's whole weights (BF16, after TP;
    FP8 Linears at `gathered_fp8_bytes`) gathered at once, less the shard the static bytes already count, instead
    of the two-unit prefetch buffer (an upper bound without pipelining, where the first units are freed as the
    backward passes them)."""
    if plan.zero_stage < 3:
        return (0,) * plan.pp
    per_fp8 = gathered_fp8_bytes(plan, any_layout)
    if not plan.reshard_after_forward:
        return tuple(
            math.ceil(params * WEIGHT_BYTES + fp8 * (per_fp8 - WEIGHT_BYTES))
            - math.ceil(params * WEIGHT_BYTES / plan.shards)
            for params, fp8 in zip(
                plan_rank_params(model, plan), plan_fp8_linear_params(model, plan), strict=True
            )
        )
    return _gathered_per_rank(
        model, plan.tp, plan.pp > 1, plan.layout, _rows(model, plan), plan.ep, plan.etp, per_fp8
    )


def _unit_bytes(items: tuple[ParamItem, ...], t: int, ep: int, etp: int, per_fp8: float) -> float:
    """Bytes of one gathered unit's weights: BF16, its FP8 Linears at `per_fp8` bytes a parameter."""
    return sum(
        item.per_rank(t, ep, etp) * (per_fp8 if is_fp8_linear(item.name) else WEIGHT_BYTES) for item in items
    )


@lru_cache(maxsize=4096)
def _gathered_per_rank(
    model: ModelSpec,
    t: int,
    pipeline_parallel: bool,
    layout: Layout,
    position_rows: int,
    ep: int,
    etp: int,
    per_fp8: float = WEIGHT_BYTES,
) -> tuple[int, ...]:
    layer = _unit_bytes(layer_params(model), t, ep, etp, per_fp8) / WEIGHT_BYTES
    dense = _unit_bytes(layer_params(model.dense_part), t, ep, etp, per_fp8) / WEIGHT_BYTES
    out = []
    for held in layout.rank_chunks:
        units: list[float] = []
        for c in held:
            chunk = layout.chunks[c]
            units += [layer] * min(chunk.routed_layers, 2) + [dense] * min(chunk.dense_layers, 2)
            if chunk.has_embedding:
                units.append(sum(i.per_rank(t, ep, etp) for i in embedding_params(model, position_rows)))
            if chunk.has_output:
                units.append(sum(i.per_rank(t, ep, etp) for i in output_params(model, pipeline_parallel)))
        out.append(math.ceil(sum(sorted(units)[-2:]) * WEIGHT_BYTES))
    return tuple(out)


def rank_param_items(model: ModelSpec, plan: Plan, rank: int) -> tuple[tuple[str, float], ...]:
    """Parameters one GPU of `rank` holds, itemised, after tensor parallelism."""
    return _plan_param_items(model, plan)[rank]


def _plan_param_items(model: ModelSpec, plan: Plan) -> tuple[tuple[tuple[str, float], ...], ...]:
    return _layout_param_items(
        model, plan.tp, plan.pp > 1, plan.layout, _rows(model, plan), plan.ep, plan.etp
    )


@lru_cache(maxsize=4096)
def _layout_param_items(
    model: ModelSpec, t: int, pipeline_parallel: bool, layout: Layout, position_rows: int, ep: int, etp: int
) -> tuple[tuple[tuple[str, float], ...], ...]:
    """`rank_param_items` of every rank of a layout."""
    return tuple(
        _param_items(
            model, t, pipeline_parallel, tuple(layout.chunks[c] for c in held), position_rows, ep, etp
        )
        for held in layout.rank_chunks
    )


@lru_cache(maxsize=16384)
def _param_items(
    model: ModelSpec,
    t: int,
    pipeline_parallel: bool,
    chunks: tuple[Chunk, ...],
    position_rows: int,
    ep: int = 1,
    etp: int = 1,
) -> tuple[tuple[str, float], ...]:
    totals: dict[str, float] = {}

    def add(items: tuple[ParamItem, ...], times: int) -> None:
        if not times:
            return
        for item in items:
            totals[item.name] = totals.get(item.name, 0.0) + times * item.per_rank(t, ep, etp)

    # a rank that holds both ends (the V and DualPipe placements) keeps one embedding matrix for the output layer's
    # tied copy and the MTP modules' embedding: no second copy to synchronise
    both_ends = any(c.has_embedding for c in chunks) and any(c.has_output for c in chunks)
    pipeline_parallel = pipeline_parallel and not both_ends
    for chunk in chunks:
        add(layer_params(model), chunk.routed_layers)
        add(layer_params(model.dense_part), chunk.dense_layers)
        if chunk.has_embedding:
            add(embedding_params(model, position_rows), 1)
        if chunk.has_output:
            add(output_params(model, pipeline_parallel=pipeline_parallel), 1)
    return tuple(totals.items())


def rank_params(model: ModelSpec, plan: Plan, rank: int) -> float:
    """Parameters one GPU of `rank` holds, after tensor parallelism, before data-parallel sharding."""
    return plan_rank_params(model, plan)[rank]


def plan_rank_params(model: ModelSpec, plan: Plan) -> tuple[float, ...]:
    """`rank_params` of every pipeline rank."""
    return _layout_params(model, plan.tp, plan.pp > 1, plan.layout, _rows(model, plan), plan.ep, plan.etp)


def plan_fp8_cache_bytes(model: ModelSpec, plan: Plan, any_layout: bool = False) -> tuple[int, ...]:
    """Per rank, the FP8 weight copies kept through the step: its FP8 Linears' parameters × their copies' bytes
    (`weight_copy_bytes`; `any_layout`: the GPU's FP8 GEMMs take any layout, `fp8_any_layout`); 0 under bf16.
    Under ZeRO-3 no copy lasts the step (each exists while its layer's gathered weights do,
    `gathered_fp8_bytes`): with FP8 primary weights the rank keeps their shards (`PRIMARY_BYTES` per parameter,
    over the data-parallel shards, experts' over the expert data-parallel ranks), else nothing."""
    per_param = weight_copy_bytes(plan.precision, any_layout)
    if not per_param:
        return (0,) * plan.pp
    if plan.zero_stage >= 3:
        if not plan.fp8_param_gather:
            return (0,) * plan.pp
        primary = PRIMARY_BYTES[plan.precision]
        return tuple(
            math.ceil(primary * (dense / plan.shards + experts / plan.expert_dp))
            for dense, experts in plan_fp8_split(model, plan)
        )
    return tuple(math.ceil(per_param * n) for n in plan_fp8_linear_params(model, plan))


def plan_fp8_split(model: ModelSpec, plan: Plan) -> tuple[tuple[float, float], ...]:
    """Per rank, (dense, routed-expert) parameters of its FP8 Linears (after tensor and expert parallelism; (0, 0)
    under bf16)."""
    if plan.precision == "bf16":
        return ((0.0, 0.0),) * plan.pp
    out = []
    for items in _plan_param_items(model, plan):
        fp8 = [(name, n) for name, n in items if is_fp8_linear(name)]
        experts = sum(n for name, n in fp8 if is_expert_item(name))
        out.append((sum(n for _, n in fp8) - experts, experts))
    return tuple(out)


def plan_fp8_linear_params(model: ModelSpec, plan: Plan) -> tuple[float, ...]:
    """Per rank, the parameters of its FP8 Linears (after tensor and expert parallelism; 0 under bf16)."""
    if plan.precision == "bf16":
        return (0.0,) * plan.pp
    return tuple(
        sum(n for name, n in items if is_fp8_linear(name)) for items in _plan_param_items(model, plan)
    )


def plan_gathered_fp8_params(model: ModelSpec, plan: Plan) -> tuple[tuple[float, float], ...]:
    """Per rank, (dense, routed-expert) parameters a distributed optimizer gathers as FP8 rather than BF16: the
    rank's FP8 Linears under `fp8_param_gather` (Megatron-LM's --fp8-param-gather all-gathers the FP8 primary
    weights, 1 byte each; pplan.cost.steptime.rank_sync), (0, 0) otherwise."""
    if not plan.fp8_param_gather or plan.precision == "bf16":
        return ((0.0, 0.0),) * plan.pp
    return plan_fp8_split(model, plan)


def _bf16_weights_dropped(plan: Plan, fp8_params: float, fp8_experts: float = 0.0) -> int:
    """BF16 weight bytes FP8 primary weights do away with (`fp8_param_gather`): `fp8_params` FP8 Linear
    parameters, `fp8_experts` of them routed experts' (their shards under ZeRO-3: over d·cp, the experts' over
    the expert data-parallel ranks)."""
    if not plan.fp8_param_gather:
        return 0
    if plan.zero_stage >= 3:
        dense = fp8_params - fp8_experts
        return math.floor(WEIGHT_BYTES * (dense / plan.shards + fp8_experts / plan.expert_dp))
    return math.floor(fp8_params * WEIGHT_BYTES)


def plan_rank_expert_params(model: ModelSpec, plan: Plan) -> tuple[float, ...]:
    """Of `plan_rank_params`, the routed experts' parameters (sharded over ep·etp; 0 for a dense model)."""
    if model.moe is None:
        return (0.0,) * plan.pp
    return _layout_expert_params(
        model, plan.tp, plan.pp > 1, plan.layout, _rows(model, plan), plan.ep, plan.etp
    )


@lru_cache(maxsize=4096)
def _layout_expert_params(
    model: ModelSpec, t: int, pipeline_parallel: bool, layout: Layout, position_rows: int, ep: int, etp: int
) -> tuple[float, ...]:
    return tuple(
        sum(n for name, n in items if is_expert_item(name))
        for items in _layout_param_items(model, t, pipeline_parallel, layout, position_rows, ep, etp)
    )


def _rows(model: ModelSpec, plan: Plan) -> int:
    """The learned position table's rows for this plan (grown to its sequence; pplan.model.params)."""
    return position_table_rows(model, plan.seq_len)


@lru_cache(maxsize=4096)
def _layout_params(
    model: ModelSpec, t: int, pipeline_parallel: bool, layout: Layout, position_rows: int, ep: int, etp: int
) -> tuple[float, ...]:
    return tuple(
        sum(n for _, n in items)
        for items in _layout_param_items(model, t, pipeline_parallel, layout, position_rows, ep, etp)
    )


def plan_offload_buffer_bytes(model: ModelSpec, plan: Plan) -> tuple[int, ...]:
    """The offload transit buffer of every rank (pplan.model.activations.offload_buffer_bytes), on ranks that
    hold a layer that keeps its activations (not every layer a full-recompute checkpoint)."""
    if not plan.offload_modules:
        return (0,) * plan.pp
    buffer = act.offload_buffer_bytes(model, plan.shape)
    if not buffer:
        return (0,) * plan.pp
    chunks = plan.layout.chunks
    return tuple(
        buffer if any(plan.recomputed_layers(chunks[c].layers) < chunks[c].layers for c in held) else 0
        for held in plan.layout.rank_chunks
    )


def fragmentation_bytes(dynamic_bytes: int, fraction: float) -> int:
    """The caching allocator's fragmentation: `fraction` of the dynamic bytes, rounded up."""
    return math.ceil(dynamic_bytes * fraction)


def with_fragmentation(dynamic: int, fraction: float) -> int:
    """The dynamic bytes with the allocator's fragmentation on top (what a rank's need adds to its static bytes)."""
    return dynamic + fragmentation_bytes(dynamic, fraction)


def plan_memory(
    model: ModelSpec,
    plan: Plan,
    usable_bytes: int,
    peaks: ActivationPeaks,
    fragmentation_fraction: float,
    any_layout: bool = False,
) -> tuple[RankMemory, ...]:
    """Memory of one GPU of every pipeline rank, given what its schedule keeps at the peak, the plan's usable
    bytes (pplan.cost.usable), the allocator's fragmentation as a fraction of the dynamic bytes and whether the
    GPU's FP8 GEMMs take any layout (`fp8_any_layout`)."""
    per_stage = peaks.in_flight_per_stage
    bpp = bytes_per_param(plan)
    working = _working_bytes(model, plan.shape, plan.recompute_group)
    items = _plan_param_items(model, plan)
    expert_bpp = bytes_per_param(plan, expert=True)
    layers = _rank_layers(plan.layout)
    stages = plan.kind.rank_stages(plan.pp, plan.vp)
    buffers = plan_offload_buffer_bytes(model, plan)
    caches = plan_fp8_cache_bytes(model, plan, any_layout)
    dropped = [_bf16_weights_dropped(plan, d + e, e) for d, e in plan_fp8_split(model, plan)]
    gathered_all = plan_gathered_weights_bytes(model, plan, any_layout)
    out = []
    for r in range(plan.pp):
        chunks = tuple(per_stage[s] for s in stages[r])
        acts = (
            peaks.activation_bytes[r],
            peaks.extra_activation_bytes[r],
            chunks,
            peaks.in_flight_stage_units[r],
        )
        gathered = gathered_all[r]
        out.append(
            rank_memory(
                *(
                    r,
                    layers[r],
                    items[r],
                    bpp,
                    working,
                    gathered,
                    usable_bytes,
                    fragmentation_fraction,
                    *acts,
                ),
                offload_buffer=buffers[r],
                expert_bpp=expert_bpp,
                fp8_cache=caches[r],
                bf16_weights_dropped=dropped[r],
            )
        )
    return tuple(out)


@lru_cache(maxsize=4096)
def _rank_layers(layout: Layout) -> tuple[int, ...]:
    return tuple(layout.rank_layers(r) for r in range(layout.num_ranks))


def plan_working_bytes(model: ModelSpec, plan: Plan) -> int:
    """The transient of one recomputed checkpoint on any rank of `plan` (0 without full recompute)."""
    return _working_bytes(model, plan.shape, plan.recompute_group)


@lru_cache(maxsize=4096)
def _working_bytes(model: ModelSpec, shape: Shape, group: int) -> int:
    """`pplan.model.activations.recompute_working_bytes`, remembered (the search asks for it per plan)."""
    return act.recompute_working_bytes(model, shape, group)


def _param_bytes(
    params: float, bpp: BytesPerParam, experts: float = 0.0, expert_bpp: BytesPerParam | None = None
) -> tuple[int, int, int]:
    """(weights, gradients, optimizer states) bytes of `params` parameters, each rounded up; `experts` of them
    (routed experts) at `expert_bpp`."""
    if not experts or expert_bpp is None:
        return (
            math.ceil(params * bpp.weights),
            math.ceil(params * bpp.grads),
            math.ceil(params * bpp.optimizer),
        )
    rest = params - experts
    return (
        math.ceil(rest * bpp.weights + experts * expert_bpp.weights),
        math.ceil(rest * bpp.grads + experts * expert_bpp.grads),
        math.ceil(rest * bpp.optimizer + experts * expert_bpp.optimizer),
    )


def plan_static_totals(model: ModelSpec, plan: Plan, any_layout: bool = False) -> tuple[int, ...]:
    """Per rank, the bytes that do not depend on the micro-batch, the schedule or recompute: weights, gradients
    and optimizer states after sharding, plus the FP8 weight copies, less the BF16 weights FP8 primary weights
    drop (`any_layout`: the GPU's FP8 GEMMs take any layout, `fp8_any_layout`). Every term of
    `plan_memory_totals` beyond these is non-negative, so they bound it from below (the search rejects whole cuts
    with it, pplan.search)."""
    bpp = bytes_per_param(plan)
    expert_bpp = bytes_per_param(plan, expert=True)

    def total(params: float, experts: float, cache: int, fp8: tuple[float, float]) -> int:
        return (
            sum(_param_bytes(params, bpp, experts, expert_bpp))
            + cache
            - _bf16_weights_dropped(plan, fp8[0] + fp8[1], fp8[1])
        )

    ranks = tuple(
        zip(
            plan_rank_params(model, plan),
            plan_rank_expert_params(model, plan),
            plan_fp8_cache_bytes(model, plan, any_layout),
            plan_fp8_split(model, plan),
            strict=True,
        )
    )
    totals = {rank: total(*rank) for rank in set(ranks)}  # ranks holding the same parameters total alike
    return tuple(totals[rank] for rank in ranks)


def plan_memory_totals(
    model: ModelSpec,
    plan: Plan,
    peaks: ActivationPeaks,
    fraction: float,
    any_layout: bool = False,
    static_totals: tuple[int, ...] | None = None,
) -> tuple[int, ...]:
    """`RankMemory.total_bytes` of every rank, without building the itemised records (the search checks
    thousands of plans against usable memory with it): `plan_static_totals` (`static_totals`, when at hand) plus
    the dynamic bytes with the allocator's fragmentation (`fraction`; `any_layout`: the GPU's FP8 GEMMs take any
    layout)."""
    working = plan_working_bytes(model, plan)
    return tuple(
        static + with_fragmentation(act_bytes + extra + working + gathered + buffer, fraction)
        for static, act_bytes, extra, gathered, buffer in zip(
            static_totals if static_totals is not None else plan_static_totals(model, plan, any_layout),
            peaks.activation_bytes,
            peaks.extra_activation_bytes,
            plan_gathered_weights_bytes(model, plan, any_layout),
            plan_offload_buffer_bytes(model, plan),
            strict=True,
        )
    )


def rank_memory(
    rank: int,
    layers: int,
    items: tuple[tuple[str, float], ...],
    bpp: BytesPerParam,
    working: int,
    gathered: int,
    usable_bytes: int,
    fragmentation_fraction: float,
    activation_bytes: int,
    extra_activation_bytes: int,
    in_flight_chunks: tuple[int, ...],
    in_flight_units: float,
    offload_buffer: int = 0,
    expert_bpp: BytesPerParam | None = None,
    fp8_cache: int = 0,
    bf16_weights_dropped: int = 0,
) -> RankMemory:
    """Memory of one GPU of pipeline rank `rank`: its parameters (`items`, after tensor parallelism) at `bpp`
    bytes each, the activations its schedule keeps at the peak, the per-plan transients, and the allocator's
    fragmentation on all but the parameter bytes."""
    params = sum(n for _, n in items)
    experts = sum(n for name, n in items if is_expert_item(name))
    weights, grads, optimizer = _param_bytes(params, bpp, experts, expert_bpp)
    weights -= bf16_weights_dropped
    dynamic = activation_bytes + extra_activation_bytes + working + gathered + offload_buffer
    return RankMemory(
        rank=rank,
        layers=layers,
        params=params,
        param_items=items,
        weights_bytes=weights,
        grads_bytes=grads,
        optimizer_bytes=optimizer,
        activation_bytes=activation_bytes,
        extra_activation_bytes=extra_activation_bytes,
        recompute_working_bytes=working,
        gathered_weights_bytes=gathered,
        offload_buffer_bytes=offload_buffer,
        fragmentation_bytes=fragmentation_bytes(dynamic, fragmentation_fraction),
        in_flight_chunk_microbatches=in_flight_chunks,
        in_flight_microbatches=in_flight_units,
        usable_bytes=usable_bytes,
        fp8_weight_cache_bytes=fp8_cache,
    )
