"""The two records of a plan's settings: what a user asks (`PlanRequest`, checked on its own before any model is
known: counts in range, known choices, options that need each other, by `pplan.plan.rules`) and the validated plan
`make_plan` derives from it against the model and the schedule (`Plan`, pplan.plan.configuration). Their fields are
the settings declared in pplan.plan.settings (and, for `Plan`, what it derives: d, m, the family, the layout);
`pplan.plan.copies` copies one into the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pplan.errors import ConfigError
from pplan.frozen import changed_underived
from pplan.model.precision import Precision
from pplan.plan.knobs import (
    DEFAULT_RECOMPUTE_MODULES,
    ActivationModel,
    CudaGraphScope,
    GradDtype,
    MoeDispatcher,
    MomentDtype,
    OffloadModule,
    Recompute,
    RecomputeMethod,
    RecomputeModule,
)
from pplan.plan.layout import Layout
from pplan.plan.rules import (
    COUNT_LIMITS,
    check_choice,
    check_count,
    check_fraction,
    check_layer_offload,
    check_moe_knobs,
    check_offload,
    check_optimizer_offload,
    check_sharding,
    recompute_label,
)
from pplan.plan.settings import SETTING, SETTINGS
from pplan.plan.shape import MoeKnobs, Shape
from pplan.profiles.stacks import DEFAULT_STACK, StackName
from pplan.schedules import Schedule, ScheduleFamily, get_schedule

_COUNTS: tuple[tuple[str, str], ...] = tuple((s.name, s.flag) for s in SETTINGS if s.count)
"""(field, flag) of each count a request holds (pplan.plan.settings)."""


_CHOICE_CHECKS: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple(
    (s.name, s.flag, s.choices) for s in SETTINGS if s.choices and not isinstance(s.default, tuple)
)
"""(field, flag, choices) of each one-value choice `PlanRequest` checks. Read off each Literal type once
(pplan.plan.settings): `get_args` on every request was a tenth of a search that filters by launcher, which makes a
request per configuration. Lists of choices are checked item by item (the offload modules by `check_offload`)."""


_RECOMPUTE_MODULES = SETTING["recompute_modules"].choices


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What a user asks for; `make_plan` validates it and derives the rest."""

    gpus: int
    global_batch: int
    micro_batch: int = 1
    tp: int = 1
    pp: int = 1
    vp: int | None = None
    cp: int = 1
    schedule: str = "1f1b"
    seq_len: int | None = None
    recompute: Recompute = "none"
    recompute_layers: int | None = None
    """Full recompute only: N of `recompute_method` (None: every layer, one checkpoint each)."""
    recompute_method: RecomputeMethod = "uniform"
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    """Selective recompute only: the modules re-run."""
    sequence_parallel: bool = True
    flash_attention: bool = True
    zero_stage: int = 0
    grad_dtype: GradDtype = "fp32"
    activation_model: ActivationModel = "itemised"
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    offload_modules: tuple[OffloadModule, ...] = ()
    """Activation offload to host memory: the modules whose saved inputs are offloaded (empty: off)."""
    shard_group: int | None = None
    """ZeRO ≥ 1: GPUs S each sharded state is divided over (hybrid sharding, HSDP: S must divide d·cp; the states
    are replicated across the (d·cp)/S shard groups); None: shard over all d·cp data-parallel GPUs."""
    reshard_after_forward: bool = True
    """ZeRO-3 only: free each unit's gathered weights after its forward and gather them again for its backward
    (FSDP2's `reshard_after_forward=True`); False keeps the rank's gathered weights from forward to backward."""
    stack: StackName = DEFAULT_STACK
    """The software stack the plan runs on (pplan.profiles.stacks): what it overlaps, how far it is calibrated."""
    overlap_p2p_comm: bool = True
    """Megatron's interleaved schedule overlaps its pipeline sends with the next chunk's passes (megatron-core's
    default; `--no-overlap-p2p-communication` turns it off and the sends block, pplan.profiles.stacks)."""
    tp_comm_overlap: bool = False
    """Overlap every tensor-parallel collective with the GEMM it feeds or follows (megatron-core's
    `--tp-comm-overlap`, torchtitan's async TP; needs sequence parallelism; pplan.profiles.stacks)."""
    ep: int = 1
    """Expert parallel (routed models): the routed experts are split, whole, over ep ranks; Megatron folds them
    onto the data- and context-parallel ranks (expert data parallel = t·cp·d / (ep·etp))."""
    etp: int = 1
    """Expert tensor parallel (routed models): each expert's matrices split over etp ranks."""
    precision: Precision = "bf16"
    """GEMM precision of the layers' Linears: bf16, fp8 (per-tensor scaled, Hopper on) or mxfp8 (Blackwell);
    pplan.model.precision says what each changes."""
    fp8_param_gather: bool = False
    """FP8 plans: the FP8 Linears' weights are kept only in FP8 (with their transpose), no BF16 copy (Megatron-LM's
    `--fp8-param-gather`)."""
    fp8_swiglu_input: bool = False
    """FP8 plans, routed models: the experts' SwiGLU input (fc1 output) is also kept in FP8 for the backward, as
    DeepSeek-V3's own framework does (report §3.3.2); no launcher pplan writes for has it."""
    moment_dtype: MomentDtype = "fp32"
    """Adam's two moments in FP32 (12 bytes of optimizer state per parameter) or BF16 (8; DeepSeek-V3 §3.3.2;
    Megatron-LM's `--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`)."""
    memory_limit: int | None = None
    """`--schedule auto` only: K, the most micro-batches in flight on a stage (pplan.schedules.auto); None: the
    most whose activations fit in each rank's usable memory after everything else (pplan.cost.autoplan)."""
    memory_headroom: float = 0.0
    """`--schedule auto` with a derived limit: the fraction of usable memory the limit leaves free (recommend's
    --headroom)."""
    jitter: float = 0.0
    """The coefficient of variation of each rank's work per step (clocks, thermals, the host, the network): the
    step waits for the slowest of its GPUs (pplan.cost.steptime `jitter_s`); 0, the default, adds nothing."""
    release: str | None = None
    """The stack's release priced (pplan.profiles.releases; None: its newest, where pplan has its releases)."""
    offload_layers: int = 0
    """Layer-granular activation offload (Megatron-LM `--cpu-offloading-num-layers N`, Transformer Engine's CPU
    offload context): the saved activations of the model's first N layers go to host memory (0, the default: none;
    pplan.model.activations)."""
    optimizer_offload_fraction: float = 0.0
    """ZeRO-1: the fraction f of each rank's optimizer states (FP32 master weights, Adam's moments) that live in host
    memory and are updated by the CPU (megatron-core 0.16 `HybridDeviceOptimizer`, Megatron-LM
    `--optimizer-cpu-offload --optimizer-offload-fraction f`); 0, the default, offloads none."""
    moe_dispatcher: MoeDispatcher = "alltoall"
    """Routed models: the token dispatcher (pplan.cost.moe_dispatch); dense layers ignore the MoE knobs."""
    moe_ep_overlap: bool = False
    """Routed models: the expert all-to-all overlapped with another micro-batch's compute (megatron-core
    `--overlap-moe-expert-parallel-comm`; pplan.cost.moe_dispatch `EP_OVERLAP_HIDDEN`)."""
    cuda_graph_scope: tuple[CudaGraphScope, ...] = ()
    """Routed models: what CUDA graphs capture (pplan.cost.host); empty: nothing, every kernel launched eagerly."""
    moe_permute_fusion: bool = False
    """Routed models: fused (un)permutation kernels (megatron-core `--moe-permute-fusion`)."""
    moe_router_fusion: bool = False
    """Routed models: fused router kernels (megatron-core `--moe-router-fusion`)."""
    moe_fused_grouped_mlp: bool = False
    """Routed models: the experts' MLP as one fused, sync-free grouped kernel (Transformer Engine CuTeDSL)."""
    moe_capacity_factor: float | None = None
    """Routed models: tokens an expert takes at most, over the balanced share (None: dropless)."""
    moe_force_balance: bool = False
    """Routed models: every token routed evenly (benchmarks; `--moe-router-force-load-balancing`)."""
    moe_imbalance: float = 1.0
    """Routed models without forced balancing: the busiest expert rank's tokens over the mean (≥ 1)."""

    @property
    def recompute_label(self) -> str:
        """The recompute policy in one phrase (`recompute_label`)."""
        return recompute_label(
            self.recompute, self.recompute_layers, self.recompute_method, self.recompute_modules
        )

    def __post_init__(self) -> None:
        """Refuse what no plan can have, naming the command-line flag (the API and the CLI refuse alike); what
        depends on the model (divisibility, layers) is `make_plan`'s."""
        for name, flag in _COUNTS:
            value = getattr(self, name)
            if value is not None and not 1 <= value <= COUNT_LIMITS[flag]:
                check_count(flag, value)
        check_fraction("--jitter", self.jitter)
        check_fraction("--headroom", self.memory_headroom)
        if self.zero_stage not in (0, 1, 2, 3):
            raise ConfigError(
                "--zero-stage", f"must be 0, 1, 2 or 3, got {self.zero_stage}", "pick one of 0-3"
            )
        if not self.recompute_modules:
            raise ConfigError(
                "--recompute-modules", "no module to recompute", "e.g. --recompute-modules core_attn"
            )
        for name, flag, choices in _CHOICE_CHECKS:
            if getattr(self, name) not in choices:
                check_choice(flag, getattr(self, name), choices)
        for module in self.recompute_modules:
            check_choice("--recompute-modules", module, _RECOMPUTE_MODULES)
        if self.recompute_layers is not None and self.recompute != "full":
            raise ConfigError(
                "--recompute-layers", f"applies to full recompute, not --recompute {self.recompute}",
                "add --recompute full, or drop --recompute-layers",
            )  # fmt: skip
        if self.recompute_method != "uniform" and self.recompute_layers is None:
            raise ConfigError(
                "--recompute-method", f"{self.recompute_method} needs a layer count",
                "add --recompute-layers N (e.g. 2), or drop --recompute-method",
            )  # fmt: skip
        if tuple(self.recompute_modules) != DEFAULT_RECOMPUTE_MODULES and self.recompute != "selective":
            raise ConfigError(
                "--recompute-modules", f"applies to selective recompute, not --recompute {self.recompute}",
                "add --recompute selective, or drop --recompute-modules",
            )  # fmt: skip
        check_sharding(self.zero_stage, self.shard_group, self.reshard_after_forward)
        for flag, on in (
            ("--fp8-param-gather", self.fp8_param_gather),
            ("--fp8-swiglu-input", self.fp8_swiglu_input),
        ):
            if on and self.precision == "bf16":
                raise ConfigError(flag, "applies to FP8 plans", "add --precision fp8, or drop it")
        check_offload(
            self.offload_modules, self.recompute, self.recompute_method, self.recompute_layers,
            self.recompute_modules,
        )  # fmt: skip
        if self.offload_layers:
            check_layer_offload(self)
        if self.optimizer_offload_fraction:
            check_optimizer_offload(self)
        check_moe_knobs(self.cuda_graph_scope, self.moe_capacity_factor, self.moe_imbalance)
        if self.release is not None:
            from pplan.profiles.releases import release_of  # the release table loads only when one is named

            release_of(self.stack, self.release)


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated configuration with its derived quantities."""

    tp: int
    pp: int
    dp: int
    vp: int
    cp: int
    kind: ScheduleFamily
    """The schedule family's record (pplan.schedules.registry)."""
    micro_batch: int
    num_microbatches: int
    global_batch: int
    seq_len: int
    recompute: Recompute
    recompute_layers: int | None
    """Full recompute: N of `recompute_method`; None when every layer is its own checkpoint (N = 1, uniform)."""
    recompute_method: RecomputeMethod
    recompute_modules: tuple[RecomputeModule, ...]
    """Selective recompute: the modules re-run, in canonical order; empty otherwise."""
    sequence_parallel: bool
    """Effective: requested and t > 1."""
    flash_attention: bool
    zero_stage: int
    grad_dtype: GradDtype
    activation_model: ActivationModel
    layout: Layout
    overlap_grad_reduce: bool
    """Gradient synchronisation runs behind the last backward passes (Megatron --overlap-grad-reduce)."""
    overlap_param_gather: bool
    """The distributed optimizer's parameter all-gather runs behind the next forward (--overlap-param-gather)."""
    offload_modules: tuple[OffloadModule, ...] = ()
    """Activation offload: the modules whose saved inputs go to host memory, in canonical order; empty: off."""
    shard_group: int | None = None
    """Hybrid sharding (HSDP, ZeRO ≥ 1): the S GPUs each sharded state is divided over, S < d·cp; None when the
    states are sharded over all d·cp data-parallel GPUs (a request for S = d·cp is stored as None)."""
    reshard_after_forward: bool = True
    """ZeRO-3: gathered weights are freed after each unit's forward and gathered again for its backward."""
    stack: StackName = DEFAULT_STACK
    """The software stack (pplan.profiles.stacks)."""
    overlap_p2p_comm: bool = True
    """Megatron's interleaved schedule overlaps its pipeline sends (else they block, pplan.profiles.stacks)."""
    tp_comm_overlap: bool = False
    """Tensor-parallel collectives overlap the GEMMs they feed or follow (effective: asked for and t > 1)."""
    ep: int = 1
    """Expert parallel: ranks the routed experts are split over (1 for a dense model)."""
    etp: int = 1
    """Expert tensor parallel: ranks each routed expert's matrices are split over."""
    precision: Precision = "bf16"
    """GEMM precision of the layers' Linears (pplan.model.precision)."""
    fp8_param_gather: bool = False
    """The FP8 Linears' weights are kept in FP8 only (no BF16 copy)."""
    fp8_swiglu_input: bool = False
    """The routed experts' SwiGLU input is kept in FP8 for the backward."""
    moment_dtype: MomentDtype = "fp32"
    """Adam's moments' dtype (optimizer bytes per parameter: 12 with FP32, 8 with BF16)."""
    memory_limit: int | None = None
    """auto only: K, the most micro-batches in flight per stage, as asked (None: derived from memory,
    pplan.cost.autoplan)."""
    memory_headroom: float = 0.0
    """auto only, derived K: the fraction of usable memory it leaves free."""
    jitter: float = 0.0
    """Coefficient of variation of each rank's work per step (the straggler allowance, pplan.cost.steptime)."""
    release: str | None = None
    """The stack's release priced, as asked (None: the newest, pplan.profiles.releases)."""
    offload_layers: int = 0
    """Layer-granular activation offload: the first N layers' saved activations live in host memory (0: none)."""
    optimizer_offload_fraction: float = 0.0
    """ZeRO-1: the fraction of the rank's optimizer states in host memory, updated by the CPU (0: none)."""
    moe_dispatcher: MoeDispatcher = "alltoall"
    """Routed models: the token dispatcher (pplan.cost.moe_dispatch)."""
    moe_ep_overlap: bool = False
    """Routed models: the expert all-to-all overlapped with another micro-batch's compute."""
    cuda_graph_scope: tuple[CudaGraphScope, ...] = ()
    """Routed models: what CUDA graphs capture (pplan.cost.host)."""
    moe_permute_fusion: bool = False
    """Routed models: fused (un)permutation kernels."""
    moe_router_fusion: bool = False
    """Routed models: fused router kernels."""
    moe_fused_grouped_mlp: bool = False
    """Routed models: fused, sync-free grouped MLP kernels."""
    moe_capacity_factor: float | None = None
    """Routed models: expert capacity over the balanced share (None: dropless)."""
    moe_force_balance: bool = False
    """Routed models: tokens routed evenly."""
    moe_imbalance: float = 1.0
    """Routed models, natural routing: the busiest expert rank's tokens over the mean."""

    @property
    def expert_dp(self) -> int:
        """Expert data parallel: copies of each expert shard among one stage's t·cp·d ranks, t·cp·d / (ep·etp)
        (megatron-core's expert decomposition of the same ranks)."""
        return self.tp * self.cp * self.dp // (self.ep * self.etp)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def shards(self) -> int:
        """GPUs the sharded states are divided over: the shard group S, or all d·cp data-parallel GPUs."""
        return self.shard_group if self.shard_group is not None else self.dp * self.cp

    @property
    def shard_replicas(self) -> int:
        """Copies of each shard across the data-parallel GPUs: (d·cp)/S (1 without hybrid sharding)."""
        return self.dp * self.cp // self.shards

    shape: Shape = field(init=False, repr=False, compare=False)
    """What one layer's activations and pass times depend on, as a hashable record (derived from the fields)."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "shape",
            Shape(
                self.tp, self.cp, self.seq_len, self.micro_batch, self.sequence_parallel, self.flash_attention,
                self.recompute, self.activation_model, self.recompute_modules or DEFAULT_RECOMPUTE_MODULES,
                self.offload_modules, self.stack, self.kind.splits_backward, self.tp_comm_overlap, self.ep,
                self.etp, self.kind.overlaps_expert_comm, self.precision, self.fp8_swiglu_input,
                MoeKnobs.of(self),
            ),
        )  # fmt: skip

    @property
    def splits_backward(self) -> bool:
        """The schedule runs W apart from I (zero-bubble families)."""
        return self.kind.splits_backward

    @property
    def moe_knobs(self) -> MoeKnobs:
        """The routed layer's software knobs as one record (`Shape.moe_knobs`)."""
        return self.shape.moe_knobs

    @property
    def expert_comm_overlap(self) -> bool:
        """The schedule hides the expert all-to-all behind paired passes (DualPipe, DualPipeV)."""
        return self.kind.overlaps_expert_comm

    def recomputed_layers(self, chunk_layers: int) -> int:
        """Layers of a chunk of `chunk_layers` whose whole forward is re-run in the backward (full recompute):
        all of them, or the first N with the block method (Megatron-LM checks `layer < recompute_num_layers`
        within each chunk)."""
        if self.recompute != "full":
            return 0
        if self.recompute_method == "block" and self.recompute_layers is not None:
            return min(self.recompute_layers, chunk_layers)
        return chunk_layers

    @property
    def recompute_group(self) -> int:
        """Layers per checkpoint under full recompute (uniform method: N; block: 1)."""
        if self.recompute == "full" and self.recompute_method == "uniform" and self.recompute_layers:
            return self.recompute_layers
        return 1

    @property
    def recompute_label(self) -> str:
        """The recompute policy in one phrase (`recompute_label`)."""
        return recompute_label(
            self.recompute, self.recompute_layers, self.recompute_method, self.recompute_modules
        )

    @property
    def placement(self) -> tuple[int, ...]:
        """The pipeline rank holding each virtual stage of the schedule."""
        return self.kind.stage_ranks(self.pp, self.vp)

    @property
    def chains(self) -> tuple[tuple[int, ...], ...]:
        """The stage sequences micro-batches flow along (two for DualPipe)."""
        return self.kind.chains(self.pp, self.vp)

    @property
    def stage_chunks(self) -> tuple[int, ...]:
        """The model chunk each virtual stage runs (DualPipe's up stage p + k runs chunk k)."""
        n = len(self.layout.chunks)
        return tuple(s % n for s in range(len(self.placement)))

    def stages_of(self, rank: int) -> tuple[int, ...]:
        """The virtual stages rank `rank` holds, in increasing order."""
        return self.kind.rank_stages(self.pp, self.vp)[rank]

    @property
    def microbatches_per_stage(self) -> int:
        """Micro-batches through each virtual stage per step (m, or m/2 per DualPipe direction)."""
        return self.num_microbatches // len(self.chains)

    @property
    def generator_v(self) -> int | None:
        """v as the schedule generator takes it (pplan.schedules.get_schedule)."""
        return self.kind.generator_v(self.vp)

    def explicit_schedule(self) -> Schedule:
        """The per-rank action lists (O(p·v·m) to build: for drawings and exports, not for planning). A tuned
        family's (auto's) are its lists for unit times; the plan's own are pplan.cost.pipeline.tuned_lists."""
        return get_schedule(self.kind.name, self.pp, self.num_microbatches, self.generator_v)

    @property
    def schedule(self) -> str:
        return self.kind.name


SHARDING_FIELDS = frozenset({"zero_stage", "grad_dtype", "shard_group", "reshard_after_forward"})
"""A plan's data-parallel state: the ZeRO stage, gradient dtype and sharding choices. `Plan.shape` reads none of
them (`with_sharding`)."""


def with_sharding(plan: Plan, **changes: Any) -> Plan:
    """`changed(plan, **changes)` for changes to `SHARDING_FIELDS` only: the copy keeps `plan.shape` (none of its
    fields changes) instead of deriving it again. The search copies plans across those choices thousands of
    times."""
    assert changes.keys() <= SHARDING_FIELDS, changes.keys() - SHARDING_FIELDS
    return changed_underived(plan, **changes)
