"""`pplan explain`: one configuration, every number with its derivation; and `pplan schema` for the JSON shape."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pplan.cli.app import app, console, json_text
from pplan.cli.files import FORCE_FLAG, FORCE_HELP, check_outputs, input_path, write_output
from pplan.cli.options import (
    DEFAULT_GLOBAL_BATCH,
    DEFAULT_GPUS,
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    DEFAULT_RECOMPUTE_MODULES_TEXT,
    ActivationModelOpt,
    GlobalBatchOpt,
    GpusOpt,
    GradDtypeOpt,
    HardwareOpt,
    JitterOpt,
    ModelOpt,
    OffloadModulesOpt,
    PassDurationsOpt,
    RecomputeLayersOpt,
    RecomputeMethodOpt,
    RecomputeModulesOpt,
    RecomputeOpt,
    SeqLenOpt,
    StackOpt,
    TpCommOverlapOpt,
    defaulted,
    setting_option,
)
from pplan.cli.options import offload_modules as parse_offload_modules
from pplan.cli.options import recompute_modules as parse_recompute_modules
from pplan.errors import ConfigError
from pplan.launchers.names import Launcher
from pplan.profiles.stacks import stack_for_launcher

if TYPE_CHECKING:
    from pplan.cost.pipeline import PipelineRun
    from pplan.documents.explain import ExplainReport
    from pplan.plan.configuration import Plan
    from pplan.profiles.hardware_spec import HardwareSpec
    from pplan.profiles.model_spec import ModelSpec

DEFAULT_TP = 8
DEFAULT_PP = 4
DEFAULT_MICRO_BATCH = 1
DEFAULT_SCHEDULE = "1f1b"
EXAMPLE_OPTIONS = ("model", "hardware", "gpus", "global_batch", "micro_batch", "tp", "pp", "schedule")
"""The options of pplan's default example; those left at their defaults are printed as assumptions."""


