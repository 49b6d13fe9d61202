"""The rich table of `pplan compare`: two plans' terms side by side with B − A, B / A and the changed settings
that moved each, and a caption naming the settings that differ, the step-time parts that move the most, and
whether the step times are tied within A's interval.

The reports are files a user hands over, not profiles pplan validated: every name and label read from them is
printed escaped (`pplan.profiles.text.escaped`), so no control character, line or rich markup reaches the
terminal."""

from __future__ import annotations

from rich.table import Table

from pplan.compare import Term, Tie
from pplan.profiles.text import escaped

_FORMATS = {"s": "{:.4g}", "GB": "{:.2f}", "tokens/s": "{:,.0f}", "%": "{:.2f}"}
MOVED_SHOWN = 4
"""At most this many settings named in a term's "moved by" cell (the caption lists them all)."""


def _value(term: Term, x: float) -> str:
    return _FORMATS[term.unit].format(x)


SHORT = {
    "tp": "t", "pp": "p", "dp": "d", "vp": "v", "micro_batch": "b", "num_microbatches": "m", "global_batch": "batch",
    "zero_stage": "Z", "recompute": "rc", "sequence_parallel": "sp", "offload_modules": "offload",
    "overlap_p2p_comm": "p2p overlap", "grad_dtype": "grads", "moment_dtype": "moments", "shard_group": "shards",
    "seq_len": "seq",
}  # fmt: skip
"""The cut's own letters for the settings (the JSON names them in full)."""


def _moved(term: Term) -> str:
    if not term.differs:
        return ""
    if not term.moved_by:
        return "–"
    names = [SHORT.get(name, name) for name in term.moved_by]
    more = len(names) - MOVED_SHOWN
    return " ".join(names[:MOVED_SHOWN]) + (f" +{more}" if more > 0 else "")


def compare_table(
    terms: list[Term], cut_a: str, cut_b: str, changed: dict[str, tuple[str, str]], tie: Tie | None
) -> Table:
    table = Table(
        title=f"A: {escaped(cut_a)}\nB: {escaped(cut_b)}",
        title_justify="left",
        caption=_caption(terms, changed, tie),
        caption_justify="left",
    )
    for col in ("term", "unit", "A", "B", "B − A", "B / A", "moved by"):
        table.add_column(col, justify="left" if col in ("term", "unit", "moved by") else "right")
    group = None
    for term in terms:
        if group is not None and term.group != group:
            table.add_section()
        group = term.group
        ratio = "–" if term.ratio is None else f"{term.ratio:.3f}"
        delta = term.delta if term.differs else 0.0
        sign = "+" if delta > 0 else ""
        table.add_row(escaped(term.name), term.unit, _value(term, term.a), _value(term, term.b),
                      sign + _value(term, delta), ratio, _moved(term))  # fmt: skip
    return table


def _caption(terms: list[Term], changed: dict[str, tuple[str, str]], tie: Tie | None) -> str:
    lines = []
    if changed:
        said = ", ".join(
            f"{SHORT.get(name, name)} {escaped(a)} → {escaped(b)}" for name, (a, b) in changed.items()
        )
        lines.append(f"Settings that differ: {said}.")
    else:
        lines.append("The two reports have the same settings.")
    parts = [t for t in terms if t.group == "step" and t.name != "step time"]
    step = next((t for t in terms if t.name == "step time"), None)
    if step is None or not parts or tie is None:
        lines.append("No step time in one of the reports (pass durations other than analytic): memory only.")
        return "\n".join(lines)
    moved = sorted(parts, key=lambda t: -abs(t.delta))[:3]
    said = ", ".join(
        f"{escaped(t.name)} {'+' if t.delta > 0 else ''}{t.delta:.3g} s" for t in moved if t.differs
    )
    lines.append(f"Step time B − A = {step.delta:+.3g} s; the parts that move most: {said or 'none'}.")
    low, high = tie.a_interval_s
    if tie.tied:
        lines.append(
            f"Tied: B's step ({tie.b_step_s:.4g} s) lies within A's interval ({low:.4g}–{high:.4g} s), so at "
            "pplan's accuracy neither plan is the faster."
        )
    else:
        side = "faster" if tie.b_step_s < low else "slower"
        lines.append(
            f"Not tied: B's step ({tie.b_step_s:.4g} s) lies outside A's interval ({low:.4g}–{high:.4g} s): B is "
            f"{side}."
        )
    return "\n".join(lines)
