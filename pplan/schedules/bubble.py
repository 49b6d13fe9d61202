"""Bubble measures beyond `Timeline`'s own, and bubble against m for several schedules (what `pplan bubble` draws).

`in_window_fraction_of_ideal` is Qi et al.'s zero-bubble measure of one simulated step; `bubble_curves` builds
each (label, schedule, v) of a chart at p ranks for each m, simulates it with equal F, I, W per stage and keeps
its bubble as a fraction of the ideal time. Pure: drawing the curves is `pplan.render.schedule`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pplan.errors import ConfigError
from pplan.schedules.registry import get_schedule
from pplan.schedules.timeline import Durations, Timeline, simulate

Measure = Literal["span", "step"]
"""Which idle time a bubble curve charges: "span", the idle time inside each rank's own first-to-last-action
window (Qi et al.); "step", the whole synchronous step (makespan − busiest rank)."""


def in_window_fraction_of_ideal(timeline: Timeline) -> float:
    """The largest idle time inside one rank's own window ÷ the busiest rank's compute time; 0 when nothing
    computes (every duration zero), like `Timeline.bubble_fraction_of_ideal`."""
    busiest = timeline.busiest
    return timeline.max_idle_in_span / busiest if busiest > 0 else 0.0


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
"""The chart's schedules, as (label, schedule name, v; None for the family's own)."""


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
