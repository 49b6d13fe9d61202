"""Rich renderables for `pplan validate`: per set of published runs, predicted against published step time with
the error, what pplan assumed where the source is silent, (with --practice) where each published
configuration ranks in `pplan recommend`, and (with --memory) pplan's memory model against published per-GPU
memory, with the reason for each large gap.

Draws a `pplan.validate/1` set (`pplan.documents.validate.ValidationSetOut`) or its memory block
(`MemoryValidationOut`) and nothing else: no files, no predictions.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pplan.documents.validate import MemoryValidationOut, PracticeOut, ValidationSetOut
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
        table.add_row(
            row.run,
            f"{row.published_step_s:.3f}",
            f"{row.predicted_step_s:.3f}",
            _error_text(row.error),
        )
    return table


def _error_text(error: float) -> Text:
    """A signed error, coloured by size (green to 5 %, yellow to 10 %, red beyond)."""
    style = "green" if abs(error) <= 0.05 else "yellow" if abs(error) <= 0.10 else "red"
    return Text(f"{error:+.1%}", style=style)


def _reasons(reasons: list[tuple[str, str]]) -> list[RenderableType]:
    """One grey line per noted gap: the row's mark and its reason."""
    return [Text(f"{mark} {reason}", style="grey62") for mark, reason in reasons]


def memory_tables(result: MemoryValidationOut) -> Group:
    """Figure 1's bars (GiB per GPU) and Figure 7's shares, predicted against published with the signed error,
    the `korthikanti` activation model's value beside, the mean absolute errors and a reason per large gap."""
    other = "korthikanti"
    fig1 = Table(
        title=f"{result.set_}: {result.figure_1_source} (first stage, {result.hardware})",
        title_justify="left",
        caption=(
            f"{result.source}; {result.precision}. Mean absolute error {result.figure_1_mape:.1%} "
            f"({result.activation_model} activation model; {other}: {result.figure_1_korthikanti_mape:.1%})."
        ),
        caption_justify="left",
    )
    for col in ("run", "quantity", "published GiB", "predicted GiB", "error", f"{other} GiB", "error ", ""):
        fig1.add_column(col, justify="left" if col in ("run", "quantity") else "right")
    reasons: list[tuple[str, str]] = []
    for r in result.figure_1:
        mark = ""
        if r.reason:
            mark = f"[{len(reasons) + 1}]"
            reasons.append((mark, r.reason))
        fig1.add_row(
            r.run,
            r.quantity,
            f"{r.published_gib:.2f}",
            f"{r.predicted_gib:.2f}",
            _error_text(r.error),
            f"{r.korthikanti_gib:.2f}",
            _error_text(r.korthikanti_error),
            mark,
        )
    fig7 = Table(
        title=f"{result.set_}: {result.figure_7_source} ({result.figure_7[0].run})",
        title_justify="left",
        caption=(
            f"Mean absolute error {result.figure_7_mape:.1%} ({result.activation_model}; "
            f"{other}: {result.figure_7_korthikanti_mape:.1%})."
        ),
        caption_justify="left",
    )
    for col in ("setting", "published %", "predicted %", "error", f"{other} %", "error ", ""):
        fig7.add_column(col, justify="left" if col == "setting" else "right")
    shares: list[tuple[str, str]] = []
    for s in result.figure_7:
        mark = ""
        if s.reason:
            mark = f"[{len(reasons) + len(shares) + 1}]"
            shares.append((mark, s.reason))
        fig7.add_row(
            s.setting,
            f"{s.published_percent:.2f}",
            f"{s.predicted_percent:.2f}",
            _error_text(s.error),
            f"{s.korthikanti_percent:.2f}",
            _error_text(s.korthikanti_error),
            mark,
        )
    stage = Text(f"compared: {result.stage}", style="grey62")
    parts: list[RenderableType] = [fig1, *_reasons(reasons), stage, Text(), fig7, *_reasons(shares)]
    assumed = ", ".join(f"{k} = {v}" for k, v in result.assumed.items())
    parts += [Text(f"assumed where the source is silent: {assumed}", style="grey62"), Text()]
    return Group(*parts)


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
