"""What a search answers: the exact top N in the documented order (`Ranked`: each configuration's exact
evaluation and the request that plans it), how many configurations were left out for each reason, the nearest
misses on memory, and how much work the answer took. Data only: `recommend` (pplan.recommend) explains it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

from pplan.plan.records import PlanRequest
from pplan.search.rank import Fitted, Scored
from pplan.search.space import Candidate, Rejection


@dataclass(frozen=True, slots=True)
class Miss:
    """A configuration rejected for memory, with how far over it was."""

    summary: str
    need_bytes: float
    """Memory the most loaded stage needs (plus any requested headroom): exact, or at least this much."""
    usable_bytes: float
    exact: bool = True
    """False when `need_bytes` is the proven lower bound the search rejected it with."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """A configuration in the answer: its exact evaluation, and the request that plans it (`explain`'s input)."""

    scored: Scored
    request: PlanRequest

    @property
    def candidate(self) -> Candidate:
        return self.scored.candidate


@dataclass
class Ranking:
    """The search's answer (module docstring)."""

    candidates: list[Ranked]
    rejected: Counter[Rejection] = field(default_factory=Counter)
    closest_misses: list[Miss] = field(default_factory=list)
    enumerated: int = 0
    bounded: int = 0
    """Configurations whose memory and proven throughput bound were computed (partial recomputes the bisection
    skipped count too: each is proven out of memory by a bound that only falls with N)."""
    simulated: int = 0
    """Configurations whose schedule was simulated for the exact throughput."""


Missed = tuple[float, float, int, bool, Candidate]
"""A miss as the search keeps it: (need / usable, need bytes, usable bytes, exact, configuration); its summary is
written only for the nearest (`nearest`)."""


def count_miss(
    result: Ranking,
    misses: list[Missed],
    fit: Fitted,
    headroom_fraction: float,
    twin_fits: bool = False,
) -> None:
    """Count a configuration out of memory, and keep it for the nearest misses unless a twin of it fits (an FP32
    configuration admitted because its BF16 twin fits is no miss of the cut; nor is a sharding variant,
    whose base's miss is kept)."""
    result.rejected[Rejection.MEMORY] += 1
    if not twin_fits:
        misses.append(
            missed_by(fit.candidate, fit.peak_bytes, fit.usable_bytes, headroom_fraction, fit.exact)
        )


def missed_by(
    cand: Candidate, peak_bytes: float, usable_bytes: int, headroom_fraction: float, exact: bool
) -> Missed:
    """`cand` out of memory, needing `peak_bytes` (exact, or a lower bound) of `usable_bytes`, plus the headroom."""
    need = peak_bytes + usable_bytes * headroom_fraction
    return need / usable_bytes, need, usable_bytes, exact, cand


NEAREST_MISSES = 5
"""How many nearest misses a search answers with."""


def nearest(misses: list[Missed]) -> list[Miss]:
    """The five nearest misses on memory (need / usable, then the summary), one line per distinct shortfall (not
    every b / cp variant of it)."""
    misses.sort(key=lambda x: x[0])
    shown: list[Miss] = []
    for _, group in itertools.groupby(misses, key=lambda x: x[0]):
        for miss in sorted((Miss(c.summary(), need, usable, exact) for _, need, usable, exact, c in group),
                           key=lambda x: x.summary):  # fmt: skip
            if all(abs(miss.need_bytes - kept.need_bytes) > 0.005 * kept.need_bytes for kept in shown):
                shown.append(miss)
            if len(shown) == NEAREST_MISSES:
                return shown
    return shown
