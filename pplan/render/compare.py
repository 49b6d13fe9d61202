"""The rich table of `pplan compare`: two plans' terms side by side with B − A and B / A, and a caption naming the
step-time parts that move the most.

The reports are files a user hands over, not profiles pplan validated: every name and label read from them is
printed escaped (`pplan.profiles.text.escaped`), so no control character, line or rich markup reaches the
terminal."""

from __future__ import annotations

from rich.table import Table

from pplan.compare import Term
from pplan.profiles.text import escaped

_FORMATS = {"s": "{:.4g}", "GB": "{:.2f}", "tokens/s": "{:,.0f}", "%": "{:.2f}"}


def _value(term: Term, x: float) -> str:
    return _FORMATS[term.unit].format(x)


def compare_table(terms: list[Term], cut_a: str, cut_b: str) -> Table:
    table = Table(
        title=f"A: {escaped(cut_a)}\nB: {escaped(cut_b)}",
        title_justify="left",
        caption=_caption(terms),
        caption_justify="left",
    )
    for col in ("term", "unit", "A", "B", "B − A", "B / A"):
        table.add_column(col, justify="left" if col in ("term", "unit") else "right")
    group = None
    for term in terms:
        if group is not None and term.group != group:
            table.add_section()
        group = term.group
        ratio = "–" if term.ratio is None else f"{term.ratio:.3f}"
        sign = "+" if term.delta > 0 else ""
        table.add_row(escaped(term.name), term.unit, _value(term, term.a), _value(term, term.b),
                      sign + _value(term, term.delta), ratio)  # fmt: skip
    return table


def _caption(terms: list[Term]) -> str:
    parts = [t for t in terms if t.group == "step" and t.name != "step time"]
    step = next((t for t in terms if t.name == "step time"), None)
    if step is None or not parts:
        return "No step time in one of the reports (pass durations other than analytic): memory only."
    moved = sorted(parts, key=lambda t: -abs(t.delta))[:3]
    said = ", ".join(
        f"{escaped(t.name)} {'+' if t.delta > 0 else ''}{t.delta:.3g} s" for t in moved if t.delta
    )
    return f"Step time B − A = {step.delta:+.3g} s; the parts that move most: {said or 'none'}."
