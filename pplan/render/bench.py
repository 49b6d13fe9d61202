"""Drawings of one `pplan bench` case: the measured timeline above the predicted one (terminal and SVG), the table
of measured against predicted with the checks, and the details the prediction was made from.

Draws a `pplan.bench.analysis.BenchResult` it is handed (measured and predicted `Timeline`s, the checks) and
nothing else: no runs, no simulation. SVG markup comes from `pplan.render.svg`; each timeline is
`pplan.render.schedule`'s drawing.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from pplan.bench.analysis import BUBBLE_TOLERANCE, BenchResult
from pplan.render import svg
from pplan.render.schedule import timeline_renderable, timeline_svg, timeline_svg_height

BOTH_SVG_WIDTH = 1200
"""Width of `both_svg` (each timeline is drawn at `timeline_svg`'s default width)."""


def both_svg(result: BenchResult) -> str:
    """The measured timeline above the predicted one, one SVG (each drawn by `timeline_svg`, in ms)."""
    parts = []
    y = 0
    for label, timeline in (("measured", result.measured), ("predicted", result.predicted)):
        parts.append(
            svg.text(8, y + 16, label, font_size=13, font_weight="bold", font_family=svg.FONT_FAMILY)
        )
        parts.append(timeline_svg(timeline, unit="ms", y=y + 20))
        y += timeline_svg_height(timeline) + 24
    return svg.document(svg.open_svg(BOTH_SVG_WIDTH, y, font=False), parts)


def _fmt_list(values: tuple[float, ...] | tuple[int, ...] | list[int], digits: int = 0) -> str:
    """Numbers with `digits` decimals; with none, whole numbers with thousands separators."""
    return ", ".join(f"{v:.{digits}f}" if digits else f"{round(v):,}" for v in values)


def comparison_table(result: BenchResult) -> Table:
    """Measured against predicted, one row per figure, with the error and the check."""
    m, p = result.measured, result.predicted
    mi, pi = result.measured_in_flight, result.predicted_in_flight
    checks = result.checks()
    table = Table(title="Measured against predicted (pplan's simulator with the measured pass times)")
    for col in ("figure", "measured", "predicted", "error", "check"):
        table.add_column(col, justify="left" if col == "figure" else "right")

    def mark(name: str) -> Text:
        return Text("ok", style="green") if checks[name] else Text("MISMATCH", style="bold red")

    table.add_row(
        "bubble, fraction of step",
        f"{m.bubble_fraction_of_step:.3f}",
        f"{p.bubble_fraction_of_step:.3f}",
        f"{result.bubble_error:+.3f}",
        Text(f"≤ {BUBBLE_TOLERANCE}", style="green")
        if checks["bubble_within_tolerance"]
        else Text(f"> {BUBBLE_TOLERANCE}", style="bold red"),
    )
    table.add_row(
        "bubble, fraction of ideal",
        f"{m.bubble_fraction_of_ideal:.3f}",
        f"{p.bubble_fraction_of_ideal:.3f}",
        f"{m.bubble_fraction_of_ideal - p.bubble_fraction_of_ideal:+.3f}",
        "",
    )
    rel = (m.makespan - p.makespan) / p.makespan if p.makespan else 0.0
    table.add_row("step time (ms)", f"{m.makespan:.1f}", f"{p.makespan:.1f}", f"{rel:+.1%}", "")
    table.add_row(
        "micro-batches in flight per stage",
        _fmt_list(mi.per_stage),
        _fmt_list(pi.per_stage),
        "",
        mark("in_flight_per_stage"),
    )
    table.add_row(
        "stage-micro-batches in flight per rank",
        _fmt_list(mi.per_rank),
        _fmt_list(pi.per_rank),
        "",
        mark("in_flight_per_rank"),
    )
    table.add_row(
        "peak activation bytes per stage",
        _fmt_list(mi.bytes_per_stage),
        _fmt_list(pi.bytes_per_stage),
        "",
        mark("activation_peak_bytes_per_stage"),
    )
    table.add_row(
        "bytes per P2P message",
        _fmt_list(result.message_bytes),
        f"{result.predicted_message_bytes:,}",
        "",
        mark("message_bytes"),
    )
    table.add_row(
        "P2P messages per step",
        f"{result.messages_per_step}",
        f"{p.p2p_messages}",
        f"{result.messages_per_step - p.p2p_messages:+d}",
        mark("messages_per_step"),
    )
    return table


def details(result: BenchResult) -> Text:
    """Grey lines: the pass times the simulator was given, hop and dispatch gaps, step times, activation bytes,
    the gradient check, CUDA peaks, and whether torch kept pplan's order."""
    c = result.config
    split = {a.stage for row in c.plan.actions for a in row if a.kind in ("I", "W")}
    backward = ", ".join(
        f"I {i:.2f} + W {w:.2f}" if s in split else f"B {i:.2f}"
        for s, (i, w) in enumerate(zip(result.i_ms, result.w_ms, strict=True))
    )
    lines = [
        f"pass times per stage (ms, the simulator's input): F {_fmt_list(result.f_ms, 2)}; backward {backward}",
        f"hop latency {result.hop_latency_ms:.3f} ms ({result.hop_samples} waits), dispatch before each pass "
        f"{result.dispatch_ms:.3f} ms ({result.dispatch_samples} gaps); step times "
        f"{_fmt_list(result.step_times_ms, 1)} ms (step {result.reported_step + 1} shown)",
        f"activation bytes per micro-batch per stage {_fmt_list(result.activation_bytes_per_stage)}; gradients "
        f"against a single-process reference: max relative error {result.grad_max_rel_error:.2e}",
    ]
    peaks = [b for b in result.peak_device_bytes if b is not None]
    if peaks:
        lines.append(f"CUDA max allocated per rank (bytes): {_fmt_list(tuple(peaks))}")
    if not result.order_matches:
        lines.append(f"torch ran {c.schedule} in a different order from pplan's lists")
    return Text("\n".join(lines), style="grey62")


def render_bench(result: BenchResult) -> Group:
    """Everything `pplan bench` shows in the terminal: the case, the measured and the predicted timeline, the
    comparison table and the details."""
    return Group(
        Text(result.config.describe(), style="bold"),
        Text(f"Measured ({result.device}, {result.backend})", style="bold underline"),
        timeline_renderable(result.measured, unit="ms"),
        Text("Predicted by pplan", style="bold underline"),
        timeline_renderable(result.predicted, unit="ms"),
        Group(comparison_table(result), details(result)),
    )


def calibration_line(matmul: float, out: str) -> Text:
    """What `--calibrate` fitted and where it wrote the profile."""
    return Text(f"Fitted GEMM efficiency: {matmul:.4g} of the peak; wrote {out}")
