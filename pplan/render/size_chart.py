"""Drawings of a `pplan size` sweep: time to train and cost against GPU count (both log–log) as a standalone SVG,
and the time-to-train chart alone as a compact terminal plot (rich).

Owns only presentation: it draws the `SizeDocument` (`pplan.documents.size`) it is handed and computes nothing
the document does not already say (the Pareto front is the document's `answers.pareto`). SVG markup comes from
`pplan.render.svg`. Only points that fit are drawn; one colour (and, in the terminal, one marker character) per
hardware in the order the inputs list them. The cost panel is in US dollars when every fitted point has a price,
else in GPU-hours for every point (one axis, one unit).

SVG hooks for tests and scripts: each data point is a `<circle class="point">` with `data-panel` ("time" or
"cost"), `data-hardware`, `data-gpus` and `data-value` (days, dollars or GPU-hours); each hardware's line is a
`<polyline class="series">` with `data-panel` and `data-hardware`; each Pareto point is a `<circle class="pareto">`
ring in both panels (same data attributes); the deadline is a `<line class="deadline">` in the time panel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from pplan.documents.size import SizeDocument, SizePointOut
from pplan.render import svg

COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#B279A2", "#72B7B2", "#9D755D", "#EECA3B")
MARKERS = ("o", "x", "+", "*", "@", "%", "&", "=")
"""Terminal marker per hardware (ASCII, one cell wide in any terminal)."""
CLASH = "#"
"""Terminal marker where points of several hardware share a cell."""
GREY = "#555555"
AXIS = "#444444"
GRID = "#E5E5E5"

SVG_WIDTH = 1200
PANEL_W = 460
PANEL_H = 330
PANEL_TOP = 96
PANEL_LEFTS = (90, 680)
LEGEND_ROW_H = 22

TERMINAL_MIN_WIDTH = 60
TERMINAL_MAX_WIDTH = 140
TERMINAL_ROWS = 13
"""Plot rows of the terminal chart (with the title, axis, tick labels and legend: about 18 lines)."""

MIN_DECADES = 0.6
"""The narrowest axis span (log10): a single value or identical values still get an axis around them."""


# --- shared ------------------------------------------------------------------------------------------------------


def _fitted(doc: SizeDocument) -> list[SizePointOut]:
    """Points with a plan and a positive finite wall time, the only ones drawn (log axes)."""
    return [
        p
        for p in doc.points
        if p.fits and p.wall_days is not None and math.isfinite(p.wall_days) and p.wall_days > 0
    ]


def _hardware_order(doc: SizeDocument) -> list[str]:
    """Every hardware named, the inputs' order first, then any only the points name."""
    out = list(dict.fromkeys(doc.inputs.hardware))
    for p in doc.points:
        if p.hardware not in out:
            out.append(p.hardware)
    return out


def _series(points: Sequence[SizePointOut], hardware: str) -> list[SizePointOut]:
    return sorted((p for p in points if p.hardware == hardware), key=lambda p: p.gpus)


def _label(point: SizePointOut) -> str:
    """The document's "hardware × GPUs" label (`pplan.sizing.document.label`)."""
    return f"{point.hardware} × {point.gpus}"


def _short(v: float) -> str:
    """A tick label: 0.5, 20, 300, 1k, 20k, 3M."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"


def _tokens(v: float) -> str:
    """A token count in words: 300B, 1.5T."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def _days(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


