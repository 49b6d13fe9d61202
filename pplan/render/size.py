"""`pplan size` for the terminal: one table per hardware (each GPU count's best plan, time to train with its interval,
goodput, GPU-hours, cost, energy), then the answers in words and the assumptions."""

from __future__ import annotations

import re

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pplan.documents.size import SizeDocument


def _money(value: float | None) -> str:
    if value is None:
        return "–"
    return (
        f"${value / 1e6:,.2f}M"
        if value >= 1e6
        else f"${value / 1e3:,.0f}k"
        if value >= 1e4
        else f"${value:,.0f}"
    )


WIDE = 130
"""Below this many columns the table keeps GPUs, plan, days, scaling efficiency, GPU-hours, cost and energy."""


_OUT_OF_MEMORY = re.compile(r"out of memory: the nearest plan \((?P<plan>.*)\) (?P<need>needs.*)")


def short_reason(reason: str | None) -> str:
    """A row's reason for having no answer, short enough for the plan column at 80 columns: out of memory with
    the nearest plan's need, or a run that never finishes (`--format json` keeps the whole sentence)."""
    if not reason:
        return "no plan"
    memory = _OUT_OF_MEMORY.match(reason)
    if memory:
        need = memory.group("need").replace("needs at least ", "≥").replace("needs ", "").replace(" of ", "/")
        return f"out of memory: {need}"
    if reason.startswith("never finishes"):
        return "never finishes: interrupted too often"
    return reason


def _hardware_table(doc: SizeDocument, hardware: str, width: int) -> Table:
    points = [p for p in doc.points if p.hardware == hardware]
    base = next((p.gpus for p in points if p.fits), None)
    priced = any(p.cost_usd is not None for p in points)
    powered = any(p.energy_kwh is not None for p in points)
    wide = width >= WIDE
    table = Table(title=hardware, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, expand=True)
    table.add_column("GPUs", justify="right", no_wrap=True)
    table.add_column("plan:\nt·p·d·v·cp schedule b×m", overflow="fold", ratio=1, min_width=16)
    columns = [
        "days",
        *(["interval", "tok/s/GPU", "MFU"] if wide else []),
        "eff",  # renamed in the header below: relative to the smallest count that fits
        *(["goodput"] if wide else []),
    ]
    columns += ["GPU-h", *(["cost"] if priced else []), *(["MWh"] if powered else [])]
    for name in columns:
        header = f"eff vs\n{base:,}" if name == "eff" and base is not None else name
        table.add_column(header, justify="right", no_wrap=True)
    for p in points:
        if not p.fits or not p.finishes:
            blank = ["–"] * len(columns)
            if p.fits and p.scaling_efficiency is not None:  # a run that never ends: its throughput stands
                blank[columns.index("eff")] = f"{p.scaling_efficiency:.0%}"
            table.add_row(f"{p.gpus:,}", Text(short_reason(p.reason), style="dim"), *blank)
            continue
        assert p.wall_days is not None and p.wall_interval_days is not None and p.gpu_hours is not None
        cells = {
            "days": f"{p.wall_days:,.1f}",
            "interval": f"{p.wall_interval_days[0]:,.1f}–{p.wall_interval_days[1]:,.1f}",
            "tok/s/GPU": f"{p.tokens_per_s_per_gpu:,.0f}",
            "MFU": f"{p.mfu:.0%}",
            "eff": f"{p.scaling_efficiency:.0%}" if p.scaling_efficiency is not None else "–",
            "goodput": f"{p.goodput.fraction:.1%}" if p.goodput else "–",
            "GPU-h": _count(p.gpu_hours),
            "cost": _money(p.cost_usd),
            "MWh": f"{p.energy_kwh / 1e3:,.0f}" if p.energy_kwh is not None else "–",
        }
        mark = " †" if p.awkward_batch else ""
        table.add_row(f"{p.gpus:,}{mark}", p.plan or "", *(cells[c] for c in columns))
    return table


def _count(value: float) -> str:
    return (
        f"{value / 1e6:,.2f}M"
        if value >= 1e6
        else f"{value / 1e3:,.0f}k"
        if value >= 1e4
        else f"{value:,.0f}"
    )


PARETO_SHOWN = 8


