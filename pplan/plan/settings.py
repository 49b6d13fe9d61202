"""One declaration per plan setting: its concern, default, choices, command-line flag and help, where the explain
document shows it and where a search's plans take it from (`SETTINGS`, one `Setting` per field of
`pplan.plan.records.PlanRequest`, in the order `pplan explain`'s command line spells them).

What reads it: `PlanRequest` checks its counts and choices under the declared flags; the `pplan explain` command
line a plan prints (`pplan.cli.commandline.explain_command`) is generated from it; `pplan explain` declares its
options' flags, help and panels from it (`pplan.cli.options.setting_option`). What is checked against it
(`tests/test_settings_record.py`): `PlanRequest`'s fields and defaults, `make_plan` carrying each setting to the
`Plan`, the explain document's plan block (`PlanOut`, field `shown`), the search's mapping of a configuration to a
request (`Candidate.request`, field `searched`) and the command line read back by `pplan explain`. So a new setting
is one declaration here plus its field, its cost and its launcher mapping; a setting declared but not mapped fails
those tests.

It imports only `typing`-level modules (choices as `Literal` types), so the command line can declare its options
(and answer `--help`) without loading the cost model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

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
from pplan.profiles.stacks import DEFAULT_STACK, STACK_NAMES

Concern = Literal["query", "axes", "schedule", "precision", "memory", "stack", "model"]
"""What a setting is about: the question (GPUs, batch, sequence), how the model is cut (parallel axes and layer
split), the pipeline schedule, number formats, what trades time for memory, what the software stack overlaps, and
how pplan models the plan."""
CONCERNS: tuple[Concern, ...] = get_args(Concern)

Searched = Literal["cut", "query", "fixed"]
"""Where the plans a search tries take a setting from: each configuration's own (`cut`: the search varies it), the
search request's (`query`: the same for every plan), or the default (`fixed`: the search never changes it)."""

NONE = "none"
"""How the command line spells an empty list of choices (`--cuda-graph-scope none`)."""

Printed = Literal["always", "changed"] | Callable[[Any], bool]
"""When `pplan explain`'s command line spells a setting: always, when it differs from its default, or when the
predicate holds of the request."""


SearchForm = Literal["fix", "list", "same", "also"]
"""How `pplan recommend` asks for a setting: `fix` one value for every plan, or every value that fits when not given
(`--tp 2`); `list` a comma list of values to try (`--zero-stage 0,1`); `same` explain's option, one value for every
plan (`--jitter 0.01`); `also` the plans without it and the plans with the value given (`--offload-modules`)."""


@dataclass(frozen=True, slots=True)
class Search:
    """How `pplan recommend` takes a setting: its field of `pplan.search.SearchRequest` (the plural form, for a
    list), the form of its option and, where recommend's option reads otherwise than explain's, its help, panel and
    choices."""

    field: str
    form: SearchForm
    help: str | None = None
    """recommend's help (None: explain's)."""
    concern: Concern | None = None
    """recommend's panel (None: the setting's concern)."""
    default: str | None = None
    """A list option's default text (None: not given, the search request's own default)."""
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    """A list's items (empty: the setting's choices; a function for choices known only to a heavier module)."""

    def item_choices(self, setting: Setting) -> tuple[str, ...]:
        """What each item of a list option may be."""
        choices = self.choices() if callable(self.choices) else self.choices
        return choices or setting.choices


