"""Peaks in flight: `InFlightProfile`, exact weighted peaks per rank for any per-stage weights.

Owns the profile of lists given as kind·S + stage per action (`profile_rows`), the Pareto frontier of
in-flight vectors (`pareto`, also used by the phase blocks) and the cache of the profiles of full lists, by m
(`PROFILES`, `keep_profile`, `profile_full`). Peaks in flight depend only on each rank's order of actions;
why route A may reuse one profile for every number of copies is in pplan.schedules.periodic's docstring.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from operator import and_, mul

from pplan.collector import collector_paused
from pplan.errors import ConfigError
from pplan.schedules.periodic._common import CACHE_LIMIT, generate
from pplan.schedules.periodic.split import read

PROFILES: dict[tuple[str, int, int | None, int], InFlightProfile] = {}


@dataclass(frozen=True, slots=True)
class InFlightProfile:
    """Peaks in flight of one (name, p, v, m) for any per-stage weights, without the explicit schedule.

    `frontier[r]` holds the Pareto-maximal vectors of micro-batches in flight on rank r's stages
    (`stages_per_rank[r]`, in that order) at the moments right after each of its forwards: the only moments a
    peak can occur, so for non-negative weights the weighted peak is the largest dot product."""

    num_stages: int
    peak_per_stage: tuple[int, ...]
    stages_per_rank: tuple[tuple[int, ...], ...]
    frontier: tuple[tuple[tuple[int, ...], ...], ...]

    def peak_per_rank(self, weights: Sequence[float]) -> tuple[float, ...]:
        """Peak weighted amount in flight per rank (`weights[s]` ≥ 0: what one micro-batch holds on stage s);
        equals `pplan.schedules.timeline.peak_in_flight(schedule, weights)[1]`."""
        if len(weights) != self.num_stages:
            raise ConfigError(
                "weights", f"has {len(weights)} values for {self.num_stages} stages", "give one per stage"
            )
        out = []
        for stages, vectors in zip(self.stages_per_rank, self.frontier, strict=True):
            w = [float(weights[s]) for s in stages]
            out.append(max([0.0] + [sum(map(mul, vec, w)) for vec in vectors]))
        return tuple(out)

    def unit_peak_per_rank(self) -> tuple[int, ...]:
        """Most stage-micro-batches per rank (every weight 1), as the timeline counts them."""
        return tuple(max([0] + [sum(vec) for vec in vectors]) for vectors in self.frontier)


def pareto(vectors: set[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """The vectors no other vector dominates (≥ in every entry), in a stable order."""
    if vectors and len(next(iter(vectors))) == 2:  # a sweep: by the first entry, then the second, descending
        kept2: list[tuple[int, ...]] = []
        best = min(vec[1] for vec in vectors) - 1
        for vec in sorted(vectors, reverse=True):
            if vec[1] > best:
                kept2.append(vec)
                best = vec[1]
        return tuple(sorted(kept2, key=lambda x: (-sum(x), x)))
    ordered = sorted(vectors, key=lambda x: (-sum(x), x))
    kept: list[tuple[int, ...]] = []
    for vec in ordered:
        if not any(all(a >= b for a, b in zip(other, vec, strict=True)) for other in kept):
            kept.append(vec)
    return tuple(kept)


def profile_rows(rows: Sequence[Sequence[int]], placement: Sequence[int], p: int) -> InFlightProfile:
    """The profile of lists given as kind·S + stage per action. On each rank the vector of in-flight counts per
    stage (F enters; W, or a B, leaves: a valid list never has both B and I for one micro-batch) is kept packed
    in one integer, `width` bits per stage (counts are never negative), so one running sum follows all of them;
    the distinct values right after each F are unpacked (every peak, per stage or weighted, is at one)."""
    num_stages = len(placement)
    stages_per_rank = tuple(tuple(s for s, r in enumerate(placement) if r == rank) for rank in range(p))
    peak = [0] * num_stages
    frontier: list[tuple[tuple[int, ...], ...]] = []
    for r, row in enumerate(rows):
        stages = stages_per_rank[r]
        width = len(row).bit_length() + 1
        step: dict[int, int] = {}
        for n, s in enumerate(stages):
            unit = 1 << (width * n)
            step.update({s: unit, 2 * num_stages + s: -unit, 3 * num_stages + s: -unit})
        forward = dict.fromkeys(stages, True)
        packed = set(
            itertools.compress(
                itertools.accumulate(map(step.get, row, itertools.repeat(0))),
                map(forward.get, row, itertools.repeat(False)),
            )
        )
        mask = (1 << width) - 1
        if len(stages) == 1:
            peak[stages[0]] = max(packed, default=0)
            frontier.append(((peak[stages[0]],),) if packed else ())
        elif len(stages) == 2:  # packed = c0 + c1·2^width: descending is by c1, then c0; sweep on c0
            peak[stages[0]] = max(map(and_, packed, itertools.repeat(mask)), default=0)
            peak[stages[1]] = max(packed, default=0) >> width
            kept: list[tuple[int, ...]] = []
            for x in sorted(packed, reverse=True):
                if not kept or x & mask > kept[-1][0]:
                    kept.append((x & mask, x >> width))
            frontier.append(tuple(sorted(kept, key=lambda vec: (-sum(vec), vec))))
        else:
            vectors = {tuple(x >> (width * n) & mask for n in range(len(stages))) for x in packed}
            for n, s in enumerate(stages):
                peak[s] = max((vec[n] for vec in vectors), default=0)
            frontier.append(pareto(vectors))
    return InFlightProfile(num_stages, tuple(peak), stages_per_rank, tuple(frontier))


def profile_full(name: str, p: int, v: int | None, m: int) -> InFlightProfile:
    key = (name, p, v, m)
    if key not in PROFILES:
        with collector_paused():
            schedule = generate(name, p, m, v)
            got = read(schedule)
            profile = profile_rows([got.kind_stage(r) for r in range(p)], schedule.placement, p)
        keep_profile(key, profile)
    return PROFILES[key]


def keep_profile(key: tuple[str, int, int | None, int], profile: InFlightProfile) -> None:
    if len(PROFILES) >= CACHE_LIMIT:
        PROFILES.pop(next(iter(PROFILES)))
    PROFILES[key] = profile