@dataclass(frozen=True)
class LogAxis:
    """A log10 axis over [10**lo, 10**hi]."""

    lo: float
    hi: float

    @classmethod
    def around(cls, values: Sequence[float], pad: float = 0.06) -> LogAxis:
        """An axis holding every (positive) value, padded by `pad` of its span and at least `MIN_DECADES`
        wide."""
        logs = [math.log10(v) for v in values if v > 0 and math.isfinite(v)] or [0.0]
        lo, hi = min(logs), max(logs)
        if hi - lo < MIN_DECADES:
            mid = (lo + hi) / 2
            lo, hi = mid - MIN_DECADES / 2, mid + MIN_DECADES / 2
        span = hi - lo
        return cls(lo - pad * span, hi + pad * span)

    def fraction(self, v: float) -> float:
        """0 at the axis's low end, 1 at its high end."""
        return (math.log10(v) - self.lo) / (self.hi - self.lo)

    def ticks(self) -> list[float]:
        """Powers of ten inside the axis; while fewer than three would show, 2 and 5 between them too while that
        gives four (then 3 while that gives three, then every digit), so a narrow axis (a cost within one
        decade) still has labels to read a point's value against."""
        for mantissas, least in (((1,), 3), ((1, 2, 5), 4), ((1, 2, 3, 5), 3), (tuple(range(1, 10)), 0)):
            out = self._multiples(mantissas)
            if len(out) >= least:
                return out
        return []  # unreachable: the last set accepts any count

    def minor(self) -> list[float]:
        """Every digit × a power of ten inside the axis (the unlabelled ticks)."""
        return self._multiples(tuple(range(1, 10)))

    def _multiples(self, mantissas: tuple[int, ...]) -> list[float]:
        out = []
        for k in range(math.floor(self.lo), math.ceil(self.hi) + 1):
            for m in mantissas:
                v = float(f"{m}e{k}")  # exact decimal, not m * 10**k rounding
                if self.lo <= math.log10(v) <= self.hi:
                    out.append(v)
        return out


# --- SVG ---------------------------------------------------------------------------------------------------------


def _cost_in_usd(points: Sequence[SizePointOut]) -> bool:
    """Whether every fitted point has a price (else the cost panel is in GPU-hours)."""
    return bool(points) and all(p.cost_usd is not None for p in points)


def _spend(point: SizePointOut, usd: bool) -> float | None:
    v = point.cost_usd if usd else point.gpu_hours
    return v if v is not None and math.isfinite(v) and v > 0 else None


def _tooltip(p: SizePointOut) -> str:
    wall = f"wall time {_days(p.wall_days or 0.0)} days"
    if p.wall_interval_days is not None:
        wall += f" ({_days(p.wall_interval_days[0])}–{_days(p.wall_interval_days[1])})"
    spend = []
    if p.cost_usd is not None:
        spend.append(f"${p.cost_usd:,.0f}")
    if p.gpu_hours is not None:
        spend.append(f"{p.gpu_hours:,.0f} GPU-hours")
    lines = [f"{p.hardware} × {p.gpus} GPUs", wall]
    if spend:
        lines.append(", ".join(spend))
    if p.plan is not None:
        lines.append(f"plan {p.plan}")
    return "\n".join(lines)


def _nothing_fits_svg(doc: SizeDocument) -> str:
    """A small SVG saying that no point has a plan, with each hardware's reason at its largest count."""
    lines = []
    for hw in _hardware_order(doc):
        series = _series(doc.points, hw)
        reason = series[-1].reason if series else None
        lines.append(f"{hw} × {series[-1].gpus}: {reason}" if series and reason else hw)
    width, height = 720, 58 + 18 * len(lines)
    out = [
        svg.background(width, height),
        svg.text(
            16,
            26,
            f"{doc.inputs.model}, {_tokens(doc.inputs.train_tokens)} tokens: nothing fits",
            class_="nothing-fits",
            font_size=15,
            font_weight="bold",
        ),
        svg.text(16, 46, "No GPU count of any hardware has a plan.", font_size=12, fill=GREY),
    ]
    for k, line in enumerate(lines):
        out.append(svg.text(16, 66 + 18 * k, line, font_size=12, fill=GREY))
    return svg.document(svg.open_svg(width, height), out)


