"""A pipeline step's summary at any number of micro-batches m, exactly, at a cost that does not grow with m.

Owns the public API: `summarise` (what `pplan.schedules.timeline.simulate(get_schedule(...), ...).summary()` returns,
without building or playing the O(p·v·m) action lists), `in_flight_profile` (exact weighted peaks in flight for
any per-stage weights), `route` and `summarise_with_route` (which path answered), `period` (the one table of
schedule periods), `clear_caches`, and the choice of route for each call. Pure: no I/O. Symbols: p ranks, v
stages per rank, S stages, m micro-batches, Δ the period in micro-batches; times in the unit of the durations
given (seconds if seconds).

Three routes, all read off the generators' lists mechanically (never hand-written per family), all exact.

A. One period (1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe, interleaved-1f1b, interleaved-zb). For m ≥ m0
rank r's list is
    P_r · Q_r(0) · Q_r(1) ··· Q_r(K−1) · S_r(K),   m = m0 + K·Δ,
a prefix, K copies of a period and a suffix: copy j is Q_r(0) with its micro-batches shifted by j·σ (`split`:
how the split is read off the lists at m0..m0 + 3Δ and checked, and the measured m0 per family). Each rank's
copy j is labelled J = j + o_r so that every cross-rank read between copies points to the same or an earlier
label, at most R labels back (`structure`: the dependencies found by arithmetic on action codes, compiled once
per class of m); `play` plays the labels per call.

Exactness of A. The simulator is max-plus linear and homogeneous: end(a) = d(a) + max(end(previous on the rank),
end(dependency) + hop, ...), so shifting every input time by μ shifts every output by μ. A dependency on an
earlier action of the same rank costs nothing and never binds (ends do not decrease along a rank), so only the
rank order and the cross-rank reads matter.
1. The prefix and labels < k are closed under dependencies (labels read the same or earlier labels; the head,
   the prefix with labels < head_labels = O + R, is simulated on its own and would stall on any other read), so
   they have the same times with k copies as with any K ≥ k. A label J ≥ O + R reads only labels J − R..J, at
   the same places for every J: one fixed play list (the same passes, durations and hops for every copy) plays
   it, so the window X_J = (labels J − R' + 1..J), R' ≥ R, evolves as X_{J+1} = G(X_J) with one max-plus map G.
2. Certificate at k copies, checked after every label: X_{k−1} = X_{k−1−c} + μ on every action (one constant μ,
   cyclicity c ≥ 1, to 1e-12 of the latest label's ends; c = 1 and the c seen before at every k, every c at
   powers of two). By homogeneity and induction X_{J+c} = X_J + μ for every later J, so for K ≡ k (mod c) the
   last R' + c labels of the K-list are the k-list's plus q·μ, q = (K − k)/c, and so is the tail (the copies
   with labels ≥ k, then the suffix), which reads only those labels and itself: R' = max(R, its reach) with
   the reach fixed for every k ≥ k0, k0 being where no tail action can read the prefix any more (each reads its
   own micro-batch, whose index grows with k; the residue argument gives the rest).
3. Hence each rank's last end (+ q·μ), first start (unchanged), busy time (fixed part + K copies' work),
   makespan, bubble and spans. G is non-expansive in the max norm, so a tolerance ε on the certificate moves the
   answer by at most q·ε (relative error ≲ 1e-12·K).
With no certificate below K copies (a long transient: near-tied critical cycles) the generator's list at m is
simulated in full. An unproven number is never returned. The head and the tail are simulated directly (ends per
stage and micro-batch, as in C); a head or tail whose lists stall sends the call to C too.
Peaks in flight depend only on each rank's order: a copy that is net zero per stage (checked) adds no new
in-flight count vector for K ≥ 1, so the list at m0 + Δ has the K-list's peaks. P2P messages grow by one copy's
count per copy. An overlapped F&B pair reads its partner's input; no segment may end inside a pair (checked),
so that stays shift-invariant.

B. Phase blocks (gpipe, looped-bfs: every F of a chunk, chunk after chunk, then every B): each block's end
times are the upper envelope of lines in the position within the block, exact longest paths in O(S²) per call
for any m (`blocks`).

C. The full list, simulated directly (`direct`): bit for bit `simulate(...).summary()`. Besides the cases
above, a cold call takes C when the list at m has at most _FULL_BELOW (0.7) times the micro-batches route A
works through cold (the lists at m0..m0 + 3Δ and about one more to compile and play): it then costs no more.

Nothing here depends on published bubble formulas (Narayanan et al. 2021; Qi et al. 2024, arXiv 2401.10241);
those live with the generators and `pplan.schedules.timeline`, whose definitions `RunSummary` reuses.

Cost. Cold, route A generates the four lists (most of its time: the generators and `make_schedule`'s check),
reads them as whole-list slices, compiles the period's play list and the head and tail, and plays; route C
generates the list at m once. What is duration-independent (the structure of a class: split, play lists, head
and tail, in-flight profile; the full lists read for C) is cached by (name, p, v, class of m) resp. by m. A warm
call simulates the head and tail, plays the labels up to the certificate (a few periods usually, up to ~100
after long transients) and extrapolates, for any m; the garbage collector is paused while lists are generated
and read (hundreds of thousands of short-lived objects).

Modules, each importing only those listed before it: `_common` (generating lists, the collector pause, flat
tables), `split`, `profile` (in-flight profiles), `direct` (the direct simulator and route C), `structure`,
`play`, `blocks`; this module chooses the route.
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.schedules import canonical_name
from pplan.schedules.periodic._common import tables
from pplan.schedules.periodic.blocks import block_tables, phases_cached, summarise_phases
from pplan.schedules.periodic.direct import LISTS, full
from pplan.schedules.periodic.play import extrapolate, stream
from pplan.schedules.periodic.profile import PROFILES, InFlightProfile, profile_full
from pplan.schedules.periodic.split import CHECK_COPIES, first_m0, period
from pplan.schedules.periodic.structure import (
    PROVIDERS,
    STORES,
    STRUCTURES,
    Structure,
    StructureKey,
    StructureStore,
    structure_cached,
)
from pplan.schedules.timeline import Durations, Latency, RunSummary

__all__ = [
    "PROVIDERS",
    "STORES",
    "InFlightProfile",
    "Route",
    "StructureKey",
    "StructureStore",
    "clear_caches",
    "in_flight_profile",
    "period",
    "route",
    "structure_key",
    "summarise",
    "summarise_with_route",
]

_FULL_BELOW = 0.7
"""Cold route choice: simulate the list at m in full when it has at most this share of the micro-batches the
periodic route works through cold (the lists it generates, at m0, m0 + Δ and the checked ones, and about one
more list's worth to compile and play its head and tail): measured, either route then costs about the same."""


def structure_key(name: str, p: int, v: int | None, m: int) -> StructureKey | None:
    """The structure a cold call at m would build (route A), or None when it would take another route."""
    name = canonical_name(name)
    delta = period(name, p)
    if delta is None:
        return None
    residue = m % delta
    m0 = max(first_m0(name, p, residue), 1)
    worked = sum(m0 + j * delta for j in (0, 1, 1, *CHECK_COPIES))
    return None if m < m0 or m <= _FULL_BELOW * worked else (name, p, v, residue)


def _plan(name: str, p: int, v: int | None, m: int, least: int | None) -> tuple[Structure, int] | str:
    """The structure of m's class and m's number of copies K ≥ `least` (None: the structure's least k, plus one),
    or why the full list is played instead. The list at m is played in full when it is not much longer than the
    lists the periodic route would generate (_FULL_BELOW), whether or not the structure is cached: the two
    routes agree only to rounding, so a route chosen by what the process computed before would make the last
    digits of an answer depend on its history (the same query giving other bytes in another process)."""
    delta = period(name, p)
    assert delta is not None
    residue = m % delta
    m0 = max(first_m0(name, p, residue), 1)
    if m < m0:
        return "m below m0 or outside the periodic class"
    worked = sum(m0 + j * delta for j in (0, 1, 1, *CHECK_COPIES))
    if m <= _FULL_BELOW * worked:
        return "the list at m is about as short as the lists read off"
    struct = structure_cached(name, p, v, residue)
    if struct is None or m < struct.dec.m0 or (m - struct.dec.m0) % delta:
        return "m below m0 or outside the periodic class"
    big_k = (m - struct.dec.m0) // delta
    if big_k < (struct.min_k + 1 if least is None else least):
        return "m within a few periods of m0"
    return struct, big_k


def summarise(
    name: str,
    p: int,
    v: int | None,
    m: int,
    durations: Durations,
    latency: Latency = 0.0,
) -> RunSummary:
    """`simulate(get_schedule(name, p, m, v), durations, latency).summary()` at a cost independent of m.

    Exact (the certificate in the module docstring); gpipe, looped-bfs, m below the family's m0 and m outside
    its periodic class are simulated in full, as is an m whose list is about as short as the lists the periodic
    route reads. Raises what `get_schedule` and `simulate` raise.
    """
    return _summarise(canonical_name(name), p, v, m, durations, latency)[0]


@dataclass(frozen=True, slots=True)
class Route:
    """How `summarise` got its answer (for tests and benchmarks): the fast path with k copies and cyclicity c,
    or the full simulation (k = c = 0) and why."""

    fast: bool
    k: int
    c: int
    why: str


def route(name: str, p: int, v: int | None, m: int, durations: Durations, latency: Latency = 0.0) -> Route:
    """Which path `summarise` takes for these inputs."""
    return _summarise(canonical_name(name), p, v, m, durations, latency)[1]


def summarise_with_route(
    name: str, p: int, v: int | None, m: int, durations: Durations, latency: Latency = 0.0
) -> tuple[RunSummary, Route]:
    """`summarise` and `route` in one call."""
    return _summarise(canonical_name(name), p, v, m, durations, latency)


def _summarise(
    name: str, p: int, v: int | None, m: int, durations: Durations, latency: Latency
) -> tuple[RunSummary, Route]:
    if period(name, p) is None:
        phases = phases_cached(name, p, v)
        if phases is None:
            return full(name, p, v, m, durations, latency), Route(
                False, 0, 0, "no period and no phase blocks"
            )
        if m < 1:
            return full(name, p, v, m, durations, latency), Route(False, 0, 0, "m < 1")  # raises
        table, lat = block_tables(phases, durations, latency)
        return summarise_phases(phases, m, table, lat), Route(True, 0, 0, "phase blocks")
    plan = _plan(name, p, v, m, None)
    if isinstance(plan, str):
        return full(name, p, v, m, durations, latency), Route(False, 0, 0, plan)
    struct, big_k = plan
    table, lat = tables(struct.num_stages, p, durations, latency)
    played = stream(struct, table, lat, big_k)
    if isinstance(played, str):
        return full(name, p, v, m, durations, latency), Route(False, 0, 0, played)
    k, c, mu, first, last = played
    summary = extrapolate(struct, first, last, table, big_k, (big_k - k) // c * mu)
    return summary, Route(True, k, c, "certificate")


def clear_caches() -> None:
    """Forget every cached structure and profile (for cold-start measurements)."""
    STRUCTURES.clear()
    phases_cached.cache_clear()
    PROFILES.clear()
    LISTS.clear()


def in_flight_profile(name: str, p: int, v: int | None, m: int) -> InFlightProfile:
    """The in-flight profile of `get_schedule(name, p, m, v)`. For m ≥ m0 + Δ of a periodic class whose list is
    long enough for the periodic route, it is the class's (read off the list at m0 + Δ when the period was
    detected: a copy of the period is net zero per stage, so copies beyond the first add no new vectors);
    otherwise from the list itself, cached by m."""
    name = canonical_name(name)
    phases = phases_cached(name, p, v) if period(name, p) is None and m >= 1 else None
    if phases is not None:
        return InFlightProfile(
            phases.num_stages,
            tuple(m * x for x in phases.peak_stage),
            phases.stages_per_rank,
            tuple(tuple(tuple(m * x for x in vec) for vec in vectors) for vectors in phases.frontier),
        )
    if period(name, p) is not None:
        plan = _plan(name, p, v, m, 1)
        if not isinstance(plan, str):
            return plan[0].profile
    return profile_full(name, p, v, m)
