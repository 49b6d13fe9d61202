"""`pplan schedule`: draw one schedule's simulated timeline; `pplan bubble`: bubble against m for several schedules.

Inputs are checked before any work: durations finite and within `MAX_DURATION`, the problem within
`pplan.schedules.limits`' caps (`MAX_PIPELINE_RANKS`, `MAX_STAGE_MICROBATCHES` and, for auto,
`MAX_AUTO_STAGE_MICROBATCHES` for `schedule`; `MAX_BUBBLE_WORK` for `bubble`), and the output
files by `pplan.cli.files.check_outputs`; each refusal is one `ConfigError` naming the flag. The core simulates
(`pplan.schedules.timeline.simulate`, `pplan.schedules.bubble.bubble_curves`), `pplan.schedules.document_fields`
gives the --json document's fields (`pplan.documents.schedule`) and `pplan.render.schedule` draws what it is handed.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pplan.cli.app import JsonAliasOpt, TableOrJson, app, asks_json, console, format_option, json_text
from pplan.cli.files import FORCE_FLAG, FORCE_HELP, check_outputs, input_path, write_output
from pplan.errors import ConfigError, PplanError, ProfileError
from pplan.schedules import get_schedule, schedule_family, to_torch_csv
from pplan.schedules.auto import AUTO_NAME, auto_schedule
from pplan.schedules.bubble import DEFAULT_CURVES, BubbleCurve, Measure, bubble_curves
from pplan.schedules.limits import (
    MAX_AUTO_STAGE_MICROBATCHES,
    MAX_BUBBLE_WORK,
    MAX_PIPELINE_RANKS,
    MAX_STAGE_MICROBATCHES,
)
from pplan.schedules.timeline import Durations, Timeline, simulate

if TYPE_CHECKING:
    from pplan.documents.bubble import BubbleDocument
    from pplan.profiles.durations import StageDurationsSpec


MAX_DURATION = 1e12
"""Largest pass duration or hop latency `pplan schedule` takes, in whatever unit the durations are given (a
trillion: 1,000 s in nanoseconds). Keeps every start, end and sum over a step finite."""


def check_duration(flag: str, value: float, what: str = "") -> None:
    """Refuse a duration that is not a finite number in [0, MAX_DURATION] (`what` names it inside a file)."""
    if math.isfinite(value) and 0 <= value <= MAX_DURATION:
        return
    name = f"{what} " if what else ""
    raise ConfigError(
        flag,
        f"{name}must be a finite number from 0 to {MAX_DURATION:g}, got {value:g}",
        f"give {what or flag} as a time ≥ 0 in one consistent unit",
    )


def _check_file_durations(value: float | list[float], stages: int, name: str) -> float | list[float]:
    """A durations-file entry: one number or one per stage, each checked like the flags."""
    if isinstance(value, list):
        if len(value) != stages:
            raise ConfigError(
                "--durations",
                f"{name} lists {len(value)} durations for {stages} stages",
                f"give {stages} values",
            )
        for k, x in enumerate(value):
            check_duration("--durations", x, f"{name}[{k}]")
    else:
        check_duration("--durations", value, name)
    return value


def _load_durations(path: Path) -> StageDurationsSpec:
    """The durations file, its errors named after `--durations` (the loader names the file and the key)."""
    from pplan.profiles.catalog import load_stage_durations  # pydantic loads only when a file is read

    try:
        return load_stage_durations(str(path))
    except PplanError as err:
        if err.field == "--durations":
            raise
        raise ProfileError("--durations", err.one_line()) from err


def check_schedule_size(name: str, pp: int, microbatches: int, vp: int | None, max_ranks: int) -> None:
    """Refuse, before building anything, a schedule over `max_ranks` ranks or `MAX_STAGE_MICROBATCHES`
    stage-micro-batches (v is `vp`, else the family's own). Values below 1 are left to the registry's rules."""
    if pp > max_ranks:
        raise ConfigError(
            "--pp",
            f"{pp:,} pipeline ranks is over pplan's cap of {max_ranks}",
            f"use --pp {max_ranks} or fewer",
        )
    if pp < 1 or microbatches < 1 or (vp is not None and vp < 1):
        return
    v = vp if vp is not None else schedule_family(name).default_v
    size = pp * v * microbatches
    if size <= MAX_STAGE_MICROBATCHES:
        return
    most = MAX_STAGE_MICROBATCHES // (pp * v)
    flag, fix = (
        ("--microbatches", f"use --microbatches {most:,} or fewer at p = {pp}, v = {v}")
        if most >= 1
        else ("--vp" if vp is not None else "--pp", "use fewer ranks or stages per rank")
    )
    raise ConfigError(
        flag,
        f"p·v·m = {pp}·{v}·{microbatches} = {size:,} stage-micro-batches is over pplan's cap of "
        f"{MAX_STAGE_MICROBATCHES:,} for simulating, drawing and exporting one schedule",
        fix,
    )


def _squashed(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def check_auto_size(pp: int, microbatches: int, vp: int | None, memory_limit: int | None = None) -> None:
    """Refuse an auto schedule over `MAX_PIPELINE_RANKS` ranks or `MAX_AUTO_STAGE_MICROBATCHES`, with a v, or
    with a count below 1 (each refusal names its flag)."""
    for flag, count in (("--pp", pp), ("--microbatches", microbatches), ("--memory-limit", memory_limit)):
        if count is not None and count < 1:
            raise ConfigError(flag, f"must be at least 1, got {count}", f"pass {flag} 1 or more")
    if vp not in (None, 1):
        raise ConfigError("--vp", f"the auto schedule runs one stage per rank, got --vp {vp}", "drop --vp")
    if pp > MAX_PIPELINE_RANKS:
        raise ConfigError(
            "--pp", f"{pp:,} pipeline ranks is over pplan's cap of {MAX_PIPELINE_RANKS}",
            f"use --pp {MAX_PIPELINE_RANKS} or fewer",
        )  # fmt: skip
    if pp >= 1 and microbatches >= 1 and pp * microbatches > MAX_AUTO_STAGE_MICROBATCHES:
        raise ConfigError(
            "--microbatches",
            f"p·m = {pp}·{microbatches} = {pp * microbatches:,} is over the auto scheduler's cap of "
            f"{MAX_AUTO_STAGE_MICROBATCHES:,}",
            f"use --microbatches {max(1, MAX_AUTO_STAGE_MICROBATCHES // pp):,} or fewer at p = {pp}",
        )


def timeline_json(timeline: Timeline) -> dict[str, Any]:
    """The `pplan schedule --json` document ("pplan.schedule/1", `pplan.documents.schedule`) as JSON data: the
    timeline's fields (`pplan.schedules.document_fields`) validated into the document."""
    from pplan.documents.schedule import ScheduleDocument
    from pplan.schedules.document_fields import schedule_fields

    return ScheduleDocument.model_validate(schedule_fields(timeline)).model_dump(mode="json")


@app.command()
def schedule(
    name: Annotated[
        str,
        typer.Argument(
            rich_help_panel="Schedule",
            help="gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe, auto, ...",
        ),
    ],
    pp: Annotated[
        int,
        typer.Option(rich_help_panel="Schedule", help=f"Pipeline ranks p (at most {MAX_PIPELINE_RANKS})."),
    ] = 4,
    microbatches: Annotated[
        int,
        typer.Option(
            rich_help_panel="Schedule",
            help=f"Micro-batches m per step (p·v·m at most {MAX_STAGE_MICROBATCHES:,}).",
        ),
    ] = 8,
    vp: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Schedule", help="Stages per rank v (interleaved: ≥ 2; V schedules: 2)."
        ),
    ] = None,
    f: Annotated[float, typer.Option(rich_help_panel="Durations", help="Forward duration per stage.")] = 1.0,
    b: Annotated[
        float, typer.Option(rich_help_panel="Durations", help="Input-gradient backward duration (torch's I).")
    ] = 1.0,
    w: Annotated[
        float, typer.Option(rich_help_panel="Durations", help="Weight-gradient backward duration.")
    ] = 1.0,
    comm: Annotated[
        float, typer.Option(rich_help_panel="Durations", help="Latency of one hop between ranks.")
    ] = 0.0,
    durations: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="Durations",
            help="A .toml/.json file with f, b, w (a number or one per stage) and comm.",
        ),
    ] = None,
    svg: Annotated[
        Path | None, typer.Option(rich_help_panel="Output", help="Also write the picture as an SVG file.")
    ] = None,
    csv: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="Output", help="Write the schedule as torch's _load_csv compute-only CSV."
        ),
    ] = None,
    memory_limit: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Schedule",
            help="auto only: micro-batches each stage may hold in flight (default p, 1F1B's and ZB-H1's memory; "
            "2p-1 is ZB-H2's).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option(FORCE_FLAG, rich_help_panel="Output", help=FORCE_HELP)] = False,
    output: Annotated[TableOrJson, format_option("pplan.schedule/1")] = "table",
    as_json: JsonAliasOpt = False,
) -> None:
    """Build a schedule, simulate it, and draw its timeline (durations in any consistent unit).

    `auto` builds the schedule for the durations given, under --memory-limit (pplan.schedules.auto).
    With every duration zero the bubble fractions are 0 (nothing computes, so nothing is idle for lack of work).
    """
    as_json = asks_json(output, as_json)
    from pplan.render.schedule import timeline_renderable, timeline_svg  # not for --help (start-up time)

    for flag, value in (("--f", f), ("--b", b), ("--w", w), ("--comm", comm)):
        check_duration(flag, value)
    auto = _squashed(name) == AUTO_NAME
    if memory_limit is not None and not auto:
        raise ConfigError(
            "--memory-limit",
            f"only the auto schedule takes a memory limit, not {name}",
            "drop --memory-limit",
        )
    if auto:
        check_auto_size(pp, microbatches, vp, memory_limit)
    else:
        check_schedule_size(name, pp, microbatches, vp, MAX_PIPELINE_RANKS)
    check_outputs({"--csv": csv, "--svg": svg}, {"--durations": input_path(durations)}, force)
    fs: float | list[float] = f
    bs: float | list[float] = b
    ws: float | list[float] = w
    if durations is not None:
        spec = _load_durations(durations)
        n = pp if auto else get_schedule(name, pp, microbatches, vp).num_stages
        fs, bs, ws = (
            _check_file_durations(x, n, k) for x, k in ((spec.f, "f"), (spec.b, "b"), (spec.w, "w"))
        )
        check_duration("--durations", spec.comm, "comm")
        comm = spec.comm
    if auto:
        limit = pp if memory_limit is None else memory_limit
        built = auto_schedule(pp, microbatches, limit, fs, bs, ws, comm)
        sched = built.schedule
        note = (
            f"auto: {built.method}; memory limit {limit} micro-batches per stage (peak "
            f"{max(built.peak_in_flight)}); makespan {built.makespan_s:g}, {built.gap:.1%} above the lower bound "
            f"{built.lower_bound_s:g} (pplan.schedules.bounds)"
        )
    else:
        sched = get_schedule(name, pp, microbatches, vp)
        note = ""
    timeline = simulate(sched, Durations(fs, bs, ws), comm)
    doc = json_text(timeline_json(timeline)) if as_json else None  # refused here, before any file is written
    if csv is not None:
        write_output(csv, to_torch_csv(sched), "--csv", force)
    if doc is not None:
        print(doc)
    else:
        console.print(timeline_renderable(timeline))
        if note:
            console.print(note)
    if svg is not None:  # after stdout: a picture that cannot be written costs only the picture
        sys.stdout.flush()
        write_output(svg, timeline_svg(timeline), "--svg", force)


