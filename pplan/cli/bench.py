"""`pplan bench`: run a schedule on a real PyTorch pipeline, measure it, and set pplan's prediction beside it.

Parses the options into a `pplan.bench.config.BenchConfig` (bad schedule, p, v or m: the registry's one-line
error), checks that torch is installed (else: pip install "pplan[bench]"), launches the ranks
(`pplan.bench.worker`, imported only here and only then), and shows the measured timeline, the predicted one and
a table of measured against predicted with the error. `--json` prints the pplan.bench/1 document; `--report`
writes it; `--svg` draws both timelines; `--calibrate` fits a hardware profile's GEMM efficiency to the measured
passes and writes it (`--out`). Under torchrun the command runs as one rank and only rank 0 prints.

Before anything starts, the sizes are capped (`MAX_BENCH_RANKS`, `MAX_BENCH_MICROBATCHES`, `MAX_BENCH_STEPS` and
`pplan schedule`'s p·v·m cap), every time must be finite and within `MAX_BENCH_PASS_MS` / `MAX_BENCH_TIMEOUT_S`,
and the output files are checked (`pplan.cli.files`): none may be an input (`--hardware`, `--model` files) or
another output, nor a symbolic link without `--force`. Files are written atomically, and only once the document
(`pplan.documents.bench`) has been built. Drawing is `pplan.render.bench`'s.
"""

from __future__ import annotations

import math
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pplan.bench.choices import DType, Mode, Runtime
from pplan.cli.app import JsonAliasOpt, TableOrJson, app, asks_json, console, format_option, json_text
from pplan.cli.files import FORCE_FLAG, FORCE_HELP, check_outputs, input_path, write_output
from pplan.cli.schedule import check_auto_size, check_schedule_size
from pplan.errors import ConfigError
from pplan.schedules.auto import AUTO_NAME

if TYPE_CHECKING:
    from pplan.bench.calibrate import Calibration

MAX_BENCH_RANKS = 64
"""Most pipeline ranks `pplan bench` launches: each is a process on this machine (with its own CUDA context when
there are GPUs), so more than a large node's worth only exhausts memory and file handles."""

MAX_BENCH_MICROBATCHES = 1024
"""Most micro-batches per step `pplan bench` runs (each rank keeps activations and timings for every one)."""

MAX_BENCH_STEPS = 1000
"""Most measured steps, and most warm-up steps, one `pplan bench` runs."""

MAX_BENCH_PASS_MS = 60_000.0
"""Longest sleep per pass (--f-ms, --i-ms, --w-ms), in ms: a minute."""

MAX_BENCH_TIMEOUT_S = 86_400.0
"""Longest --timeout a rank waits on another, in seconds: a day."""


def _check_bench_limits(
    pp: int, microbatches: int, steps: int, warmup: int, times_ms: dict[str, float], timeout: float
) -> None:
    """Refuse, as one `ConfigError` naming the flag, sizes over the caps and times that are not finite."""
    for flag, count, most in (
        ("--pp", pp, MAX_BENCH_RANKS),
        ("--microbatches", microbatches, MAX_BENCH_MICROBATCHES),
        ("--steps", steps, MAX_BENCH_STEPS),
        ("--warmup", warmup, MAX_BENCH_STEPS),
    ):
        if count > most:
            raise ConfigError(
                flag, f"{count:,} is over pplan bench's cap of {most:,}", f"use {flag} {most} or less"
            )
    for flag, value in times_ms.items():
        if not (math.isfinite(value) and 0 <= value <= MAX_BENCH_PASS_MS):
            raise ConfigError(
                flag,
                f"must be a finite number of ms from 0 to {MAX_BENCH_PASS_MS:g}, got {value:g}",
                "e.g. 6",
            )
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_BENCH_TIMEOUT_S):
        raise ConfigError(
            "--timeout",
            f"must be a finite number of seconds above 0 and at most {MAX_BENCH_TIMEOUT_S:g}, got {timeout:g}",
            "e.g. --timeout 120",
        )


