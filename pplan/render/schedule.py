"""Drawings of simulated pipeline schedules: a terminal Gantt chart (rich), the same picture as standalone SVG,
and the bubble-versus-micro-batches chart for several schedules.

Owns only presentation: it draws the `Timeline` (`pplan.schedules.timeline.simulate`) or the bubble curves
(`pplan.schedules.bubble.bubble_curves`) it is handed and simulates nothing; SVG markup comes from
`pplan.render.svg`. Colours: one hue per pass kind (F blue, B green, I light green, W ochre), lighter for a rank's
later chunks; idle time is left blank (dots in the terminal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from pplan.render import svg
from pplan.schedules.actions import Action
from pplan.schedules.bubble import BubbleCurve, Measure, in_window_fraction_of_ideal
from pplan.schedules.timeline import Timeline

BASE_COLOURS = {"F": "#4C78A8", "B": "#3C8D3A", "I": "#7FC97F", "W": "#D9912B"}
KIND_NAMES = {
    "F": "forward",
    "B": "backward (I + W)",
    "I": "backward, input grad",
    "W": "backward, weight grad",
}


def _mix(hex_colour: str, white: float) -> str:
    """Blend `hex_colour` towards white by the fraction `white` (towards black when negative)."""
    r, g, b = (int(hex_colour[k : k + 2], 16) for k in (1, 3, 5))
    target = 255 if white >= 0 else 0
    r, g, b = (round(c + (target - c) * abs(white)) for c in (r, g, b))
    return f"#{r:02X}{g:02X}{b:02X}"


def _ink(hex_colour: str) -> str:
    """Black or white text, whichever reads better on `hex_colour`."""
    r, g, b = (int(hex_colour[k : k + 2], 16) for k in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#FFFFFF"


def pass_colour(kind: str, chunk: int, chunks: int) -> str:
    """Fill colour of a pass: the kind's hue, lightened for the rank's later chunks (chunk 0 darkest)."""
    step = 0.45 / max(1, chunks - 1) if chunks > 1 else 0.0
    return _mix(BASE_COLOURS[kind], step * chunk)


def _chunk_index(timeline: Timeline) -> dict[int, tuple[int, int]]:
    """stage → (its index among its rank's stages, how many stages the rank holds)."""
    s = timeline.schedule
    out: dict[int, tuple[int, int]] = {}
    for r in range(s.p):
        mine = s.stages_of(r)
        for k, st in enumerate(mine):
            out[st] = (k, len(mine))
    return out


def _kinds_used(timeline: Timeline) -> list[str]:
    used = {a.kind for row in timeline.schedule.actions for a in row}
    return [k for k in ("F", "B", "I", "W") if k in used]


def _summary(timeline: Timeline, unit: str) -> str:
    s = timeline.schedule
    u = f" {unit}" if unit else ""
    v = f", v={s.v}" if s.v > 1 else ""
    span = ""
    if abs(timeline.max_idle_in_span - timeline.bubble) > 1e-9 * max(1.0, timeline.makespan):
        span = f" (inside rank windows {in_window_fraction_of_ideal(timeline):.1%})"
    return (
        f"{s.name}: p={s.p}{v}, m={s.m}; step {timeline.makespan:.4g}{u}; bubble "
        f"{timeline.bubble_fraction_of_step:.1%} of step, {timeline.bubble_fraction_of_ideal:.1%} of ideal{span}; "
        f"peak in flight per rank {max(timeline.peak_in_flight_per_rank)}; P2P {timeline.p2p_messages}"
    )


# --- terminal ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    """One pass as drawn: its columns [start, end) on the whole step's column axis."""

    start: int
    end: int
    action: Action
    chunk: int
    """The pass's chunk among its rank's stages (0 for the first)."""
    fill: str
    """Colour shown (the kind's hue; a darker shade where it follows a block of the same colour)."""


@dataclass(frozen=True)
class _Layout:
    """Where the terminal drawing puts time: `cols_per_unit` columns per unit of time, the whole step `total`
    columns wide, cut into bands of `band_w` columns drawn one under the other."""

    cols_per_unit: float
    total: int
    band_w: int
    need: int
    """Columns a pass needs for its label (kind letter without colour, micro-batch number, one spare)."""

    def col(self, t: float) -> int:
        return min(self.total, math.floor(t * self.cols_per_unit + 0.5))

    @property
    def bands(self) -> list[tuple[int, int]]:
        return [(a, min(a + self.band_w, self.total)) for a in range(0, self.total, self.band_w)]


MAX_BANDS = 16
"""Most bands (stretches of time drawn one under the other) the terminal drawing cuts a step into so that every
pass shows its micro-batch number; past it, the step is drawn in one band of the terminal's width."""
MAX_DRAWING_LINES = 480
"""Most rank rows of all bands together (bands × ranks): with many ranks, fewer bands."""
PLAIN_MARKS = {"F": ">", "B": "<", "I": "<", "W": "="}
"""Without colour: the character that fills a pass after its letter and number (forward →, backward ←)."""


@dataclass(frozen=True)
class TimelineView:
    """A rich renderable Gantt chart of a `Timeline`: one row per rank, time scaled to the width available.

    Every pass is labelled with its micro-batch number; when the terminal is too narrow for that, time is cut
    into bands drawn one under the other (at most `MAX_BANDS`, `MAX_DRAWING_LINES` rank rows), each with its own
    time axis; a label that would be cut at a band's right edge runs a few columns past it. Passes too short
    for a number even then (very uneven pass times, or a step too long for the bands) show a letter (no colour)
    or nothing (colour). With colour each pass is a block of its kind's colour with its number centred; without
    colour (piped, NO_COLOR) each pass reads as its kind's letter, its number and a mark to its end: `F12>>`,
    `B12<<<<`, `I12<<`, `W12==`."""

    timeline: Timeline
    unit: str = ""
    title: bool = True

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        tl = self.timeline
        s = tl.schedule
        plain = console.no_color or console.color_system is None
        label_w = len(f"rank {s.p - 1}") + 1
        avail = max(10, options.max_width - label_w - 1)
        layout = self._layout(avail, plain)
        blocks = [self._blocks(r, layout) for r in range(s.p)]
        if self.title:
            yield Text(_summary(tl, self.unit), style="bold")
        bands = layout.bands
        for k, (a, b) in enumerate(bands):
            if k:
                yield Text("")
            for r in range(s.p):
                line = Text(f"rank {r}".ljust(label_w), style="bold", no_wrap=True, overflow="crop")
                line.append_text(self._row(blocks[r], a, b, layout, plain))
                yield line
            yield self._axis(label_w, a, b, layout, options.max_width)
        short = any(len(_label(x, plain)) > x.end - x.start for row in blocks for x in row)
        yield self._legend(plain, len(bands), short)

    def _layout(self, avail: int, plain: bool) -> _Layout:
        tl = self.timeline
        acts = [a for row in tl.schedule.actions for a in row]
        digits = len(str(max((a.microbatch for a in acts), default=0)))
        need = digits + (2 if plain else 1)
        shortest = min(
            (
                e - s
                for r in range(tl.schedule.p)
                for s, e in zip(tl.start[r], tl.end[r], strict=True)
                if e > s
            ),
            default=0.0,
        )
        if not (tl.makespan > 0 and shortest > 0):
            return _Layout(0.0, avail, avail, need)
        wanted = math.ceil(tl.makespan * need / shortest)
        if wanted <= avail:  # one band, stretched to the width as before
            return _Layout(avail / tl.makespan, avail, avail, need)
        band_w = max(10, avail - (need - 1))  # room for a label that runs past the band's edge
        most = max(1, min(MAX_BANDS, MAX_DRAWING_LINES // max(1, tl.schedule.p)))
        if wanted > most * band_w:  # too long to number every pass: one band of the terminal's width
            return _Layout(avail / tl.makespan, avail, avail, need)
        total = math.ceil(wanted / band_w) * band_w  # fill the last band too
        return _Layout(total / tl.makespan, total, band_w, need)

    def _blocks(self, r: int, layout: _Layout) -> list[_Block]:
        tl = self.timeline
        chunks = _chunk_index(tl)
        out: list[_Block] = []
        last = ""
        toggle = False
        last_end = -1
        for a, t0, t1 in tl.intervals(r):
            c0, c1 = layout.col(t0), layout.col(t1)
            if c1 <= c0:
                continue
            chunk, n = chunks[a.stage]
            fill = pass_colour(a.kind, chunk, n)
            # Two touching blocks of the same colour alternate with a slightly darker shade.
            toggle = not toggle if fill == last and c0 == last_end else False
            last, last_end = fill, c1
            out.append(_Block(c0, c1, a, chunk, _mix(fill, -0.18) if toggle else fill))
        return out

    def _row(self, blocks: list[_Block], a: int, b: int, layout: _Layout, plain: bool) -> Text:
        """Columns [a, b) of one rank's row; a label starting in the band is drawn whole, past `b` if need be."""
        text = Text()
        pos = a
        for x in blocks:
            if x.end <= a or x.start >= b:
                continue
            head = x.start >= a
            start = x.start if head else a
            end = min(x.end, b)
            label = _label(x, plain)
            if head and len(label) <= x.end - x.start:
                end = max(end, x.start + len(label))
            if start > pos:
                text.append("·" * (start - pos), style="grey50")
            text.append_text(_piece(x, end - start, head, plain))
            pos = end
        if pos < b:
            text.append("·" * (b - pos), style="grey50")
        return text

    def _axis(self, label_w: int, a: int, b: int, layout: _Layout, max_width: int) -> Text:
        width = b - a
        line = [" "] * (width + layout.need)
        scale = layout.cols_per_unit
        for t in _nice_ticks(self.timeline.makespan, max(2, layout.total // 12)):
            col = min(layout.total - 1, math.floor(t * scale + 0.5)) if scale > 0 else 0
            if not a <= col < b:
                continue
            tag = f"{t:g}"
            start = max(0, min(col - a, len(line) - len(tag)))
            line[start : start + len(tag)] = list(tag)
        body = " " * label_w + "".join(line).rstrip()
        u = f" ({self.unit})" if self.unit else ""
        if len(body) + len(u) <= max_width:
            body += u
        return Text(body, style="grey62", no_wrap=True, overflow="crop")

    def _legend(self, plain: bool, bands: int, short: bool) -> Text:
        text = Text("  ")
        for kind in _kinds_used(self.timeline):
            if plain:
                text.append(f"{kind}7{PLAIN_MARKS[kind] * 2}", style="bold")
                text.append(f" {KIND_NAMES[kind]}   ")
            else:
                fill = BASE_COLOURS[kind]
                text.append(f" {kind} ", style=f"bold {_ink(fill)} on {fill}")
                text.append(f" {KIND_NAMES[kind]}   ")
        text.append("···", style="grey50")
        text.append(" idle")
        notes = []
        if plain:
            notes.append("each pass: its kind, its micro-batch and a mark to its end")
        else:
            notes.append("numbers are micro-batches")
        if self.timeline.schedule.v > 1:
            notes.insert(
                0,
                "lower case = a later chunk on the rank" if plain else "lighter = a later chunk on the rank",
            )
        if short:
            notes.append("passes too short for a number show " + ("their letter" if plain else "none"))
        if bands > 1:
            notes.append(f"the step is drawn in {bands} bands of time, one under the other")
        text.append("   (" + "; ".join(notes) + ")", style="grey62")
        return text


def _label(x: _Block, plain: bool) -> str:
    """What a pass's start shows: its micro-batch, after its kind's letter without colour (lower case for a
    later chunk on the rank, as its colour is lighter)."""
    a = x.action
    if not plain:
        return str(a.microbatch)
    return f"{a.kind if x.chunk == 0 else a.kind.lower()}{a.microbatch}"


def _piece(x: _Block, span: int, head: bool, plain: bool) -> Text:
    """`span` columns of block `x`: with its label when `head` (the block's start), else its fill alone."""
    label = _label(x, plain)
    if plain:
        mark = PLAIN_MARKS[x.action.kind]
        if not head:
            body = mark * span
        elif len(label) <= span:
            body = label + mark * (span - len(label))
        else:
            body = label[0] + mark * (span - 1)
        return Text(body)
    fits = head and len(label) <= span
    body = label.center(span) if fits else " " * span
    return Text(body, style=f"{_ink(x.fill)} on {x.fill}")


def timeline_renderable(timeline: Timeline, unit: str = "") -> TimelineView:
    """The terminal drawing of `timeline` (print it with a rich Console)."""
    return TimelineView(timeline, unit)


# --- SVG ---------------------------------------------------------------------------------------------------------


def _nice_ticks(top: float, count: int) -> list[float]:
    """Round tick values from 0 to `top`, about `count` of them (just 0 when `top` is not a positive finite
    number)."""
    if not (math.isfinite(top) and top > 0):
        return [0.0]
    raw = top / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(k * mag for k in (1, 2, 2.5, 5, 10) if k * mag >= raw)
    n = int(top / step + 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


TIMELINE_TOP = 44
"""Height above the first lane: the summary line."""
TIMELINE_LANE_GAP = 4
TIMELINE_BELOW = 74
"""Height below the last lane: the time axis (44) and the legend (30)."""


def timeline_svg_height(timeline: Timeline, row_height: int = 26) -> int:
    """Height of `timeline_svg(timeline, row_height=row_height)`: one lane per rank between the title and the
    axis and legend."""
    return TIMELINE_TOP + timeline.schedule.p * (row_height + TIMELINE_LANE_GAP) + TIMELINE_BELOW


def timeline_svg(
    timeline: Timeline, width: int = 1200, unit: str = "", row_height: int = 26, y: int | None = None
) -> str:
    """A standalone SVG of `timeline`: one rect per action (class "action", with a tooltip), rank labels, a time
    axis, a legend and the bubble summary (placed at height `y` when nested in another SVG)."""
    s = timeline.schedule
    left, right, top = 70, 20, TIMELINE_TOP
    plot_w = width - left - right
    scale = plot_w / timeline.makespan if timeline.makespan > 0 else 1.0
    gap = TIMELINE_LANE_GAP
    plot_h = s.p * (row_height + gap)
    legend_y = top + plot_h + 44
    height = timeline_svg_height(timeline, row_height)
    chunks = _chunk_index(timeline)
    summary = _summary(timeline, unit)
    room = (width - left - 10) / (len(summary) * 0.62)  # the font size at which the summary fits the width
    out = [
        svg.background(width, height),
        svg.text(
            left, 20, summary, font_size=14 if room >= 14 else f"{max(8.0, room):.1f}", font_weight="bold"
        ),
    ]
    for r in range(s.p):
        y_r = top + r * (row_height + gap)
        out.append(svg.rect(left, y_r, plot_w, row_height, class_="lane", fill="#F3F3F3"))
        out.append(
            svg.text(
                left - 8, f"{y_r + row_height / 2 + 4:.1f}", f"rank {r}", font_size=12, text_anchor="end"
            )
        )
        for a, t0, t1 in timeline.intervals(r):
            x = left + t0 * scale
            w = max(0.5, (t1 - t0) * scale)
            chunk, n = chunks[a.stage]
            fill = pass_colour(a.kind, chunk, n)
            out.append(
                svg.rect(
                    f"{x:.2f}",
                    y_r,
                    f"{w:.2f}",
                    row_height,
                    tooltip=f"{a} [{t0:.4g}, {t1:.4g}]",
                    class_="action",
                    fill=fill,
                    stroke="#FFFFFF",
                    stroke_width=0.6,
                )
            )
            label = str(a.microbatch)
            font = min(12.0, row_height * 0.5, (w - 2) / (len(label) * 0.62))
            if font >= 7:
                out.append(
                    svg.text(
                        f"{x + w / 2:.2f}",
                        f"{y_r + row_height / 2 + font * 0.35:.2f}",
                        label,
                        font_size=f"{font:.0f}",
                        text_anchor="middle",
                        fill=_ink(fill),
                    )
                )
    axis_y = top + plot_h + 2
    out.append(svg.line(left, axis_y, left + plot_w, axis_y, stroke="#444444"))
    for t in _nice_ticks(timeline.makespan, max(2, plot_w // 90)):
        x = left + t * scale
        out.append(svg.line(f"{x:.2f}", axis_y, f"{x:.2f}", axis_y + 5, stroke="#444444"))
        out.append(svg.text(f"{x:.2f}", axis_y + 18, f"{t:g}", font_size=11, text_anchor="middle"))
    u = f" ({unit})" if unit else ""
    out.append(svg.text(left + plot_w, axis_y + 34, f"time{u}", font_size=11, text_anchor="end"))
    x = left
    for kind in _kinds_used(timeline):
        out.append(svg.rect(x, legend_y, 16, 16, class_="legend", fill=BASE_COLOURS[kind]))
        text = f"{kind}: {KIND_NAMES[kind]}"
        out.append(svg.text(x + 22, legend_y + 13, text, font_size=12))
        x += 30 + int(len(text) * 7.2)
    note = "blank: idle; numbers: micro-batches"
    if s.v > 1:
        note += "; lighter: a later chunk on the rank"
    out.append(svg.text(x, legend_y + 13, note, font_size=12, fill="#555555"))
    return svg.document(svg.open_svg(width, height, y=y), out)


# --- bubble versus m ---------------------------------------------------------------------------------------------


CURVE_COLOURS = ("#4C78A8", "#F58518", "#E45756", "#54A24B", "#B279A2", "#72B7B2", "#9D755D")
_BARS = " ▏▎▍▌▋▊▉█"


def bubble_table(curves: Sequence[BubbleCurve], p: int) -> Table:
    """The bubble curves as a rich table: one row per schedule, one column per m, a bar in each cell."""
    ms = sorted({m for c in curves for m in c.microbatches})
    top = max((y for c in curves for y in c.bubble_of_ideal), default=1.0) or 1.0
    table = Table(title=f"Bubble as a fraction of ideal time, p = {p} (simulated, equal F, I, W)")
    table.add_column("schedule", style="bold", no_wrap=True)
    for m in ms:
        table.add_column(f"m={m}", justify="left", no_wrap=True)
    for k, c in enumerate(curves):
        colour = CURVE_COLOURS[k % len(CURVE_COLOURS)]
        cells: list[Text | str] = []
        for m in ms:
            if m not in c.microbatches:
                cells.append(Text("–", style="grey50"))
                continue
            y = c.bubble_of_ideal[c.microbatches.index(m)]
            eighths = round(3 * 8 * y / top)
            bar = "█" * (eighths // 8) + (_BARS[eighths % 8] if eighths % 8 else "")
            cell = Text(f"{y:5.1%} ")
            cell.append(bar.ljust(3), style=colour)
            cells.append(cell)
        table.add_row(Text(c.label, style=colour), *cells)
    return table


def bubble_group(curves: Sequence[BubbleCurve], p: int, measure: Measure = "span") -> Group:
    """The terminal bubble-versus-m chart of the curves given (`pplan.schedules.bubble.bubble_curves`)."""
    note = Text(
        "bubble = idle inside each rank's own window ÷ ideal (Qi et al.)"
        if measure == "span"
        else "bubble = (step − busiest rank) ÷ busiest rank",
        style="grey62",
    )
    return Group(bubble_table(curves, p), note)


def bubble_curves_svg(
    curves: Sequence[BubbleCurve], p: int, measure: Measure = "span", width: int = 760, height: int = 440
) -> str:
    """The bubble-versus-m chart of the curves given as a standalone SVG line chart (log₂ m axis, percent of
    ideal)."""
    left, right, top, bottom = 70, 190, 50, 60
    pw, ph = width - left - right, height - top - bottom
    ms = sorted({m for c in curves for m in c.microbatches}) or [1]
    lo, hi = math.log2(ms[0]), math.log2(ms[-1])
    ymax = max((y for c in curves for y in c.bubble_of_ideal), default=1.0) or 1.0
    yticks = _nice_ticks(ymax * 100, 5)
    if len(yticks) > 1 and yticks[-1] < ymax * 100 - 1e-9:
        yticks.append(round(yticks[-1] + (yticks[1] - yticks[0]), 10))
    ytop = max(yticks[-1], ymax * 100) or 1.0

    def px(m: float) -> float:
        return left + (0.5 * pw if hi == lo else (math.log2(m) - lo) / (hi - lo) * pw)

    def py(y: float) -> float:
        return top + ph - (y * 100) / ytop * ph

    what = "idle inside each rank's window" if measure == "span" else "step − busiest rank"
    out = [
        svg.background(width, height),
        svg.text(left, 22, f"Pipeline bubble vs micro-batches, p = {p}", font_size=15, font_weight="bold"),
        svg.text(
            left, 40, f"{what} ÷ ideal time; simulated, equal F, I, W per stage", font_size=11, fill="#555555"
        ),
    ]
    for t in yticks:
        y = py(t / 100)
        out.append(svg.line(left, f"{y:.1f}", left + pw, f"{y:.1f}", stroke="#E5E5E5"))
        out.append(svg.text(left - 8, f"{y + 4:.1f}", f"{t:g}%", font_size=11, text_anchor="end"))
    for m in ms:
        x = px(m)
        out.append(svg.line(f"{x:.1f}", top + ph, f"{x:.1f}", top + ph + 5, stroke="#444444"))
        out.append(svg.text(f"{x:.1f}", top + ph + 18, str(m), font_size=11, text_anchor="middle"))
    out.append(svg.line(left, top + ph, left + pw, top + ph, stroke="#444444"))
    out.append(svg.line(left, top, left, top + ph, stroke="#444444"))
    out.append(svg.text(left + pw / 2, height - 18, "micro-batches m", font_size=12, text_anchor="middle"))
    out.append(
        svg.text(
            16,
            top + ph / 2,
            "bubble, % of ideal",
            font_size=12,
            text_anchor="middle",
            transform=f"rotate(-90 16 {top + ph / 2})",
        )
    )
    for k, c in enumerate(curves):
        colour = CURVE_COLOURS[k % len(CURVE_COLOURS)]
        pts = " ".join(
            f"{px(m):.1f},{py(y):.1f}" for m, y in zip(c.microbatches, c.bubble_of_ideal, strict=True)
        )
        dash = "6 3" if c.name.startswith("zb") else None
        out.append(
            svg.element(
                "polyline",
                class_="curve",
                points=pts,
                fill="none",
                stroke=colour,
                stroke_width=2,
                stroke_dasharray=dash,
            )
        )
        for m, y in zip(c.microbatches, c.bubble_of_ideal, strict=True):
            out.append(
                svg.element(
                    "circle",
                    svg.title(f"{c.label}, m={m}: {y:.2%}"),
                    cx=f"{px(m):.1f}",
                    cy=f"{py(y):.1f}",
                    r=3,
                    fill=colour,
                )
            )
        ly = top + 10 + k * 22
        out.append(
            svg.line(
                left + pw + 20, ly, left + pw + 44, ly, stroke=colour, stroke_width=2, stroke_dasharray=dash
            )
        )
        out.append(svg.text(left + pw + 50, ly + 4, c.label, font_size=12))
    return svg.document(svg.open_svg(width, height), out)
