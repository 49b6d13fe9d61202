"""The picture of one explained plan (`pplan explain --svg`): a standalone SVG with the plan's title and three
parts, one under the other:

(a) memory per GPU of each pipeline stage as a stacked bar of its parts (the `StageMemory` byte fields that
    `total_bytes` sums, zero parts left out), against the usable memory as a horizontal line, in GB (10⁹ bytes);
    every stage gets a bar (thin ones, without gaps, past `WIDE_BARS_UP_TO` stages);
(b) where the step time goes: one horizontal bar of `performance.breakdown_s` (zero parts left out and named
    under it), each part with its seconds and its share of the step;
(c) the plan's simulated pipeline timeline, drawn by `pplan.render.schedule.timeline_svg`, or the note the
    caller gives when it is not drawn (a schedule over `pplan schedule`'s size cap).

Owns only presentation: it draws the `ExplainReport` (`pplan.documents.explain`) and the `Timeline` it is handed
and computes nothing the report does not already say; SVG markup comes from `pplan.render.svg`, so the bytes
follow from the data alone.

SVG hooks for tests and scripts: each stage's bar is a `<g class="stage">` with `data-stage` and
`data-total-bytes`, holding one `<rect class="memory-part">` per part with `data-part` and `data-bytes`; the usable
memory is a `<line class="usable">` with `data-bytes`; the step-time bar is a `<g class="step-time">` with
`data-step-s`, holding one `<rect class="time-part">` per part with `data-part` and `data-seconds` (Python's
shortest round-trip form); the timeline is a nested `<svg class="timeline">`, or a `<text class="timeline-note">`.
"""

from __future__ import annotations

import math

from pplan.documents.explain import ExplainReport, StageMemory
from pplan.render import svg
from pplan.render.schedule import _ink, timeline_svg, timeline_svg_height
from pplan.schedules.timeline import Timeline

WIDTH = 1200
LEFT = 80
GREY = "#555555"
AXIS = "#444444"
GRID = "#E5E5E5"
USABLE = "#C0392B"

MEMORY_PARTS: tuple[tuple[str, str, str], ...] = (
    ("weights_bytes", "weights", "#4C78A8"),
    ("grads_bytes", "gradients", "#72B7B2"),
    ("optimizer_bytes", "optimizer states", "#54A24B"),
    ("fp8_weight_cache_bytes", "FP8 weight copies", "#B279A2"),
    ("activation_bytes", "activations", "#F58518"),
    ("extra_activation_bytes", "model-end buffers", "#FFBF79"),
    ("recompute_working_bytes", "recompute transient", "#E45756"),
    ("gathered_weights_bytes", "gathered weights", "#9D755D"),
    ("offload_buffer_bytes", "offload buffers", "#EECA3B"),
    ("fragmentation_bytes", "fragmentation", "#BAB0AC"),
)
"""(StageMemory field, name, colour) of each part of a stage's `total_bytes`, bottom to top."""
OTHER_PART = ("other", "other", "#DDDDDD")
"""Whatever of `total_bytes` the parts above do not account for (none today)."""

TIME_PARTS: dict[str, tuple[str, str]] = {
    "compute": ("compute", "#4C78A8"),
    "recompute": ("recompute", "#E45756"),
    "tp_comm": ("tensor-parallel comm", "#F58518"),
    "ep_comm": ("expert-parallel comm", "#B279A2"),
    "bubble": ("bubble", "#BAB0AC"),
    "p2p": ("point-to-point", "#72B7B2"),
    "dp_comm": ("data-parallel comm", "#54A24B"),
    "optimizer": ("optimizer", "#9D755D"),
    "jitter": ("jitter", "#EECA3B"),
}
"""Name and colour of each `performance.breakdown_s` key; another key is drawn by its own name, in grey."""

MEMORY_TOP = 120
MEMORY_H = 260
MEMORY_W = 860
WIDE_BARS_UP_TO = 64
"""Stages drawn as separate bars with gaps and their own labels; more are drawn as thin touching bars."""
TIME_BAR_H = 34
TIME_LEGEND_ROW = 20