@dataclass(frozen=True, slots=True)
class Setting:
    """One plan setting, declared once; what the copies of a plan's settings are generated from
    (`pplan.plan.copies`: `Plan` from `PlanRequest`, a search configuration's request; `pplan.cli.signature`:
    the options of `explain` and `recommend`)."""

    name: str
    """The field of `PlanRequest` (and, derived or not, of `Plan`)."""
    concern: Concern
    default: object
    flag: str
    """`pplan explain`'s option (a boolean defaulting to true also takes `--no-…`)."""
    help: str
    shown: str | None
    """Where the explain document's plan block (`PlanOut`) shows the plan's value: a field, dotted into a sub-block;
    None where it does not. A field of the setting's own name is filled from the plan's attribute."""
    candidate: str | None
    """The expression, over the configuration `c` (`pplan.search.space.Candidate`), the search request `q` and the
    sequence length `seq_len`, that gives a search's plans this setting (None: its default, the search never
    changes it)."""
    choices: tuple[str, ...] = ()
    """The values a choice takes (each item's, for a tuple of choices); empty for other settings."""
    count: bool = False
    """An integer count, from 1 to `pplan.plan.rules.COUNT_LIMITS[flag]` (None allowed where the default is
    None)."""
    printed: Printed = "changed"
    plan: str | None = ""
    """How `make_plan` gives `Plan` this setting: "" copies the request's value, an expression (over the request
    `req`, the schedule family `kind`, the derived t, p, v, cp, d, m, `seq_len`, `layout`, `shard_group`,
    `recompute_layers` and the canonical-order helpers) derives it, None where the plan holds no such field (it
    derives it: `Plan.gpus`, the family's name, the layout's end chunks)."""
    search: Search | None = None
    """How `pplan recommend` takes it; None: recommend has no option for it (the search keeps `candidate`'s
    value)."""
    cli_type: object = None
    """The type of explain's option where it is not the one the default implies (a `Literal` of choices, an
    option that is optional on the command line)."""
    metavar: str | None = None
    """How `--help` shows the option's value where its type does not say it."""

    @property
    def searched(self) -> Searched:
        """Where a search's plans take the setting from: each configuration's, the query's, or the default."""
        if self.candidate is None:
            return "fixed"
        return "cut" if "c." in self.candidate and "q." not in self.candidate else "query"

    def spelled(self, value: object) -> str:
        """`value` as the command line spells it: `--flag value`, `--flag` or `--no-flag` for a boolean, a comma
        list for a tuple, a float in its shortest form."""
        if isinstance(value, bool):
            return self.flag if value else f"--no-{self.flag[2:]}"
        if isinstance(value, tuple):
            return f"{self.flag} {','.join(str(v) for v in value) or NONE}"
        if isinstance(value, float):
            return f"{self.flag} {value:g}"
        return f"{self.flag} {value}"

    def is_printed(self, request: Any) -> bool:
        """Whether `pplan explain`'s command line for `request` spells this setting (`printed`)."""
        if self.printed == "always":
            return True
        if self.printed == "changed":
            return bool(getattr(request, self.name) != self.default)
        return self.printed(request)


