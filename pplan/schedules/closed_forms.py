"""Closed forms for each schedule's bubble, shown beside the simulated one for comparison.

The forms themselves, with their citations, are each family's `bubble_idle` in the schedule registry
(`pplan.schedules.registry`): idle time per rank per step for uniform stages and free communication; published
ones, or derived there where no source gives one (interleaved zero bubble, looped BFS: `bubble_derived`). Durations
F (forward), I (input-gradient backward, Qi et al.'s B) and W (weight-gradient backward) are per stage; a full
backward is I + W. The schedule simulator measures the same quantities off an explicit timeline and is tested
against them.

Micro-batches in flight are not given here: pplan measures them off the explicit schedule (pplan.schedules.timeline),
whose tests check them against the published counts.
"""

from __future__ import annotations

from pplan.schedules.registry import ScheduleFamily


def bubble_fractions(
    family: ScheduleFamily, p: int, v: int, m: int, f: float = 1.0, i: float = 1.0, w: float = 1.0
) -> tuple[float, float]:
    """(idle / ideal, idle / step) from the family's `bubble_idle`, ideal = m·(F + I + W) per rank."""
    idle = family.bubble_idle(p, v, m, f, i, w)
    ideal = m * (f + i + w)
    return idle / ideal, idle / (ideal + idle)