def plan_svg(
    report: ExplainReport, timeline: Timeline | None, timeline_note: str = "", unit: str = "s"
) -> str:
    """The whole picture of `report` (see the module docstring); `timeline` in `unit`s, or None with the
    `timeline_note` that says why it is not drawn."""
    out: list[str] = []
    y = _title(report, out)
    y = _memory(report, out, y)
    y = _step_time(report, out, y + 36)
    y = _timeline(timeline, timeline_note, unit, out, y + 36)
    height = y + 16
    return svg.document(svg.open_svg(WIDTH, height), [svg.background(WIDTH, height), *out])


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f}"


def _seconds(x: float) -> str:
    """Seconds to 4 significant figures, whole seconds from 1,000 on (no exponent)."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _share(x: float) -> str:
    return "<0.1%" if 0 < x < 0.0005 else f"{x:.1%}"


def _title(report: ExplainReport, out: list[str]) -> int:
    p = report.plan
    cut = [f"t={p.tp}", f"p={p.pp}", f"d={p.dp}"]
    cut += [f"{k}={v}" for k, v in (("v", p.vp), ("cp", p.cp), ("ep", p.ep), ("etp", p.etp)) if v > 1]
    head = (
        f"{report.model.name} on {p.gpus} × {report.hardware.gpu} ({report.hardware.name}): {', '.join(cut)}"
    )
    details = (
        f"{p.schedule}, {p.num_microbatches} micro-batches of {p.micro_batch} × {p.seq_len} tokens "
        f"(global batch {p.global_batch}); ZeRO {p.zero_stage}; recompute {p.recompute_policy.label}; "
        f"{p.precision}"
    )
    perf = report.performance
    fit = "every stage fits" if report.memory.fits else "some stage does not fit"
    summary = (
        f"step {perf.step_s:.3f} s, {perf.tokens_per_s:,.0f} tokens/s, MFU {perf.mfu:.1%}; {fit}"
        if perf is not None
        else f"{fit}; no step time (pass durations: {report.pipeline.pass_durations})"
    )
    out.append(svg.text(LEFT - 60, 30, head, font_size=18, font_weight="bold"))
    out.append(svg.text(LEFT - 60, 52, details, font_size=12, fill=GREY))
    out.append(svg.text(LEFT - 60, 70, summary, font_size=12, fill=GREY))
    return 70


def _parts(stage: StageMemory) -> list[tuple[str, str, str, int]]:
    """(key, name, colour, bytes) of the stage's non-zero parts, bottom to top."""
    data = stage.model_dump()
    parts = [(key, name, colour, int(data[key])) for key, name, colour in MEMORY_PARTS if data.get(key)]
    rest = stage.total_bytes - sum(b for *_, b in parts)
    if rest > 0:
        parts.append((*OTHER_PART, rest))
    return parts