def _schedule_names() -> tuple[str, ...]:
    """The schedules recommend's `--schedule` list may name (the registry loads only when a command runs)."""
    from pplan.schedules import SCHEDULE_NAMES

    return SCHEDULE_NAMES


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "gpus", "query", None, "--gpus", "Total GPUs.", "gpus", "q.gpus", count=True, printed="always", plan=None,
        search=Search("gpus", "same"), cli_type=int,
    ),
    Setting(
        "global_batch", "query", None, "--global-batch", "Global batch, in sequences.", "global_batch",
        "q.global_batch", count=True, printed="always", search=Search("global_batch", "same"), cli_type=int,
    ),
    Setting(
        "tp", "axes", 1, "--tp", "Tensor-parallel degree t.", "tp", "c.t", count=True, printed="always",
        search=Search("tp", "fix", "Fix the tensor-parallel degree."),
    ),
    Setting(
        "pp", "axes", 1, "--pp", "Pipeline-parallel ranks p.", "pp", "c.p", count=True, printed="always",
        search=Search("pp", "fix", "Fix the pipeline ranks."),
    ),
    Setting(
        "cp", "axes", 1, "--cp", "Context-parallel degree (sequence split).", "cp", "c.cp", count=True,
        printed="always", search=Search("cp", "fix", "Fix the context-parallel degree."),
    ),
    Setting(
        "micro_batch", "axes", 1, "--micro-batch", "Micro-batch size b, in sequences.", "micro_batch", "c.b",
        count=True, printed="always", search=Search("micro_batch", "fix", "Fix the micro-batch size."),
    ),
    Setting(
        "schedule", "schedule", "1f1b", "--schedule",
        "gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe (or torch's names), or auto (lists "
        "built for this plan's pass times and memory: pplan.schedules.auto).",
        "schedule", "c.family.name", printed="always", plan=None,
        search=Search(
            "schedules", "list", "Comma list of schedules to consider (default: all but gpipe, looped-bfs).", "axes",
            choices=_schedule_names,
        ),
    ),
    Setting(
        "recompute", "memory", "none", "--recompute", "Activation recomputation.", "recompute", "c.recompute",
        choices=get_args(Recompute), printed="always", cli_type=Recompute,
        search=Search("recompute", "list", f"Comma list of {', '.join(get_args(Recompute))} (default: all)."),
    ),
    Setting(
        "zero_stage", "memory", 0, "--zero-stage", "ZeRO stage 0-3 (1 = distributed optimizer).", "zero_stage",
        "c.zero", printed="always",
        search=Search(
            "zero_stages", "list",
            "Comma list of ZeRO stages to consider (default 0,1,2,3: those the launcher runs).",
            choices=("0", "1", "2", "3"),
        ),
    ),
    Setting(
        "grad_dtype", "precision", "fp32", "--grad-dtype", "Gradient dtype: fp32 (18 B/param) or bf16 (16).",
        "grad_dtype", "c.grad_dtype", choices=get_args(GradDtype), printed="always", cli_type=GradDtype,
        search=Search(
            "grad_dtypes", "list",
            "Comma list of gradient dtypes, fp32 (18 B/param) and bf16 (16) (default: both).", "memory",
        ),
    ),
    Setting(
        "recompute_method", "memory", "uniform", "--recompute-method",
        "Full recompute: uniform (every layer, checkpoints of N layers) or block (the first N layers of every "
        "chunk, the rest kept).",
        "recompute_policy.method", "'block' if c.recompute_layers else 'uniform'",
        choices=get_args(RecomputeMethod), printed=lambda r: r.recompute_layers is not None,
        plan="req.recompute_method if recompute_layers is not None else 'uniform'", cli_type=RecomputeMethod,
    ),
    Setting(
        "recompute_layers", "memory", None, "--recompute-layers",
        "Full recompute: N layers per chunk (--recompute-method block) or layers per checkpoint (uniform; default "
        "1).",
        "recompute_policy.layers", "c.recompute_layers", count=True, plan="recompute_layers",
    ),
    Setting(
        "recompute_modules", "memory", DEFAULT_RECOMPUTE_MODULES, "--recompute-modules",
        "Selective recompute: comma list of core_attn, layernorm, mlp (dense MLPs), and for routed models moe (the "
        "whole MoE block), shared_experts, moe_act, or mla_up_proj (MLA) (Megatron-LM --recompute-modules).",
        "recompute_policy.modules", "q.recompute_modules if c.recompute == 'selective' else DEFAULT_RECOMPUTE_MODULES",
        choices=get_args(RecomputeModule),
        plan="canonical_modules(req.recompute_modules) if req.recompute == 'selective' else ()",
        search=Search("recompute_modules", "same"),
    ),
    Setting(
        "seq_len", "query", None, "--seq-len", "Sequence length (default: the model's).", "seq_len", "seq_len",
        count=True, plan="seq_len", search=Search("seq_len", "same"),
    ),
    Setting(
        "vp", "axes", None, "--vp", "Model chunks per pipeline rank v (interleaving).", "vp",
        "c.v if c.family.fixed_v is None else None", count=True, plan="v",
        search=Search("vp", "fix", "Fix the chunks per rank (interleaved schedules)."),
    ),
    Setting(
        "first_stage_layers", "axes", None, "--first-stage-layers", "Layers on the first chunk.",
        "layers_per_chunk", "c.first_layers", plan=None,
    ),
    Setting(
        "last_stage_layers", "axes", None, "--last-stage-layers", "Layers on the last chunk.", "layers_per_chunk",
        "c.last_layers", plan=None,
    ),
    Setting(
        "offload_modules", "memory", (), "--offload-modules",
        "Activation offload to host memory: comma list of attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm "
        "(Megatron-LM --offload-modules; default: no offload).",
        "offload_modules", "c.offload_modules", choices=get_args(OffloadModule),
        plan="canonical_offload(req.offload_modules)", search=Search("offload", "also"),
    ),
    Setting(
        "shard_group", "memory", None, "--shard-group",
        "Hybrid sharding (HSDP, ZeRO ≥ 1): shard the states over groups of S GPUs (S divides d·cp), replicated "
        "across the (d·cp)/S groups; default all d·cp.",
        "shard_group", "c.shard_group", plan="shard_group",
    ),
    Setting(
        "reshard_after_forward", "memory", True, "--reshard-after-forward",
        "ZeRO-3: free gathered weights after each forward and gather again for the backward "
        "(--no-reshard-after-forward keeps the rank's weights gathered: more memory, half the gathers).",
        "reshard_after_forward", "c.reshard",
    ),
    Setting(
        "overlap_p2p_comm", "stack", True, "--overlap-p2p-comm",
        "megatron-core's interleaved schedule overlaps its pipeline sends (--no-overlap-p2p-comm: they block the "
        "sender, Megatron's --no-overlap-p2p-communication).",
        "overlap_p2p_comm", None,
    ),
    Setting(
        "tp_comm_overlap", "stack", False, "--tp-comm-overlap",
        "Overlap every tensor-parallel collective with the GEMM it feeds or follows (megatron-core "
        "--tp-comm-overlap, torchtitan async TP; needs sequence parallelism).",
        "tp_comm_overlap", "q.tp_comm_overlap", printed=lambda r: r.tp_comm_overlap and r.tp > 1,
        plan="req.tp_comm_overlap and t > 1", search=Search("tp_comm_overlap", "same"),
    ),
    Setting(
        "stack", "stack", DEFAULT_STACK, "--stack",
        "Software stack whose overlap and fusion rules to apply: megatron-core, megatron-bridge, torchtitan or "
        "deepspeed (default: the launcher's, megatron-core without one); megatron-bridge@RELEASE (e.g. @26.06) "
        "names a release: explain prices its recipe's knobs where no flag sets them.",
        "stack", "q.stack", choices=STACK_NAMES, search=Search("stack", "same"), cli_type=str | None,
        metavar="<megatron-core|megatron-bridge[@RELEASE]|torchtitan|deepspeed>",
    ),
    Setting(
        "ep", "axes", 1, "--ep", "Expert-parallel degree (routed models): experts split over ep ranks.", "ep",
        "c.ep", count=True,
        search=Search("ep", "fix", "Routed models: fix the expert-parallel degree (default: every divisor that fits)."),
    ),
    Setting(
        "precision", "precision", "bf16", "--precision",
        "GEMM precision of the layers' Linears: bf16, fp8 (per-tensor scaled, Hopper on) or mxfp8 (block-scaled, "
        "Blackwell).",
        "precision", "c.precision", choices=get_args(Precision),
        search=Search(
            "precisions", "list", "GEMM precisions to try, a comma list of bf16, fp8, mxfp8 (default bf16 only).",
            "axes", default="bf16",
        ),
    ),
    Setting(
        "memory_headroom", "schedule", 0.0, "--headroom",
        "--schedule auto without --memory-limit: the fraction of usable HBM its derived memory limit leaves free "
        "on every stage (recommend's --headroom).",
        None, "q.headroom_fraction if c.family.tuned else 0.0", plan="req.memory_headroom if kind.tuned else 0.0",
        search=Search(
            "headroom_fraction", "same", "Fraction of usable HBM to keep free on every stage, e.g. 0.1.", "memory"
        ),
    ),
    Setting(
        "jitter", "model", 0.0, "--jitter",
        "Straggler allowance: the coefficient of variation of each rank's work per step, e.g. 0.01; the step waits "
        "for the slowest GPU, c·busy·√(2 ln GPUs) more (default 0: none).",
        None, "q.jitter", search=Search("jitter", "same"),
    ),
    Setting(
        "etp", "axes", 1, "--etp",
        "Expert tensor-parallel degree (routed models): each expert split over etp ranks.", "etp", "c.etp",
        count=True,
        search=Search(
            "etp", "fix",
            "Routed models: fix the expert tensor-parallel degree (default: 1 and t, each expert whole or split over "
            "the tensor-parallel ranks).",
        ),
    ),
    Setting(
        "sequence_parallel", "memory", True, "--sequence-parallel", "Megatron sequence parallelism (t > 1).",
        "sequence_parallel", None, plan="req.sequence_parallel and t > 1",
    ),
    Setting(
        "flash_attention", "memory", True, "--flash-attention", "Flash attention (no attention-score tensors).",
        "flash_attention", None,
    ),
    Setting(
        "activation_model", "model", "itemised", "--activation-model",
        "itemised (this architecture) or korthikanti (GPT-3 formula).", "activation_model", None,
        choices=get_args(ActivationModel), cli_type=ActivationModel,
    ),
    Setting(
        "overlap_grad_reduce", "stack", True, "--overlap-grad-reduce",
        "Gradient sync behind the last backward passes (Megatron --overlap-grad-reduce).", None, None,
    ),
    Setting(
        "overlap_param_gather", "stack", True, "--overlap-param-gather",
        "Distributed optimizer's parameter all-gather behind the next forward.", None, None,
    ),
    Setting(
        "fp8_param_gather", "precision", False, "--fp8-param-gather",
        "FP8 plans: keep the FP8 Linears' weights in FP8 only, no BF16 copy (Megatron's --fp8-param-gather).",
        "fp8_param_gather", None,
    ),
    Setting(
        "fp8_swiglu_input", "precision", False, "--fp8-swiglu-input",
        "FP8 plans, routed models: also keep the experts' SwiGLU input in FP8 (DeepSeek-V3's framework, report "
        "§3.3.2; no launcher has it).",
        "fp8_swiglu_input", None,
    ),
    Setting(
        "moment_dtype", "precision", "fp32", "--moment-dtype",
        "Adam's moments: fp32 (12 bytes of optimizer state per parameter) or bf16 (8).", "moment_dtype", None,
        choices=get_args(MomentDtype),
    ),
    Setting(
        "memory_limit", "schedule", None, "--memory-limit",
        "--schedule auto: micro-batches each stage may hold in flight (default: the most whose activations fit in "
        "each stage's usable memory after its weights, gradients and optimizer states).",
        None, None, count=True,
    ),
    Setting(
        "offload_layers", "memory", 0, "--offload-layers",
        "Activation offload of whole layers: the saved activations of the model's first N layers go to host "
        "memory (Megatron-LM --cpu-offloading-num-layers; p = 1, no recompute; default 0: none).",
        None, None,
    ),
    Setting(
        "optimizer_offload_fraction", "memory", 0.0, "--optimizer-offload-fraction",
        "ZeRO-1: the fraction of each rank's optimizer states (FP32 master weights and Adam's moments) kept and "
        "updated in host memory by the CPU (megatron-core's hybrid device optimizer, Megatron-LM "
        "--optimizer-cpu-offload --optimizer-offload-fraction; default 0: none).",
        None, None,
    ),
    Setting(
        "release", "stack", None, "--release",
        "The stack's release (megatron-bridge: a NeMo container, 25.09 to 26.08): explain prices its recipe's "
        "knobs where no flag sets them; --stack NAME@RELEASE says the same.",
        "release", "q.release", search=Search("release", "same"), cli_type=str | None,
    ),
    Setting(
        "moe_dispatcher", "stack", "alltoall", "--moe-dispatcher",
        "Routed models: token dispatcher, alltoall (NCCL all-to-all, k copies per token), allgather, deepep, "
        "hybridep or ncclep (deduplicating kernels: one copy per destination rank).",
        "moe_dispatcher", "q.moe_dispatcher", choices=get_args(MoeDispatcher), cli_type=MoeDispatcher,
        search=Search(
            "moe_dispatchers", "list",
            "Routed models: comma list of token dispatchers to try (alltoall, allgather, deepep, hybridep, ncclep); "
            "the search runs once per dispatcher and ranks the union (default: alltoall, or a named release's).",
        ),
    ),
    Setting(
        "moe_ep_overlap", "stack", False, "--moe-ep-overlap",
        "Routed models: overlap the expert all-to-all with another micro-batch's compute (megatron-core "
        "--overlap-moe-expert-parallel-comm; taken where the cut allows it: ep > 1, interleaved when p > 1, no "
        "full recompute, not allgather).",
        "moe_ep_overlap", "q.moe_ep_overlap", search=Search("moe_ep_overlap", "same"),
        plan="req.moe_ep_overlap and ep_overlap_refusal(req.ep, p, v, req.recompute, req.moe_dispatcher) is None",
    ),
    Setting(
        "cuda_graph_scope", "stack", (), "--cuda-graph-scope",
        "Routed models: what CUDA graphs capture, a comma list of attn, moe_router, moe_preprocess, or full_layer, "
        "or full_iteration (default: none, every kernel launched by the host).",
        "cuda_graph_scope", "q.cuda_graph_scope", choices=get_args(CudaGraphScope), search=Search("cuda_graph_scope", "same"),
    ),
    Setting(
        "moe_permute_fusion", "stack", False, "--moe-permute-fusion",
        "Routed models: fused token permutation kernels (megatron-core --moe-permute-fusion).",
        "moe_permute_fusion", "q.moe_permute_fusion", search=Search("moe_permute_fusion", "same"),
    ),
    Setting(
        "moe_router_fusion", "stack", False, "--moe-router-fusion",
        "Routed models: fused router score and top-k kernels (megatron-core --moe-router-fusion).",
        "moe_router_fusion", "q.moe_router_fusion", search=Search("moe_router_fusion", "same"),
    ),
    Setting(
        "moe_fused_grouped_mlp", "stack", False, "--moe-fused-grouped-mlp",
        "Routed models: the experts' GEMMs, activation and quantisation as one fused, sync-free kernel (Transformer "
        "Engine's CuTeDSL grouped MLP, megatron-core 0.18; no megatron-core 0.16.1 flag).",
        "moe_fused_grouped_mlp", "q.moe_fused_grouped_mlp", search=Search("moe_fused_grouped_mlp", "same"),
    ),
    Setting(
        "moe_capacity_factor", "stack", None, "--moe-capacity-factor",
        "Routed models: expert capacity factor, tokens over it dropped (megatron-core "
        "--moe-expert-capacity-factor; default: dropless).",
        None, "q.moe_capacity_factor", search=Search("moe_capacity_factor", "same"), cli_type=float | None,
    ),
    Setting(
        "moe_force_balance", "stack", False, "--moe-force-balance",
        "Routed models: route every token evenly (megatron-core --moe-router-force-load-balancing, benchmarks "
        "only); otherwise the busiest rank carries --moe-imbalance times the mean.",
        "moe_force_balance", "q.moe_force_balance", search=Search("moe_force_balance", "same"),
    ),
    Setting(
        "moe_imbalance", "stack", 1.0, "--moe-imbalance",
        "Routed models without forced balancing: the busiest expert rank's tokens over the mean (the overload "
        "factor; default 1.0: balanced).",
        None, "q.moe_imbalance", search=Search("moe_imbalance", "same"),
    ),
)  # fmt: skip
"""Every setting of a plan, in the order `pplan explain`'s command line spells them (new ones go last)."""

SETTING: dict[str, Setting] = {s.name: s for s in SETTINGS}
"""The declarations by field name."""
