"""What a user asks of a sweep's points (pplan.sizing.sweep), each answer a point or None.

- least GPUs that fit: per hardware, the smallest count with a plan;
- fewest GPUs that meet a deadline: per hardware, the smallest count whose wall time (interruptions included) is
  within it, at the estimate and at the interval's slow end (the wall time from the step interval's high end);
- uncalibrated: the hardware whose answering points are not calibrated (pplan.cost.uncertainty), each named;
- cheapest that meets it: over every hardware, the least cost (GPU-hours where a point has no price);
- fastest within a budget: the least wall time whose cost is within it;
- the Pareto front of wall time against cost (GPU-hours without prices): the points no other point beats on both;
- a point whose run never finishes (interruptions faster than the recovery from one) answers none of the
  questions of time or cost above: it has no wall time to meet a deadline with and no cost;
- the knee of a hardware's scaling curve: the largest count up to which every step up in GPUs still returned at
  least `KNEE_MARGINAL` of its share, marginal efficiency = (Δ tokens/s ÷ Δ GPUs) ÷ (tokens/s per GPU at the
  smallest count that fits).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from pplan.sizing.sweep import SizePoint

KNEE_MARGINAL = 0.5


def spend(point: SizePoint) -> float:
    """What a point costs: US dollars where it has a price, else GPU-hours."""
    assert point.cost is not None
    return point.cost.cost_usd if point.cost.cost_usd is not None else point.cost.gpu_hours


def fitted(points: Sequence[SizePoint]) -> list[SizePoint]:
    return [p for p in points if p.fits]


def finishing(points: Sequence[SizePoint]) -> list[SizePoint]:
    """The points with a plan whose run ends (a finite wall time): the only ones a question of time or cost
    may answer with."""
    return [p for p in points if p.finishes]


def by_hardware(points: Sequence[SizePoint]) -> dict[str, list[SizePoint]]:
    """Points by hardware (in their first appearance's order), each list by GPU count."""
    out: dict[str, list[SizePoint]] = {}
    for p in points:
        out.setdefault(p.hardware, []).append(p)
    return {hw: sorted(ps, key=lambda p: p.gpus) for hw, ps in out.items()}


def least_fitting(points: Sequence[SizePoint]) -> dict[str, SizePoint | None]:
    """Per hardware, the smallest count with a plan."""
    return {hw: next(iter(fitted(ps)), None) for hw, ps in by_hardware(points).items()}


def fewest_meeting(
    points: Sequence[SizePoint], deadline_s: float, slow_end: bool = False
) -> dict[str, SizePoint | None]:
    """Per hardware, the smallest count whose wall time is within `deadline_s` (`slow_end`: its wall time at the
    interval's slow end)."""
    return {
        hw: next((p for p in finishing(ps) if wall(p, slow_end) <= deadline_s), None)
        for hw, ps in by_hardware(points).items()
    }


def wall(point: SizePoint, slow_end: bool = False) -> float:
    """A point's wall time: at the estimate, or at the interval's slow end."""
    return point.wall_interval_s[1] if slow_end else point.wall_s


def uncalibrated(points: Sequence[SizePoint]) -> dict[str, str]:
    """Per hardware with a plan that is not calibrated, the first such point's confidence sentence."""
    out: dict[str, str] = {}
    for p in fitted(points):
        if not p.calibrated and p.hardware not in out:
            out[p.hardware] = p.confidence
    return out


def cheapest_meeting(
    points: Sequence[SizePoint], deadline_s: float, slow_end: bool = False
) -> SizePoint | None:
    """The least-spend point within `deadline_s` (fewer GPUs on a tie; `slow_end`: at the interval's slow end)."""
    meeting = [p for p in finishing(points) if wall(p, slow_end) <= deadline_s]
    return min(meeting, key=lambda p: (spend(p), p.gpus), default=None)


def fastest_within(points: Sequence[SizePoint], budget: float) -> SizePoint | None:
    """The least wall time whose spend is within `budget` (cheaper on a tie)."""
    within = [p for p in finishing(points) if spend(p) <= budget]
    return min(within, key=lambda p: (p.wall_s, spend(p)), default=None)


def nearest_miss(points: Sequence[SizePoint]) -> SizePoint | None:
    """The fastest point: what comes nearest a deadline nothing meets."""
    return min(finishing(points), key=lambda p: p.wall_s, default=None)


def pareto(points: Sequence[SizePoint]) -> list[SizePoint]:
    """The points no other beats on both wall time and spend (ties kept once), by wall time."""
    front: list[SizePoint] = []
    for p in sorted(finishing(points), key=lambda p: (p.wall_s, spend(p))):
        if not front or spend(p) < spend(front[-1]):
            front.append(p)
    return front


def knee(points: Sequence[SizePoint]) -> SizePoint | None:
    """One hardware's knee (module docstring): None when nothing fits."""
    curve = fitted(sorted(points, key=lambda p: p.gpus))
    if not curve:
        return None
    share = curve[0].tokens_per_s_per_gpu
    at = curve[0]
    for prev, cur in itertools.pairwise(curve):
        marginal = (cur.tokens_per_s - prev.tokens_per_s) / (cur.gpus - prev.gpus) / share
        if marginal < KNEE_MARGINAL:
            break
        at = cur
    return at


def scaling_efficiency(point: SizePoint, points: Sequence[SizePoint]) -> float | None:
    """Tokens/s per GPU against the smallest fitting count of the same hardware (None when it has no plan)."""
    base = next(iter(fitted(by_hardware(points).get(point.hardware, []))), None)
    if base is None or not point.fits:
        return None
    return point.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu
