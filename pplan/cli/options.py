"""Command-line options that more than one command takes, each declared once as a typed alias.

Choices are the core's own `Literal` types (typer reads them directly), so a choice exists in one place: adding a
recompute mode to `pplan.plan.knobs.Recompute` adds it to `--recompute` everywhere. One defaulting policy:
an option's default is written in its alias (so `--help` shows it); a command that needs to know which values the
user left at their defaults (`explain` prints them as assumptions) asks `defaulted`. Range checks live in the core
request types (`PlanRequest`, `SearchRequest`), so the API and the CLI refuse the same inputs with the same line.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

import typer

from pplan.errors import ConfigError
from pplan.plan.knobs import (
    DEFAULT_RECOMPUTE_MODULES,
    MOE_OFFLOAD_MODULES,
    ActivationModel,
    DurationModel,
    GradDtype,
    OffloadModule,
    Recompute,
    RecomputeMethod,
    RecomputeModule,
)
from pplan.profiles.stacks import StackName

DEFAULT_MODEL = "llama3-70b"
DEFAULT_HARDWARE = "h100-sxm-80gb"
DEFAULT_GPUS = 2048
DEFAULT_GLOBAL_BATCH = 1024
"""pplan's default example, shared by every planning command: Llama 3 70B on 2,048 H100s with a global batch of
1,024 sequences (`explain` adds t = 8, p = 4, b = 1 and 1F1B, so d = 64 and m = 16)."""

ModelOpt = Annotated[
    str,
    typer.Option(
        "--model", rich_help_panel="Query", help="Bundled model name, a .toml file or a HF config.json."
    ),
]
HardwareOpt = Annotated[
    str, typer.Option("--hardware", rich_help_panel="Query", help="Bundled hardware name or a .toml file.")
]
GpusOpt = Annotated[int, typer.Option("--gpus", rich_help_panel="Query", help="Total GPUs.")]
GlobalBatchOpt = Annotated[
    int, typer.Option("--global-batch", rich_help_panel="Query", help="Global batch, in sequences.")
]
SeqLenOpt = Annotated[
    int | None,
    typer.Option("--seq-len", rich_help_panel="Query", help="Sequence length (default: the model's)."),
]
GradDtypeOpt = Annotated[
    GradDtype,
    typer.Option(
        "--grad-dtype", rich_help_panel="Memory knobs", help="Gradient dtype: fp32 (18 B/param) or bf16 (16)."
    ),
]
RecomputeOpt = Annotated[
    Recompute, typer.Option("--recompute", rich_help_panel="Memory knobs", help="Activation recomputation.")
]
TpCommOverlapOpt = Annotated[
    bool,
    typer.Option(
        "--tp-comm-overlap",
        rich_help_panel="Stack",
        help="Overlap every tensor-parallel collective with the GEMM it feeds or follows (megatron-core "
        "--tp-comm-overlap, torchtitan async TP; needs sequence parallelism).",
    ),
]
JitterOpt = Annotated[
    float,
    typer.Option(
        "--jitter",
        rich_help_panel="Stack",
        help="Straggler allowance: the coefficient of variation of each rank's work per step, e.g. 0.01; the step "
        "waits for the slowest GPU, c·busy·√(2 ln GPUs) more (default 0: none).",
    ),
]
StackOpt = Annotated[
    StackName | None,
    typer.Option(
        "--stack",
        rich_help_panel="Stack",
        help="Software stack whose overlap and fusion rules to apply: megatron-core, torchtitan or deepspeed "
        "(default: the launcher's, megatron-core without one).",
    ),
]
RecomputeLayersOpt = Annotated[
    int | None,
    typer.Option(
        "--recompute-layers",
        rich_help_panel="Memory knobs",
        help="Full recompute: N layers per chunk (--recompute-method block) or layers per checkpoint (uniform; "
        "default 1).",
    ),
]
RecomputeMethodOpt = Annotated[
    RecomputeMethod,
    typer.Option(
        "--recompute-method",
        rich_help_panel="Memory knobs",
        help="Full recompute: uniform (every layer, checkpoints of N layers) or block (the first N layers of "
        "every chunk, the rest kept).",
    ),
]
RecomputeModulesOpt = Annotated[
    str,
    typer.Option(
        "--recompute-modules",
        rich_help_panel="Memory knobs",
        help="Selective recompute: comma list of core_attn, layernorm, mlp (Megatron-LM --recompute-modules).",
    ),
]
OffloadModulesOpt = Annotated[
    str | None,
    typer.Option(
        "--offload-modules",
        rich_help_panel="Memory knobs",
        help="Activation offload to host memory: comma list of attn_norm, qkv_linear, core_attn, attn_proj, "
        "mlp_norm (Megatron-LM --offload-modules; default: no offload).",
    ),
]
ActivationModelOpt = Annotated[
    ActivationModel,
    typer.Option(
        "--activation-model",
        rich_help_panel="Model of the plan",
        help="itemised (this architecture) or korthikanti (GPT-3 formula).",
    ),
]
PassDurationsOpt = Annotated[
    DurationModel,
    typer.Option(
        "--pass-durations",
        rich_help_panel="Model of the plan",
        help="Simulate the schedule with analytic pass times and link latencies, or unit passes.",
    ),
]
RECOMPUTE_CHOICES: tuple[Recompute, ...] = get_args(Recompute)
RECOMPUTE_MODULE_CHOICES: tuple[RecomputeModule, ...] = get_args(RecomputeModule)
DEFAULT_RECOMPUTE_MODULES_TEXT = ",".join(DEFAULT_RECOMPUTE_MODULES)
GRAD_DTYPE_CHOICES: tuple[GradDtype, ...] = get_args(GradDtype)
OFFLOAD_MODULE_CHOICES: tuple[OffloadModule, ...] = get_args(OffloadModule)


def defaulted(ctx: typer.Context, names: tuple[str, ...], values: dict[str, Any]) -> list[str]:
    """`--flag value` for each of `names` (parameter names, in that order) the user left at its default."""
    out = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "DEFAULT":
            out.append(f"--{name.replace('_', '-')} {values[name]}")
    return out


def comma_list(flag: str, text: str | None, allowed: tuple[str, ...]) -> tuple[str, ...] | None:
    """A comma-separated choice list (`--recompute none,full`), each item one of `allowed`; None if not given."""
    if text is None:
        return None
    values = tuple(x.strip().lower() for x in text.split(",") if x.strip())
    bad = [x for x in values if x not in allowed]
    if bad or not values:
        raise ConfigError(
            flag, f"unknown value(s) {', '.join(bad) or text!r}", f"use a comma list of {', '.join(allowed)}"
        )
    return values


def recompute_modules(text: str) -> tuple[RecomputeModule, ...]:
    """`--recompute-modules core_attn,mlp` as the core's tuple."""
    values = comma_list("--recompute-modules", text, RECOMPUTE_MODULE_CHOICES) or DEFAULT_RECOMPUTE_MODULES
    return tuple(m for m in RECOMPUTE_MODULE_CHOICES if m in values)


def offload_modules(text: str | None) -> tuple[OffloadModule, ...]:
    """`--offload-modules qkv_linear,core_attn` as the core's tuple (empty when not given); the MoE modules pass
    through to the core, which refuses them with its own reason."""
    values = comma_list("--offload-modules", text, (*OFFLOAD_MODULE_CHOICES, *MOE_OFFLOAD_MODULES)) or ()
    return tuple(values)  # type: ignore[arg-type]  # the core checks each (PlanRequest)
