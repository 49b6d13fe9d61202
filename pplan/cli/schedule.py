"""`pplan schedule`: draw one schedule's simulated timeline; `pplan bubble`: bubble against m for several schedules."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from pplan.catalog import load_stage_durations
from pplan.cli.app import app, console, json_text
from pplan.errors import ConfigError, PplanError
from pplan.render.schedule import bubble_renderable, bubble_svg, timeline_renderable, timeline_svg
from pplan.schedules import get_schedule, to_torch_csv
from pplan.timeline import Durations, Timeline, simulate

SCHEDULE_SCHEMA = "pplan.schedule/1"


class Measure(StrEnum):
    span = "span"
    step = "step"


def _write(path: Path, text: str, flag: str) -> None:
    try:
        path.write_text(text)
    except OSError as err:
        raise PplanError(flag, f"cannot write {path} ({err.strerror})", "give a writable path") from err


def _per_stage(value: float | list[float], stages: int, name: str) -> float | list[float]:
    if isinstance(value, list) and len(value) != stages:
        raise ConfigError(
            "--durations", f"{name} lists {len(value)} durations for {stages} stages", f"give {stages} values"
        )
    return value


def timeline_json(timeline: Timeline) -> dict[str, Any]:
    """The `pplan schedule --json` document."""
    sched = timeline.schedule
    return {
        "schema": SCHEDULE_SCHEMA,
        "schedule": sched.name,
        "pp": sched.p,
        "vp": sched.v,
        "microbatches": sched.m,
        "makespan": timeline.makespan,
        "bubble_fraction_of_step": timeline.bubble_fraction_of_step,
        "bubble_fraction_of_ideal": timeline.bubble_fraction_of_ideal,
        "bubble_in_window_fraction_of_ideal": timeline.max_idle_in_span / timeline.busiest,
        "busy_per_rank": list(timeline.busy_per_rank),
        "peak_in_flight_microbatches": list(timeline.peak_in_flight_per_rank),
        "peak_in_flight_per_stage": list(timeline.peak_in_flight_per_stage),
        "p2p_messages_per_step": timeline.p2p_messages,
        "actions": [
            [
                {
                    "action": str(a),
                    "stage": a.stage,
                    "kind": a.kind,
                    "microbatch": a.microbatch,
                    "start": t0,
                    "end": t1,
                }
                for a, t0, t1 in timeline.intervals(rank)
            ]
            for rank in range(sched.p)
        ],
    }


@app.command()
def schedule(
    name: Annotated[
        str, typer.Argument(help="gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe, ...")
    ],
    pp: Annotated[int, typer.Option(help="Pipeline ranks p.")] = 4,
    microbatches: Annotated[int, typer.Option(help="Micro-batches m per step.")] = 8,
    vp: Annotated[
        int | None, typer.Option(help="Stages per rank v (interleaved: ≥ 2; V schedules: 2).")
    ] = None,
    f: Annotated[float, typer.Option(help="Forward duration per stage.")] = 1.0,
    b: Annotated[float, typer.Option(help="Input-gradient backward duration (torch's I).")] = 1.0,
    w: Annotated[float, typer.Option(help="Weight-gradient backward duration.")] = 1.0,
    comm: Annotated[float, typer.Option(help="Latency of one hop between ranks.")] = 0.0,
    durations: Annotated[
        Path | None,
        typer.Option(help="A .toml/.json file with f, b, w (a number or one per stage) and comm."),
    ] = None,
    svg: Annotated[Path | None, typer.Option(help="Also write the picture as an SVG file.")] = None,
    csv: Annotated[
        Path | None, typer.Option(help="Write the schedule as torch's _load_csv compute-only CSV.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Emit the pplan.schedule/1 JSON document.")] = False,
) -> None:
    """Build a schedule, simulate it, and draw its timeline (durations in any consistent unit)."""
    for flag, value in (("--f", f), ("--b", b), ("--w", w), ("--comm", comm)):
        if value < 0:
            raise ConfigError(flag, f"must be ≥ 0, got {value:g}", f"pass {flag} 0 or more")
    sched = get_schedule(name, pp, microbatches, vp)
    fs: float | list[float] = f
    bs: float | list[float] = b
    ws: float | list[float] = w
    if durations is not None:
        spec = load_stage_durations(str(durations))
        n = sched.num_stages
        fs, bs, ws = _per_stage(spec.f, n, "f"), _per_stage(spec.b, n, "b"), _per_stage(spec.w, n, "w")
        comm = spec.comm
    timeline = simulate(sched, Durations(fs, bs, ws), comm)
    if csv is not None:
        _write(csv, to_torch_csv(sched), "--csv")
    if svg is not None:
        _write(svg, timeline_svg(timeline), "--svg")
    if as_json:
        print(json_text(timeline_json(timeline)))
        return
    console.print(timeline_renderable(timeline))


def _parse_ms(text: str | None) -> Sequence[int] | None:
    if text is None:
        return None
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as err:
        raise ConfigError(
            "--microbatches", f"not a comma-separated list of integers: {text!r}", "e.g. 4,8,16"
        ) from err
    if not values or min(values) < 1:
        raise ConfigError("--microbatches", f"need positive micro-batch counts, got {text!r}", "e.g. 4,8,16")
    return sorted(set(values))


@app.command()
def bubble(
    pp: Annotated[int, typer.Option(help="Pipeline ranks p.")] = 4,
    microbatches: Annotated[
        str | None, typer.Option(help="Comma-separated m values (default p, 2p, ... 16p).")
    ] = None,
    measure: Annotated[
        Measure,
        typer.Option(help="span: idle inside each rank's window (Qi et al.); step: the synchronous step."),
    ] = Measure.span,
    svg: Annotated[Path | None, typer.Option(help="Also write the chart as an SVG file.")] = None,
) -> None:
    """Bubble against m for 1F1B, interleaved (v = 2, 4), ZB-H1 and ZB-H2 at p ranks, by simulation."""
    if pp < 1:
        raise ConfigError("--pp", f"must be ≥ 1, got {pp}", "pass --pp 2 or more")
    ms = _parse_ms(microbatches) or [pp * k for k in (1, 2, 4, 8, 16)]
    console.print(bubble_renderable(pp, ms, measure.value))
    if svg is not None:
        _write(svg, bubble_svg(pp, ms, measure.value), "--svg")
