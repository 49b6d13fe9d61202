"""One timeline simulator for every pipeline schedule: when each action runs, and what that costs.

`simulate(schedule, durations, latency=...)` plays a `Schedule`'s per-rank action lists against pass durations
and point-to-point latencies and returns a frozen `Timeline`: start and end of every action, the makespan, busy
and idle time per rank, the bubble, peak micro-batches (and optionally bytes) in flight, and P2P message counts.

Model (the same dependencies torch.distributed.pipelining's runtime enforces):
- F(s, mb) starts after F(s−1, mb) has ended and its activation has arrived (s−1 is the previous stage of the
  chain; none for the first stage).
- I(s, mb) or B(s, mb) starts after the backward (I or B) of the next stage, mb, has ended and its gradient has
  arrived, and after F(s, mb). The last stage's backward needs only its own forward (the loss is part of it).
- W(s, mb) starts after I(s, mb).
- A rank runs its list in order, one action at a time; nothing overlaps on a rank.
- A hop between stages on different ranks costs `latency(src_rank, dst_rank)`; a hop on the same rank is free.
- Durations per stage: F, I and W; a full backward B takes I + W.

Symbols: p ranks, v stages per rank, m micro-batches, S = p·v stages. Bubble definitions (Qi et al. 2024,
"Zero Bubble Pipeline Parallelism", arXiv 2401.10241, §2 bubble rate; Narayanan et al. 2021 for "of ideal"):
- bubble = makespan − busiest rank's compute time;
- bubble_fraction_of_step = bubble / makespan;
- bubble_fraction_of_ideal = bubble / busiest rank's compute time;
- for uniform stages and zero latency, 1F1B and GPipe give (p−1)/(m+p−1) of the step and (p−1)/m of the ideal.

In flight: a micro-batch is in flight on a stage from the start of its F to the end of its B, or of its W when
the backward is split (torch keeps the autograd graph until W). Because a rank runs one action at a time, the
counts depend only on the order of each rank's list, not on durations.

Implementation: a schedule is compiled once (cached) into flat arrays in a dependency-respecting order with
precomputed predecessor indices; each simulation is then one pass over those arrays. Pure: no I/O.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from pplan.errors import ConfigError
from pplan.schedules.actions import Action, Schedule, ScheduleError, check, is_checked, make_schedule

PerStage: TypeAlias = float | Sequence[float]
Latency: TypeAlias = float | Sequence[Sequence[float]] | Callable[[int, int], float]

_KIND_CODE = {"F": 0, "I": 1, "W": 2, "B": 3}


class DeadlockError(ScheduleError):
    """The action lists wait on each other in a cycle: no order of execution can finish them."""


@dataclass(frozen=True, slots=True)
class Durations:
    """Time of one pass of one micro-batch through one stage, in any consistent unit (seconds if you pass seconds).

    Each of `f` (forward), `i` (input-gradient backward) and `w` (weight-gradient backward) is either one number
    for every stage or a sequence with one number per virtual stage (length S). A full backward B takes i + w.
    """

    f: PerStage = 1.0
    i: PerStage = 1.0
    w: PerStage = 1.0

    def per_stage(self, num_stages: int) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """The three durations as per-stage tuples, checked: non-negative and of length `num_stages`."""
        out: list[tuple[float, ...]] = []
        for name, value in (("f", self.f), ("i", self.i), ("w", self.w)):
            if isinstance(value, int | float):
                values = (float(value),) * num_stages
            else:
                values = tuple(float(x) for x in value)
                if len(values) != num_stages:
                    raise ConfigError(
                        f"durations.{name}",
                        f"has {len(values)} values for {num_stages} stages",
                        f"give one number, or one per virtual stage ({num_stages})",
                    )
            if any(x < 0 for x in values):
                raise ConfigError(f"durations.{name}", "has a negative duration", "use times ≥ 0")
            out.append(values)
        return out[0], out[1], out[2]


ROUNDING = 1e-12
"""Relative size of the summation-order noise between a makespan and the busy time it contains."""


def idle_s(makespan: float, busy: float) -> float:
    """makespan − busy: 0 when they differ only by rounding (a rank busy the whole step sums its passes in another
    order than its end time accumulates them), so a step without a bubble never reports a negative one."""
    gap = makespan - busy
    return 0.0 if abs(gap) <= ROUNDING * max(makespan, busy) else gap


class _StepFigures:
    """Figures derived the same way from a full `Timeline` and from its `RunSummary`."""

    __slots__ = ()
    makespan: float
    busy_per_rank: tuple[float, ...]
    p2p_forward_messages: int
    p2p_backward_messages: int

    @property
    def busiest(self) -> float:
        return max(self.busy_per_rank)

    @property
    def idle_per_rank(self) -> tuple[float, ...]:
        return tuple(self.makespan - b for b in self.busy_per_rank)

    @property
    def p2p_messages(self) -> int:
        return self.p2p_forward_messages + self.p2p_backward_messages


@dataclass(frozen=True, slots=True)
class RunSummary(_StepFigures):
    """What a planner needs from a simulated step, without the per-action times (see `Timeline.summary`).

    Per-rank tuples are indexed by rank. The derived properties have exactly `Timeline`'s definitions. Produced
    by `Timeline.summary()` and, without playing every action, by `pplan.schedules.periodic.summarise`.
    """

    makespan: float
    """End of the last action (the step starts at 0)."""
    busy_per_rank: tuple[float, ...]
    """Compute time of each rank (sum of its action durations)."""
    first_start_per_rank: tuple[float, ...]
    """Start of each rank's first action (0.0 for a rank without actions)."""
    last_end_per_rank: tuple[float, ...]
    """End of each rank's last action (0.0 for a rank without actions)."""
    peak_in_flight_per_stage: tuple[int, ...]
    """Most micro-batches a stage holds at once (from the start of F to the end of B or W)."""
    peak_in_flight_per_rank: tuple[int, ...]
    """Most stage-micro-batches (summed over the rank's stages) a rank holds at once."""
    p2p_forward_messages: int
    """Activations sent between ranks per step."""
    p2p_backward_messages: int
    """Gradients sent between ranks per step."""

    @property
    def bubble(self) -> float:
        """makespan − the busiest rank's compute time."""
        return idle_s(self.makespan, self.busiest)

    @property
    def bubble_fraction_of_step(self) -> float:
        """bubble / makespan (0 for an empty step)."""
        return self.bubble / self.makespan if self.makespan > 0 else 0.0

    @property
    def bubble_fraction_of_ideal(self) -> float:
        """bubble / busiest compute time (0 when nothing computes)."""
        busiest = self.busiest
        return self.bubble / busiest if busiest > 0 else 0.0

    @property
    def span_per_rank(self) -> tuple[float, ...]:
        """Each rank's own window: its last end − its first start."""
        return tuple(e - s for s, e in zip(self.first_start_per_rank, self.last_end_per_rank, strict=True))

    @property
    def idle_in_span_per_rank(self) -> tuple[float, ...]:
        """Idle time inside each rank's own window (span − busy)."""
        return tuple(sp - bz for sp, bz in zip(self.span_per_rank, self.busy_per_rank, strict=True))

    @property
    def max_idle_in_span(self) -> float:
        return max(self.idle_in_span_per_rank)