def fitted_profile_text(calibration: Calibration) -> str:
    """The fitted profile as TOML, refused (one `ConfigError` on --calibrate) when pplan could not read it back:
    a fit far outside the profile's ranges (e.g. tiny blocks on a CPU against a GPU's peak) is not a profile."""
    from pydantic import ValidationError

    from pplan.bench.calibrate import hardware_toml
    from pplan.profiles.hardware_spec import HardwareSpec

    text = hardware_toml(calibration)
    try:
        HardwareSpec.model_validate(tomllib.loads(text))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(
            "--calibrate",
            f"the fitted profile would not load ({where}: {first['msg']}; fitted GEMM efficiency "
            f"{calibration.matmul:.3g} of {calibration.hardware.name}'s peak)",
            "calibrate on the device --hardware describes, with blocks large enough for their GEMMs to dominate "
            "(--hidden, --seq-len, --micro-batch)",
        ) from err
    return text


@app.command()
def bench(
    schedule: Annotated[
        str,
        typer.Option(
            rich_help_panel="Schedule",
            help="gpipe, 1f1b, interleaved-1f1b, looped-bfs, interleaved-zb, zb-h1, zb-h2, zbv, dualpipev, auto",
        ),
    ] = "1f1b",
    pp: Annotated[
        int, typer.Option(rich_help_panel="Schedule", help="Pipeline ranks p (processes launched).")
    ] = 2,
    microbatches: Annotated[
        int, typer.Option(rich_help_panel="Schedule", help="Micro-batches m per step.")
    ] = 4,
    vp: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Schedule", help="Stages per rank v (interleaved: ≥ 2; V schedules: 2)."
        ),
    ] = None,
    mode: Annotated[
        Mode | None,
        typer.Option(
            rich_help_panel="Run",
            help="sleep: blocks with fixed F/I/W times; compute: real transformer layers (default with --calibrate).",
        ),
    ] = None,
    runtime: Annotated[
        Runtime,
        typer.Option(
            rich_help_panel="Run",
            help="torch: torch's schedule class; csv: pplan's lists through torch's runtime; auto: torch's where it has one.",
        ),
    ] = "auto",
    model: Annotated[
        str,
        typer.Option(
            rich_help_panel="Compute blocks", help="Model profile the compute blocks are scaled from."
        ),
    ] = "gpt-1.7b",
    hidden: Annotated[
        int,
        typer.Option(
            rich_help_panel="Compute blocks", help="Width h of the scaled-down blocks (a multiple of 16)."
        ),
    ] = 64,
    seq_len: Annotated[int, typer.Option(rich_help_panel="Compute blocks", help="Sequence length s.")] = 16,
    micro_batch: Annotated[
        int, typer.Option(rich_help_panel="Compute blocks", help="Sequences per micro-batch b.")
    ] = 2,
    layers_per_stage: Annotated[
        int,
        typer.Option(rich_help_panel="Compute blocks", help="Transformer layers per stage (compute mode)."),
    ] = 1,
    f_ms: Annotated[
        float, typer.Option(rich_help_panel="Sleep blocks", help="Sleep mode: forward time per stage, ms.")
    ] = 6.0,
    i_ms: Annotated[
        float,
        typer.Option(rich_help_panel="Sleep blocks", help="Sleep mode: input-gradient time per stage, ms."),
    ] = 6.0,
    w_ms: Annotated[
        float,
        typer.Option(rich_help_panel="Sleep blocks", help="Sleep mode: weight-gradient time per stage, ms."),
    ] = 6.0,
    steps: Annotated[
        int, typer.Option(rich_help_panel="Run", help="Measured steps (after the warm-up).")
    ] = 3,
    warmup: Annotated[
        int, typer.Option(rich_help_panel="Run", help="Warm-up steps (the first step also infers shapes).")
    ] = 1,
    dtype: Annotated[
        DType, typer.Option(rich_help_panel="Compute blocks", help="Parameter and activation dtype.")
    ] = "float32",
    timeout: Annotated[
        float, typer.Option(rich_help_panel="Run", help="Seconds a rank waits on another before failing.")
    ] = 120.0,
    output: Annotated[TableOrJson, format_option("pplan.bench/1")] = "table",
    as_json: JsonAliasOpt = False,
    svg: Annotated[
        Path | None,
        typer.Option(rich_help_panel="Output", help="Write the measured and predicted timelines as SVG."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option(rich_help_panel="Output", help="Write the JSON document to this file.")
    ] = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            rich_help_panel="Calibration",
            help="Fit --hardware's GEMM efficiency to the measured passes.",
        ),
    ] = False,
    hardware: Annotated[
        str | None, typer.Option(rich_help_panel="Calibration", help="Hardware profile to calibrate.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="Calibration", help="Where --calibrate writes the fitted profile (TOML)."
        ),
    ] = None,
    memory_limit: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Schedule",
            help="--schedule auto only: micro-batches each stage may hold in flight (default p).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option(FORCE_FLAG, rich_help_panel="Output", help=FORCE_HELP)] = False,
) -> None:
    """Run a schedule on real PyTorch pipeline stages and compare the measured step with pplan's prediction.

    `--schedule auto` builds the schedule for the sleep times under --memory-limit (pplan.schedules.auto) and runs
    its lists through torch's runtime."""
    as_json = asks_json(output, as_json)
    from pplan.bench.config import BenchConfig, require_torch  # the core loads only when a command runs
    from pplan.bench.document import bench_document
    from pplan.documents.bench import CalibrationOut
    from pplan.profiles.catalog import load_hardware
    from pplan.render.bench import both_svg, calibration_line, render_bench

    if calibrate:
        if hardware is None or out is None:
            raise ConfigError(
                "--calibrate",
                "needs --hardware NAME and --out FILE",
                "e.g. --hardware h100-sxm-80gb --out fitted.toml",
            )
        if mode == "sleep":
            raise ConfigError("--mode", "calibration needs real compute, not sleeps", "use --mode compute")
    elif hardware is not None or out is not None:
        raise ConfigError("--hardware", "--hardware and --out belong to --calibrate", "add --calibrate")
    times = {"--f-ms": f_ms, "--i-ms": i_ms, "--w-ms": w_ms}
    _check_bench_limits(pp, microbatches, steps, warmup, times, timeout)
    if schedule.strip().lower() == AUTO_NAME:
        check_auto_size(pp, microbatches, vp, memory_limit)
    else:
        check_schedule_size(schedule, pp, microbatches, vp, MAX_BENCH_RANKS)
    check_outputs(
        {"--out": out, "--report": report, "--svg": svg},
        {"--hardware": input_path(hardware), "--model": input_path(model)},
        force,
    )
    config = BenchConfig(
        schedule=schedule,
        pp=pp,
        microbatches=microbatches,
        vp=vp,
        mode=mode or ("compute" if calibrate else "sleep"),
        runtime=runtime,
        model=model,
        hidden=hidden,
        seq_len=seq_len,
        micro_batch=micro_batch,
        layers_per_stage=layers_per_stage,
        f_ms=f_ms,
        i_ms=i_ms,
        w_ms=w_ms,
        steps=steps,
        warmup=warmup,
        dtype=dtype,
        timeout_s=timeout,
        memory_limit=memory_limit,
    )
    hw = load_hardware(hardware) if calibrate and hardware is not None else None
    require_torch()
    from pplan.bench.analysis import analyse
    from pplan.bench.worker import launch

    records = launch([config])
    if records is None:  # a rank other than 0 under torchrun: rank 0 reports
        return
    result = analyse(config, records[0])
    calibration: Calibration | None = None
    fitted = ""
    if hw is not None:
        from pplan.bench.calibrate import fit_matmul_to_measured

        calibration = fit_matmul_to_measured(result, hw)
        fitted = fitted_profile_text(calibration)  # refused here, before any file is written, if unreadable
    document = bench_document(
        result,
        None
        if calibration is None
        else CalibrationOut(
            hardware=calibration.hardware.name,
            matmul=calibration.matmul,
            measured_busy_ms=calibration.measured_s * 1e3,
            out=str(out),
        ),
    )
    text = json_text(document.model_dump(mode="json"))  # refused here, before any file is written
    if calibration is not None and out is not None:
        write_output(out, fitted, "--out", force)
    if report is not None:
        write_output(report, text + "\n", "--report", force)
    if as_json:
        print(text)
    else:
        console.print(render_bench(result))
        if calibration is not None:
            console.print(calibration_line(calibration.matmul, str(out)))
    if svg is not None:  # after stdout: a picture that cannot be written costs only the picture
        sys.stdout.flush()
        write_output(svg, both_svg(result), "--svg", force)