@app.command()
def explain(
    ctx: typer.Context,
    model: ModelOpt = DEFAULT_MODEL,
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    gpus: GpusOpt = DEFAULT_GPUS,
    global_batch: GlobalBatchOpt = DEFAULT_GLOBAL_BATCH,
    seq_len: SeqLenOpt = None,
    tp: Annotated[int, setting_option("tp")] = DEFAULT_TP,
    pp: Annotated[int, setting_option("pp")] = DEFAULT_PP,
    vp: Annotated[int | None, setting_option("vp")] = None,
    cp: Annotated[int, setting_option("cp")] = 1,
    ep: Annotated[int, setting_option("ep")] = 1,
    etp: Annotated[int, setting_option("etp")] = 1,
    precision: Annotated[str, setting_option("precision")] = "bf16",
    fp8_param_gather: Annotated[bool, setting_option("fp8_param_gather")] = False,
    fp8_swiglu_input: Annotated[bool, setting_option("fp8_swiglu_input")] = False,
    moment_dtype: Annotated[str, setting_option("moment_dtype")] = "fp32",
    micro_batch: Annotated[int, setting_option("micro_batch")] = DEFAULT_MICRO_BATCH,
    schedule: Annotated[str, setting_option("schedule")] = DEFAULT_SCHEDULE,
    memory_limit: Annotated[int | None, setting_option("memory_limit")] = None,
    headroom: Annotated[float, setting_option("memory_headroom")] = 0.0,
    recompute: RecomputeOpt = "none",
    recompute_layers: RecomputeLayersOpt = None,
    recompute_method: RecomputeMethodOpt = "uniform",
    recompute_modules: RecomputeModulesOpt = DEFAULT_RECOMPUTE_MODULES_TEXT,
    offload_modules: OffloadModulesOpt = None,
    sequence_parallel: Annotated[bool, setting_option("sequence_parallel")] = True,
    flash_attention: Annotated[bool, setting_option("flash_attention")] = True,
    distributed_optimizer: Annotated[
        bool,
        typer.Option(
            "--distributed-optimizer",
            rich_help_panel="Memory knobs",
            help="Shard optimizer states over d (ZeRO-1).",
        ),
    ] = False,
    zero_stage: Annotated[int, setting_option("zero_stage")] = 0,
    grad_dtype: GradDtypeOpt = "fp32",
    activation_model: ActivationModelOpt = "itemised",
    first_stage_layers: Annotated[int | None, setting_option("first_stage_layers")] = None,
    last_stage_layers: Annotated[int | None, setting_option("last_stage_layers")] = None,
    overlap_grad_reduce: Annotated[bool, setting_option("overlap_grad_reduce")] = True,
    overlap_param_gather: Annotated[bool, setting_option("overlap_param_gather")] = True,
    overlap_p2p_comm: Annotated[bool, setting_option("overlap_p2p_comm")] = True,
    shard_group: Annotated[int | None, setting_option("shard_group")] = None,
    reshard_after_forward: Annotated[bool, setting_option("reshard_after_forward")] = True,
    stack: StackOpt = None,
    tp_comm_overlap: TpCommOverlapOpt = False,
    jitter: JitterOpt = 0.0,
    optimizer_offload_fraction: Annotated[float, setting_option("optimizer_offload_fraction")] = 0.0,
    train_tokens: Annotated[
        float | None,
        typer.Option(rich_help_panel="Query", help="Token budget to report the time to train, e.g. 15e12."),
    ] = None,
    pass_durations: PassDurationsOpt = "analytic",
    csv: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="Output",
            help="Also write the plan's per-rank action lists as torch's _load_csv compute-only CSV (for "
            "_PipelineScheduleRuntime; with --schedule auto, the lists built for this plan).",
        ),
    ] = None,
    svg: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="Output",
            help="Also write a picture of the plan as an SVG file: memory per stage against the usable memory, "
            "where the step time goes, and the pipeline timeline.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option(FORCE_FLAG, rich_help_panel="Output", help=FORCE_HELP)] = False,
    all_stages: Annotated[
        bool, typer.Option(rich_help_panel="Output", help="Show every stage, not a sample.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", rich_help_panel="Output", help="Emit the pplan.explain/2 JSON document.")
    ] = False,
    launcher_format: Annotated[
        Launcher | None,
        typer.Option(
            "--format",
            rich_help_panel="Output",
            help="megatron (flags), torchtitan (0.3.x arguments) or torchtitan@0.2 (TOML) for this plan, "
            "instead of tables.",
        ),
    ] = None,
) -> None:
    """Explain one configuration: memory per stage, traffic, bubble, and every assumption."""
    from pplan import launchers  # the core loads only when a command runs, not for --help
    from pplan.explain import check_train_tokens, explain_with_run
    from pplan.plan.configuration import PlanRequest, make_plan
    from pplan.profiles.catalog import load_hardware, load_model
    from pplan.render.explain import render_explain
    from pplan.schedules import schedule_family, to_torch_csv

    used = defaulted(ctx, EXAMPLE_OPTIONS, locals())
    if distributed_optimizer and zero_stage not in (0, 1):
        raise ConfigError(
            "--distributed-optimizer", f"conflicts with --zero-stage {zero_stage}", "pass one of them"
        )
    request = PlanRequest(
        gpus=gpus,
        global_batch=global_batch,
        micro_batch=micro_batch,
        tp=tp,
        pp=pp,
        vp=vp,
        cp=cp,
        ep=ep,
        etp=etp,
        precision=precision,  # type: ignore[arg-type]  # PlanRequest checks it (one-line error)
        fp8_param_gather=fp8_param_gather,
        fp8_swiglu_input=fp8_swiglu_input,
        moment_dtype=moment_dtype,  # type: ignore[arg-type]  # PlanRequest checks it (one-line error)
        schedule=schedule,
        memory_limit=memory_limit,
        memory_headroom=headroom,
        jitter=jitter,
        optimizer_offload_fraction=optimizer_offload_fraction,
        seq_len=seq_len,
        recompute=recompute,
        recompute_layers=recompute_layers,
        recompute_method=recompute_method,
        recompute_modules=parse_recompute_modules(recompute_modules),
        sequence_parallel=sequence_parallel,
        flash_attention=flash_attention,
        zero_stage=1 if distributed_optimizer else zero_stage,
        grad_dtype=grad_dtype,
        activation_model=activation_model,
        first_stage_layers=first_stage_layers,
        last_stage_layers=last_stage_layers,
        overlap_grad_reduce=overlap_grad_reduce,
        overlap_param_gather=overlap_param_gather,
        offload_modules=parse_offload_modules(offload_modules),
        shard_group=shard_group,
        reshard_after_forward=reshard_after_forward,
        overlap_p2p_comm=overlap_p2p_comm,
        tp_comm_overlap=tp_comm_overlap,
        stack=stack or stack_for_launcher(launcher_format.split("@")[0] if launcher_format else None),
    )
    if headroom and (memory_limit is not None or not schedule_family(schedule).tuned):
        raise ConfigError(
            "--headroom", "sets the memory limit --schedule auto derives, when no --memory-limit is given",
            "add --schedule auto and drop --memory-limit, or drop --headroom",
        )  # fmt: skip
    check_train_tokens(train_tokens)
    model_spec = load_model(model)
    hardware_spec = load_hardware(hardware)
    if launcher_format is not None and svg is not None:
        raise ConfigError(
            "--svg", f"draws the explained plan, --format {launcher_format} prints launcher settings instead",
            "drop one of them",
        )  # fmt: skip
    if launcher_format is not None:
        if as_json:
            raise ConfigError(
                "--json", f"asks for the JSON document, --format {launcher_format} for launcher settings",
                "drop one of them",
            )  # fmt: skip
        plan = make_plan(model_spec, request)
        print(launchers.launcher_text(launcher_format, model_spec, plan))
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
    if svg is not None:
        write_output(svg, _plan_picture(model_spec, hardware_spec, plan, run, report), "--svg", force)
    if used:
        note = "pplan's default example (pass the flag to change it): " + ", ".join(used)
        report = report.model_copy(update={"assumptions": [note, *report.assumptions]})
    if as_json:
        print(json_text(report.model_dump(mode="json", by_alias=True)))
    else:
        console.print(render_explain(report, all_stages))


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
            help="A document (explain, recommend, schedule, bench, validate) or an input profile (hardware, "
            "model); without one, the list."
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