@dataclass(frozen=True, slots=True)
class Timeline(_StepFigures):
    """The simulated step. Per-rank tuples are indexed by rank; `start`/`end` align with `schedule.actions`."""

    schedule: Schedule
    start: tuple[tuple[float, ...], ...]
    end: tuple[tuple[float, ...], ...]
    makespan: float
    """End of the last action (the step starts at 0)."""
    busy_per_rank: tuple[float, ...]
    """Compute time of each rank (sum of its action durations)."""
    bubble: float
    """makespan − the busiest rank's compute time: the idle time the step pays."""
    bubble_fraction_of_step: float
    """bubble / makespan (Qi et al.'s bubble rate; GPipe's (p−1)/(m+p−1), Huang et al. 2019, arXiv:1811.06965)."""
    bubble_fraction_of_ideal: float
    """bubble / busiest compute time (Narayanan's and Megatron's (p−1)/m)."""
    span_per_rank: tuple[float, ...]
    """Each rank's own window: its last end − its first start."""
    idle_in_span_per_rank: tuple[float, ...]
    """Idle time inside each rank's own window (span − busy): the bubble a rank pays when ranks are not
    synchronised at the end of the step (Qi et al.'s ZB-H2 parallelogram counts it this way)."""
    peak_in_flight_per_stage: tuple[int, ...]
    """Most micro-batches a stage holds at once (from the start of F to the end of B or W)."""
    peak_in_flight_per_rank: tuple[int, ...]
    """Most stage-micro-batches (summed over the rank's stages) a rank holds at once."""
    peak_bytes_per_stage: tuple[float, ...] | None
    """Peak activation bytes per stage, when `activation_bytes` was given."""
    peak_bytes_per_rank: tuple[float, ...] | None
    """Peak activation bytes per rank (its stages summed at each moment), when `activation_bytes` was given."""
    p2p_forward_messages: int
    """Activations sent between ranks per step (one per cross-rank stage boundary per micro-batch)."""
    p2p_backward_messages: int
    """Gradients sent between ranks per step."""

    @property
    def max_idle_in_span(self) -> float:
        return max(self.idle_in_span_per_rank)

    def summary(self) -> RunSummary:
        """The step without its per-action times: what `pplan.schedules.periodic.summarise` computes without simulating."""
        return RunSummary(
            makespan=self.makespan,
            busy_per_rank=self.busy_per_rank,
            first_start_per_rank=tuple(s[0] if s else 0.0 for s in self.start),
            last_end_per_rank=tuple(e[-1] if e else 0.0 for e in self.end),
            peak_in_flight_per_stage=self.peak_in_flight_per_stage,
            peak_in_flight_per_rank=self.peak_in_flight_per_rank,
            p2p_forward_messages=self.p2p_forward_messages,
            p2p_backward_messages=self.p2p_backward_messages,
        )

    def intervals(self, rank: int) -> Iterator[tuple[Action, float, float]]:
        """(action, start, end) for each action of `rank`, in the rank's order (which is time order)."""
        yield from zip(self.schedule.actions[rank], self.start[rank], self.end[rank], strict=True)


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A schedule flattened for fast repeated simulation (duration-independent facts included)."""

    order: tuple[int, ...]  # global ids (rank-major) in a dependency-respecting order
    rank: tuple[int, ...]  # per position in `order`
    stage: tuple[int, ...]
    kind: tuple[int, ...]
    prev: tuple[int, ...]  # position (in `order`) of the same rank's previous action, or -1
    dep: tuple[int, ...]  # position of the cross-stage dependency, or -1
    dep_src_rank: tuple[int, ...]  # rank of that dependency (for latency), or -1 when free
    dep2: tuple[
        int, ...
    ]  # position of the second dependency (same-stage F or I; an F&B partner's input), or -1
    dep2_src_rank: tuple[int, ...]
    offsets: tuple[int, ...]  # first global id of each rank, plus the total at the end
    peak_stage: tuple[int, ...]
    peak_rank: tuple[int, ...]
    p2p_fwd: int
    p2p_bwd: int


_CACHE: dict[int, tuple[weakref.ref[Schedule], _Compiled]] = {}
_CACHE_LIMIT = 256


def _compiled(schedule: Schedule) -> _Compiled:
    key = id(schedule)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is schedule:
        return hit[1]
    comp = _compile(schedule)
    if len(_CACHE) >= _CACHE_LIMIT:
        for k in [k for k, (ref, _) in _CACHE.items() if ref() is None] or list(_CACHE)[: _CACHE_LIMIT // 2]:
            _CACHE.pop(k, None)
    _CACHE[key] = (weakref.ref(schedule), comp)
    return comp


def _compile(schedule: Schedule) -> _Compiled:
    if not is_checked(schedule):
        check(schedule)
    placement = schedule.placement
    prev_stage = [-1] * schedule.num_stages
    next_stage = [-1] * schedule.num_stages
    for chain in schedule.chains:
        for up, down in itertools.pairwise(chain):
            next_stage[up] = down
            prev_stage[down] = up

    offsets = [0]
    for row in schedule.actions:
        offsets.append(offsets[-1] + len(row))
    n = offsets[-1]
    g_rank = [0] * n
    g_stage = [0] * n
    g_kind = [0] * n
    where: dict[tuple[int, int, int], int] = {}  # (stage, kind code, mb) -> global id
    for r, row in enumerate(schedule.actions):
        base = offsets[r]
        for j, a in enumerate(row):
            gid = base + j
            code = _KIND_CODE[a.kind]
            g_rank[gid], g_stage[gid], g_kind[gid] = r, a.stage, code
            where[(a.stage, code, a.microbatch)] = gid

    g_dep = [-1] * n
    g_dep2 = [-1] * n
    p2p_fwd = p2p_bwd = 0
    for r, row in enumerate(schedule.actions):
        base = offsets[r]
        for j, a in enumerate(row):
            gid = base + j
            s, mb = a.stage, a.microbatch
            if a.kind == "F":
                ps = prev_stage[s]
                if ps >= 0:
                    g_dep[gid] = where[(ps, 0, mb)]
                    if placement[ps] != r:
                        p2p_fwd += 1
            elif a.kind == "W":
                g_dep2[gid] = where[(s, 1, mb)]
            else:
                g_dep2[gid] = where[(s, 0, mb)]
                ns = next_stage[s]
                if ns >= 0:
                    d = where.get((ns, 1, mb))
                    g_dep[gid] = d if d is not None else where[(ns, 3, mb)]
                    if placement[ns] != r:
                        p2p_bwd += 1

    # An overlapped F&B pair starts when the B's gradient has arrived too (torch's OVERLAP_F_B waits for both).
    for r, positions in enumerate(schedule.overlaps):
        for k in positions:
            g_dep2[offsets[r] + k] = g_dep[offsets[r] + k + 1]

    # Dependency-respecting order: advance every rank as far as its dependencies allow, round after round.
    done = [False] * n
    order: list[int] = []
    heads = list(offsets[:-1])
    ends = offsets[1:]
    progress = True
    while progress:
        progress = False
        for r in range(schedule.p):
            h, e = heads[r], ends[r]
            while h < e:
                d, lo = g_dep[h], g_dep2[h]
                if (d >= 0 and not done[d]) or (lo >= 0 and not done[lo]):
                    break
                done[h] = True
                order.append(h)
                h += 1
            if h != heads[r]:
                heads[r] = h
                progress = True
    if len(order) != n:
        raise _deadlock(schedule, heads, ends, offsets, g_dep, g_dep2, done)

    pos = [0] * n
    for k, gid in enumerate(order):
        pos[gid] = k
    prev = [-1] * n
    for r in range(schedule.p):
        for gid in range(offsets[r] + 1, offsets[r + 1]):
            prev[pos[gid]] = pos[gid - 1]
    o_dep = [pos[g_dep[g]] if g_dep[g] >= 0 else -1 for g in order]
    o_src = [g_rank[g_dep[g]] if g_dep[g] >= 0 and g_rank[g_dep[g]] != g_rank[g] else -1 for g in order]
    o_dep2 = [pos[g_dep2[g]] if g_dep2[g] >= 0 else -1 for g in order]
    o_src2 = [g_rank[g_dep2[g]] if g_dep2[g] >= 0 and g_rank[g_dep2[g]] != g_rank[g] else -1 for g in order]

    peak_stage, peak_rank = _peaks(schedule, [1.0] * schedule.num_stages)
    return _Compiled(
        order=tuple(order),
        rank=tuple(g_rank[g] for g in order),
        stage=tuple(g_stage[g] for g in order),
        kind=tuple(g_kind[g] for g in order),
        prev=tuple(prev),
        dep=tuple(o_dep),
        dep_src_rank=tuple(o_src),
        dep2=tuple(o_dep2),
        dep2_src_rank=tuple(o_src2),
        offsets=tuple(offsets),
        peak_stage=tuple(round(x) for x in peak_stage),
        peak_rank=tuple(round(x) for x in peak_rank),
        p2p_fwd=p2p_fwd,
        p2p_bwd=p2p_bwd,
    )


def _deadlock(
    schedule: Schedule,
    heads: list[int],
    ends: list[int],
    offsets: list[int],
    g_dep: list[int],
    g_dep2: list[int],
    done: list[bool],
) -> DeadlockError:
    def name(gid: int) -> str:
        r = next(r for r in range(schedule.p) if offsets[r] <= gid < offsets[r + 1])
        return str(schedule.actions[r][gid - offsets[r]])

    stuck = []
    for r in range(schedule.p):
        h = heads[r]
        if h < ends[r]:
            waits = [name(d) for d in (g_dep[h], g_dep2[h]) if d >= 0 and not done[d]]
            stuck.append(f"rank {r} at {name(h)} waits for {', '.join(waits)}")
    return DeadlockError(
        "schedule",
        f"{schedule.name} deadlocks: " + "; ".join(stuck),
        "reorder the action lists so every wait is on an action that can run first",
    )


_DELTAS: dict[int, tuple[weakref.ref[Schedule], tuple[tuple[tuple[int, int], ...], ...]]] = {}


def _deltas(schedule: Schedule) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per rank, in order, (stage, +1) where a micro-batch enters a stage and (stage, −1) where it leaves
    (cached per schedule object, like the compiled form)."""
    hit = _DELTAS.get(id(schedule))
    if hit is not None and hit[0]() is schedule:
        return hit[1]
    if len(_DELTAS) >= _CACHE_LIMIT:
        _DELTAS.clear()
    rows = _make_deltas(schedule)
    _DELTAS[id(schedule)] = (weakref.ref(schedule), rows)
    return rows


