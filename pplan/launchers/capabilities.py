"""What each launcher runs, as data: one declaration (`LauncherCapabilities`) per launcher pplan writes for.

A declaration says, for each plan setting, which values the launcher runs and the arguments that write each
(`Setting`: `runs`), and for each value it does not run the refusal (`refused`: a `Text` of reason, detail and
fix, whose `{launcher}` and `{value}` fields are filled per plan); the schedules it runs (read off each family's
record in `pplan.schedules.registry`, with the record's refusal texts), its rule on m, whether its pipeline split
may give the first or last stage more layers, its sharding rules, the torchtitan release whose models and
expert-parallel mesh it has (`TorchtitanRelease`), its display words and the stack its output runs on.
`pplan.launchers.support` reads these declarations for every refusal and for the search's `SearchFilter`, and
compares no launcher names; the writers (`pplan.launchers.megatron`, `pplan.launchers.torchtitan`) read the
arguments of the settings they write from here where a setting maps to fixed arguments, and
`tests/test_launchers_capabilities.py` checks the declared arguments against what the writers emit and Megatron-LM's
option table.

Where each rule comes from (the sources and the texts below say why each refusal holds):
- Megatron-LM (megatron-core 0.16.1, `megatron/training/arguments.py` at tag core_v0.16.1): 1F1B and interleaved
  1F1B, m a multiple of p when interleaved (micro-batch groups of p), any split, every precision, recompute,
  gradient and moment dtype pplan plans, activation offload, ZeRO-1 as the distributed optimizer and ZeRO-2/3 as
  Megatron-FSDP, hybrid sharding for ZeRO-1 only, always resharding after the forward, and its assertion that a
  sharded plan overlapping the parameter gather overlaps the gradient reduction too.
- torchtitan 0.3.x (`torchtitan`) and 0.2.x (`torchtitan@0.2`): torch.distributed.pipelining's classes with
  torch's rules on m, a split that gives the end stages at most the others' layers, BF16 (and FP8 in 0.3.x where
  the model registry ships a Float8 config function), FP32 gradients and moments, full or no recompute, FSDP
  (ZeRO-3; a search skips ZeRO-1/2), hybrid sharding over a multiple of cp, either resharding, no async TP, no
  activation offload, the models the release ships (`pplan.launchers.torchtitan_models`) and its expert mesh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from string import Formatter
from typing import Generic, Literal, TypeVar

from pplan.errors import ConfigError
from pplan.launchers.names import LAUNCHERS, Launcher
from pplan.launchers.torchtitan_models import TORCHTITAN_02_RELEASE, TORCHTITAN_RELEASE, TorchtitanVersion
from pplan.profiles.stacks import StackName
from pplan.schedules import FAMILIES

K = TypeVar("K")

RecomputeKind = Literal["none", "full", "full(N)", "selective"]
"""A recompute policy as a launcher tells them apart (`recompute_kind` of its label): none, every layer re-run
from its input, full recompute of N layers per chunk or in groups of N (`full(block N)`, `full(uniform N)`), or
selective recompute of some modules."""


def recompute_kind(label: str) -> RecomputeKind:
    """The kind of a recompute label (`pplan.plan.rules.recompute_label`)."""
    if label.startswith("full("):
        return "full(N)"
    if label.startswith("selective"):
        return "selective"
    return "full" if label == "full" else "none"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a launcher cannot run a plan: the reason (generic, so a search can count rejections by it: no
    plan-specific numbers), the detail, and the fix."""

    reason: str
    detail: str
    fix: str


@dataclass(frozen=True, slots=True)
class Text:
    """A refusal's texts, with `{name}` fields (`{launcher}`, `{value}`, and the rule's own) filled per plan."""

    reason: str
    detail: str
    fix: str
    constant: Refusal | None = field(init=False, repr=False, compare=False)
    """The refusal itself when the texts have no fields (built once: the search asks often)."""

    def __post_init__(self) -> None:
        texts = (self.reason, self.detail, self.fix)
        fields = any(name is not None for text in texts for _, name, _, _ in Formatter().parse(text))
        object.__setattr__(self, "constant", None if fields else Refusal(*texts))

    def format(self, **values: object) -> Refusal:
        if self.constant is not None:
            return self.constant
        return Refusal(self.reason.format(**values), self.detail.format(**values), self.fix.format(**values))


