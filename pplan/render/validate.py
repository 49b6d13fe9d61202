"""Rich renderables for `pplan validate`: per set of published runs, predicted against published step time with
the error, what pplan assumed where the source is silent, and (with --practice) where each published
configuration ranks in `pplan recommend`.

Draws a `pplan.validate/1` set (`pplan.documents.validate.ValidationSetOut`) and nothing else: no files, no
predictions.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pplan.documents.validate import PracticeOut, ValidationSetOut
from pplan.validation.practice import GAP, TOP


def validation_table(result: ValidationSetOut) -> Table:
    """Predicted against published step time, one row per run, the error coloured by size."""
    how = "fitted now" if result.fitted else "from the profile"
    table = Table(
        title=f"{result.set_} on {result.hardware} (GEMM efficiency {result.matmul_efficiency:.3f}, {how})",
        title_justify="left",
        caption=f"{result.source}. Mean absolute error {result.mape:.1%}.",
        caption_justify="left",
    )
    for col in ("run", "published s", "predicted s", "error"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for row in result.rows:
        style = "green" if abs(row.error) <= 0.05 else "yellow" if abs(row.error) <= 0.10 else "red"
        table.add_row(
            row.run,
            f"{row.published_step_s:.3f}",
            f"{row.predicted_step_s:.3f}",
            Text(f"{row.error:+.1%}", style=style),
        )
    return table


def assumed_note(result: ValidationSetOut) -> Text:
    """One grey line: the settings the source does not state, as pplan assumed them."""
    return Text(
        "assumed where the source is silent: " + ", ".join(f"{k} = {v}" for k, v in result.assumed.items()),
        style="grey62",
    )


def practice_table(rows: list[PracticeOut], name: str) -> Table:
    """Each published configuration against recommend's best, with the gap, its rank and whether it passes."""
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


def render_validation_set(result: ValidationSetOut) -> Group:
    """Everything `pplan validate` shows for one set: the runs, the assumptions, the practice check if run, and a
    blank line."""
    parts: list[RenderableType] = [validation_table(result), assumed_note(result)]
    if result.practice is not None:
        parts.append(practice_table(result.practice, result.set_))
    parts.append(Text())
    return Group(*parts)