def _make_deltas(schedule: Schedule) -> tuple[tuple[tuple[int, int], ...], ...]:
    split = {(a.stage, a.microbatch) for row in schedule.actions for a in row if a.kind == "I"}
    rows = []
    for row in schedule.actions:
        out = []
        for a in row:
            if a.kind == "F":
                out.append((a.stage, 1))
            elif a.kind == "W" or (a.kind == "B" and (a.stage, a.microbatch) not in split):
                out.append((a.stage, -1))  # a split backward releases at its W, not at its I
        rows.append(tuple(out))
    return tuple(rows)


def _peaks(schedule: Schedule, weight: Sequence[float]) -> tuple[list[float], list[float]]:
    """Peak weighted in-flight amount per stage and per rank, walking each rank's list in order."""
    peak_stage = [0.0] * schedule.num_stages
    peak_rank = [0.0] * schedule.p
    for r, row in enumerate(_deltas(schedule)):
        cur_stage = [0.0] * schedule.num_stages
        cur = 0.0
        top = 0.0
        for s, sign in row:
            if sign > 0:
                x = cur_stage[s] + weight[s]
                cur_stage[s] = x
                cur += weight[s]
                if x > peak_stage[s]:
                    peak_stage[s] = x
                if cur > top:
                    top = cur
            else:
                cur_stage[s] -= weight[s]
                cur -= weight[s]
        peak_rank[r] = top
    return peak_stage, peak_rank