@dataclass(frozen=True, slots=True, eq=False)
class Setting(Generic[K]):
    """One plan setting as a launcher takes it: each value it runs, with the arguments that write it (option names
    with the fixed values they take; empty: the launcher's default), and the refusal of each value it does not
    run. A value in neither is not the launcher's to refuse (`refused` decides)."""

    runs: Mapping[K, tuple[str, ...]]
    refused: Mapping[K, Text] = field(default_factory=dict)

    def refusal(self, value: K, launcher: str, **values: object) -> Refusal | None:
        """The refusal of `value` (None when the launcher runs it), its texts filled with `launcher`, `value` and
        `values`."""
        text = self.refused.get(value)
        return None if text is None else text.format(launcher=launcher, value=value, **values)


@dataclass(frozen=True, slots=True, eq=False)
class TorchtitanRelease:
    """What differs between the torchtitan releases pplan writes for, beside the declaration's settings."""

    version: TorchtitanVersion
    """The release series: which shipped models it builds, and each model's facts by release
    (`pplan.launchers.torchtitan_models.PerRelease`)."""
    release: str
    """The release the output was checked against."""
    replicates_beside_parallelism: bool
    """A ZeRO-0 plan is written as `data_parallel_replicate_degree` beside t, p and cp (0.3.0: FSDP with a replicate
    axis, `resolve_fsdp_mesh` in torchtitan/distributed/full_dtensor.py); otherwise only when data parallelism is
    the only dimension (0.2.2: DDP, torchtitan/models/llama3/infra/parallelize.py), else as FSDP."""
    expert_tp_beside_ep: bool
    """With ep > 1 the experts may be split over the t ranks too (etp = t: 0.2.2's
    `expert_tensor_parallel_degree`, 1 or t); otherwise each expert is whole (etp = 1)."""
    expert_tp_refusal: Text
    """The refusal of another etp with ep > 1 (fields `ep`, `etp`, `tp`)."""
    expert_mesh: str
    """How the release builds the expert mesh from the ranks it borrows (the detail of `EXPERT_RANKS`)."""


@dataclass(frozen=True, slots=True, eq=False)
class LauncherCapabilities:
    """What one launcher runs and how pplan writes it. One record per launcher (`DECLARATIONS`), compared by
    identity."""

    name: Launcher
    """What `--launcher` and `--format` take (`pplan.launchers.names`); `{launcher}` in its refusals."""
    words: str
    """The launcher in prose (recommend's tie sentence)."""
    short: str
    """One letter for recommend's `on` column."""
    project: str
    """The project whose releases share these rules: the name `ScheduleFamily.launchers` gives and the prefix of
    the refusals its releases share."""
    stack: StackName
    """The software stack its output runs on (`pplan.profiles.stacks`)."""
    ranked: bool
    """`runs_on` asks it for recommend's `on` column (one release per project)."""
    release: TorchtitanRelease | None
    """The torchtitan release: it builds only the models that release ships, with its expert mesh. None: any
    model pplan plans (what the writer cannot spell is its own refusal, `pplan.launchers.megatron`)."""
    schedules: Mapping[str, tuple[str, ...]]
    """The schedule families it runs (by canonical name), with the arguments that name them."""
    schedule_refusals: Mapping[str, Refusal]
    """Each other family's refusal, from the family's record."""
    m_rule: Literal["groups of p", "torch"]
    """Its rule on m beyond the family's own: Megatron-LM's interleaved schedule takes micro-batches in groups of
    p (`M_GROUPS_OF_P`); torchtitan runs torch's classes, with their checks on `n_microbatches` (`M_TORCH_1F1B`,
    `M_TORCH_FAMILY`)."""
    larger_end_stages: Text | None
    """None: any first/last stage split (`layouts`); else the refusal of a first or last stage with more layers
    than the stages between."""
    layouts: tuple[str, ...]
    """The arguments that write an uneven split."""
    precision: Setting[str]
    float8_config_precisions: Mapping[str, Text]
    """Precisions written only as a Float8 config function the model registry ships, with the refusal for a model
    that has none."""
    fp8_param_gather: Setting[bool]
    """Whether an FP8 plan gathers its weights in FP8 (asked of FP8 plans only)."""
    fp8_swiglu_input: Setting[bool]
    tp_comm_overlap: Setting[bool]
    moment_dtype: Setting[str]
    grad_dtype: Setting[str]
    recompute: Setting[str]
    """Keyed by `RecomputeKind`."""
    activation_offload: Setting[bool]
    optimizer_offload: Setting[bool]
    """Whether the plan keeps part of its optimizer states in host memory (`optimizer_offload_fraction` > 0; the
    writer adds the fraction after the declared option)."""
    zero_stage: Setting[int]
    searched_zero_stages: frozenset[int]
    """The ZeRO stages a search for it keeps (what it runs as costed); the others are refused with
    `searched_zero_reason`."""
    searched_zero_reason: str
    hybrid_sharding: Setting[int]
    """A shard group (hybrid sharding), keyed by the ZeRO stage."""
    reshard_after_forward: Setting[bool]
    param_gather_needs_grad_reduce: Text | None
    """The refusal of a sharded plan that overlaps the parameter gather but not the gradient reduction (None: it
    runs one)."""
    shard_group_of_cp: Text | None
    """The refusal of a shard group that is no multiple of cp (None: any)."""
    paired_expert_overlap: Literal["never", "without recompute"] | None
    """Whether a schedule whose paired passes hide the expert all-to-all (DualPipeV: `overlaps_expert_comm`) runs
    that overlap with ep > 1: never (`PAIRED_EXPERTS_NEVER`), only without activation checkpointing
    (`PAIRED_EXPERTS_WITHOUT_RECOMPUTE`); None: it runs no such schedule."""


