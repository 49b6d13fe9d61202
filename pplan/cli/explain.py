"""`pplan explain`: one configuration, every number with its derivation; and `pplan schema` for the JSON shape."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from pplan.cli.app import JsonAliasOpt, app, console, json_text
from pplan.cli.files import FORCE_FLAG, FORCE_HELP, check_outputs, input_path, write_output
from pplan.cli.options import (
    DEFAULT_GLOBAL_BATCH,
    DEFAULT_GPUS,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    HardwareOpt,
    ModelOpt,
    PassDurationsOpt,
    defaulted,
)
from pplan.cli.signature import explain_parameters, request_values, with_settings
from pplan.documents.names import DOCUMENT_NAMES, INPUT_NAMES
from pplan.errors import ConfigError
from pplan.launchers.names import Launcher
from pplan.profiles.stacks import stack_for_launcher

if TYPE_CHECKING:
    from pplan.cost.pipeline import PipelineRun
    from pplan.documents.explain import ExplainReport
    from pplan.plan.records import Plan, PlanRequest
    from pplan.profiles.hardware_spec import HardwareSpec
    from pplan.profiles.model_spec import ModelSpec

DEFAULT_TP = 8
DEFAULT_PP = 4
DEFAULT_MICRO_BATCH = 1
DEFAULT_SCHEDULE = "1f1b"
EXAMPLE_OPTIONS = ("model", "hardware", "gpus", "global_batch", "micro_batch", "tp", "pp", "schedule")
"""The options of pplan's default example; those left at their defaults are printed as assumptions."""

DistributedOptimizerOpt = Annotated[
    bool,
    typer.Option(
        "--distributed-optimizer",
        rich_help_panel="Memory knobs",
        help="Shard optimizer states over d (ZeRO-1).",
    ),
]
TrainTokensOpt = Annotated[
    float | None,
    typer.Option(rich_help_panel="Query", help="Token budget to report the time to train, e.g. 15e12."),
]
CsvOpt = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel="Output",
        help="Also write the plan's per-rank action lists as torch's _load_csv compute-only CSV (for "
        "_PipelineScheduleRuntime; with --schedule auto, the lists built for this plan).",
    ),
]
PlanSvgOpt = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel="Output",
        help="Also write a picture of the plan as an SVG file: memory per stage against the usable memory, "
        "where the step time goes, and the pipeline timeline.",
    ),
]
FromLogOpt = Annotated[
    Path | None,
    typer.Option(
        "--from-log",
        rich_help_panel="Query",
        help="Rebuild the plan from a Megatron-LM, NeMo 2 / Megatron-Bridge or torchtitan training log and print "
        "predicted against measured (flags fill what the log lacks; docs/logs.md).",
    ),
]
ForceOpt = Annotated[bool, typer.Option(FORCE_FLAG, rich_help_panel="Output", help=FORCE_HELP)]
AllStagesOpt = Annotated[bool, typer.Option(rich_help_panel="Output", help="Show every stage, not a sample.")]
ExplainJsonOpt = JsonAliasOpt
ExplainFormatOpt = Annotated[
    Literal["table", "json", Launcher] | None,
    typer.Option(
        "--format",
        rich_help_panel="Output",
        help="table, json (the pplan.explain/2 document), or this plan's launcher settings: megatron (flags), "
        "torchtitan (0.3.x arguments), torchtitan@0.2 (TOML) or megatron-bridge (recipe overrides).",
        show_default=False,
    ),
]


