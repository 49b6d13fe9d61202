"""Drawings of simulated pipeline schedules: a terminal Gantt chart (rich), the same picture as standalone SVG,
and the bubble-versus-micro-batches chart for several schedules.

Owns only presentation: every number drawn comes from `pplan.schedules.timeline.simulate`. Colours: one hue per pass
kind (F blue, B green, I light green, W ochre), lighter for a rank's later chunks; idle time is left blank (dots
in the terminal).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from pplan.errors import ConfigError
from pplan.schedules import get_schedule
from pplan.schedules.timeline import Durations, Timeline, simulate

BASE_COLOURS = {"F": "#4C78A8", "B": "#3C8D3A", "I": "#7FC97F", "W": "#D9912B"}
KIND_NAMES = {
    "F": "forward",
    "B": "backward (I + W)",
    "I": "backward, input grad",
    "W": "backward, weight grad",
}
Measure = Literal["step", "span"]


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


def in_window_fraction_of_ideal(timeline: Timeline) -> float:
    """The largest idle time inside one rank's own window ÷ the busiest rank's compute time; 0 when nothing
    computes (every duration zero), like `Timeline.bubble_fraction_of_ideal`."""
    busiest = timeline.busiest
    return timeline.max_idle_in_span / busiest if busiest > 0 else 0.0


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
class TimelineView:
    """A rich renderable Gantt chart of a `Timeline`: one row per rank, time scaled to the width available."""

    timeline: Timeline
    unit: str = ""
    title: bool = True

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        tl = self.timeline
        s = tl.schedule
        label_w = len(f"rank {s.p - 1}") + 1
        width = max(10, options.max_width - label_w - 1)
        scale = tl.makespan / width if tl.makespan > 0 else 1.0
        chunks = _chunk_index(tl)
        if self.title:
            yield Text(_summary(tl, self.unit), style="bold")
        for r in range(s.p):
            line = Text(f"rank {r}".ljust(label_w), style="bold")
            line.append_text(self._row(r, width, scale, chunks))
            yield line
        yield self._axis(label_w, width, scale)
        yield self._legend()

    def _row(self, r: int, width: int, scale: float, chunks: dict[int, tuple[int, int]]) -> Text:
        tl = self.timeline
        acts = tl.schedule.actions[r]
        starts, ends = tl.start[r], tl.end[r]
        owner: list[int] = []  # action index per column, or -1 when idle
        for col in range(width):
            t = (col + 0.5) * scale
            k = bisect.bisect_right(starts, t) - 1
            owner.append(k if k >= 0 and ends[k] > t else -1)
        text = Text()
        col = 0
        last_style = ""
        toggle = False
        while col < width:
            k = owner[col]
            run = col
            while run < width and owner[run] == k:
                run += 1
            span = run - col
            if k < 0:
                text.append("·" * span, style="grey50")
                last_style = ""
            else:
                a = acts[k]
                chunk, n = chunks[a.stage]
                fill = pass_colour(a.kind, chunk, n)
                # Two neighbouring blocks of the same colour alternate with a slightly darker shade.
                toggle = not toggle if fill == last_style else False
                last_style = fill
                shown = _mix(fill, -0.18) if toggle else fill
                label = str(a.microbatch)
                body = (
                    label.center(span) if len(label) < span or (span == 1 and len(label) == 1) else " " * span
                )
                text.append(body, style=f"{_ink(shown)} on {shown}")
            col = run
        return text

    def _axis(self, label_w: int, width: int, scale: float) -> Text:
        ticks = _nice_ticks(self.timeline.makespan, max(2, width // 12))
        line = [" "] * (width + 8)
        for t in ticks:
            col = min(width - 1, int(t / scale)) if scale > 0 else 0
            tag = f"{t:g}"
            start = max(0, min(col, width - len(tag)))
            line[start : start + len(tag)] = list(tag)
        u = f" ({self.unit})" if self.unit else ""
        return Text(" " * label_w + "".join(line).rstrip() + u, style="grey62")

    def _legend(self) -> Text:
        text = Text("  ")
        for kind in _kinds_used(self.timeline):
            fill = BASE_COLOURS[kind]
            text.append(f" {kind} ", style=f"bold {_ink(fill)} on {fill}")
            text.append(f" {KIND_NAMES[kind]}   ")
        text.append("···", style="grey50")
        text.append(" idle")
        if self.timeline.schedule.v > 1:
            text.append("   (lighter = a later chunk on the rank; numbers are micro-batches)", style="grey62")
        else:
            text.append("   (numbers are micro-batches)", style="grey62")
        return text


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


def timeline_svg(timeline: Timeline, width: int = 1200, unit: str = "", row_height: int = 26) -> str:
    """A standalone SVG of `timeline`: one rect per action (class "action", with a tooltip), rank labels, a time
    axis, a legend and the bubble summary."""
    s = timeline.schedule
    left, right, top = 70, 20, 44
    plot_w = width - left - right
    scale = plot_w / timeline.makespan if timeline.makespan > 0 else 1.0
    gap = 4
    plot_h = s.p * (row_height + gap)
    legend_y = top + plot_h + 44
    height = legend_y + 30
    chunks = _chunk_index(timeline)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f'<rect class="background" x="0" y="0" width="{width}" height="{height}" fill="#FFFFFF"/>',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">{escape(_summary(timeline, unit))}</text>',
    ]
    for r in range(s.p):
        y = top + r * (row_height + gap)
        out.append(
            f'<rect class="lane" x="{left}" y="{y}" width="{plot_w}" height="{row_height}" fill="#F3F3F3"/>'
        )
        out.append(
            f'<text x="{left - 8}" y="{y + row_height / 2 + 4:.1f}" font-size="12" text-anchor="end">rank {r}</text>'
        )
        for a, t0, t1 in timeline.intervals(r):
            x = left + t0 * scale
            w = max(0.5, (t1 - t0) * scale)
            chunk, n = chunks[a.stage]
            fill = pass_colour(a.kind, chunk, n)
            out.append(
                f'<rect class="action" x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row_height}" fill="{fill}" '
                f'stroke="#FFFFFF" stroke-width="0.6"><title>{a} [{t0:.4g}, {t1:.4g}]</title></rect>'
            )
            label = str(a.microbatch)
            font = min(12.0, row_height * 0.5, (w - 2) / (len(label) * 0.62))
            if font >= 7:
                out.append(
                    f'<text x="{x + w / 2:.2f}" y="{y + row_height / 2 + font * 0.35:.2f}" font-size="{font:.0f}" '
                    f'text-anchor="middle" fill="{_ink(fill)}">{label}</text>'
                )
    axis_y = top + plot_h + 2
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="#444444"/>')
    for t in _nice_ticks(timeline.makespan, max(2, plot_w // 90)):
        x = left + t * scale
        out.append(f'<line x1="{x:.2f}" y1="{axis_y}" x2="{x:.2f}" y2="{axis_y + 5}" stroke="#444444"/>')
        out.append(f'<text x="{x:.2f}" y="{axis_y + 18}" font-size="11" text-anchor="middle">{t:g}</text>')
    u = f" ({escape(unit)})" if unit else ""
    out.append(f'<text x="{left + plot_w}" y="{axis_y + 34}" font-size="11" text-anchor="end">time{u}</text>')
    x = left
    for kind in _kinds_used(timeline):
        out.append(
            f'<rect class="legend" x="{x}" y="{legend_y}" width="16" height="16" fill="{BASE_COLOURS[kind]}"/>'
        )
        text = f"{kind}: {KIND_NAMES[kind]}"
        out.append(f'<text x="{x + 22}" y="{legend_y + 13}" font-size="12">{escape(text)}</text>')
        x += 30 + int(len(text) * 7.2)
    note = "blank: idle; numbers: micro-batches"
    if s.v > 1:
        note += "; lighter: a later chunk on the rank"
    out.append(f'<text x="{x}" y="{legend_y + 13}" font-size="12" fill="#555555">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --- bubble versus m ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BubbleCurve:
    """Bubble fraction of ideal against m for one schedule (simulated, uniform stages, equal F, I, W)."""

    label: str
    name: str
    v: int
    microbatches: tuple[int, ...]
    bubble_of_ideal: tuple[float, ...]


DEFAULT_CURVES: tuple[tuple[str, str, int | None], ...] = (
    ("1F1B", "1f1b", None),
    ("interleaved v=2", "interleaved-1f1b", 2),
    ("interleaved v=4", "interleaved-1f1b", 4),
    ("ZB-H1", "zb-h1", None),
    ("ZB-H2", "zb-h2", None),
)


def bubble_curves(
    p: int,
    microbatches: Sequence[int] | None = None,
    schedules: Sequence[tuple[str, str, int | None]] = DEFAULT_CURVES,
    measure: Measure = "span",
) -> list[BubbleCurve]:
    """Simulate each (label, schedule name, v) at p ranks for each m and return its bubble as a fraction of the
    ideal time. A full stage's passes take F = I = W = 1, a chunk's 1/v. `measure="step"` charges the whole
    synchronous step (makespan − busiest); "span" charges the idle time inside each rank's own window (Qi et
    al.'s cost, the same number except for ZB-H2, whose parallelogram start skew it leaves out). m values a
    schedule's rules refuse are skipped (interleaving needs m to be a multiple of its rounds)."""
    ms = list(microbatches) if microbatches is not None else [p * k for k in (1, 2, 3, 4, 6, 8, 12, 16)]
    curves = []
    for label, name, v in schedules:
        xs: list[int] = []
        ys: list[float] = []
        for m in ms:
            try:
                sched = get_schedule(name, p, m, v)
            except ConfigError:  # a rule refuses this m: leave the point out
                continue
            d = 1.0 / sched.v
            t = simulate(sched, Durations(d, d, d))
            idle = t.bubble if measure == "step" else t.max_idle_in_span
            xs.append(m)
            ys.append(idle / t.busiest)
        curves.append(BubbleCurve(label, name, v or 1, tuple(xs), tuple(ys)))
    return curves


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