# ------------------------------------------------------------------------------------------------- shared texts

SEVERAL_CHUNKS = Text(
    "{launcher}: several chunks on one pipeline rank",
    "p = 1 with {chunks} chunks",
    "use --pp 2 or more, or a one-chunk schedule such as 1f1b",
)
"""No launcher places several chunks on one rank without a pipeline (DualPipe's two copies aside)."""
_SWIGLU = Text(
    "{launcher}: no FP8 SwiGLU-input caching",
    "--fp8-swiglu-input is DeepSeek-V3's own framework's (report §3.3.2); neither Megatron-LM nor torchtitan has "
    "an option for it",
    "drop --fp8-swiglu-input",
)
NO_FP8_SWIGLU_INPUT: Setting[bool] = Setting({False: ()}, {True: _SWIGLU})

# ----------------------------------------------------------------------------------------------------- Megatron-LM

M_GROUPS_OF_P = Text(
    "megatron: interleaved 1F1B needs m a multiple of p",
    "m = {m}, p = {p}",
    "use a global batch giving m a multiple of {p}, or --launcher torchtitan",
)
"""Megatron-LM's interleaved schedule takes micro-batches in groups of `microbatch_group_size_per_vp_stage`, by
default p, and `forward_backward_pipelining_with_interleaving` raises unless the last group is empty or at least p
(`megatron/core/pipeline_parallel/schedules.py`; Narayanan et al. 2021, arXiv:2104.04473 §2.2)."""

_MEGATRON_SCHEDULES = {"1f1b": (), "interleaved-1f1b": ("--num-virtual-stages-per-pipeline-rank",)}
_FSDP = ("--use-megatron-fsdp", "--data-parallel-sharding-strategy")
_FSDP_CHECKPOINT = ("--ckpt-format", "fsdp_dtensor", "--no-gradient-accumulation-fusion")
_HYBRID_MEGATRON = Text(
    "megatron: no hybrid sharding for Megatron-FSDP in pplan's flags",
    "ZeRO-{value} with a shard group; pplan writes hybrid sharding only as the distributed optimizer's "
    "--num-distributed-optimizer-instances (ZeRO-1), not Megatron-FSDP's",
    "use --zero-stage 1, or drop --shard-group, or --launcher torchtitan",
)

