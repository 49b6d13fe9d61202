"""Small numeric routines the fits share (pplan.validation's fit to published sets, pplan.logs' fit to the user's
own logs): one home for each."""

from __future__ import annotations

from collections.abc import Callable

GOLDEN_RATIO = (5**0.5 - 1) / 2
"""The interval kept at each golden-section step, (√5 − 1) / 2."""


def golden_section_min(cost: Callable[[float], float], lo: float, hi: float, tol: float) -> float:
    """The x in [lo, hi] minimising a unimodal `cost`, to `tol` (golden-section search: each step keeps
    `GOLDEN_RATIO` of the interval and reuses one of its two evaluations)."""
    a, b = lo, hi
    c, d = b - GOLDEN_RATIO * (b - a), a + GOLDEN_RATIO * (b - a)
    fc, fd = cost(c), cost(d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN_RATIO * (b - a)
            fc = cost(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN_RATIO * (b - a)
            fd = cost(d)
    return (a + b) / 2
