"""Direct simulation: the simulator behind route A's head and tail, and route C (the full list).

Owns the timeline's dependencies on action codes (`Rules`), the tables of ends per stage and micro-batch they
read and write (`rulebook`), the simulator itself (`advance`) and route C: the full list read once (`Lists`,
`lists`, cached by m in `LISTS`) and simulated (`simulated`, `full`). Ranks advance round after round as far
as their inputs have arrived, ends kept per stage and micro-batch, with the timeline's recurrence and its
order of float operations, so the summary is bit for bit `simulate(...).summary()`; deadlocks are left to
`simulate`, which names the stuck actions.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from pplan.collector import collector_paused
from pplan.schedules import Schedule
from pplan.schedules.periodic._common import generate, tables
from pplan.schedules.periodic.profile import InFlightProfile, keep_profile, profile_rows
from pplan.schedules.periodic.split import read
from pplan.schedules.timeline import Durations, Latency, RunSummary, simulate

NONE = -(1 << 62)  # added to a code: negative, so never an action's code

Row = tuple[list[int], list[int], frozenset[int]]
"""One rank's actions to simulate directly: kind·S + stage of each (the flat duration table's index), the
index of its micro-batch within its chain, and the positions that open an overlapped F&B pair."""


def _links(placement: Sequence[int], chains: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    prev_stage = [-1] * len(placement)
    next_stage = [-1] * len(placement)
    for chain in chains:
        for up, down in itertools.pairwise(chain):
            next_stage[up], prev_stage[down] = down, up
    return prev_stage, next_stage


class Rules:
    """The timeline's dependencies on codes: the cross-stage dependency of an action with code c is the first
    of c + first[c mod 4S], c + second[c mod 4S] that exists (F: the previous stage's F; I or B: the next
    stage's I, else its B; W: none — its I is its own stage's, earlier on the rank: it never binds)."""

    def __init__(self, placement: Sequence[int], chains: Sequence[Sequence[int]]) -> None:
        n = len(placement)
        self.num_stages = n
        self.p = max(placement) + 1
        self.unit = 4 * n
        self.placement = placement
        self.prev_stage, self.next_stage = _links(placement, chains)
        self.first = [NONE] * self.unit
        self.second = [NONE] * self.unit
        self.source = [-1] * self.unit  # rank of the dependency's stage, −1: none
        self.fwd = [0] * self.unit  # messages received, as the timeline counts them
        self.bwd = [0] * self.unit
        for s in range(n):
            ps, ns = self.prev_stage[s], self.next_stage[s]
            if ps >= 0:
                self.first[s] = ps - s
                self.source[s] = placement[ps]
                self.fwd[s] = int(placement[ps] != placement[s])
            if ns >= 0:
                for kind in (1, 3):
                    sk = kind * n + s
                    self.first[sk] = n + ns - sk  # the next stage's I
                    self.second[sk] = 3 * n + ns - sk  # its B
                    self.source[sk] = placement[ns]
                    self.bwd[sk] = int(placement[ns] != placement[s])


_Rule = tuple[list[float] | None, int, float, list[float] | None, int, float]


def rulebook(
    rules: Rules, table: Sequence[float], lat: Sequence[float], width: int
) -> tuple[list[_Rule], list[float], list[float]]:
    """Per kind·S + stage: (ends it reads or None, offset, hop, ends it writes or None, offset, duration), over
    fresh tables of ends per (stage, index), `width` indices per stage, −1.0 for not yet played: forwards, and
    backwards (I or B). A dependency on the rank itself is read with no hop (it never binds, but must have run:
    the timeline waits for it). W is read by nothing across stages."""
    n, p = rules.num_stages, rules.p
    fwd = [-1.0] * (n * width)
    bwd = [-1.0] * (n * width)
    book: list[_Rule] = []
    for sk in range(rules.unit):
        kind, s = divmod(sk, n)
        if kind == 2:
            book.append((None, 0, 0.0, None, 0, table[sk]))
            continue
        t = rules.prev_stage[s] if kind == 0 else rules.next_stage[s]
        r, src = rules.placement[s], rules.placement[t] if t >= 0 else -1
        hop = lat[src * p + r] if t >= 0 and src != r else 0.0
        reads = None if t < 0 else fwd if kind == 0 else bwd
        book.append((reads, t * width, hop, fwd if kind == 0 else bwd, s * width, table[sk]))
    return book, fwd, bwd


def advance(
    rows: Sequence[Row], book: list[_Rule], shift: int, last: list[float], keep: list[list[float]] | None
) -> list[float] | None:
    """Simulate each rank's actions after the end last[r] of its previous one (updated to its last end), round
    after round, each rank as far as its inputs have arrived: the timeline's recurrence end = max(previous end,
    input end + hop, partner's input end + hop) + duration, inputs found in `book`'s tables by index + `shift`.
    Appends every end to keep[r] when given. The start of each rank's first action, or None when the ranks
    stall (their lists wait on each other, or on actions not simulated)."""
    p = len(rows)
    heads = [0] * p
    first = [0.0] * p
    live = [r for r in range(p) if rows[r][0]]
    while live:
        still = []
        moved = False
        for r in live:
            sks, idx, pairs = rows[r]
            out = None if keep is None else keep[r]
            h = start = heads[r]
            size = len(sks)
            t_end = last[r]
            while h < size:
                i = idx[h] + shift
                reads, at, hop, writes, put, d = book[sks[h]]
                t = t_end
                if reads is not None:
                    x = reads[at + i]
                    if x < 0.0:
                        break
                    x += hop
                    if x > t:
                        t = x
                if pairs and h in pairs:  # an F&B pair also waits for its partner's input
                    reads, at, hop, *_ = book[sks[h + 1]]
                    if reads is not None:
                        x = reads[at + idx[h + 1] + shift]
                        if x < 0.0:
                            break
                        x += hop
                        if x > t:
                            t = x
                if h == 0:
                    first[r] = t
                t_end = t + d
                if writes is not None:
                    writes[put + i] = t_end
                if out is not None:
                    out.append(t_end)
                h += 1
            if h != start:
                heads[r] = h
                last[r] = t_end
                moved = True
            if h < size:
                still.append(r)
        if not moved:
            return None
        live = still
    return first


@dataclass(frozen=True, slots=True)
class Lists:
    """One generated list, read for `advance` (duration-independent, cached by (name, p, v, m))."""

    rows: list[Row]
    rules: Rules
    width: int  # micro-batches per chain, at most
    fwd: int  # P2P messages
    bwd: int
    profile: InFlightProfile


def lists(schedule: Schedule) -> Lists:
    got = read(schedule)
    rules = Rules(schedule.placement, schedule.chains)
    rows = [(got.kind_stage(r), got.index[r], got.pairs[r]) for r in range(schedule.p)]
    return Lists(
        rows,
        rules,
        max(got.sizes, default=0),
        sum(sum(map(rules.fwd.__getitem__, row[0])) for row in rows),
        sum(sum(map(rules.bwd.__getitem__, row[0])) for row in rows),
        profile_rows([row[0] for row in rows], schedule.placement, schedule.p),
    )


def simulated(lists: Lists, num_stages: int, durations: Durations, latency: Latency) -> RunSummary | None:
    """`simulate(schedule, durations, latency).summary()`, the same floats, without compiling: `advance` over
    the whole lists (busy time summed in list order, as the timeline does). None when the lists deadlock."""
    p = len(lists.rows)
    table, lat = tables(num_stages, p, durations, latency)
    book, _, _ = rulebook(lists.rules, table, lat, lists.width)
    last = [0.0] * p
    first = advance(lists.rows, book, 0, last, None)
    if first is None:
        return None
    profile = lists.profile
    return RunSummary(
        makespan=max((t for t, row in zip(last, lists.rows, strict=True) if row[0]), default=0.0),
        busy_per_rank=tuple(sum(map(table.__getitem__, row[0])) for row in lists.rows),
        first_start_per_rank=tuple(first),
        last_end_per_rank=tuple(last),
        peak_in_flight_per_stage=profile.peak_per_stage,
        peak_in_flight_per_rank=profile.unit_peak_per_rank(),
        p2p_forward_messages=lists.fwd,
        p2p_backward_messages=lists.bwd,
    )


LISTS: dict[tuple[str, int, int | None, int], Lists] = {}
_LISTS_LIMIT = 16


def _full_lists(name: str, p: int, v: int | None, m: int) -> tuple[Lists, Schedule]:
    key = (name, p, v, m)
    schedule = generate(name, p, m, v)
    if key not in LISTS:
        with collector_paused():
            if len(LISTS) >= _LISTS_LIMIT:
                LISTS.pop(next(iter(LISTS)))
            LISTS[key] = lists(schedule)
        keep_profile(key, LISTS[key].profile)
    return LISTS[key], schedule


def full(name: str, p: int, v: int | None, m: int, durations: Durations, latency: Latency) -> RunSummary:
    """The full simulation of the list at m (read once; its profile kept for `in_flight_profile`)."""
    lists, schedule = _full_lists(name, p, v, m)
    summary = simulated(lists, schedule.num_stages, durations, latency)
    return simulate(schedule, durations, latency).summary() if summary is None else summary  # raises