def _ticks(top: float, count: int) -> list[float]:
    """Round values from 0 to at least `top`, about `count` of them."""
    if not (math.isfinite(top) and top > 0):
        return [0.0, 1.0]
    raw = top / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(k * mag for k in (1, 2, 2.5, 5, 10) if k * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def _memory(report: ExplainReport, out: list[str], y0: int) -> int:
    mem = report.memory
    stages = mem.stages
    n = max(1, len(stages))
    top, h, w = y0 + MEMORY_TOP - 70, MEMORY_H, MEMORY_W
    out.append(
        svg.text(
            LEFT - 60,
            top - 22,
            "Memory per GPU by pipeline stage, GB (10⁹ bytes)",
            font_size=15,
            font_weight="bold",
        )
    )
    highest = max([mem.usable_bytes, *(s.total_bytes for s in stages)]) / 1e9
    ticks = _ticks(highest, 5)
    y_top = ticks[-1] or 1.0

    def py(gb: float) -> float:
        return top + h - gb / y_top * h

    for t in ticks:
        out.append(svg.line(LEFT, f"{py(t):.1f}", LEFT + w, f"{py(t):.1f}", stroke=GRID))
        out.append(svg.text(LEFT - 8, f"{py(t) + 4:.1f}", f"{t:g}", font_size=11, text_anchor="end"))
    slot = w / n
    wide = n <= WIDE_BARS_UP_TO
    bar_w = slot * 0.7 if wide else max(1.0, slot * 0.9)
    every = 1 if n <= 32 else math.ceil(n / 16)
    used: dict[str, tuple[str, str]] = {}
    for k, stage in enumerate(stages):
        x = LEFT + k * slot + (slot - bar_w) / 2
        rects = []
        base = 0.0
        for key, name, colour, nbytes in _parts(stage):
            used[key] = (name, colour)
            y_hi, y_lo = py((base + nbytes) / 1e9), py(base / 1e9)
            rects.append(
                svg.rect(
                    f"{x:.2f}",
                    f"{y_hi:.2f}",
                    f"{bar_w:.2f}",
                    f"{y_lo - y_hi:.2f}",
                    tooltip=f"stage {stage.stage} {name}: {_gb(nbytes)} GB",
                    class_="memory-part",
                    data_part=key,
                    data_bytes=nbytes,
                    fill=colour,
                )
            )
            base += nbytes
        out.append(
            svg.element(
                "g",
                "".join(rects),
                class_="stage",
                data_stage=stage.stage,
                data_total_bytes=stage.total_bytes,
            )
        )
        centre = f"{x + bar_w / 2:.2f}"
        if wide and n <= 16:
            out.append(
                svg.text(
                    centre,
                    f"{py(stage.total_bytes / 1e9) - 5:.1f}",
                    _gb(stage.total_bytes),
                    font_size=11,
                    text_anchor="middle",
                    fill=AXIS if stage.fits else USABLE,
                )
            )
        if k % every == 0 or k == n - 1:
            out.append(svg.text(centre, top + h + 16, str(stage.stage), font_size=11, text_anchor="middle"))
    out.append(svg.line(LEFT, top + h, LEFT + w, top + h, stroke=AXIS))
    out.append(svg.line(LEFT, top, LEFT, top + h, stroke=AXIS))
    out.append(svg.text(LEFT + w / 2, top + h + 34, "pipeline stage", font_size=12, text_anchor="middle"))
    y_use = f"{py(mem.usable_bytes / 1e9):.2f}"
    out.append(
        svg.line(
            LEFT,
            y_use,
            LEFT + w,
            y_use,
            class_="usable",
            data_bytes=mem.usable_bytes,
            stroke=USABLE,
            stroke_width=2,
            stroke_dasharray="6 3",
        )
    )
    # Legend on the right: the usable line, then the parts drawn, top of the stack first.
    lx, ly = LEFT + w + 24, top + 4
    out.append(svg.line(lx, ly + 6, lx + 16, ly + 6, stroke=USABLE, stroke_width=2, stroke_dasharray="6 3"))
    out.append(svg.text(lx + 22, ly + 10, f"usable {_gb(mem.usable_bytes)} GB", font_size=12))
    order = [k for k, *_ in (*MEMORY_PARTS, OTHER_PART) if k in used]
    for j, key in enumerate(reversed(order)):
        name, colour = used[key]
        yy = ly + 24 + j * 20
        out.append(svg.rect(lx, yy, 16, 14, class_="legend", fill=colour))
        out.append(svg.text(lx + 22, yy + 11, name, font_size=12))
    worst = max(stages, key=lambda s: s.total_bytes, default=None)
    if worst is not None:
        yy = ly + 24 + len(order) * 20 + 10
        out.append(
            svg.text(
                lx, yy, f"fullest: stage {worst.stage}, {_gb(worst.total_bytes)} GB", font_size=11, fill=GREY
            )
        )
        room = worst.headroom_bytes
        spare = f"headroom {_gb(room)} GB" if room >= 0 else f"over the usable memory by {_gb(-room)} GB"
        out.append(svg.text(lx, yy + 16, spare, font_size=11, fill=GREY if room >= 0 else USABLE))
    return top + h + 34


def _step_time(report: ExplainReport, out: list[str], y0: int) -> int:
    perf = report.performance
    if perf is None:
        out.append(svg.text(LEFT - 60, y0, "Where the step time goes", font_size=15, font_weight="bold"))
        out.append(
            svg.text(
                LEFT - 60,
                y0 + 22,
                f"not estimated: pass durations are {report.pipeline.pass_durations!r} (the step in pass units, "
                "not seconds); drop --pass-durations unit for the step time",
                class_="time-note",
                font_size=12,
                fill=GREY,
            )
        )
        return y0 + 22
    out.append(
        svg.text(
            LEFT - 60,
            y0,
            f"Where the step time goes: {perf.step_s:.3f} s per step (busiest pipeline rank)",
            font_size=15,
            font_weight="bold",
        )
    )
    step = perf.step_s
    w = WIDTH - LEFT - 40
    top = y0 + 14
    scale = w / step if step > 0 else 0.0
    drawn = [(k, v) for k, v in perf.breakdown_s.items() if v > 0]
    rects: list[str] = []
    labels: list[str] = []
    x = float(LEFT)
    for key, seconds in drawn:
        name, colour = TIME_PARTS.get(key, (key.replace("_", " "), "#CCCCCC"))
        width = seconds * scale
        share = seconds / step if step > 0 else 0.0
        rects.append(
            svg.rect(
                f"{x:.2f}",
                top,
                f"{width:.2f}",
                TIME_BAR_H,
                tooltip=f"{name}: {_seconds(seconds)} s, {_share(share)} of the step",
                class_="time-part",
                data_part=key,
                data_seconds=repr(seconds),
                fill=colour,
                stroke="#FFFFFF",
                stroke_width=0.6,
            )
        )
        inside = f"{_seconds(seconds)} s · {_share(share)}"
        if width >= len(inside) * 6.6 + 8:
            labels.append(
                svg.text(
                    f"{x + width / 2:.2f}",
                    top + TIME_BAR_H / 2 + 4,
                    inside,
                    font_size=11,
                    text_anchor="middle",
                    fill=_ink(colour),
                )
            )
        x += width
    out.append(svg.element("g", "".join(rects), class_="step-time", data_step_s=repr(step)))
    out.extend(labels)
    # Legend under the bar: every drawn part with its seconds and share, flowing over rows.
    y = top + TIME_BAR_H + 22
    lx = float(LEFT)
    for key, seconds in drawn:
        name, colour = TIME_PARTS.get(key, (key.replace("_", " "), "#CCCCCC"))
        share = seconds / step if step > 0 else 0.0
        text = f"{name} {_seconds(seconds)} s ({_share(share)})"
        item_w = 24 + len(text) * 6.8 + 18
        if lx + item_w > WIDTH - 20 and lx > LEFT:
            lx, y = float(LEFT), y + TIME_LEGEND_ROW
        out.append(svg.rect(f"{lx:.1f}", y - 11, 14, 14, class_="legend", fill=colour))
        out.append(svg.text(f"{lx + 20:.1f}", y, text, font_size=12))
        lx += item_w
    zero = [TIME_PARTS.get(k, (k.replace("_", " "), ""))[0] for k, v in perf.breakdown_s.items() if v <= 0]
    if zero:
        y += TIME_LEGEND_ROW
        out.append(svg.text(LEFT, y, "0 s (not drawn): " + ", ".join(zero), font_size=11, fill=GREY))
    return y


def _timeline(timeline: Timeline | None, note: str, unit: str, out: list[str], y0: int) -> int:
    out.append(
        svg.text(
            LEFT - 60,
            y0,
            "Pipeline timeline: the simulated forward and backward passes of one step",
            font_size=15,
            font_weight="bold",
        )
    )
    if timeline is None:
        out.append(svg.text(LEFT - 60, y0 + 24, note, class_="timeline-note", font_size=12, fill=GREY))
        return y0 + 24
    row_height = max(4, min(26, 520 // max(1, timeline.schedule.p)))
    nested = timeline_svg(timeline, width=WIDTH, unit=unit, row_height=row_height, y=y0 + 8)
    out.append(nested.rstrip("\n").replace("<svg", '<svg class="timeline"', 1))
    return y0 + 8 + timeline_svg_height(timeline, row_height)
