"""Usable memory of one GPU under a plan: the HBM less named parts, and the NCCL communicators a rank opens.

usable = HBM − context − label gap − NCCL buffers, where (each figure a field of the hardware profile's
`[memory]` section, its source beside it in the TOML):
- context: the CUDA context and the framework's workspaces (cuBLAS, cuDNN, PyTorch), fixed per GPU;
- label gap: the label capacity less the total the driver reports to allocations, fixed per GPU;
- NCCL: buffers per communicator × the communicators a rank of this plan opens (`communicators`).
The caching allocator's fragmentation is not taken off here: it grows with what is allocated and freed every
step, so pplan.cost.memory adds it to each rank's need (`RankMemory.fragmentation_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pplan.plan.layout import Layout
from pplan.plan.records import Plan
from pplan.profiles.fields import GIB
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Communicator:
    """One NCCL communicator a rank opens: the group's name and its members."""

    name: str
    size: int


@dataclass(frozen=True, slots=True)
class UsablePart:
    """One named part of the HBM a plan cannot use, with where its figure comes from."""

    name: str
    bytes: int
    source: str


@dataclass(frozen=True, slots=True)
class UsableMemory:
    """A plan's usable bytes per GPU and the parts taken off the HBM to get them."""

    hbm_bytes: int
    parts: tuple[UsablePart, ...]
    communicators: tuple[Communicator, ...]

    @property
    def usable_bytes(self) -> int:
        """HBM less every part, never below zero."""
        return max(0, self.hbm_bytes - sum(p.bytes for p in self.parts))


@lru_cache(maxsize=4096)
def communicators(
    t: int, p: int, d: int, cp: int, zero_stage: int, tied_ends_apart: bool, shard_group: int | None = None
) -> tuple[Communicator, ...]:
    """The NCCL communicators a rank of a Megatron-LM-style BF16 run opens, one per process group it runs
    collectives on (Megatron-LM's `parallel_state` groups; ranks ordered tp fastest, then cp, dp, pp). Only a
    group with more than one member opens a communicator (and holds NCCL buffers):
    - world (all t·p·d·cp GPUs): the default group, used by the start-up barriers and, with the distributed
      optimizer (ZeRO ≥ 1), by the gradient-norm and found-inf all-reduces;
    - tensor (t): the layers' all-reduces (or all-gather / reduce-scatter under sequence parallelism);
    - pipeline (p): the activation and gradient sends between stages (batched P2P on the group's communicator;
      assumed: unbatched send/recv, which may open one communicator per peer pair, is not counted);
    - data (d): the gradient reduction when cp = 1, and the data-parallel reductions of the loss;
    - context (cp): the attention's key/value exchange;
    - data×context (d·cp, when cp > 1): gradient reduction and the distributed optimizer's shards span d·cp;
    - model (t·p, ZeRO-0 only): the plain optimizer's gradient-norm and found-inf all-reduces;
    - embedding (tied embeddings, the input embedding and the output layer on different ranks): the all-reduce
      of the tied matrix's gradient between them. Middle ranks are not members; the plan's figure is that of
      the ranks that open the most communicators, the end ranks, which also hold the model's ends;
    - hybrid sharding (`shard_group` S < d·cp): the shard group (S, the reduce-scatters and gathers) and the
      replica group ((d·cp)/S, the all-reduce across replicas; Megatron-LM's intra- and inter-instance groups).
    """
    groups = (
        ("world", t * p * d * cp),
        ("tensor", t),
        ("pipeline", p),
        ("data", d),
        ("context", cp),
        ("data×context", d * cp if cp > 1 else 1),
        ("model", t * p if zero_stage == 0 else 1),
        ("embedding", 2 if tied_ends_apart and p > 1 else 1),
        ("shard", shard_group or 1),
        ("shard replicas", d * cp // shard_group if shard_group else 1),
    )
    return tuple(Communicator(name, size) for name, size in groups if size > 1)


CommunicatorArgs = tuple[int, int, int, int, int, bool, int | None]
"""What `communicators` reads of a plan: t, p, d, cp, the ZeRO stage, tied ends apart, the shard group."""


def _communicator_args(model: ModelSpec, plan: Plan) -> CommunicatorArgs:
    tied = model.tied_embeddings and _ends_apart(plan.layout)
    return plan.tp, plan.pp, plan.dp, plan.cp, plan.zero_stage, tied, plan.shard_group


def plan_communicators(model: ModelSpec, plan: Plan) -> tuple[Communicator, ...]:
    """`communicators` of `plan`."""
    return communicators(*_communicator_args(model, plan))


@lru_cache(maxsize=4096)
def _ends_apart(layout: Layout) -> bool:
    """Whether the input embedding and the output layer sit on more than one rank (not on a V-shaped layout's
    rank 0 alone)."""
    ends = {
        r
        for r, held in enumerate(layout.rank_chunks)
        for c in held
        if layout.chunks[c].has_embedding or layout.chunks[c].has_output
    }
    return len(ends) > 1


def usable_memory(hw: HardwareSpec, model: ModelSpec, plan: Plan) -> UsableMemory:
    """The usable bytes of one GPU under `plan`, with the parts taken off the HBM."""
    return _usable(hw, plan_communicators(model, plan))


def usable_bytes(hw: HardwareSpec, model: ModelSpec, plan: Plan) -> int:
    """`usable_memory(...).usable_bytes` (cached: the search asks for it for every plan it checks)."""
    return _usable_bytes(hw, _communicator_args(model, plan))


@lru_cache(maxsize=4096)
def _usable_bytes(hw: HardwareSpec, args: CommunicatorArgs) -> int:
    """`usable_bytes` by the arguments of `communicators` it comes from: remembered without hashing the
    communicators or summing the parts on each lookup."""
    return _usable(hw, communicators(*args)).usable_bytes


@lru_cache(maxsize=1024)
def _usable(hw: HardwareSpec, comms: tuple[Communicator, ...]) -> UsableMemory:
    mem = hw.memory
    per = mem.nccl_per_communicator_bytes
    names = ", ".join(f"{c.name} {c.size}" for c in comms) or "none: a single GPU"
    parts = (
        UsablePart(
            "context",
            int(mem.context_gib * GIB),
            f"CUDA context and framework workspaces per GPU: memory.context_gib (profile {hw.name})",
        ),
        UsablePart(
            "label gap",
            int(mem.label_gap_gib * GIB),
            f"label capacity less what the driver reports: memory.label_gap_gib (profile {hw.name})",
        ),
        UsablePart(
            "NCCL",
            len(comms) * per,
            f"{len(comms)} communicators ({names}) × memory.nccl_per_communicator_mib = "
            f"{mem.nccl_per_communicator_mib:g} MiB (profile {hw.name}; pplan.cost.usable.communicators)",
        ),
    )
    return UsableMemory(hw.gpu.hbm_bytes, parts, comms)