EXPLAIN_ORDER = (
    "ctx", "model", "hardware", "gpus", "global_batch", "seq_len", "tp", "pp", "vp", "cp", "ep", "etp", "precision",
    "fp8_param_gather", "fp8_swiglu_input", "moment_dtype", "micro_batch", "schedule", "memory_limit",
    "memory_headroom", "recompute", "recompute_layers", "recompute_method", "recompute_modules", "offload_modules",
    "offload_layers",
    "sequence_parallel", "flash_attention", "distributed_optimizer", "zero_stage", "grad_dtype", "activation_model",
    "first_stage_layers", "last_stage_layers", "overlap_grad_reduce", "overlap_param_gather", "overlap_p2p_comm",
    "shard_group", "reshard_after_forward", "stack", "tp_comm_overlap", "jitter", "optimizer_offload_fraction",
    "train_tokens", "from_log", "pass_durations", "csv", "svg", "force", "all_stages", "as_json", "launcher_format",
)  # fmt: skip
"""explain's options in `--help` order (pplan.cli.signature: a setting not named here ends its panel)."""

EXPLAIN_DEFAULTS = {
    "tp": DEFAULT_TP, "pp": DEFAULT_PP, "gpus": DEFAULT_GPUS, "global_batch": DEFAULT_GLOBAL_BATCH, "stack": None,
}  # fmt: skip
"""pplan's default example where it is not the settings' defaults; the stack defaults to the launcher's."""


@app.command()
@with_settings(explain_parameters(EXPLAIN_DEFAULTS), EXPLAIN_ORDER)
def explain(
    ctx: typer.Context,
    model: ModelOpt = DEFAULT_MODEL,
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    distributed_optimizer: DistributedOptimizerOpt = False,
    train_tokens: TrainTokensOpt = None,
    from_log: FromLogOpt = None,
    pass_durations: PassDurationsOpt = "analytic",
    csv: CsvOpt = None,
    svg: PlanSvgOpt = None,
    force: ForceOpt = False,
    all_stages: AllStagesOpt = False,
    as_json: ExplainJsonOpt = False,
    launcher_format: ExplainFormatOpt = None,
    **settings: Any,
) -> None:
    """Explain one configuration: memory per stage, traffic, bubble, and every assumption."""
    as_json = as_json or launcher_format == "json"
    launcher = None if launcher_format in ("table", "json") else cast("Launcher | None", launcher_format)
    from pplan import launchers  # the core loads only when a command runs, not for --help
    from pplan.explain import explain_with_run
    from pplan.plan.configuration import make_plan
    from pplan.render.explain import render_explain
    from pplan.schedules import to_torch_csv

    if from_log is not None:
        from pplan.cli.fromlog import explain_from_log

        for flag, value in (("--format", launcher), ("--csv", csv), ("--svg", svg)):
            if value is not None:
                raise ConfigError(flag, "does not apply to --from-log", f"drop {flag}")
        explain_from_log(ctx, str(from_log), model, hardware, settings, request_values(settings), as_json)
        return
    model_spec, hardware_spec, request, notes = prepared(
        ctx, model, hardware, distributed_optimizer, train_tokens, launcher, settings
    )
    if launcher is not None and svg is not None:
        raise ConfigError(
            "--svg", f"draws the explained plan, --format {launcher} prints launcher settings instead",
            "drop one of them",
        )  # fmt: skip
    if launcher is not None:
        if as_json:
            raise ConfigError(
                "--json", f"asks for the JSON document, --format {launcher} for launcher settings",
                "drop one of them",
            )  # fmt: skip
        plan = make_plan(model_spec, request)
        print(launchers.launcher_text(launcher, model_spec, plan))
        return
    if csv is not None or svg is not None:
        check_outputs(
            {"--csv": csv, "--svg": svg},
            {"--model": input_path(model), "--hardware": input_path(hardware)},
            force,
        )
    if csv is not None:
        _check_csv_size(make_plan(model_spec, request))
    report, plan, run = explain_with_run(model_spec, hardware_spec, request, pass_durations, train_tokens)
    if csv is not None:
        lists = run.lists if run.lists is not None else plan.explicit_schedule()
        write_output(csv, to_torch_csv(lists), "--csv", force)
    pictured = report
    report = with_notes(report, notes)
    if as_json:
        print(json_text(report.model_dump(mode="json", by_alias=True)))
    else:
        console.print(render_explain(report, all_stages))
    if svg is not None:  # after stdout: a picture that cannot be written costs only the picture
        sys.stdout.flush()
        write_output(svg, _plan_picture(model_spec, hardware_spec, plan, run, pictured), "--svg", force)