@dataclass(frozen=True)
class Panel:
    """One log–log panel: its name (the points' `data-panel`), left edge and axes."""

    name: str
    left: int
    x_axis: LogAxis
    y_axis: LogAxis

    def x(self, gpus: float) -> str:
        return f"{self.left + self.x_axis.fraction(gpus) * PANEL_W:.1f}"

    def y(self, v: float) -> str:
        return f"{PANEL_TOP + PANEL_H - self.y_axis.fraction(v) * PANEL_H:.1f}"

    def frame(self, caption: str, y_title: str, y_prefix: str = "") -> list[str]:
        """The caption, grid, axes, ticks (labelled at 1, 2, 5 × powers of ten; minor at every digit) and axis
        titles."""
        top, bottom, left, right = PANEL_TOP, PANEL_TOP + PANEL_H, self.left, self.left + PANEL_W
        out = [svg.text(left, top - 14, caption, font_size=13, font_weight="bold")]
        for v in self.y_axis.ticks():
            y = self.y(v)
            out.append(svg.line(left, y, right, y, stroke=GRID))
            out.append(
                svg.text(
                    left - 8, f"{float(y) + 4:.1f}", f"{y_prefix}{_short(v)}", font_size=11, text_anchor="end"
                )
            )
        for v in self.y_axis.minor():
            out.append(svg.line(left - 3, self.y(v), left, self.y(v), stroke=AXIS))
        for v in self.x_axis.ticks():
            x = self.x(v)
            out.append(svg.line(x, top, x, bottom, stroke=GRID))
            out.append(svg.line(x, bottom, x, bottom + 5, stroke=AXIS))
            out.append(svg.text(x, bottom + 18, _short(v), font_size=11, text_anchor="middle"))
        for v in self.x_axis.minor():
            out.append(svg.line(self.x(v), bottom, self.x(v), bottom + 3, stroke=AXIS))
        out.append(svg.line(left, bottom, right, bottom, stroke=AXIS))
        out.append(svg.line(left, top, left, bottom, stroke=AXIS))
        out.append(
            svg.text(left + PANEL_W // 2, bottom + 38, "GPUs (log)", font_size=12, text_anchor="middle")
        )
        tx, ty = left - 62, top + PANEL_H // 2
        out.append(
            svg.text(tx, ty, y_title, font_size=12, text_anchor="middle", transform=f"rotate(-90 {tx} {ty})")
        )
        return out

    def level(self, value: float, class_: str, caption: str, colour: str) -> list[str]:
        """A dashed horizontal line across the panel at `value`, captioned above its right end."""
        y = self.y(value)
        return [
            svg.line(
                self.left,
                y,
                self.left + PANEL_W,
                y,
                class_=class_,
                stroke=colour,
                stroke_width=1.5,
                stroke_dasharray="6 4",
            ),
            svg.text(
                self.left + PANEL_W - 4,
                f"{float(y) - 5:.1f}",
                caption,
                font_size=11,
                text_anchor="end",
                fill=colour,
            ),
        ]

    def band(self, hardware: str, series: Sequence[SizePointOut], colour: str) -> list[str]:
        """The wall-time interval: a shaded band along the series (two points or more) and a bar at each
        point."""
        bounded = [(p.gpus, p.wall_interval_days) for p in series if p.wall_interval_days is not None]
        out = []
        if len(bounded) >= 2:
            upper = [f"{self.x(g)},{self.y(hi)}" for g, (_, hi) in bounded]
            lower = [f"{self.x(g)},{self.y(lo)}" for g, (lo, _) in reversed(bounded)]
            out.append(
                svg.element(
                    "polygon",
                    class_="band",
                    data_hardware=hardware,
                    points=" ".join(upper + lower),
                    fill=colour,
                    fill_opacity=0.15,
                    stroke="none",
                )
            )
        for g, (lo, hi) in bounded:
            x = self.x(g)
            out.append(
                svg.line(x, self.y(lo), x, self.y(hi), class_="interval", stroke=colour, stroke_opacity=0.6)
            )
        return out

    def series(
        self, hardware: str, values: Sequence[tuple[SizePointOut, float]], colour: str, pareto: set[str]
    ) -> list[str]:
        """One hardware's line and points (each with its tooltip), and a ring on each Pareto point."""
        if not values:
            return []
        out = [
            svg.element(
                "polyline",
                class_="series",
                data_panel=self.name,
                data_hardware=hardware,
                points=" ".join(f"{self.x(p.gpus)},{self.y(v)}" for p, v in values),
                fill="none",
                stroke=colour,
                stroke_width=2,
            )
        ]
        for p, v in values:
            tags: dict[str, svg.Value] = {
                "data_panel": self.name,
                "data_hardware": hardware,
                "data_gpus": p.gpus,
                "data_value": f"{v:.6g}",
            }
            if _label(p) in pareto:
                out.append(
                    svg.element(
                        "circle",
                        class_="pareto",
                        **tags,
                        cx=self.x(p.gpus),
                        cy=self.y(v),
                        r=7,
                        fill="none",
                        stroke="#222222",
                        stroke_width=1.5,
                    )
                )
            out.append(
                svg.element(
                    "circle",
                    svg.title(_tooltip(p)),
                    class_="point",
                    **tags,
                    cx=self.x(p.gpus),
                    cy=self.y(v),
                    r=3.5,
                    fill=colour,
                )
            )
        return out


def _legend(
    hardware: Sequence[str], drawn: set[str], colours: dict[str, str], y0: int
) -> tuple[list[str], int]:
    """Legend entries left to right, wrapping at the drawing's width, then the Pareto ring; returns the parts and
    the height they take."""
    start = PANEL_LEFTS[0]
    out = []
    x, y = start, y0
    entries = [(hw, hw if hw in drawn else f"{hw} (nothing fits)") for hw in hardware]
    for hw, words in entries:
        w = 32 + round(len(words) * 7.2) + 28
        if x + w > SVG_WIDTH - 20 and x > start:
            x, y = start, y + LEGEND_ROW_H
        if hw in drawn:
            out.append(
                svg.line(
                    x, y, x + 24, y, class_="legend", data_hardware=hw, stroke=colours[hw], stroke_width=2
                )
            )
            out.append(svg.element("circle", cx=x + 12, cy=y, r=3.5, fill=colours[hw]))
        out.append(svg.text(x + 32, y + 4, words, font_size=12, fill=None if hw in drawn else GREY))
        x += w
    ring = "Pareto front: time against cost"
    if x + 40 + round(len(ring) * 7.2) > SVG_WIDTH - 20 and x > start:
        x, y = start, y + LEGEND_ROW_H
    out.append(svg.element("circle", cx=x + 12, cy=y, r=7, fill="none", stroke="#222222", stroke_width=1.5))
    out.append(svg.text(x + 28, y + 4, ring, font_size=12))
    return out, y - y0 + LEGEND_ROW_H


def size_svg(doc: SizeDocument) -> str:
    """A standalone SVG of a sizing sweep: (a) wall time to train in days, its interval shaded, and (b) cost (US
    dollars, or GPU-hours when some fitted point has no price) against GPU count, both log–log; one line per
    hardware, the Pareto points ringed in both, the deadline dashed in (a) and the budget in (b) (dollars only)
    when given. With nothing that fits, a small SVG saying so."""
    points = _fitted(doc)
    if not points:
        return _nothing_fits_svg(doc)
    hardware = _hardware_order(doc)
    colours = {hw: COLOURS[k % len(COLOURS)] for k, hw in enumerate(hardware)}
    usd = _cost_in_usd(points)
    pareto = set(doc.answers.pareto)
    deadline = doc.inputs.deadline_days
    deadline = deadline if deadline is not None and math.isfinite(deadline) and deadline > 0 else None
    budget = doc.inputs.budget_usd if usd else None
    budget = budget if budget is not None and math.isfinite(budget) and budget > 0 else None

    x_axis = LogAxis.around([p.gpus for p in points])
    days = [p.wall_days or 0.0 for p in points]
    days += [v for p in points if p.wall_interval_days is not None for v in p.wall_interval_days]
    spends = [s for p in points if (s := _spend(p, usd)) is not None]
    time = Panel("time", PANEL_LEFTS[0], x_axis, LogAxis.around(days + ([deadline] if deadline else [])))
    cost = Panel("cost", PANEL_LEFTS[1], x_axis, LogAxis.around(spends + ([budget] if budget else [])))

    legend_y = PANEL_TOP + PANEL_H + 72
    legend, legend_h = _legend(hardware, {p.hardware for p in points}, colours, legend_y)
    height = legend_y + legend_h + 8
    spend_words = "cost, US dollars" if usd else "GPU-hours (not every point has a price)"
    out = [
        svg.background(SVG_WIDTH, height),
        svg.text(
            20,
            24,
            f"Time and cost to train {doc.inputs.model} on {_tokens(doc.inputs.train_tokens)} tokens",
            font_size=15,
            font_weight="bold",
        ),
        svg.text(
            20,
            44,
            f"{doc.inputs.batch_policy}; wall time with interruptions, checkpoints and restarts (shaded: its "
            "interval); only points that fit and finish",
            font_size=11,
            fill=GREY,
        ),
    ]
    out += time.frame("(a) time to train", "days to train (wall time, log)")
    out += cost.frame("(b) cost" if usd else "(b) GPU-hours", f"{spend_words}, log", "$" if usd else "")
    if deadline is not None:
        out += time.level(deadline, "deadline", f"deadline {deadline:g} days", "#C0392B")
    if budget is not None:
        out += cost.level(budget, "budget", f"budget ${budget:,.0f}", "#C0392B")
    for hw in hardware:
        series = _series(points, hw)
        if not series:
            continue
        out += time.band(hw, series, colours[hw])
        out += time.series(hw, [(p, p.wall_days or 0.0) for p in series], colours[hw], pareto)
        costed = [(p, s) for p in series if (s := _spend(p, usd)) is not None]
        out += cost.series(hw, costed, colours[hw], pareto)
    out += legend
    return svg.document(svg.open_svg(SVG_WIDTH, height), out)


# --- terminal ----------------------------------------------------------------------------------------------------


def _wrap(entries: Sequence[Text], width: int, indent: str = "  ") -> list[Text]:
    """Legend entries on as few lines of at most `width` cells as they fit on, three spaces apart."""
    lines: list[Text] = []
    current = Text(indent)
    for entry in entries:
        gap = "   " if current.plain.strip() else ""
        if current.plain.strip() and len(current.plain) + len(gap) + len(entry.plain) > width:
            lines.append(current)
            current, gap = Text(indent), ""
        current.append(gap)
        current.append_text(entry)
        if len(current.plain) > width:
            current.truncate(width)
    if current.plain.strip():
        lines.append(current)
    return lines


def size_terminal(doc: SizeDocument, width: int) -> Text:
    """A compact terminal chart of wall time to train (days, log) against GPU count (log): one marker character
    per hardware (`MARKERS`, `CLASH` where several share a cell), the deadline as a row of '-' when given, and a
    legend. At most `width` columns (drawn at `TERMINAL_MIN_WIDTH` when given less; no wider than
    `TERMINAL_MAX_WIDTH`) and about 18 lines."""
    width = min(max(width, TERMINAL_MIN_WIDTH), TERMINAL_MAX_WIDTH)
    head = Text(
        f"Days to train {doc.inputs.model} ({_tokens(doc.inputs.train_tokens)} tokens) against GPUs, log–log"
    )
    head.truncate(width, overflow="ellipsis")
    head.stylize("bold")
    points = _fitted(doc)
    if not points:
        return Text("\n").join(
            [head, Text("nothing fits: no GPU count of any hardware has a plan", style="grey62")]
        )
    hardware = [hw for hw in _hardware_order(doc) if any(p.hardware == hw for p in points)]
    marker = {hw: MARKERS[k % len(MARKERS)] for k, hw in enumerate(hardware)}
    colour = {hw: COLOURS[k % len(COLOURS)] for k, hw in enumerate(hardware)}
    deadline = doc.inputs.deadline_days
    deadline = deadline if deadline is not None and math.isfinite(deadline) and deadline > 0 else None

    x_axis = LogAxis.around([p.gpus for p in points], pad=0.03)
    y_axis = LogAxis.around([p.wall_days or 0.0 for p in points] + ([deadline] if deadline else []), pad=0.03)
    y_ticks = y_axis.ticks()
    label_w = max(len(_short(v)) for v in y_ticks) if y_ticks else 1
    plot_w = width - label_w - 2  # the labels, the axis column, and one spare column at the right
    rows = TERMINAL_ROWS

    def column(gpus: float) -> int:
        return min(plot_w - 1, max(0, round(x_axis.fraction(gpus) * (plot_w - 1))))

    def row(days: float) -> int:
        return min(rows - 1, max(0, rows - 1 - round(y_axis.fraction(days) * (rows - 1))))

    cells: list[list[tuple[str, str]]] = [[(" ", "")] * plot_w for _ in range(rows)]
    if deadline is not None:
        cells[row(deadline)] = [("-", "red")] * plot_w
    owner: dict[tuple[int, int], str] = {}
    clash = False
    for p in points:
        at = (row(p.wall_days or 0.0), column(p.gpus))
        if owner.setdefault(at, p.hardware) != p.hardware:
            cells[at[0]][at[1]] = (CLASH, "bold")
            clash = True
        else:
            cells[at[0]][at[1]] = (marker[p.hardware], f"bold {colour[p.hardware]}")
    labels: dict[int, str] = {}
    for v in reversed(y_ticks):  # the larger value wins a shared row
        labels.setdefault(row(v), _short(v))

    out = head.copy()
    for r in range(rows):
        line = Text("\n" + labels.get(r, "").rjust(label_w), style="grey62")
        line.append("┤" if r in labels else "│", style="grey62")
        for char, style in cells[r]:
            line.append(char, style=style or None)
        out.append_text(line)
    axis = ["─"] * plot_w
    ticks = [" "] * (plot_w + 1)
    free = 0  # the first column a tick label may start at
    for v in x_axis.ticks():
        col = column(v)
        axis[col] = "┬"
        tag = _short(v)
        start = max(free, min(col - len(tag) // 2, plot_w + 1 - len(tag)))
        if start + len(tag) <= plot_w + 1:
            ticks[start : start + len(tag)] = list(tag)
            free = start + len(tag) + 1
    out.append("\n" + " " * label_w + "└" + "".join(axis), style="grey62")
    tick_row = "".join(ticks).rstrip()
    unit = "GPUs"
    tick_row = tick_row + " " * max(1, plot_w + 1 - len(tick_row) - len(unit)) + unit
    if len(tick_row) > plot_w + 1:
        tick_row = "".join(ticks).rstrip()
    out.append("\n" + " " * label_w + tick_row, style="grey62")

    entries = [Text(marker[hw], style=f"bold {colour[hw]}") + Text(f" {hw}") for hw in hardware]
    if deadline is not None:
        entries.append(Text("---", style="red") + Text(f" deadline {deadline:g} days"))
    if clash:
        entries.append(Text(CLASH, style="bold") + Text(" several hardware"))
    entries.append(Text("y: days (wall time)", style="grey62"))
    for line in _wrap(entries, width):
        out.append("\n")
        out.append_text(line)
    return out