def answer_lines(doc: SizeDocument) -> list[str]:
    """The answers block in words."""
    a = doc.answers
    out = []
    fits = ", ".join(
        f"{hw} {n:,}" if n else f"{hw} none in the sweep" for hw, n in a.least_gpus_that_fit.items()
    )
    lowest = [
        hw
        for hw, n in a.least_gpus_that_fit.items()
        if n is not None
        and n == min(p.gpus for p in doc.points if p.hardware == hw)
        and n > doc.inputs.gpus_per_node[hw]
    ]
    caveat = (
        f" ({', '.join(lowest)}: the lowest count swept; fewer GPUs may fit, widen --gpus)" if lowest else ""
    )
    out.append(f"Least GPUs that fit: {fits}{caveat}.")
    curves = [hw for hw in a.knee if sum(p.fits for p in doc.points if p.hardware == hw) >= 3]
    knees = ", ".join(f"{hw} {a.knee[hw]:,}" for hw in curves if a.knee[hw])
    if knees:
        out.append(
            f"Knee of the scaling curve (the last count up to which every step up still returned half its GPUs' "
            f"share): {knees}."
        )
    days = doc.inputs.deadline_days
    if days is not None and a.fewest_gpus_meeting_deadline is not None:
        slow = a.fewest_gpus_meeting_deadline_slow_end or {}

        def count(n: int | None) -> str:
            return f"{n:,}" if n else "none"

        fewest = ", ".join(
            f"{hw} {count(n)} ({count(slow.get(hw))} at the interval's slow end"
            + ("; NOT calibrated" if hw in a.uncalibrated else "")
            + ")"
            for hw, n in a.fewest_gpus_meeting_deadline.items()
        )
        out.append(f"Fewest GPUs that train it within {days:g} days, at the estimate: {fewest}.")
        if a.cheapest_meeting_deadline:
            slow_cheapest = a.cheapest_meeting_deadline_slow_end or "none in the sweep"
            out.append(
                f"Cheapest within {days:g} days: {a.cheapest_meeting_deadline} ({slow_cheapest} at the interval's "
                "slow end)."
            )
        elif a.nearest_miss:
            out.append(f"No count in the sweep meets {days:g} days; nearest: {a.nearest_miss}.")
    if doc.inputs.budget_usd is not None:
        within = a.fastest_within_budget or "nothing in the sweep"
        out.append(f"Fastest within ${doc.inputs.budget_usd:,.0f}: {within}.")
    for hw, words in a.uncalibrated.items():
        out.append(f"{hw}: {words}")
    if a.pareto:
        what = "cost" if any(p.cost_usd is not None for p in doc.points) else "GPU-hours"
        shown = ", ".join(a.pareto[:PARETO_SHOWN])
        more = (
            f" and {len(a.pareto) - PARETO_SHOWN} more (--json lists them)"
            if len(a.pareto) > PARETO_SHOWN
            else ""
        )
        out.append(f"Pareto front of time against {what} (fastest first): {shown}{more}.")
    return out


def render_size(doc: SizeDocument, width: int) -> RenderableType:
    """The tables, the answers and the assumptions."""
    head = Text(
        f"{doc.inputs.model}: {doc.inputs.train_tokens:.3g} tokens at sequence {doc.inputs.seq_len:,}; "
        f"{sum(p.fits for p in doc.points)} of {len(doc.points)} points have a plan",
        style="bold",
    )
    parts: list[RenderableType] = [head]
    for hardware in dict.fromkeys(p.hardware for p in doc.points):
        parts.append(_hardware_table(doc, hardware, width))
    parts.append(
        Text(
            "days: wall time to train the budget with interruptions, checkpoints and restarts (interval: the step "
            "time's); eff vs N: tokens/s per GPU against that at N GPUs, the hardware's smallest count that fits; "
            "MFU: model FLOPs over "
            "the BF16 peak, attention over the full s×s scores (non-causal); goodput: work kept / wall time"
            + (
                "."
                if width >= WIDE
                else f"; interval, tok/s/GPU, MFU and goodput need {WIDE} columns (or --json)."
            ),
            style="dim",
        )
    )
    never = [p for p in doc.points if p.fits and not p.finishes]
    if never:
        counts = ", ".join(dict.fromkeys(f"{p.hardware} × {p.gpus:,}" for p in never))
        why = (never[0].reason or "").removeprefix("never finishes: ")
        parts.append(Text(f"Never finishes at {counts}: {why}.", style="dim"))
    missing = [p for p in doc.points if not p.fits and p.reason and short_reason(p.reason) != p.reason]
    if missing:
        parts.append(Text(f"Nearest plan at {missing[0].hardware} × {missing[0].gpus:,}: {missing[0].reason} "
                          "(--format json gives each count's).", style="dim"))  # fmt: skip
    awkward = [p for p in doc.points if p.awkward_batch]
    if awkward:
        counts = ", ".join(dict.fromkeys(f"{p.gpus:,}" for p in awkward))
        parts.append(
            Text(
                f"† an awkward batch at {counts} GPUs: d must divide the batch's sequences, which forces t·p·cp to "
                "a multiple of GPUs / gcd(GPUs, sequences), a model-parallel size the count would not otherwise "
                "need; another batch or count may run faster per GPU.",
                style="dim",
            )
        )
    parts += [Text("Answers", style="bold"), *(Text("  " + line) for line in answer_lines(doc))]
    parts += [Text("Assumptions", style="bold"), *(Text("  • " + line) for line in doc.assumptions)]
    return Group(*parts)