def prepared(
    ctx: typer.Context,
    model: str,
    hardware: str,
    distributed_optimizer: bool,
    train_tokens: float | None,
    launcher_format: Launcher | None,
    settings: dict[str, Any],
) -> tuple[ModelSpec, HardwareSpec, PlanRequest, list[str]]:
    """explain's options checked (for the command and the Python API, pplan.api): the profiles, the plan request
    (with its stack release's knobs) and the assumptions the report adds (the defaults of pplan's example that were
    used, the release's knobs)."""
    from pplan.explain import check_train_tokens
    from pplan.profiles.catalog import load_hardware, load_model
    from pplan.schedules import schedule_family

    used = defaulted(ctx, EXAMPLE_OPTIONS, {"model": model, "hardware": hardware, **settings})
    request = _request(settings, distributed_optimizer, launcher_format)
    if request.memory_headroom and (
        request.memory_limit is not None or not schedule_family(request.schedule).tuned
    ):
        raise ConfigError(
            "--headroom", "sets the memory limit --schedule auto derives, when no --memory-limit is given",
            "add --schedule auto and drop --memory-limit, or drop --headroom",
        )  # fmt: skip
    check_train_tokens(train_tokens)
    model_spec = load_model(model)
    hardware_spec = load_hardware(hardware)
    request, release_knobs = _with_release(ctx, request, model_spec, hardware_spec)
    notes = [release_knobs] if release_knobs else []
    if used:
        notes.insert(0, "pplan's default example (pass the flag to change it): " + ", ".join(used))
    return model_spec, hardware_spec, request, notes


def with_notes(report: ExplainReport, notes: list[str]) -> ExplainReport:
    """`report` with `notes` leading its assumptions."""
    if not notes:
        return report
    return report.model_copy(update={"assumptions": [*notes, *report.assumptions]})


def _request(settings: dict[str, Any], distributed_optimizer: bool, launcher: Launcher | None) -> PlanRequest:
    """The plan request of explain's setting options: `--distributed-optimizer` is ZeRO-1, the stack defaults to
    the `--format` launcher's."""
    from pplan.plan.records import PlanRequest

    zero_stage = settings["zero_stage"]
    if distributed_optimizer and zero_stage not in (0, 1):
        raise ConfigError(
            "--distributed-optimizer", f"conflicts with --zero-stage {zero_stage}", "pass one of them"
        )
    values = request_values(settings)
    stack = values["stack"] or stack_for_launcher(launcher.split("@")[0] if launcher else None)
    changes = {"zero_stage": 1 if distributed_optimizer else zero_stage, "stack": stack}
    return PlanRequest(**values | changes)


def _with_release(
    ctx: typer.Context, request: PlanRequest, model: ModelSpec, hardware: HardwareSpec
) -> tuple[PlanRequest, str | None]:
    """`request` with the knobs its stack release's recipe runs (pplan.profiles.releases) in place of the settings
    the user left at their defaults, and the assumption saying which; unchanged for a stack without releases."""
    from dataclasses import asdict, replace

    from pplan.plan.settings import SETTING, SETTINGS
    from pplan.profiles.releases import release_changes

    if (
        request.release is None
    ):  # a release priced only when named (module docstring of pplan.profiles.releases)
        return request, None
    defaulted = [s.name for s in SETTINGS if _source(ctx, s.name) == "DEFAULT"]
    changes = release_changes(asdict(request), defaulted, model.name, hardware.name, model.moe is not None)
    if not changes:
        return request, None
    shown = ", ".join(f"{SETTING[k].spelled(v)}" for k, v in sorted(changes.items()))
    note = f"{request.stack} {request.release}'s recipe knobs where no flag was given: {shown}"
    return replace(request, **changes), note


