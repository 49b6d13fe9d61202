"""What one layer's activations and pass times depend on (`Shape`, a hashable record a plan derives) and the
protocol of the settings the per-layer cost model reads (`LayerSetting`: a plan or its shape).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pplan.model.precision import Precision
from pplan.plan.knobs import (
    DEFAULT_RECOMPUTE_MODULES,
    ActivationModel,
    CudaGraphScope,
    MoeDispatcher,
    OffloadModule,
    Recompute,
    RecomputeModule,
)
from pplan.profiles.stacks import DEFAULT_STACK, StackName


@dataclass(frozen=True, slots=True)
class MoeKnobs:
    """The knobs of a routed layer's software (pplan.plan.settings `moe_*`, `cuda_graph_scope`), as one hashable
    record a layer's cost reads (pplan.cost.moe_dispatch, pplan.cost.host); dense layers ignore it."""

    dispatcher: MoeDispatcher = "alltoall"
    ep_overlap: bool = False
    graph_scope: tuple[CudaGraphScope, ...] = ()
    permute_fusion: bool = False
    router_fusion: bool = False
    fused_grouped_mlp: bool = False
    capacity_factor: float | None = None
    force_balance: bool = False
    imbalance: float = 1.0
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    """The hash of the fields, computed once: every `Shape` built hashes its knobs. Written out field by field (an
    `attrgetter` over `dataclasses.fields` cost 0.06 G instructions more on recommend's DeepSeek-V3 query); a
    field left out would only cost collisions, as equality compares every field."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "_hash",
            hash(
                (
                    self.dispatcher, self.ep_overlap, self.graph_scope, self.permute_fusion, self.router_fusion,
                    self.fused_grouped_mlp, self.capacity_factor, self.force_balance, self.imbalance,
                )
            ),
        )  # fmt: skip

    def __hash__(self) -> int:
        return self._hash

    @staticmethod
    def of(plan: Any) -> MoeKnobs:
        """The knobs a plan (or request) holds in its `moe_*` and `cuda_graph_scope` fields."""
        knobs = MoeKnobs(
            plan.moe_dispatcher, plan.moe_ep_overlap, tuple(sorted(plan.cuda_graph_scope)), plan.moe_permute_fusion,
            plan.moe_router_fusion, plan.moe_fused_grouped_mlp, plan.moe_capacity_factor, plan.moe_force_balance,
            plan.moe_imbalance,
        )  # fmt: skip
        return DEFAULT_MOE_KNOBS if knobs == DEFAULT_MOE_KNOBS else knobs

    @property
    def overload(self) -> float:
        """The busiest expert rank's tokens over the balanced share: 1 with forced balancing, else the imbalance
        factor, capped by the capacity factor (tokens over capacity are dropped)."""
        if self.force_balance:
            return 1.0
        if self.capacity_factor is not None:
            return max(1.0, min(self.imbalance, self.capacity_factor))
        return self.imbalance


DEFAULT_MOE_KNOBS = MoeKnobs()
"""The knobs at their defaults (what pplan priced before they were settings)."""


class LayerSetting(Protocol):
    """What one layer's activations and pass times depend on (a `Plan` is one; the search uses `Shape`)."""

    def __hash__(self) -> int: ...

    @property
    def tp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def micro_batch(self) -> int: ...
    @property
    def sequence_parallel(self) -> bool: ...
    @property
    def flash_attention(self) -> bool: ...
    @property
    def recompute(self) -> Recompute: ...
    @property
    def activation_model(self) -> ActivationModel: ...
    @property
    def recompute_modules(self) -> tuple[RecomputeModule, ...]: ...
    @property
    def offload_modules(self) -> tuple[OffloadModule, ...]: ...
    @property
    def stack(self) -> StackName: ...
    @property
    def splits_backward(self) -> bool: ...
    @property
    def tp_comm_overlap(self) -> bool: ...
    @property
    def ep(self) -> int: ...
    @property
    def etp(self) -> int: ...
    @property
    def expert_comm_overlap(self) -> bool: ...
    @property
    def precision(self) -> Precision: ...
    @property
    def fp8_swiglu_input(self) -> bool: ...
    @property
    def moe_knobs(self) -> MoeKnobs: ...


@dataclass(frozen=True, slots=True)
class Shape:
    """A `LayerSetting` without a pipeline: cheap to build and hashable, for caching in a search."""

    tp: int
    cp: int
    seq_len: int
    micro_batch: int
    sequence_parallel: bool
    flash_attention: bool
    recompute: Recompute
    activation_model: ActivationModel
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    """Selective recomputation only: the modules re-run (ignored otherwise)."""
    offload_modules: tuple[OffloadModule, ...] = ()
    """The modules whose saved inputs go to host memory (empty: no offload)."""
    stack: StackName = DEFAULT_STACK
    """The software stack (pplan.profiles.stacks): what it overlaps and fuses."""
    splits_backward: bool = False
    """The schedule runs the weight gradient (W) apart from the input gradient (I)."""
    tp_comm_overlap: bool = False
    """Every tensor-parallel collective runs behind the GEMM it feeds or follows (pplan.profiles.stacks)."""
    ep: int = 1
    """Expert parallel: ranks the routed experts are split over (whole experts)."""
    etp: int = 1
    """Expert tensor parallel: ranks each expert's matrices are split over."""
    expert_comm_overlap: bool = False
    """The schedule pairs passes so the expert all-to-all runs behind the other's compute (DualPipe)."""
    precision: Precision = "bf16"
    """The Linears' GEMM precision and what they keep for the backward (pplan.model.precision)."""
    fp8_swiglu_input: bool = False
    """The routed experts' SwiGLU input is kept in FP8 too (DeepSeek-V3's framework)."""
    moe_knobs: MoeKnobs = DEFAULT_MOE_KNOBS
    """The routed layer's dispatcher, overlap, graphs, fusions and balancing (`MoeKnobs`)."""
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    """The hash of the fields, computed once: shapes key the per-layer cost caches (written out as `MoeKnobs`'s)."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "_hash",
            hash(
                (
                    self.tp, self.cp, self.seq_len, self.micro_batch, self.sequence_parallel,
                    self.flash_attention, self.recompute, self.activation_model, self.recompute_modules,
                    self.offload_modules, self.stack, self.splits_backward, self.tp_comm_overlap, self.ep,
                    self.etp, self.expert_comm_overlap, self.precision, self.fp8_swiglu_input, self.moe_knobs,
                )
            ),
        )  # fmt: skip

    def __hash__(self) -> int:
        return self._hash