MEGATRON = LauncherCapabilities(
    name="megatron",
    words="Megatron-LM",
    short="M",
    project="megatron",
    stack="megatron-core",
    ranked=True,
    release=None,
    # Megatron-LM main runs 1F1B and interleaved 1F1B only (core_v0.16.1 schedules.py): the zero-bubble schedules
    # live in the sail-sg fork, DualPipe(V) and GPipe are no Megatron-LM schedules (each record says why)
    schedules={f.name: _MEGATRON_SCHEDULES[f.name] for f in FAMILIES.values() if f.megatron},
    schedule_refusals={
        f.name: Refusal(
            f"megatron cannot run {f.name}",
            f.why_not_megatron,
            "use --schedule interleaved-1f1b (or 1f1b)"
            + (", or --launcher torchtitan" if f.torch_class is not None else ""),
        )
        for f in FAMILIES.values()
        if not f.megatron
    },
    m_rule="groups of p",
    larger_end_stages=None,
    layouts=(
        "--decoder-first-pipeline-num-layers",
        "--decoder-last-pipeline-num-layers",
        "--pipeline-model-parallel-layout",
    ),
    precision=Setting(
        {
            "bf16": ("--bf16",),
            # Transformer Engine's E4M3-forward/E5M2-gradient delayed scaling, or MXFP8 (E4M3 everywhere, block
            # scales): core_v0.16.1 `--fp8-format` {e4m3, hybrid}, `--fp8-recipe` {tensorwise, delayed, mxfp8,
            # blockwise}; the rest of the model (and the BF16 weights FP8 Linears are cast from) stays BF16
            "fp8": ("--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "delayed"),
            "mxfp8": ("--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"),
        }
    ),
    float8_config_precisions={},
    fp8_param_gather=Setting({False: (), True: ("--fp8-param-gather",)}),
    fp8_swiglu_input=NO_FP8_SWIGLU_INPUT,
    tp_comm_overlap=Setting({False: (), True: ("--tp-comm-overlap",)}),  # Transformer Engine userbuffers
    moment_dtype=Setting(
        {
            "fp32": (),
            # megatron-core's precision-aware optimizer keeps the moments in BF16
            "bf16": (
                "--use-precision-aware-optimizer",
                "--exp-avg-dtype",
                "bf16",
                "--exp-avg-sq-dtype",
                "bf16",
            ),
        }
    ),
    grad_dtype=Setting({"fp32": (), "bf16": ("--grad-reduce-in-bf16",)}),  # else FP32 main gradients
    recompute=Setting(
        {
            "none": (),
            "full": ("--recompute-granularity", "full", "--recompute-method", "--recompute-num-layers"),
            "full(N)": ("--recompute-granularity", "full", "--recompute-method", "--recompute-num-layers"),
            "selective": ("--recompute-granularity", "selective", "--recompute-modules"),
        }
    ),
    # megatron-core 0.16.1 transformer_config.py
    activation_offload=Setting(
        {False: (), True: ("--fine-grained-activation-offloading", "--offload-modules")}
    ),
    # megatron-core 0.16.1 optimizer/cpu_offloading/hybrid_optimizer.py, built on the precision-aware optimizer
    optimizer_offload=Setting(
        {
            False: (),
            True: (
                "--optimizer-cpu-offload",
                "--optimizer-offload-fraction",
                "--use-precision-aware-optimizer",
            ),
        }
    ),
    zero_stage=Setting(
        {
            0: (),
            1: ("--use-distributed-optimizer",),
            # megatron-core 0.16.1's DistributedOptimizer carries the Megatron-FSDP paths: it stays on
            2: ("--use-distributed-optimizer", *_FSDP, "optim_grads", *_FSDP_CHECKPOINT),
            3: ("--use-distributed-optimizer", *_FSDP, "optim_grads_params", *_FSDP_CHECKPOINT),
        }
    ),
    searched_zero_stages=frozenset({0, 1, 2, 3}),
    searched_zero_reason="",
    # megatron-core 0.16.1 param_and_grad_buffer.py: reduce-scatter within an instance, all-reduce across them
    hybrid_sharding=Setting(
        {1: ("--num-distributed-optimizer-instances",)}, {2: _HYBRID_MEGATRON, 3: _HYBRID_MEGATRON}
    ),
    reshard_after_forward=Setting(
        {True: ()},
        {
            False: Text(
                "megatron: Megatron-FSDP reshards after every forward",
                "megatron-core 0.16.1's only no-reshard flag, --torch-fsdp2-no-reshard-after-forward, applies to "
                "--use-torch-fsdp2, not the Megatron-FSDP pplan writes for ZeRO-3",
                "drop --no-reshard-after-forward, or use --launcher torchtitan (fsdp_reshard_after_forward)",
            )
        },
    ),
    param_gather_needs_grad_reduce=Text(
        "megatron: --overlap-param-gather needs --overlap-grad-reduce",
        "ZeRO-{zero_stage} with --no-overlap-grad-reduce; Megatron asserts "
        "'Must use --overlap-param-gather with --overlap-grad-reduce'",
        "add --no-overlap-param-gather (pplan then costs the parameter gather as exposed), "
        "or drop --no-overlap-grad-reduce",
    ),
    shard_group_of_cp=None,
    paired_expert_overlap=None,
)

# ------------------------------------------------------------------------------------------------------ torchtitan

M_TORCH_1F1B = Text(
    "torchtitan: 1F1B needs m ≥ p",
    "m = {m}, p = {p}",
    "use a global batch giving m ≥ {p}, or --schedule gpipe",
)
"""torch's Schedule1F1B checks m ≥ p on top of the family's rule (PyTorch 2.13 schedules.py)."""
M_TORCH_FAMILY = Text(
    "torchtitan: {torch_name} needs {m_rule}",
    "m = {m}, p = {p}",
    "use a global batch giving m = {near}",
)
"""torch's class has the family's own rule on m (Interleaved1F1B and InterleavedZeroBubble: m divisible by
max(1, m // p); DualPipeV: m ≥ 2p)."""
PAIRED_EXPERTS_NEVER = Text(
    "torchtitan: {schedule} without the expert all-to-all overlap",
    "ep = {ep}: pplan costed {schedule}'s paired passes hiding the expert all-to-all, but torchtitan 0.3.0 "
    "registers no overlap function, so torch runs the paired forward and backward one after the other "
    "(_PipelineScheduleRuntime, OVERLAP_F_B, PyTorch 2.13 torch/distributed/pipelining/schedules.py)",
    "use another schedule (--schedule zbv or interleaved-1f1b), or --ep 1",
)
PAIRED_EXPERTS_WITHOUT_RECOMPUTE = Text(
    "torchtitan@0.2: DualPipeV's expert overlap without activation checkpointing only",
    "ep = {ep}, recompute {recompute}: torchtitan 0.2.2 overlaps DualPipeV's expert all-to-all "
    '(pipeline_parallel_expert_parallel_overlap) only with activation_checkpoint.mode "none"; '
    "get_dual_pipe_v_flag raises NotImplementedError otherwise (torchtitan/distributed/dual_pipe_v.py)",
    "use --recompute none, or another schedule (--schedule zbv or interleaved-1f1b), or --ep 1",
)
EXPERT_TP_IS_TP = Text(
    "torchtitan: expert tensor parallelism is the tensor parallelism",
    "ep = 1, etp = {etp}, t = {tp}: without expert parallelism torchtitan splits every expert over the t "
    "tensor-parallel ranks (0.3.0 expert_param_placement_dense, torchtitan/models/common/moe_sharding.py; "
    "0.2.2 apply_moe_ep_tp, torchtitan/models/llama4/infra/parallelize.py)",
    "use --etp {tp}, or --ep > 1 without --etp, or --launcher megatron",
)
"""Without expert parallelism both releases split every expert over the t tensor-parallel ranks (etp = t)."""
EXPERT_RANKS = Text(
    "torchtitan: ep must divide data_parallel_shard_degree × cp × tp",
    "ep = {ep}, data_parallel_shard_degree {shard} × cp {cp} × t {tp} = {ranks}: {mesh}",
    "{fix}, or --launcher megatron",
)
"""ep must divide the ranks it borrows (the release's `expert_mesh` says how); `{fix}` is
`EXPERT_RANKS_FIX_REPLICATED` for a replicated (ZeRO-0) plan, else `EXPERT_RANKS_FIX`."""
EXPERT_RANKS_FIX = "use --ep dividing {ranks}"
EXPERT_RANKS_FIX_REPLICATED = "use --zero-stage 3 (FSDP shards over d, so the ranks are t·cp·d)"
EXPERT_RANKS_WITH_ETP = Text(
    "torchtitan@0.2: ep must divide data_parallel_shard_degree × cp with etp = t",
    "ep = {ep}, etp = t = {tp}, data_parallel_shard_degree {shard} × cp {cp} = {ranks}: {mesh}",
    "use --ep dividing {ranks}, or --etp 1 (EP then borrows the t ranks too), or --launcher megatron",
)
"""With etp = t (0.2.x only) EP borrows its ranks from FSDP and CP alone."""
MODEL_AXIS = Text(
    "{launcher}: {model} cannot run {axis} parallelism",
    "{symbol} = {degree}: {why}",
    "{fix}--launcher megatron",
)
"""What a release cannot run on a model it builds (the model's record says why: `PerRelease`); `{fix}` is
`MODEL_AXIS_FIXES`' for the axis."""
MODEL_AXIS_FIXES = {
    "pipeline": ("p", "use --pp 1, or --format torchtitan (0.3.x), or "),
    "context": ("cp", "use --cp 1, or "),
}
"""Per axis of `MODEL_AXIS`: its symbol and the fix's start."""
MODEL_NOT_SHIPPED = "torchtitan ships no configuration for this model"
MODEL_NOT_SHIPPED_FIX = "use --launcher megatron, or a Llama 3 8B/70B/405B profile"
MODEL_NOT_SHIPPED_FIX_ROUTED = "use --launcher megatron, or a model profile of a shape torchtitan ships"

_TORCHTITAN_03 = TorchtitanRelease(
    version="0.3",
    release=TORCHTITAN_RELEASE,
    replicates_beside_parallelism=True,
    expert_tp_beside_ep=False,
    expert_tp_refusal=Text(
        "torchtitan: no expert tensor parallelism with expert parallelism",
        "ep = {ep}, etp = {etp}: torchtitan 0.3.0 has no expert_tensor_parallel_degree; with ep > 1 its experts "
        "are whole on each rank (torchtitan/models/common/moe_sharding.py)",
        "drop --etp (etp = 1), or --format torchtitan@0.2 (etp = t), or --launcher megatron",
    ),
    expert_mesh="torchtitan 0.3.0 borrows the expert-parallel ranks from FSDP and TP (efsdp = dp_shard·cp·tp / ep, "
    "torchtitan/config/configs.py; dp_replicate and pp are outer)",
)
_TORCHTITAN_02 = TorchtitanRelease(
    version="0.2",
    release=TORCHTITAN_02_RELEASE,
    replicates_beside_parallelism=False,
    expert_tp_beside_ep=True,
    expert_tp_refusal=Text(
        "torchtitan@0.2: expert tensor parallelism is 1 or t with expert parallelism",
        "ep = {ep}, etp = {etp}, t = {tp}: ParallelDims._validate asserts ETP = TP or ETP = 1 (torchtitan 0.2.2 "
        "torchtitan/distributed/parallel_dims.py)",
        "use --etp 1 or --etp {tp}, or --launcher megatron",
    ),
    expert_mesh="torchtitan 0.2.2 borrows the expert-parallel ranks from FSDP, CP and the TP ranks etp leaves "
    "(efsdp = dp_shard·cp·tp / (etp·ep), ParallelDims.build_mesh in torchtitan/distributed/parallel_dims.py)",
)
RELEASES: dict[TorchtitanVersion, TorchtitanRelease] = {
    r.version: r for r in (_TORCHTITAN_03, _TORCHTITAN_02)
}

_PAR = "--parallelism."
_FP8_TORCHTITAN = Text(
    "{launcher}: FP8 not emitted",
    "--precision {value}: pplan writes torchtitan's FP8 only as a Float8 config function the model registry ships "
    "(torchtitan 0.3.0: deepseek_v3_671b_float8), none for this model or precision",
    "use --precision bf16, or --launcher megatron (--fp8-format, --fp8-recipe)",
)
_FP8_TORCHTITAN_02 = Text(
    _FP8_TORCHTITAN.reason,
    "--precision {value}: torchtitan 0.2.2 takes FP8 as model converters (model.converters, "
    "[quantize.linear.float8] and, for routed experts, the prototype [quantize.grouped_mm.float8], "
    "torchtitan/config/job_config.py) whose recipe and filters are not pplan's FP8 plan; pplan writes none",
    _FP8_TORCHTITAN.fix,
)
_REPLICATE_AND_SHARD = (f"{_PAR}data_parallel_replicate_degree", f"{_PAR}data_parallel_shard_degree")

TORCHTITAN = LauncherCapabilities(
    name="torchtitan",
    words="torchtitan",
    short="T",
    project="torchtitan",
    stack="torchtitan",
    ranked=True,
    release=_TORCHTITAN_03,
    # torch.distributed.pipelining's classes (PyTorch 2.13 schedules.py): no ZB-H1/H2 class (a torchtitan config
    # cannot name a CSV) and no bidirectional DualPipe
    schedules={
        f.name: (f"{_PAR}pipeline_parallel_schedule", f.torch_short_name)
        for f in FAMILIES.values()
        if f.torch_short_name is not None
    },
    schedule_refusals={
        f.name: Refusal(f"torchtitan cannot run {f.name}", f.why_not_torch, f.fix_not_torch)
        for f in FAMILIES.values()
        if f.torch_class is None
    },
    m_rule="torch",
    # torchtitan 0.2.2 and 0.3.0 torchtitan/distributed/pipeline_parallel.py: every virtual stage gets
    # pipeline_parallel_layers_per_stage layers, less at the two ends only
    larger_end_stages=Text(
        "torchtitan: first/last stage cannot have more layers than the others",
        "layers per chunk {first}, ..., {last}",
        "give the first and last stages fewer layers (or as many), or --launcher megatron",
    ),
    layouts=(
        f"{_PAR}pipeline_parallel_layers_per_stage",
        f"{_PAR}pipeline_parallel_first_stage_less_layers",
        f"{_PAR}pipeline_parallel_last_stage_less_layers",
    ),
    precision=Setting({"bf16": (), "fp8": ("--config",)}, {"mxfp8": _FP8_TORCHTITAN}),
    float8_config_precisions={"fp8": _FP8_TORCHTITAN},
    fp8_param_gather=Setting(
        {False: ()},
        {
            True: Text(
                "torchtitan: no FP8 parameter gathers",
                "--fp8-param-gather: torchtitan 0.3.0's Float8 converters have no FP8 all-gather field "
                "(torchtitan/components/quantization/float8.py)",
                "drop --fp8-param-gather, or --launcher megatron",
            )
        },
    ),
    fp8_swiglu_input=NO_FP8_SWIGLU_INPUT,
    tp_comm_overlap=Setting(
        {False: ()},
        {
            True: Text(
                "{launcher}: async tensor parallelism not emitted",
                "--tp-comm-overlap: pplan writes no torchtitan async-TP and compile settings",
                "drop --tp-comm-overlap, or set parallelism.enable_async_tensor_parallel and compile yourself",
            )
        },
    ),
    moment_dtype=Setting(
        {"fp32": ()},
        {
            "bf16": Text(
                "{launcher}: Adam moments in FP32 only",
                "--moment-dtype {value}: pplan writes no torchtitan low-precision optimizer settings",
                "use --moment-dtype fp32, or --launcher megatron (--use-precision-aware-optimizer)",
            )
        },
    ),
    grad_dtype=Setting(
        {"fp32": ()},
        {
            "bf16": Text(
                "torchtitan: gradients reduced in FP32 only",
                "torchtitan keeps and reduces gradients in FP32 (training.mixed_precision_reduce takes only "
                "float32, torchtitan 0.3.0 torchtitan/config/job_config.py), so a BF16-gradient plan is not the job "
                "it runs",
                "use --grad-dtype fp32, or --launcher megatron (--grad-reduce-in-bf16)",
            )
        },
    ),
    # full AC (FullAC: every layer re-run from its input) and none map one to one; torchtitan's selective AC
    # (SelectiveAC, torchtitan/distributed/activation_checkpoint.py; 0.2.x's selective_ac_option = "op") is not
    # pplan's selective (Korthikanti et al. 2022, arXiv:2205.05198)
    recompute=Setting(
        {"none": ("activation-checkpoint:none",), "full": ("activation-checkpoint:full",)},
        {
            "full(N)": Text(
                "torchtitan: full recompute of every layer only",
                "torchtitan's full AC checkpoints every transformer block on its own, and its layer option "
                "(selective_ac_option = k) every k-th block, not the first N of each chunk nor groups of N "
                "(torchtitan 0.3.0 torchtitan/distributed/activation_checkpoint.py)",
                "use --recompute full without --recompute-layers, or --launcher megatron (--recompute-method)",
            ),
            "selective": Text(
                "torchtitan: no attention-core recompute (pplan's selective)",
                "torchtitan's selective AC saves matmul and attention outputs and recomputes every second matmul "
                "(SelectiveAC, torchtitan 0.3.0 torchtitan/distributed/activation_checkpoint.py), not pplan's "
                "attention-core recompute (Korthikanti et al. 2022)",
                "use --recompute full or none, or --launcher megatron",
            ),
        },
    ),
    activation_offload=Setting(
        {False: ()},
        {
            True: Text(
                "torchtitan: no activation offload",
                "torchtitan's only offload option, training.enable_cpu_offload, moves FSDP's parameters, gradients "
                "and optimizer states to the CPU, not saved activations (torchtitan 0.3.0 "
                "torchtitan/config/configs.py)",
                "drop --offload-modules and --offload-layers, or use --launcher megatron "
                "(--fine-grained-activation-offloading, --cpu-offloading-num-layers)",
            )
        },
    ),
    optimizer_offload=Setting(
        {False: ()},
        {
            True: Text(
                "torchtitan: no optimizer CPU offload",
                "training.enable_cpu_offload moves all of FSDP's parameters, gradients and optimizer states to the "
                "CPU, not a fraction of the optimizer states (torchtitan 0.3.0 torchtitan/config/configs.py)",
                "drop --optimizer-offload-fraction, or use --launcher megatron (--optimizer-cpu-offload)",
            )
        },
    ),
    # FSDP shards weights, gradients and optimizer states (ZeRO-3); a hand-picked ZeRO-1/2 plan is written as FSDP
    # with a note (pplan.launchers.torchtitan)
    zero_stage=Setting(
        {0: _REPLICATE_AND_SHARD, 1: _REPLICATE_AND_SHARD, 2: _REPLICATE_AND_SHARD, 3: _REPLICATE_AND_SHARD}
    ),
    searched_zero_stages=frozenset({0, 3}),
    searched_zero_reason="torchtitan: no ZeRO-1/2 (its FSDP shards the weights too: ZeRO-3)",
    # HSDP: FSDP shards over data_parallel_shard_degree × context_parallel_degree
    hybrid_sharding=Setting({1: _REPLICATE_AND_SHARD, 2: _REPLICATE_AND_SHARD, 3: _REPLICATE_AND_SHARD}),
    reshard_after_forward=Setting(
        {
            True: (f"{_PAR}fsdp_reshard_after_forward", "always"),
            False: (f"{_PAR}fsdp_reshard_after_forward", "never"),
        }
    ),
    param_gather_needs_grad_reduce=None,
    shard_group_of_cp=Text(
        "torchtitan: the shard group must be a multiple of cp",
        "S = {shard_group}, cp = {cp}: torchtitan's FSDP shards over data_parallel_shard_degree × "
        "context_parallel_degree (torchtitan 0.3.0 torchtitan/config/configs.py)",
        "use --shard-group a multiple of {cp}, or --launcher megatron",
    ),
    paired_expert_overlap="never",
)

TORCHTITAN_02 = replace(
    TORCHTITAN,
    name="torchtitan@0.2",
    words="torchtitan 0.2.x",
    ranked=False,  # it writes the plans torchtitan writes, in the older format
    release=_TORCHTITAN_02,
    # FP8 is model converters whose recipe pplan does not write
    precision=Setting({"bf16": ()}, {"fp8": _FP8_TORCHTITAN_02, "mxfp8": _FP8_TORCHTITAN_02}),
    float8_config_precisions={},
    recompute=Setting(
        {"none": ("--activation_checkpoint.mode", "none"), "full": ("--activation_checkpoint.mode", "full")},
        TORCHTITAN.recompute.refused,
    ),
    # overlap_callback, pipeline_parallel_expert_parallel_overlap (torchtitan/distributed/dual_pipe_v.py)
    paired_expert_overlap="without recompute",
)

MEGATRON_BRIDGE = replace(
    MEGATRON,
    name="megatron-bridge",
    words="Megatron-Bridge",
    short="B",
    stack="megatron-bridge",
    ranked=False,  # megatron-core's rules, as Megatron-LM's: the `on` column's M covers it
)
"""Megatron-Bridge 0.3.1 (`pplan.launchers.megatron_bridge`): a recipe on megatron-core 0.16.1, so Megatron-LM's
rules; its output names config fields, not flags (the declared arguments are Megatron-LM's, for the rules)."""

DECLARATIONS: tuple[LauncherCapabilities, ...] = (MEGATRON, TORCHTITAN, TORCHTITAN_02, MEGATRON_BRIDGE)
"""Every launcher, in `LAUNCHERS` order."""
BY_NAME: dict[str, LauncherCapabilities] = {c.name: c for c in DECLARATIONS}
assert tuple(BY_NAME) == LAUNCHERS, "pplan.launchers.names and the declarations name the same launchers"
RANKED: tuple[LauncherCapabilities, ...] = tuple(c for c in DECLARATIONS if c.ranked)
"""The launchers recommend's `on` column asks (`runs_on`)."""
_ALL_LAUNCHERS = ", ".join(LAUNCHERS)


def launcher_name(name: str) -> str:
    """The launcher's canonical name (one of `LAUNCHERS`); a ConfigError naming `--launcher` otherwise."""
    key = name.strip().lower()
    if key not in BY_NAME:
        raise ConfigError("--launcher", f"unknown launcher {name!r}", f"use one of {_ALL_LAUNCHERS}")
    return key


def capabilities_of(name: str) -> LauncherCapabilities:
    """The declaration of the launcher `name` (any case, surrounding spaces ignored); a ConfigError naming
    `--launcher` for an unknown one."""
    return BY_NAME[launcher_name(name)]


WORDS: dict[str, str] = {c.name: c.words for c in DECLARATIONS}
"""Each launcher in prose."""
SHORT: dict[str, str] = {c.name: c.short for c in DECLARATIONS}
"""Each launcher's letter."""