def _source(ctx: typer.Context, name: str) -> str | None:
    source = ctx.get_parameter_source(name)
    return source.name if source is not None else None


def _check_csv_size(plan: Plan) -> None:
    """Refuse --csv for a schedule over `pplan schedule`'s cap on stage-micro-batches, before any work."""
    from pplan.schedules.limits import MAX_STAGE_MICROBATCHES  # only when a CSV is asked for (start-up time)

    size = len(plan.placement) * plan.num_microbatches
    if size > MAX_STAGE_MICROBATCHES:
        raise ConfigError(
            "--csv",
            f"the plan's lists hold p·v·m = {size:,} stage-micro-batches, over pplan's cap of "
            f"{MAX_STAGE_MICROBATCHES:,} for exporting one schedule",
            "drop --csv, or take a smaller global batch or fewer pipeline ranks",
        )


def _plan_picture(
    model: ModelSpec, hardware: HardwareSpec, plan: Plan, run: PipelineRun, report: ExplainReport
) -> str:
    """The --svg picture (pplan.render.plan_svg): the report, and the plan's step simulated once more to keep its
    timeline (the run keeps only its summary), with the lists and durations the run played; over `pplan
    schedule`'s cap on stage-micro-batches the picture says so instead of drawing the timeline."""
    from pplan.cost.pipeline import stage_inputs
    from pplan.render.plan_svg import plan_svg
    from pplan.schedules.limits import MAX_STAGE_MICROBATCHES  # only when a picture is asked for (start-up)
    from pplan.schedules.timeline import Durations, simulate

    size = len(plan.placement) * plan.num_microbatches
    if size > MAX_STAGE_MICROBATCHES:
        note = (
            f"not drawn: the plan's lists hold p·v·m = {size:,} stage-micro-batches, over pplan's cap of "
            f"{MAX_STAGE_MICROBATCHES:,} for drawing one schedule (pplan schedule's)"
        )
        return plan_svg(report, None, note)
    lists = run.lists if run.lists is not None else plan.explicit_schedule()
    if run.duration_model == "unit":
        return plan_svg(report, simulate(lists, Durations(), 0.0), unit="")
    inputs = stage_inputs(model, hardware, plan)
    return plan_svg(report, simulate(lists, inputs.durations, inputs.latency), unit="s")


@app.command()
def schema(
    name: Annotated[
        str | None,
        typer.Argument(
            help=f"A document ({', '.join(DOCUMENT_NAMES)}) or an input profile ({', '.join(INPUT_NAMES)}); "
            "without one, the list."
        ),
    ] = None,
    list_all: Annotated[
        bool, typer.Option("--list", help="List the names, with each document's version string.")
    ] = False,
) -> None:
    """Print the JSON Schema of a pplan JSON document or input profile; without a name, list them."""
    from pplan.documents.base import version_of
    from pplan.documents.registry import DOCUMENTS, INPUTS

    if list_all and name is not None:
        raise ConfigError(
            "--list", f"lists every schema and takes no name, got {name!r}", "drop NAME or --list"
        )
    if name is None or list_all:
        width = max(len(key) for key in (*DOCUMENTS, *INPUTS))
        for key, document in DOCUMENTS.items():
            print(f"{key:<{width}}  {version_of(document)}")
        for key, (_, what) in INPUTS.items():
            print(f"{key:<{width}}  input: {what}")
        return
    if name in INPUTS:  # what a profile file may hold: validation mode (defaults optional)
        print(json_text(INPUTS[name][0].model_json_schema(by_alias=True, mode="validation")))
        return
    if name not in DOCUMENTS:
        choices = ", ".join([*DOCUMENTS, *INPUTS])
        raise ConfigError("schema", f"unknown document {name!r}", f"use one of: {choices}")
    print(json_text(DOCUMENTS[name].model_json_schema(by_alias=True, mode="serialization")))
