"""`pplan validate`: predicted against published step time for every bundled run, with the error and the MAPE."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from pplan.cli.app import app, console, json_text
from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.validation.practice import GAP, TOP, PracticeRow, practice_rows
from pplan.validation.published import ValidationSet, fit_matmul, validate_set


def _table(result: ValidationSet, matmul: float, fitted: bool) -> Table:
    how = "fitted now" if fitted else "from the profile"
    table = Table(
        title=f"{result.name} on {result.hardware} (GEMM efficiency {matmul:.3f}, {how})",
        title_justify="left",
        caption=f"{result.source}. Mean absolute error {result.mape:.1%}.",
        caption_justify="left",
    )
    for col in ("run", "published s", "predicted s", "error"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for row in result.rows:
        style = "green" if abs(row.error) <= 0.05 else "yellow" if abs(row.error) <= 0.10 else "red"
        table.add_row(
            row.label,
            f"{row.published_step_s:.3f}",
            f"{row.predicted_step_s:.3f}",
            Text(f"{row.error:+.1%}", style=style),
        )
    return table


def _doc(result: ValidationSet, matmul: float, fitted: bool) -> dict[str, Any]:
    return {
        "set": result.name,
        "source": result.source,
        "hardware": result.hardware,
        "matmul_efficiency": matmul,
        "fitted": fitted,
        "assumed": result.assumed,
        "mape": result.mape,
        "rows": [
            {
                "run": r.label,
                "published_step_s": r.published_step_s,
                "predicted_step_s": r.predicted_step_s,
                "error": r.error,
            }
            for r in result.rows
        ],
    }


def _practice_table(rows: list[PracticeRow], name: str) -> Table:
    table = Table(
        title=f"{name}: the published configuration against recommend's best (Megatron-LM schedules)",
        title_justify="left",
        caption=f"passes: in the top {TOP} or within {GAP:.0%} of the best predicted throughput",
        caption_justify="left",
    )
    for col in ("published", "Mtok/s", "recommend's best", "Mtok/s ", "gap", "rank", "passes"):
        table.add_column(col, justify="right" if "tok" in col or col in ("gap", "rank") else "left")
    for r in rows:
        table.add_row(
            r.published,
            f"{r.published_tokens_per_s / 1e6:.3f}" if r.published_tokens_per_s else "-",
            r.best,
            f"{r.best_tokens_per_s / 1e6:.3f}",
            f"{r.gap:.1%}" if r.gap is not None else "-",
            str(r.rank) if r.rank else "below the simulated",
            Text("yes", style="green") if r.passes else Text("no", style="yellow"),
        )
    return table


@app.command()
def validate(
    fit: Annotated[
        bool, typer.Option("--fit", help="Re-fit each GPU type's GEMM efficiency to its runs.")
    ] = False,
    practice: Annotated[
        bool,
        typer.Option("--practice", help="Also check where each published configuration ranks in recommend."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Emit the pplan.validate/1 JSON document.")] = False,
) -> None:
    """Predict every bundled published run and compare with its published step time."""
    docs = []
    for data in load_published_runs()["sets"]:
        hardware = load_hardware(data["hardware"])
        if fit:
            matmul, result = fit_matmul(data, load_model, hardware)
        else:
            matmul, result = hardware.efficiency.matmul, validate_set(data, load_model, hardware)
        doc = _doc(result, matmul, fit)
        rows = practice_rows(data, load_model, hardware) if practice else []
        if practice:
            doc["practice"] = [
                {"published": r.published, "published_tokens_per_s": r.published_tokens_per_s, "best": r.best,
                 "best_tokens_per_s": r.best_tokens_per_s, "gap": r.gap, "rank": r.rank, "passes": r.passes}
                for r in rows
            ]  # fmt: skip
        docs.append(doc)
        if not as_json:
            console.print(_table(result, matmul, fit))
            console.print(
                Text(
                    "assumed where the source is silent: "
                    + ", ".join(f"{k} = {v}" for k, v in data["assumed"].items()),
                    style="grey62",
                )
            )
            if practice:
                console.print(_practice_table(rows, data["name"]))
            console.print()
    if as_json:
        print(json_text({"schema": "pplan.validate/1", "sets": docs}))
