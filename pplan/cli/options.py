"""Command-line options that more than one command takes, each declared once as a typed alias.

A plan setting's flag, help and panel are its declaration's (`setting_option`, pplan.plan.settings). Choices are
the core's own `Literal` types (typer reads them directly), so a choice exists in one place: adding a
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
from pplan.plan.settings import SETTING, Concern
from pplan.profiles.stacks import StackName

DEFAULT_MODEL = "llama3-70b"
DEFAULT_HARDWARE = "h100-sxm-80gb"
DEFAULT_GPUS = 2048
DEFAULT_GLOBAL_BATCH = 1024
"""pplan's default example, shared by every planning command: Llama 3 70B on 2,048 H100s with a global batch of
1,024 sequences (`explain` adds t = 8, p = 4, b = 1 and 1F1B, so d = 64 and m = 16)."""

PANELS: dict[Concern, str] = {
    "query": "Query",
    "axes": "Plan axes",
    "schedule": "Schedule",
    "precision": "Precision",
    "memory": "Memory knobs",
    "stack": "Stack",
    "model": "Model of the plan",
}
"""The help panel of each concern's options (pplan.plan.settings)."""


def setting_option(name: str) -> Any:
    """The typer option of the plan setting `name`, from its declaration (pplan.plan.settings): its flag (and
    `--no-…` for a boolean that defaults to true), its concern's panel and its help."""
    setting = SETTING[name]
    flags = f"{setting.flag}/--no-{setting.flag[2:]}" if setting.default is True else setting.flag
    return typer.Option(flags, rich_help_panel=PANELS[setting.concern], help=setting.help)


ModelOpt = Annotated[
    str,
    typer.Option(
        "--model", rich_help_panel="Query", help="Bundled model name, a .toml file or a HF config.json."
    ),
]
HardwareOpt = Annotated[
    str, typer.Option("--hardware", rich_help_panel="Query", help="Bundled hardware name or a .toml file.")
]
GpusOpt = Annotated[int, setting_option("gpus")]
GlobalBatchOpt = Annotated[int, setting_option("global_batch")]
SeqLenOpt = Annotated[int | None, setting_option("seq_len")]
GradDtypeOpt = Annotated[GradDtype, setting_option("grad_dtype")]
RecomputeOpt = Annotated[Recompute, setting_option("recompute")]
TpCommOverlapOpt = Annotated[bool, setting_option("tp_comm_overlap")]
JitterOpt = Annotated[float, setting_option("jitter")]
StackOpt = Annotated[StackName | None, setting_option("stack")]
RecomputeLayersOpt = Annotated[int | None, setting_option("recompute_layers")]
RecomputeMethodOpt = Annotated[RecomputeMethod, setting_option("recompute_method")]
RecomputeModulesOpt = Annotated[str, setting_option("recompute_modules")]
OffloadModulesOpt = Annotated[str | None, setting_option("offload_modules")]
ActivationModelOpt = Annotated[ActivationModel, setting_option("activation_model")]
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
