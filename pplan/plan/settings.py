"""One declaration per plan setting: its concern, default, choices, command-line flag and help, where the explain
document shows it and where a search's plans take it from (`SETTINGS`, one `Setting` per field of
`pplan.plan.configuration.PlanRequest`, in the order `pplan explain`'s command line spells them).

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
    GradDtype,
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

Printed = Literal["always", "changed"] | Callable[[Any], bool]
"""When `pplan explain`'s command line spells a setting: always, when it differs from its default, or when the
predicate holds of the request."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One plan setting, declared once."""

    name: str
    """The field of `PlanRequest` (and, derived or not, of `Plan`)."""
    concern: Concern
    default: object
    flag: str
    """`pplan explain`'s option (a boolean defaulting to true also takes `--no-…`)."""
    help: str
    shown: str | None
    """Where the explain document's plan block (`PlanOut`) shows the plan's value: a field, dotted into a sub-block;
    None where it does not."""
    searched: Searched
    choices: tuple[str, ...] = ()
    """The values a choice takes (each item's, for a tuple of choices); empty for other settings."""
    count: bool = False
    """An integer count, from 1 to `pplan.plan.configuration.COUNT_LIMITS[flag]` (None allowed where the default is
    None)."""
    printed: Printed = "changed"

    def spelled(self, value: object) -> str:
        """`value` as the command line spells it: `--flag value`, `--flag` or `--no-flag` for a boolean, a comma
        list for a tuple, a float in its shortest form."""
        if isinstance(value, bool):
            return self.flag if value else f"--no-{self.flag[2:]}"
        if isinstance(value, tuple):
            return f"{self.flag} {','.join(str(v) for v in value)}"
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