def bubble_renderable(p: int, microbatches: Sequence[int] | None = None, measure: Measure = "span") -> Group:
    """The terminal bubble-versus-m chart for the default schedules at p ranks."""
    return bubble_group(bubble_curves(p, microbatches, measure=measure), p, measure)


def bubble_group(curves: Sequence[BubbleCurve], p: int, measure: Measure = "span") -> Group:
    """The terminal bubble-versus-m chart of curves already simulated (`bubble_curves`)."""
    note = Text(
        "bubble = idle inside each rank's own window ÷ ideal (Qi et al.)"
        if measure == "span"
        else "bubble = (step − busiest rank) ÷ busiest rank",
        style="grey62",
    )
    return Group(bubble_table(curves, p), note)


def bubble_svg(
    p: int,
    microbatches: Sequence[int] | None = None,
    measure: Measure = "span",
    width: int = 760,
    height: int = 440,
) -> str:
    """The bubble-versus-m chart as a standalone SVG line chart (log₂ m axis, percent of ideal)."""
    curves = bubble_curves(p, microbatches, measure=measure)
    return bubble_curves_svg(curves, p, measure, width, height)


def bubble_curves_svg(
    curves: Sequence[BubbleCurve], p: int, measure: Measure = "span", width: int = 760, height: int = 440
) -> str:
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
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f'<rect class="background" x="0" y="0" width="{width}" height="{height}" fill="#FFFFFF"/>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">Pipeline bubble vs micro-batches, p = {p}</text>',
        f'<text x="{left}" y="40" font-size="11" fill="#555555">{escape(what)} ÷ ideal time; simulated, '
        "equal F, I, W per stage</text>",
    ]
    for t in yticks:
        y = py(t / 100)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#E5E5E5"/>')
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{t:g}%</text>')
    for m in ms:
        x = px(m)
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="#444444"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" font-size="11" text-anchor="middle">{m}</text>')
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#444444"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#444444"/>')
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 18}" font-size="12" text-anchor="middle">micro-batches m</text>'
    )
    out.append(
        f'<text x="16" y="{top + ph / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + ph / 2})">bubble, % of ideal</text>'
    )
    for k, c in enumerate(curves):
        colour = CURVE_COLOURS[k % len(CURVE_COLOURS)]
        pts = " ".join(
            f"{px(m):.1f},{py(y):.1f}" for m, y in zip(c.microbatches, c.bubble_of_ideal, strict=True)
        )
        dash = ' stroke-dasharray="6 3"' if c.name.startswith("zb") else ""
        out.append(
            f'<polyline class="curve" points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        for m, y in zip(c.microbatches, c.bubble_of_ideal, strict=True):
            out.append(
                f'<circle cx="{px(m):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}">'
                f"<title>{escape(c.label)}, m={m}: {y:.2%}</title></circle>"
            )
        ly = top + 10 + k * 22
        out.append(
            f'<line x1="{left + pw + 20}" y1="{ly}" x2="{left + pw + 44}" y2="{ly}" stroke="{colour}" '
            f'stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{left + pw + 50}" y="{ly + 4}" font-size="12">{escape(c.label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
