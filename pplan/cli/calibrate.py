"""`pplan calibrate FILE...`: fit the efficiency figures the user's own training logs can identify
(pplan.logs.fit) and write a hardware profile that says it is calibrated on them; `recommend`, `explain` and
`size` take it with `--hardware FILE` and name it in their output."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from pplan.cli.app import app
from pplan.cli.files import FORCE_FLAG, FORCE_HELP, check_outputs, write_output
from pplan.errors import ConfigError

FIGURE_NAMES = {
    "matmul": "efficiency.matmul (BF16 GEMMs)",
    "fp8_matmul": "efficiency.fp8_matmul (FP8 GEMMs)",
    "grouped_gemm": "efficiency.grouped_gemm (routed experts' grouped GEMMs)",
    "inter_node": "inter_node.efficiency (the network between nodes)",
}


@app.command()
def calibrate(
    logs: Annotated[
        list[Path], typer.Argument(metavar="LOG", help="Training logs of your runs on one kind of GPU.")
    ],
    hardware: Annotated[
        str | None,
        typer.Option(help="The hardware profile to fit (bundled name or .toml); default: the logs' GPU."),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="The model, for logs that print no model shape (bundled name or file).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the profile here (default: print it).")
    ] = None,
    force: Annotated[bool, typer.Option(FORCE_FLAG, help=FORCE_HELP)] = False,
) -> None:
    """Fit your cluster's efficiency figures to your own training logs and write them as a hardware profile."""
    from pplan.logs.files import read_record, steady_of
    from pplan.logs.fit import calibrate as fit_logs
    from pplan.logs.fit import make_run, mape
    from pplan.logs.rebuild import rebuild
    from pplan.logs.torchtitan import for_plan

    if output is not None:
        check_outputs({"--output": output}, {}, force)
    runs = []
    skipped: list[str] = []
    hw = None
    for path in logs:
        try:
            record = read_record(str(path), "LOGS")
            if not record.tps_steps:  # a log without a steady state is refused before its plan is asked for
                steady_of(record, str(path), "LOGS")
            rebuilt = rebuild(record, model, hardware, {}, {})
            request = rebuilt.request
            seq = request.seq_len or rebuilt.model.seq_len
            record = for_plan(
                record, request.gpus, request.global_batch, seq, request.tp, request.pp, request.cp
            )
            run = make_run(str(path), rebuilt, steady_of(record, str(path), "LOGS").step_s)
        except ConfigError as err:  # a log whose plan cannot be rebuilt is left out, and said
            if len(logs) == 1:
                raise
            skipped.append(f"  left out {path}: {err.one_line()}")
            continue
        if hw is not None and rebuilt.hardware.name != hw.name:
            raise ConfigError(
                "LOGS",
                f"{path} ran on {rebuilt.hardware.name}, the first log on {hw.name}",
                "calibrate the logs of one kind of GPU at a time, or pass --hardware",
            )
        hw = rebuilt.hardware
        runs.append(run)
    if hw is None:
        raise ConfigError("LOGS", "no log's plan could be rebuilt", "see explain --from-log on each log")
    result = fit_logs(runs, hw)
    from pplan.logs.fit import with_figures

    fitted = with_figures(hw, result.figures)
    n = len(runs)
    label = f"calibrated on {n} run{'s' if n != 1 else ''} of yours"
    from pplan.profiles.confidence import PERCENTILES, percentile
    from pplan.profiles.hardware_spec import UserFitSpec

    judged = result.left_out or result.in_sample  # one log leaves none out: its in-sample error
    user_fit = UserFitSpec(
        runs=n,
        error_low=round(percentile(judged, PERCENTILES[0]), 4),
        error_high=round(percentile(judged, PERCENTILES[1]), 4),
        mape=round(mape(judged), 4),
        in_sample_mape=round(mape(result.in_sample), 4),
        left_out=bool(result.left_out),
    )
    fitted = fitted.model_copy(
        update={
            "name": f"{hw.name} ({label})"[:64],
            "description": f"{hw.description}; {label}",
            "user_fit": user_fit,
        }
    )
    summary = [
        f"{fitted.name}: {label} (pplan calibrate, {datetime.date.today().isoformat()}).",
        "Fitted: "
        + ", ".join(f"{FIGURE_NAMES[k]} {hw_value(hw, k):.3f} → {v:.3f}" for k, v in result.figures.items())
        + ".",
        f"Step-time error over your runs, mean absolute: {mape(result.before):.1%} with {hw.name} as it was, "
        f"{mape(result.in_sample):.1%} in sample"
        + (
            f", {mape(result.left_out):.1%} with each log left out of the fit."
            if result.left_out
            else " (one run fits itself: no left-out error)."
        ),
    ]
    for run, before, inside, out in zip(
        runs, result.before, result.in_sample, result.left_out or [float("nan")] * n, strict=True
    ):
        summary.append(
            f"  {run.name}: measured {run.measured_s:.3f} s; error before {before:+.1%}, "
            f"in sample {inside:+.1%}, left out {out:+.1%}"
        )
    summary += skipped
    text = profile_toml(fitted, summary)
    if output is None:
        print(text, end="")
        return
    write_output(output, text, "--output", force)
    print("\n".join(summary))
    print(f"Wrote {output}: plan with it by --hardware {output}")


def hw_value(hw: Any, key: str) -> float:
    if key == "inter_node":
        return float(hw.inter_node.efficiency)
    return float(getattr(hw.efficiency, f"{key}_fraction", None) or getattr(hw.efficiency, key))


def profile_toml(hw: Any, summary: list[str]) -> str:
    """The fitted profile as TOML, the summary in its head (pplan.bench.calibrate writes its fits the same way)."""
    from pplan.bench.calibrate import _toml_value

    data = hw.model_dump(exclude_none=True, exclude={"calibration"})
    data["efficiency"]["calibrated"] = False
    data["efficiency"].pop("fingerprint", None)
    lines = [f"# {line}" for line in summary]
    lines += [
        "# The figures above were fitted by `pplan calibrate` to your logs' steady-state step times; every other",
        "# figure is the source profile's. pplan's [calibration] band describes its public fit, not this one, and",
        "# is left out; [user_fit] holds your runs' errors, by which every prediction with this profile is judged.",
    ]
    for key, value in data.items():
        if not isinstance(value, dict):
            lines.append(f"{key} = {_toml_value(value)}")
    for name, table in data.items():
        if isinstance(table, dict):
            lines += ["", f"[{name}]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