SETTINGS: tuple[Setting, ...] = (
    Setting("gpus", "query", None, "--gpus", "Total GPUs.", "gpus", "query", count=True, printed="always"),
    Setting(
        "global_batch", "query", None, "--global-batch", "Global batch, in sequences.", "global_batch", "query",
        count=True, printed="always",
    ),
    Setting("tp", "axes", 1, "--tp", "Tensor-parallel degree t.", "tp", "cut", count=True, printed="always"),
    Setting("pp", "axes", 1, "--pp", "Pipeline-parallel ranks p.", "pp", "cut", count=True, printed="always"),
    Setting(
        "cp", "axes", 1, "--cp", "Context-parallel degree (sequence split).", "cp", "cut", count=True,
        printed="always",
    ),
    Setting(
        "micro_batch", "axes", 1, "--micro-batch", "Micro-batch size b, in sequences.", "micro_batch", "cut",
        count=True, printed="always",
    ),
    Setting(
        "schedule", "schedule", "1f1b", "--schedule",
        "gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe (or torch's names), or auto (lists "
        "built for this plan's pass times and memory: pplan.schedules.auto).",
        "schedule", "cut", printed="always",
    ),
    Setting(
        "recompute", "memory", "none", "--recompute", "Activation recomputation.", "recompute", "cut",
        choices=get_args(Recompute), printed="always",
    ),
    Setting(
        "zero_stage", "memory", 0, "--zero-stage", "ZeRO stage 0-3 (1 = distributed optimizer).", "zero_stage",
        "cut", printed="always",
    ),
    Setting(
        "grad_dtype", "precision", "fp32", "--grad-dtype", "Gradient dtype: fp32 (18 B/param) or bf16 (16).",
        "grad_dtype", "cut", choices=get_args(GradDtype), printed="always",
    ),
    Setting(
        "recompute_method", "memory", "uniform", "--recompute-method",
        "Full recompute: uniform (every layer, checkpoints of N layers) or block (the first N layers of every "
        "chunk, the rest kept).",
        "recompute_policy.method", "cut", choices=get_args(RecomputeMethod),
        printed=lambda r: r.recompute_layers is not None,
    ),
    Setting(
        "recompute_layers", "memory", None, "--recompute-layers",
        "Full recompute: N layers per chunk (--recompute-method block) or layers per checkpoint (uniform; default "
        "1).",
        "recompute_policy.layers", "cut", count=True,
    ),
    Setting(
        "recompute_modules", "memory", DEFAULT_RECOMPUTE_MODULES, "--recompute-modules",
        "Selective recompute: comma list of core_attn, layernorm, mlp (Megatron-LM --recompute-modules).",
        "recompute_policy.modules", "query", choices=get_args(RecomputeModule),
    ),
    Setting(
        "seq_len", "query", None, "--seq-len", "Sequence length (default: the model's).", "seq_len", "query",
        count=True,
    ),
    Setting(
        "vp", "axes", None, "--vp", "Model chunks per pipeline rank v (interleaving).", "vp", "cut", count=True
    ),
    Setting(
        "first_stage_layers", "axes", None, "--first-stage-layers", "Layers on the first chunk.",
        "layers_per_chunk", "cut",
    ),
    Setting(
        "last_stage_layers", "axes", None, "--last-stage-layers", "Layers on the last chunk.", "layers_per_chunk",
        "cut",
    ),
    Setting(
        "offload_modules", "memory", (), "--offload-modules",
        "Activation offload to host memory: comma list of attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm "
        "(Megatron-LM --offload-modules; default: no offload).",
        "offload_modules", "cut", choices=get_args(OffloadModule),
    ),
    Setting(
        "shard_group", "memory", None, "--shard-group",
        "Hybrid sharding (HSDP, ZeRO ≥ 1): shard the states over groups of S GPUs (S divides d·cp), replicated "
        "across the (d·cp)/S groups; default all d·cp.",
        "shard_group", "cut",
    ),
    Setting(
        "reshard_after_forward", "memory", True, "--reshard-after-forward",
        "ZeRO-3: free gathered weights after each forward and gather again for the backward "
        "(--no-reshard-after-forward keeps the rank's weights gathered: more memory, half the gathers).",
        "reshard_after_forward", "cut",
    ),
    Setting(
        "overlap_p2p_comm", "stack", True, "--overlap-p2p-comm",
        "megatron-core's interleaved schedule overlaps its pipeline sends (--no-overlap-p2p-comm: they block the "
        "sender, Megatron's --no-overlap-p2p-communication).",
        "overlap_p2p_comm", "fixed",
    ),
    Setting(
        "tp_comm_overlap", "stack", False, "--tp-comm-overlap",
        "Overlap every tensor-parallel collective with the GEMM it feeds or follows (megatron-core "
        "--tp-comm-overlap, torchtitan async TP; needs sequence parallelism).",
        None, "query", printed=lambda r: r.tp_comm_overlap and r.tp > 1,
    ),
    Setting(
        "stack", "stack", DEFAULT_STACK, "--stack",
        "Software stack whose overlap and fusion rules to apply: megatron-core, torchtitan or deepspeed (default: "
        "the launcher's, megatron-core without one).",
        "stack", "query", choices=STACK_NAMES,
    ),
    Setting(
        "ep", "axes", 1, "--ep", "Expert-parallel degree (routed models): experts split over ep ranks.", "ep",
        "cut", count=True,
    ),
    Setting(
        "precision", "precision", "bf16", "--precision",
        "GEMM precision of the layers' Linears: bf16, fp8 (per-tensor scaled, Hopper on) or mxfp8 (block-scaled, "
        "Blackwell).",
        "precision", "cut", choices=get_args(Precision),
    ),
    Setting(
        "memory_headroom", "schedule", 0.0, "--headroom",
        "--schedule auto without --memory-limit: the fraction of usable HBM its derived memory limit leaves free "
        "on every stage (recommend's --headroom).",
        None, "query",
    ),
    Setting(
        "jitter", "model", 0.0, "--jitter",
        "Straggler allowance: the coefficient of variation of each rank's work per step, e.g. 0.01; the step waits "
        "for the slowest GPU, c·busy·√(2 ln GPUs) more (default 0: none).",
        None, "query",
    ),
    Setting(
        "etp", "axes", 1, "--etp",
        "Expert tensor-parallel degree (routed models): each expert split over etp ranks.", "etp", "cut",
        count=True,
    ),
    Setting(
        "sequence_parallel", "memory", True, "--sequence-parallel", "Megatron sequence parallelism (t > 1).",
        "sequence_parallel", "fixed",
    ),
    Setting(
        "flash_attention", "memory", True, "--flash-attention", "Flash attention (no attention-score tensors).",
        "flash_attention", "fixed",
    ),
    Setting(
        "activation_model", "model", "itemised", "--activation-model",
        "itemised (this architecture) or korthikanti (GPT-3 formula).", "activation_model", "fixed",
        choices=get_args(ActivationModel),
    ),
    Setting(
        "overlap_grad_reduce", "stack", True, "--overlap-grad-reduce",
        "Gradient sync behind the last backward passes (Megatron --overlap-grad-reduce).", None, "fixed",
    ),
    Setting(
        "overlap_param_gather", "stack", True, "--overlap-param-gather",
        "Distributed optimizer's parameter all-gather behind the next forward.", None, "fixed",
    ),
    Setting(
        "fp8_param_gather", "precision", False, "--fp8-param-gather",
        "FP8 plans: keep the FP8 Linears' weights in FP8 only, no BF16 copy (Megatron's --fp8-param-gather).",
        "fp8_param_gather", "fixed",
    ),
    Setting(
        "fp8_swiglu_input", "precision", False, "--fp8-swiglu-input",
        "FP8 plans, routed models: also keep the experts' SwiGLU input in FP8 (DeepSeek-V3's framework, report "
        "§3.3.2; no launcher has it).",
        "fp8_swiglu_input", "fixed",
    ),
    Setting(
        "moment_dtype", "precision", "fp32", "--moment-dtype",
        "Adam's moments: fp32 (12 bytes of optimizer state per parameter) or bf16 (8).", "moment_dtype", "fixed",
        choices=get_args(MomentDtype),
    ),
    Setting(
        "memory_limit", "schedule", None, "--memory-limit",
        "--schedule auto: micro-batches each stage may hold in flight (default: the most whose activations fit in "
        "each stage's usable memory after its weights, gradients and optimizer states).",
        None, "fixed", count=True,
    ),
    Setting(
        "optimizer_offload_fraction", "memory", 0.0, "--optimizer-offload-fraction",
        "ZeRO-1: the fraction of each rank's optimizer states (FP32 master weights and Adam's moments) kept and "
        "updated in host memory by the CPU (megatron-core's hybrid device optimizer, Megatron-LM "
        "--optimizer-cpu-offload --optimizer-offload-fraction; default 0: none).",
        None, "fixed",
    ),
)  # fmt: skip
"""Every setting of a plan, in the order `pplan explain`'s command line spells them (new ones go last)."""

SETTING: dict[str, Setting] = {s.name: s for s in SETTINGS}
"""The declarations by field name."""