def _parse_ms(text: str | None) -> Sequence[int] | None:
    if text is None:
        return None
    shown = repr(text if len(text) <= 60 else text[:57] + "...")
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as err:  # also an integer too long to convert
        raise ConfigError(
            "--microbatches", f"not a comma-separated list of integers: {shown}", "e.g. 4,8,16"
        ) from err
    if not values or min(values) < 1:
        raise ConfigError("--microbatches", f"need positive micro-batch counts, got {shown}", "e.g. 4,8,16")
    return sorted(set(values))


def bubble_work(pp: int, ms: Sequence[int]) -> int:
    """Stage-micro-batches `pplan bubble` simulates: Σ over its schedules and m values of p·v·m."""
    return sum(pp * (v or 1) * m for _, _, v in DEFAULT_CURVES for m in ms)


@app.command()
def bubble(
    pp: Annotated[
        int,
        typer.Option(rich_help_panel="Schedule", help=f"Pipeline ranks p (at most {MAX_PIPELINE_RANKS})."),
    ] = 4,
    microbatches: Annotated[
        str | None,
        typer.Option(rich_help_panel="Schedule", help="Comma-separated m values (default p, 2p, ... 16p)."),
    ] = None,
    measure: Annotated[
        Measure,
        typer.Option(
            rich_help_panel="Schedule",
            help="span: idle inside each rank's window (Qi et al.); step: the synchronous step.",
        ),
    ] = "span",
    svg: Annotated[
        Path | None, typer.Option(rich_help_panel="Output", help="Also write the chart as an SVG file.")
    ] = None,
    force: Annotated[bool, typer.Option(FORCE_FLAG, rich_help_panel="Output", help=FORCE_HELP)] = False,
    output: Annotated[TableOrJson, format_option("pplan.bubble/1")] = "table",
    as_json: JsonAliasOpt = False,
) -> None:
    """Bubble against m for 1F1B, interleaved (v = 2, 4), ZB-H1 and ZB-H2 at p ranks, by simulation."""
    as_json = asks_json(output, as_json)
    from pplan.render.schedule import bubble_curves_svg, bubble_group  # not for --help (start-up time)

    if pp < 1:
        raise ConfigError("--pp", f"must be ≥ 1, got {pp}", "pass --pp 2 or more")
    if pp > MAX_PIPELINE_RANKS:
        raise ConfigError(
            "--pp",
            f"{pp:,} pipeline ranks is over pplan's cap of {MAX_PIPELINE_RANKS}",
            f"use --pp {MAX_PIPELINE_RANKS} or fewer",
        )
    given = _parse_ms(microbatches)
    ms = list(given or [pp * k for k in (1, 2, 4, 8, 16)])
    work = bubble_work(pp, ms)
    if work > MAX_BUBBLE_WORK:
        raise ConfigError(
            "--microbatches" if given else "--pp",
            f"the chart would simulate {work:,} stage-micro-batches (Σ p·v·m over its schedules and m values), "
            f"over pplan's cap of {MAX_BUBBLE_WORK:,}",
            "pass fewer or smaller --microbatches values" + ("" if given else ", or a smaller --pp"),
        )
    check_outputs({"--svg": svg}, force=force)
    curves = bubble_curves(pp, ms, measure=measure)
    if as_json:
        print(json_text(bubble_document(curves, pp, ms, measure).model_dump(mode="json")))
    else:
        console.print(bubble_group(curves, pp, measure))
    if svg is not None:  # after stdout: a picture that cannot be written costs only the picture
        sys.stdout.flush()
        write_output(svg, bubble_curves_svg(curves, pp, measure), "--svg", force)


def bubble_document(
    curves: Sequence[BubbleCurve], pp: int, ms: Sequence[int], measure: Measure
) -> BubbleDocument:
    """The `pplan.bubble/1` document of the chart's curves."""
    from pplan.documents.bubble import BubbleCurveOut, BubbleDocument

    return BubbleDocument(
        pp=pp,
        measure=measure,
        microbatches=sorted(ms),
        curves=[
            BubbleCurveOut(
                label=c.label,
                schedule=c.name,
                v=c.v,
                microbatches=list(c.microbatches),
                bubble_fraction_of_ideal=list(c.bubble_of_ideal),
            )
            for c in curves
        ],
    )
