"""Rich renderables for `pplan validate`: per set of published runs, predicted against published step time with
the error, what pplan assumed where the source is silent, (with --practice) where each published
configuration ranks in `pplan recommend`, and (with --memory) pplan's memory model against published per-GPU
memory, with the reason for each large gap.

Draws a `pplan.validate/3` set (`pplan.documents.validate.ValidationSetOut`) or its memory block
(`MemoryValidationOut`) and nothing else: no files, no predictions.
"""

from __future__ import annotations

import re

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pplan.documents.validate import (
    MemoryValidationOut,
    PracticeOut,
    RecentOut,
    ScalingCheckOut,
    ValidationSetOut,
)
from pplan.validation.practice import GAP, TOP

EFFICIENCY_NAMES = {
    "matmul": "GEMM efficiency",
    "fp8_matmul": "FP8 GEMM efficiency",
    "grouped_gemm": "grouped-GEMM efficiency",
}
"""How each fitted efficiency is named in a set's title."""


def validation_table(result: ValidationSetOut) -> Table:
    """Predicted against published time, one row per run, in sample and with the set left out of the fit, the
    errors coloured by size."""
    how = "fitted now" if result.fitted else "from the profile"
    table = Table(
        title=(
            f"{result.set_} on {result.hardware}: {result.quantity} ({EFFICIENCY_NAMES[result.efficiency_field]} "
            f"{result.matmul_efficiency:.3f}, {how}; "
            + (
                f"{result.left_out_matmul_efficiency:.3f} without this set)"
                if result.left_out_matmul_efficiency is not None
                else "unfitted without this set: the only one of its kind)"
            )
        ),
        title_justify="left",
        caption=(
            f"{result.source}. In sample: mean absolute error {result.mape:.1%}, worst {result.worst:.1%}; "
            f"leave this set out: mean {result.left_out_mape:.1%}, worst {result.left_out_worst:.1%}."
        ),
        caption_justify="left",
    )
    for col in ("run", "published", "predicted", "error", "left out"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for row in result.rows:
        table.add_row(
            row.run,
            f"{row.published_s:.4g}",
            f"{row.predicted_s:.4g}",
            _error_text(row.error),
            _error_text(row.left_out_error),
        )
    return table


def summary_table(sets: list[ValidationSetOut], width: int | None = None) -> Table:
    """One row per set: its GPU type, in-sample and leave-one-set-out mean and worst absolute errors. `width`: the
    terminal's columns; where a set's name does not fit, it is broken after a hyphen (`_broken`), never mid-word."""
    table = Table(
        title="pplan's step-time model against every public set (in sample; and fitted without the set)",
        title_justify="left",
        caption=(
            "One efficiency per GPU type and kind of set (GEMM for BF16 dense sets, FP8 GEMM for FP8 sets, grouped "
            "GEMM for mixture-of-experts sets), fitted to all that type's sets of the kind (in sample) or to the "
            "others only (leave one set out; a set alone of its kind: unfitted); mean and worst absolute error per "
            "set."
        ),
        caption_justify="left",
    )
    rows = [
        (s.hardware, str(len(s.rows)), _size_text(s.mape), _size_text(s.worst), _size_text(s.left_out_mape),
         _size_text(s.left_out_worst))
        for s in sets
    ]  # fmt: skip
    headers = ("set", "GPU", "rows", "mean", "worst", "left-out\nmean", "left-out\nworst")
    others = sum(
        max(*(len(line) for line in h.split("\n")), *(len(str(r[k])) for r in rows))
        for k, h in enumerate(headers[1:])
    )
    room = None if width is None else width - others - 3 * len(headers) - 1  # cell padding and borders
    if room is not None:  # never below a name's longest hyphen-ended part: the other columns shorten instead
        room = max(room, *(len(part) for s in sets for part in _parts(s.set_)))
    for col in headers:
        # a narrow terminal breaks the set's name after a hyphen; every other cell stays whole
        table.add_column(
            col,
            justify="left" if col in ("set", "GPU") else "right",
            overflow="fold" if col == "set" else "ellipsis",
            no_wrap=col != "set",
            min_width=min(room, max(len(s.set_) for s in sets)) if col == "set" and room and sets else None,
        )
    for s, row in zip(sets, rows, strict=True):
        table.add_row(_broken(s.set_, room), *row)
    return table


def _broken(name: str, room: int | None) -> str:
    """`name` over lines of at most `room` characters, broken after hyphens (mid-word only where one word alone is
    longer than `room`); whole when it fits or `room` is unknown."""
    if room is None or len(name) <= room:
        return name
    lines = [""]
    for part in _parts(name):
        if lines[-1] and len(lines[-1]) + len(part) > room:
            lines.append("")
        lines[-1] += part
        while len(lines[-1]) > room:  # one word longer than the room: folded
            lines[-1:] = [lines[-1][:room], lines[-1][room:]]
    return "\n".join(lines)


def _parts(name: str) -> list[str]:
    """`name` cut after each hyphen."""
    return re.findall(r"[^-]*-|[^-]+$", name)


def scaling_table(check: ScalingCheckOut) -> Table:
    """A strong-scaling statement: published against predicted MFU at each GPU count, and the fitted straggler
    allowance."""
    verdict = (
        "pplan's drop is already at least the published one, so no straggler allowance is fitted (c = 0)"
        if check.jitter == 0
        else f"the straggler allowance that reproduces it: --jitter {check.jitter:g}"
    )
    table = Table(
        title=f"{check.name} on {check.hardware}: MFU at each size ({check.cut})",
        title_justify="left",
        caption=(
            f"{check.source}. Last over first: published ×{check.published_ratio:.3f}, pplan ×"
            f"{check.predicted_ratio:.3f}; {verdict}."
        ),
        caption_justify="left",
    )
    for col in ("GPUs", "published MFU", "pplan MFU", "with the allowance"):
        table.add_column(col, justify="right")
    for p in check.points:
        table.add_row(
            f"{p.gpus:,}", f"{p.published_mfu:.1%}", f"{p.predicted_mfu:.1%}", f"{p.fitted_mfu:.1%}"
        )
    return table


def _error_text(error: float) -> Text:
    """A signed error, coloured by size (green to 5 %, yellow to 10 %, red beyond)."""
    return Text(f"{error:+.1%}", style=_error_style(error))


def _error_style(error: float) -> str:
    return "green" if abs(error) <= 0.05 else "yellow" if abs(error) <= 0.10 else "red"


def _size_text(error: float) -> Text:
    """An absolute error (a mean or a worst), coloured as `_error_text`."""
    return Text(f"{error:.1%}", style=_error_style(error))


def _marked(error: float, mark: str) -> Text:
    """The coloured error with the row's reason mark after it (when it has one)."""
    text = _error_text(error)
    if mark:
        text.append(f" {mark}", style="grey62")
    return text


def memory_tables(result: MemoryValidationOut) -> Group:
    """Figure 1's bars (GiB per GPU) and Figure 7's shares, predicted against published with the signed error (and
    the `korthikanti` activation model's error beside), the mean absolute errors, and a numbered reason per gap
    above the threshold."""
    other = "korthikanti"
    reasons: list[Text] = []

    def mark(reason: str | None) -> str:
        if reason is None:
            return ""
        reasons.append(Text(f"[{len(reasons) + 1}] {reason}", style="grey62"))
        return f"[{len(reasons)}]"

    fig1 = Table(
        title=f"{result.set_}: {result.figure_1_source}",
        title_justify="left",
        caption=(
            f"Mean absolute error {result.figure_1_mape:.1%} ({result.activation_model} activation model; the "
            f"{other} column: the error with Table 2's formula, mean {result.figure_1_korthikanti_mape:.1%})."
        ),
        caption_justify="left",
    )
    for col in ("model", "bar", "published", "pplan", "error", f"{other}"):
        fig1.add_column(col, justify="left" if col in ("model", "bar") else "right", no_wrap=True)
    runs: dict[str, str] = {}
    for r in result.figure_1:
        runs.setdefault(r.label, r.run)
        fig1.add_row(
            r.label,
            r.quantity,
            f"{r.published_gib:.2f}",
            f"{r.predicted_gib:.2f}",
            _marked(r.error, mark(r.reason)),
            _error_text(r.korthikanti_error),
        )
    fig1_notes = [
        Text(f"runs ({result.hardware}): " + "; ".join(runs.values()), style="grey62"),
        Text(f"compared: {result.stage}", style="grey62"),
        *reasons,
    ]
    shown = len(reasons)
    fig7 = Table(
        title=f"{result.set_}: {result.figure_7_source} ({result.figure_7[0].run})",
        title_justify="left",
        caption=(
            f"Mean absolute error {result.figure_7_mape:.1%} ({result.activation_model}; "
            f"{other}: {result.figure_7_korthikanti_mape:.1%})."
        ),
        caption_justify="left",
    )
    for col in ("setting", "published %", "pplan %", "error", f"{other}"):
        fig7.add_column(col, justify="left" if col == "setting" else "right", no_wrap=col != "setting")
    for s in result.figure_7:
        fig7.add_row(
            s.setting,
            f"{s.published_percent:.2f}",
            f"{s.predicted_percent:.2f}",
            _marked(s.error, mark(s.reason)),
            _error_text(s.korthikanti_error),
        )
    assumed = ", ".join(f"{k} = {v}" for k, v in result.assumed.items())
    source = Text(f"{result.source}; {result.precision}.", style="grey62")
    return Group(
        fig1,
        *fig1_notes,
        Text(),
        fig7,
        *reasons[shown:],
        source,
        Text(f"assumed where the source is silent: {assumed}", style="grey62"),
        Text(),
    )


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
    if result.recompute_gaps:
        parts.append(
            Text(
                "full recompute against sequence parallelism + selective (step ratio − 1), published / pplan: "
                + "; ".join(f"{g.model} {g.published:.1%} / {g.predicted:.1%}" for g in result.recompute_gaps)
            )
        )
    if result.practice is not None:
        parts.append(practice_table(result.practice, result.set_))
    parts.append(Text())
    return Group(*parts)


WORST_SHOWN = 12
"""How many of the recent runs' largest misses the terminal lists (the JSON document has every run)."""


def recent_tables(result: RecentOut) -> Group:
    """The recent runs: figures per axis, the largest misses, and what pplan could not express."""

    def pct(value: float | None, signed: bool = False) -> Text:
        if value is None:
            return Text("–")
        return _error_text(value) if signed else _size_text(value)

    tables: list[Table | Text] = []
    for axis in dict.fromkeys(g.axis for g in result.groups):
        table = Table(title=f"By {axis}", title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column(axis, overflow="fold", min_width=16, ratio=1)
        for col in ("counted", "|err|", "mean", "LOSO\n|err|", "LOSO\nmean", "LOSO\nworst", "LOSO\n≤ 15 %"):
            table.add_column(col, justify="right", no_wrap=True)
        for g in (g for g in result.groups if g.axis == axis):
            table.add_row(
                g.name, f"{g.counted}/{g.rows}", pct(g.mape), pct(g.mean_error, signed=True),
                pct(g.left_out_mape), pct(g.left_out_mean_error, signed=True), pct(g.left_out_worst),
                f"{g.left_out_within_15}/{g.counted}",
            )  # fmt: skip
        tables += [table, Text()]
    head = Text(
        f"Published runs of 2024–2026 at their published cuts: {result.counted} of {result.rows} counted, mean "
        f"absolute error {pct(result.mape)} ({result.within_15} within 15 %); leaving each set out of the fits "
        f"(LOSO) {pct(result.left_out_mape)} ({result.left_out_within_15} within 15 %). Counted: predicted and not "
        "flagged uncertain by the collection (counted/rows). mean: signed mean error (positive: pplan's steps are "
        "slower than published). Fitted to this collection's dense runs: "
        + ", ".join(result.fitted)
        + "; every other figure is out of sample. LOSO: each set predicted with those refitted without it."
    )
    misses = Table(title="The largest misses", title_justify="left", box=box.SIMPLE_HEAD)
    misses.add_column("run", overflow="fold", ratio=1)
    for col in ("published\ns", "predicted\ns", "error", "LOSO"):
        misses.add_column(col, justify="right", no_wrap=True)
    misses.add_column("plan; assumed", overflow="fold", ratio=1)
    counted = [r for r in result.runs if r.error is not None and not r.uncertain]
    for r in sorted(counted, key=lambda r: -abs(r.error or 0.0))[:WORST_SHOWN]:
        misses.add_row(
            r.id, f"{r.published_s:.4g}", f"{r.predicted_s:.4g}", _error_text(r.error or 0.0),
            pct(r.left_out_error, signed=True),
            "; ".join([r.run, *r.assumed]) + ("" if r.fits else "; does not fit pplan's memory model"),
        )  # fmt: skip
    reasons: dict[str, int] = {}
    for r in result.runs:
        if r.refused is not None:
            reasons[r.refused] = reasons.get(r.refused, 0) + 1
    refused = Table(title="Runs pplan cannot express yet", title_justify="left")
    refused.add_column("runs", justify="right")
    refused.add_column("what is missing")
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        refused.add_row(str(count), reason)
    return Group(head, Text(), *tables, misses, Text(), refused)