def peak_in_flight(
    schedule: Schedule, weight: Sequence[float]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Peak weighted amount in flight per stage and per rank (`weight[s]`: what one micro-batch holds on stage
    s). In-flight sets depend only on each rank's order, so no durations are needed."""
    per_stage, per_rank = _peaks(schedule, weight)
    return tuple(per_stage), tuple(per_rank)


def _latency_matrix(latency: Latency, p: int) -> list[list[float]]:
    if isinstance(latency, int | float):
        if latency < 0:
            raise ConfigError("latency", "is negative", "use a latency ≥ 0")
        return [[0.0 if a == b else float(latency) for b in range(p)] for a in range(p)]
    if callable(latency):
        return [[0.0 if a == b else float(latency(a, b)) for b in range(p)] for a in range(p)]
    rows = [[float(x) for x in row] for row in latency]
    if len(rows) != p or any(len(row) != p for row in rows):
        raise ConfigError("latency", f"matrix must be {p}×{p} (one row and column per rank)", "")
    return rows


def simulate(
    schedule: Schedule,
    durations: Durations | tuple[PerStage, PerStage, PerStage] = Durations(),
    latency: Latency = 0.0,
    activation_bytes: PerStage | None = None,
) -> Timeline:
    """Play `schedule` with per-stage pass `durations` (F, I, W) and per-hop `latency` (a number for every
    cross-rank hop, a p×p matrix, or a function of (src_rank, dst_rank)); same-rank hops cost nothing.

    `activation_bytes`, one number or one per stage, is the memory one micro-batch holds on a stage while in
    flight; with it the timeline also reports peak bytes per stage and per rank.
    Raises `DeadlockError` naming the stuck actions when the lists cannot complete.
    """
    comp = _compiled(schedule)
    dur = durations if isinstance(durations, Durations) else Durations(*durations)
    f, i, w = dur.per_stage(schedule.num_stages)
    b = tuple(x + y for x, y in zip(i, w, strict=True))
    table = (f, i, w, b)
    lat = _latency_matrix(latency, schedule.p)

    n = len(comp.order)
    d = [table[k][s] for k, s in zip(comp.kind, comp.stage, strict=True)]
    hop = [lat[src][dst] if src >= 0 else 0.0 for src, dst in zip(comp.dep_src_rank, comp.rank, strict=True)]
    hop2 = [
        lat[src][dst] if src >= 0 else 0.0 for src, dst in zip(comp.dep2_src_rank, comp.rank, strict=True)
    ]
    start = [0.0] * n
    end = [0.0] * n
    prev, dep, dep2 = comp.prev, comp.dep, comp.dep2
    for k in range(n):
        pk = prev[k]
        t = end[pk] if pk >= 0 else 0.0
        dk = dep[k]
        if dk >= 0:
            x = end[dk] + hop[k]
            if x > t:
                t = x
        dk = dep2[k]
        if dk >= 0:
            x = end[dk] + hop2[k]
            if x > t:
                t = x
        start[k] = t
        end[k] = t + d[k]

    # Back to rank-major order, aligned with schedule.actions.
    g_start = [0.0] * n
    g_end = [0.0] * n
    for k, gid in enumerate(comp.order):
        g_start[gid] = start[k]
        g_end[gid] = end[k]
    busy = [0.0] * schedule.p
    for k in range(n):
        busy[comp.rank[k]] += d[k]
    off = comp.offsets
    starts = tuple(tuple(g_start[off[r] : off[r + 1]]) for r in range(schedule.p))
    ends = tuple(tuple(g_end[off[r] : off[r + 1]]) for r in range(schedule.p))
    return _summarise(schedule, comp, starts, ends, tuple(busy), activation_bytes)


def timeline_from_records(
    schedule: Schedule,
    records: Iterable[tuple[int, Action, float, float]],
    origin: float | None = None,
    activation_bytes: PerStage | None = None,
) -> Timeline:
    """A `Timeline` of passes that really ran: one (rank, action, start, end) record per action of `schedule`.

    The same summary `simulate` gives, from measured intervals instead of durations: makespan, busy and idle per
    rank, both bubble fractions, spans. `origin` is time zero (default: the earliest start). Each rank's actions
    are taken in the order of their start times; when that order is not `schedule`'s, the timeline's schedule is
    the measured order (same name, p, v, m, placement and chains, no F&B pairs). Peaks in flight (and bytes, with
    `activation_bytes`) and P2P message counts follow from that order, as in `simulate`.
    Raises `ConfigError` when the records do not cover the schedule's actions exactly once each, on the right
    rank, or when an interval ends before it starts or overlaps the rank's next one.
    """
    rows: list[list[tuple[float, float, Action]]] = [[] for _ in range(schedule.p)]
    for rank, action, t0, t1 in records:
        if not 0 <= rank < schedule.p:
            raise ConfigError("records", f"rank {rank} is outside 0..{schedule.p - 1}", "")
        if t1 < t0:
            raise ConfigError("records", f"rank {rank}: {action} ends before it starts", "")
        rows[rank].append((float(t0), float(t1), action))
    for rank, row in enumerate(rows):
        row.sort(key=lambda item: (item[0], item[1]))
        if sorted(map(str, schedule.actions[rank])) != sorted(str(a) for _, _, a in row):
            raise ConfigError(
                "records",
                f"rank {rank} ran {len(row)} passes that are not {schedule.name}'s {len(schedule.actions[rank])}",
                "record every pass of the schedule exactly once",
            )
        for (_, end, a), (start, _, b) in itertools.pairwise(row):
            if start < end:
                raise ConfigError("records", f"rank {rank}: {b} starts before {a} ends", "")
    measured = tuple(tuple(a for _, _, a in row) for row in rows)
    if measured != schedule.actions:
        schedule = make_schedule(
            schedule.name, schedule.p, schedule.v, schedule.m, schedule.placement, measured, schedule.chains
        )
    comp = _compiled(schedule)
    zero = min((row[0][0] for row in rows if row), default=0.0) if origin is None else origin
    starts = tuple(tuple(t0 - zero for t0, _, _ in row) for row in rows)
    ends = tuple(tuple(t1 - zero for _, t1, _ in row) for row in rows)
    busy = tuple(sum(t1 - t0 for t0, t1, _ in row) for row in rows)
    return _summarise(schedule, comp, starts, ends, busy, activation_bytes)


def _summarise(
    schedule: Schedule,
    comp: _Compiled,
    starts: tuple[tuple[float, ...], ...],
    ends: tuple[tuple[float, ...], ...],
    busy: tuple[float, ...],
    activation_bytes: PerStage | None,
) -> Timeline:
    """The `Timeline` of start and end times per rank (simulated or measured) and busy time per rank."""
    makespan = max((e[-1] for e in ends if e), default=0.0)
    busiest = max(busy)
    bubble = idle_s(makespan, busiest)
    spans = tuple((e[-1] - s[0]) if s else 0.0 for s, e in zip(starts, ends, strict=True))
    peak_bytes_stage: tuple[float, ...] | None = None
    peak_bytes_rank: tuple[float, ...] | None = None
    if activation_bytes is not None:
        if isinstance(activation_bytes, int | float):
            weights = [float(activation_bytes)] * schedule.num_stages
        else:
            weights = [float(x) for x in activation_bytes]
            if len(weights) != schedule.num_stages:
                raise ConfigError(
                    "activation_bytes",
                    f"has {len(weights)} values for {schedule.num_stages} stages",
                    "give one number, or one per virtual stage",
                )
        ps, pr = _peaks(schedule, weights)
        peak_bytes_stage, peak_bytes_rank = tuple(ps), tuple(pr)
    return Timeline(
        schedule=schedule,
        start=starts,
        end=ends,
        makespan=makespan,
        busy_per_rank=busy,
        bubble=bubble,
        bubble_fraction_of_step=bubble / makespan if makespan > 0 else 0.0,
        bubble_fraction_of_ideal=bubble / busiest if busiest > 0 else 0.0,
        span_per_rank=spans,
        idle_in_span_per_rank=tuple(sp - bz for sp, bz in zip(spans, busy, strict=True)),
        peak_in_flight_per_stage=comp.peak_stage,
        peak_in_flight_per_rank=comp.peak_rank,
        peak_bytes_per_stage=peak_bytes_stage,
        peak_bytes_per_rank=peak_bytes_rank,
        p2p_forward_messages=comp.p2p_fwd,
        p2p_backward_messages=comp.p2p_bwd,
    )
