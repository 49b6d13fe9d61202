"""From what the ranks recorded to measured against predicted: the comparison `pplan bench` reports. Pure.

Measured, per step:
- the per-pass timeline as a `Timeline` (`pplan.schedules.timeline.timeline_from_records`; milliseconds from the moment
  the first rank left the pre-step barrier), summarised and drawn like a simulated one: both bubble
  conventions, busy time per rank, step time;
- micro-batches in flight per stage and per rank, from the saved-tensor lifetimes autograd really had (a
  micro-batch is in flight on a stage from the start of its F until autograd frees the last tensor it saved),
  and activation bytes per stage from the same tensors;
- P2P messages per step and bytes per message, from the send operations torch posted;
- two kinds of idle gap (over all steps, `measure_gaps`): the dispatch gap, from the end of a pass to the start
  of the rank's next one when its input was already there (the runtime's own work between passes), and the hop
  gap, from the end of a pass to the start of the pass on another rank that was idle waiting for its output.
Predicted, per step (`predict`): `pplan.schedules.timeline.simulate` on pplan's own schedule with that step's F, I and W
per stage (`stage_durations`), the dispatch time (mean gap) charged in front of every pass, and a hop latency of
the (trimmed) mean hop gap less the dispatch time; bytes per message b·s·h·dtype; activation bytes per
micro-batch as measured, so peak bytes follow from the predicted in-flight counts.
Reported: the step whose bubble error is the median, with every step's figures kept. Error: measured −
predicted. Exact checks: in-flight per stage and per rank (largest over the steps), peak activation bytes,
message bytes, messages per step; the bubble (fraction of the step) within `BUBBLE_TOLERANCE` (p ≤ 4).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pplan.bench.config import BenchConfig
from pplan.bench.records import RankRecord, StepRecord
from pplan.schedules import Action, Schedule
from pplan.schedules.timeline import Durations, Timeline, simulate, timeline_from_records

BUBBLE_TOLERANCE = 0.05
"""Largest |measured − predicted| bubble, as a fraction of the step, accepted for p ≤ 4."""
NS_PER_MS = 1e6


@dataclass(frozen=True)
class InFlight:
    """Peak micro-batches (stage-micro-batches for a rank) and activation bytes held at once."""

    per_stage: tuple[int, ...]
    per_rank: tuple[int, ...]
    bytes_per_stage: tuple[float, ...]
    bytes_per_rank: tuple[float, ...]


@dataclass(frozen=True)
class BenchResult:
    """One case, measured and predicted (times in milliseconds)."""

    config: BenchConfig
    measured: Timeline
    predicted: Timeline
    reported_step: int
    """Which measured step `measured` and `predicted` show (the one with the median bubble error)."""
    step_times_ms: tuple[float, ...]
    """Every measured step's time."""
    step_bubbles: tuple[tuple[float, float], ...]
    """Every measured step's (measured, predicted) bubble, fraction of the step."""
    f_ms: tuple[float, ...]
    i_ms: tuple[float, ...]
    w_ms: tuple[float, ...]
    """Pass times per stage in the reported step, the simulator's input (see `stage_durations`)."""
    hop_latency_ms: float
    """Per-hop latency the simulator charges: the trimmed mean hop gap less the dispatch time."""
    hop_samples: int
    dispatch_ms: float
    """Mean dispatch gap: the runtime's work before each pass, which the simulator charges in front of it."""
    dispatch_samples: int
    measured_in_flight: InFlight
    activation_bytes_per_stage: tuple[int, ...]
    """Bytes autograd saved for one micro-batch on each stage (the largest over micro-batches)."""
    message_bytes: tuple[int, ...]
    """The distinct sizes of the messages sent between ranks."""
    messages_per_step: int
    predicted_message_bytes: int
    order_matches: bool
    """Whether torch ran each rank's passes in pplan's order."""
    grad_max_abs_error: float
    grad_max_rel_error: float
    peak_device_bytes: tuple[int | None, ...]
    peak_rss_bytes: tuple[int | None, ...]
    device: str
    backend: str

    @property
    def predicted_in_flight(self) -> InFlight:
        p = self.predicted
        return InFlight(
            p.peak_in_flight_per_stage,
            p.peak_in_flight_per_rank,
            p.peak_bytes_per_stage or (),
            p.peak_bytes_per_rank or (),
        )

    @property
    def bubble_error(self) -> float:
        return self.measured.bubble_fraction_of_step - self.predicted.bubble_fraction_of_step

    def checks(self) -> dict[str, bool]:
        """Each exact or tolerance check, by name."""
        mi, pi = self.measured_in_flight, self.predicted_in_flight
        return {
            "in_flight_per_stage": mi.per_stage == pi.per_stage,
            "in_flight_per_rank": mi.per_rank == pi.per_rank,
            "activation_peak_bytes_per_stage": mi.bytes_per_stage == pi.bytes_per_stage,
            "message_bytes": self.message_bytes == (self.predicted_message_bytes,),
            "messages_per_step": self.messages_per_step == self.predicted.p2p_messages,
            "bubble_within_tolerance": abs(self.bubble_error) <= BUBBLE_TOLERANCE,
        }

    @property
    def ok(self) -> bool:
        return all(self.checks().values())


def _chain_neighbours(schedule: Schedule) -> tuple[dict[int, int], dict[int, int]]:
    prev: dict[int, int] = {}
    nxt: dict[int, int] = {}
    for chain in schedule.chains:
        for a, b in itertools.pairwise(chain):
            nxt[a] = b
            prev[b] = a
    return prev, nxt


@dataclass(frozen=True)
class Gaps:
    """Idle time around passes, measured (ns): what the simulator's hop latency and dispatch overhead come from."""

    hop: tuple[int, ...]
    """From the end of a pass to the start of the dependent pass on another rank, where that rank was idle by the
    time the pass ended (so it waited for the message)."""
    dispatch: tuple[int, ...]
    """From the end of a rank's pass to the start of its next one, where the next one's input was already there
    (so the gap is the runtime's own work between passes: posting sends and receives, Python, autograd set-up)."""


def remote_inputs(schedule: Schedule) -> dict[tuple[int, str, int], list[tuple[int, tuple[str, ...], int]]]:
    """(stage, kind, micro-batch) of each pass → the passes on other ranks whose output it waits for, as
    (stage, kinds that produce it, micro-batch). An F waits for the previous stage's F, an I or B for the next
    stage's I or B; the F of an overlapped F&B pair also waits for its partner's input (torch starts the pair
    when both have arrived)."""
    prev, nxt = _chain_neighbours(schedule)
    placement = schedule.placement
    out: dict[tuple[int, str, int], list[tuple[int, tuple[str, ...], int]]] = {}
    for row in schedule.actions:
        for a in row:
            src = prev.get(a.stage) if a.kind == "F" else nxt.get(a.stage) if a.kind in ("I", "B") else None
            kinds: tuple[str, ...] = ("F",) if a.kind == "F" else ("I", "B")
            deps = (
                [(src, kinds, a.microbatch)]
                if src is not None and placement[src] != placement[a.stage]
                else []
            )
            out[(a.stage, a.kind, a.microbatch)] = deps
    for rank, positions in enumerate(schedule.overlaps):
        for k in positions:
            f, partner = schedule.actions[rank][k], schedule.actions[rank][k + 1]
            out[(f.stage, f.kind, f.microbatch)] = (
                out[(f.stage, f.kind, f.microbatch)] + out[(partner.stage, partner.kind, partner.microbatch)]
            )
    return out


def measure_gaps(schedule: Schedule, steps: Sequence[Sequence[tuple[int, StepRecord]]]) -> Gaps:
    """The two kinds of gap over every measured step; `steps[k]` holds (clock offset, record) per rank."""
    inputs = remote_inputs(schedule)
    hop: list[int] = []
    pending: list[
        tuple[int, int, int]
    ] = []  # (gap, input arrival, previous end) for passes fed from elsewhere
    dispatch: list[int] = []
    for ranks in steps:
        end: dict[tuple[int, str, int], int] = {}
        for offset, step in ranks:
            for op in step.ops:
                end[(op.stage, op.kind, op.microbatch)] = op.end_ns + offset
        for offset, step in ranks:
            ops = sorted(step.ops, key=lambda o: o.start_ns)
            for k, op in enumerate(ops):
                start = op.start_ns + offset
                free = ops[k - 1].end_ns + offset if k else None
                sent = [
                    next(end[(s, kd, mb)] for kd in kinds if (s, kd, mb) in end)
                    for s, kinds, mb in inputs.get((op.stage, op.kind, op.microbatch), [])
                ]
                if sent:
                    last = max(sent)
                    idle_since = free if free is not None else step.start_ns + offset
                    if idle_since <= last:
                        hop.append(start - last)
                    elif free is not None:
                        pending.append((start - free, last, free))
                elif free is not None:
                    dispatch.append(start - free)
    # A pass fed from another rank shows pure dispatch only when its message had surely arrived.
    latency = trimmed_mean(hop)
    dispatch += [gap for gap, last, free in pending if last + latency <= free]
    return Gaps(tuple(hop), tuple(dispatch))


def _in_flight(
    schedule: Schedule, ranks: Sequence[tuple[int, StepRecord]], nbytes: Sequence[int]
) -> InFlight:
    """Peaks from the step's F starts and the times autograd freed each micro-batch's saved tensors."""
    per_stage = [0] * schedule.num_stages
    per_rank = [0] * schedule.p
    bytes_stage = [0.0] * schedule.num_stages
    bytes_rank = [0.0] * schedule.p
    for rank, (_, step) in enumerate(ranks):
        starts: dict[tuple[int, int], int] = {}
        ends: dict[tuple[int, int], int] = {}
        for op in step.ops:
            key = (op.stage, op.microbatch)
            if op.kind == "F":
                starts[key] = op.start_ns
            elif op.kind in ("B", "W"):
                ends[key] = op.end_ns
        events: list[tuple[int, int, int]] = []  # (time, +1 / -1, stage)
        for key, t0 in starts.items():
            t1 = step.released_ns.get(key, ends.get(key, t0))
            events += [(t0, 1, key[0]), (t1, -1, key[0])]
        events.sort(key=lambda e: (e[0], e[1]))
        count: dict[int, int] = {}
        held: dict[int, float] = {}
        total = 0
        total_bytes = 0.0
        for _, delta, s in events:
            count[s] = count.get(s, 0) + delta
            held[s] = held.get(s, 0.0) + delta * nbytes[s]
            total += delta
            total_bytes += delta * nbytes[s]
            per_stage[s] = max(per_stage[s], count[s])
            bytes_stage[s] = max(bytes_stage[s], held[s])
            per_rank[rank] = max(per_rank[rank], total)
            bytes_rank[rank] = max(bytes_rank[rank], total_bytes)
    return InFlight(tuple(per_stage), tuple(per_rank), tuple(bytes_stage), tuple(bytes_rank))


def stage_durations(
    schedule: Schedule, ranks: Sequence[tuple[int, StepRecord]], overhead: float
) -> tuple[list[float], list[float], list[float]]:
    """F, I and W per stage (ms) for the simulator, from one step's passes.

    F is the mean forward. I and W are the least-squares fit of the stage's backward passes to the simulator's
    model (an I takes i, a W takes w, a full B takes i + w): minimise Σ(i − I)² + Σ(w − W)² + Σ(i + w − B')².
    That is the plain means where a stage runs only I and W; where it runs only B, i = mean B and w = 0 (the
    simulator uses only the sum). Times cannot be negative: an optimum outside i, w ≥ 0 moves to the edge. Where a stage runs both, the simulator charges a B two dispatch overheads
    (one for each of I and W) where the runtime pays one, so B' = B − `overhead`."""
    times: dict[tuple[int, str], list[float]] = {}
    for _, step in ranks:
        for op in step.ops:
            times.setdefault((op.stage, op.kind), []).append((op.end_ns - op.start_ns) / NS_PER_MS)
    f, i, w = [], [], []
    for s in range(schedule.num_stages):
        f.append(statistics.fmean(times.get((s, "F"), [0.0])))
        ins, ws = times.get((s, "I"), []), times.get((s, "W"), [])
        bs = [b - overhead for b in times.get((s, "B"), [])] if ins or ws else times.get((s, "B"), [])
        n_i, n_w, n_b = len(ins), len(ws), len(bs)
        if n_i + n_w == 0:
            i.append(statistics.fmean(bs) if bs else 0.0)
            w.append(0.0)
            continue
        # (n_i + n_b)·i + n_b·w = ΣI + ΣB;  n_b·i + (n_w + n_b)·w = ΣW + ΣB
        a11, a12, a22 = n_i + n_b, n_b, n_w + n_b
        r1, r2 = sum(ins) + sum(bs), sum(ws) + sum(bs)
        det = a11 * a22 - a12 * a12
        x, y = (r1 * a22 - a12 * r2) / det, (a11 * r2 - a12 * r1) / det
        if x < 0:  # the constrained optimum lies on the edge i = 0 (or w = 0 below)
            x, y = 0.0, max(0.0, r2 / a22)
        elif y < 0:
            x, y = max(0.0, r1 / a11), 0.0
        i.append(x)
        w.append(y)
    return f, i, w


def trimmed_mean(values: Sequence[float], cut: float = 0.1) -> float:
    """Mean of `values` without the lowest and highest `cut` fraction (0 for none): a rare stall neither
    vanishes, as in a median, nor dominates a few samples, as in a mean."""
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    kept = ordered[k : len(ordered) - k] or ordered
    return statistics.fmean(kept) if kept else 0.0


def predict(
    schedule: Schedule,
    f: Sequence[float],
    i: Sequence[float],
    w: Sequence[float],
    latency: float,
    overhead: float,
    activation_bytes: Sequence[int],
) -> Timeline:
    """pplan's prediction: `simulate` with per-stage F, I, W, the hop latency, and `overhead` of runtime work in
    front of every pass. The overhead is charged inside the pass's slot and then shown as idle: the pass itself
    is drawn, and counted busy, from `overhead` after its slot starts, as the measured passes are. (A stage that
    runs only full backwards gets its B in `i` and nothing in `w`, so its B carries one overhead, not two.)"""
    o = overhead
    split = {a.stage for row in schedule.actions for a in row if a.kind in ("I", "W")}
    slots = simulate(
        schedule,
        Durations(
            [x + o for x in f],
            [x + o for x in i],
            [x + (o if s in split else 0.0) for s, x in enumerate(w)],
        ),
        latency,
    )
    records = [
        (rank, a, min(t0 + o, t1), t1) for rank in range(schedule.p) for a, t0, t1 in slots.intervals(rank)
    ]
    return timeline_from_records(schedule, records, origin=0.0, activation_bytes=list(activation_bytes))


def _origin(ranks: Sequence[tuple[int, StepRecord]]) -> int:
    """The step's time zero: when the first rank left the pre-step barrier."""
    return min(step.start_ns + off for off, step in ranks)


def measured_timeline(
    schedule: Schedule, ranks: Sequence[tuple[int, StepRecord]], activation_bytes: Sequence[int]
) -> Timeline:
    """One step's passes as a `Timeline` (ms from the step's start)."""
    zero = _origin(ranks)
    records = [
        (
            rank,
            Action(op.stage, op.kind, op.microbatch),
            (op.start_ns + off - zero) / NS_PER_MS,
            (op.end_ns + off - zero) / NS_PER_MS,
        )
        for rank, (off, step) in enumerate(ranks)
        for op in step.ops
    ]
    return timeline_from_records(schedule, records, origin=0.0, activation_bytes=list(activation_bytes))


def analyse(config: BenchConfig, records: Sequence[RankRecord]) -> BenchResult:
    """Measured against predicted for one case, from every rank's records.

    Every measured step is predicted from its own pass times (hop latency and dispatch overhead from all steps);
    the step reported is the one whose bubble error is the median, and every step's figures are kept. In-flight
    peaks are the largest over all steps; messages are those of the reported step."""
    plan = config.plan
    records = sorted(records, key=lambda r: r.rank)
    n_steps = min(len(r.steps) for r in records)
    steps = [[(r.clock_offset_ns, r.steps[k]) for r in records] for k in range(n_steps)]
    saved: dict[int, int] = {}
    for ranks in steps:
        for _, step in ranks:
            for (s, _mb), n in step.saved_bytes.items():
                saved[s] = max(saved.get(s, 0), n)
    act_bytes = tuple(saved.get(s, 0) for s in range(plan.num_stages))
    gaps = measure_gaps(plan, steps)
    overhead = statistics.fmean(gaps.dispatch) / NS_PER_MS if gaps.dispatch else 0.0
    latency = max(0.0, trimmed_mean(gaps.hop) / NS_PER_MS - overhead) if gaps.hop else 0.0
    pairs: list[tuple[Timeline, Timeline, tuple[list[float], list[float], list[float]]]] = []
    for ranks in steps:
        durations = stage_durations(plan, ranks, overhead)
        pairs.append(
            (
                measured_timeline(plan, ranks, act_bytes),
                predict(plan, *durations, latency, overhead, act_bytes),
                durations,
            )
        )
    errors = [m.bubble_fraction_of_step - p.bubble_fraction_of_step for m, p, _ in pairs]
    pick = sorted(range(n_steps), key=lambda k: errors[k])[n_steps // 2]
    measured, predicted, (f, i, w) = pairs[pick]
    flights = [_in_flight(plan, ranks, act_bytes) for ranks in steps]
    in_flight = InFlight(
        *(
            tuple(max(vals) for vals in zip(*(getattr(x, name) for x in flights), strict=True))
            for name in ("per_stage", "per_rank", "bytes_per_stage", "bytes_per_rank")
        )
    )
    sends = [s for rank, (_, step) in enumerate(steps[pick]) for s in step.sends if s.peer != rank]
    all_sizes = {
        s.nbytes
        for ranks in steps
        for rank, (_, step) in enumerate(ranks)
        for s in step.sends
        if s.peer != rank
    }
    return BenchResult(
        config=config,
        measured=measured,
        predicted=predicted,
        reported_step=pick,
        step_times_ms=tuple(m.makespan for m, _, _ in pairs),
        step_bubbles=tuple((m.bubble_fraction_of_step, p.bubble_fraction_of_step) for m, p, _ in pairs),
        f_ms=tuple(f),
        i_ms=tuple(i),
        w_ms=tuple(w),
        hop_latency_ms=latency,
        hop_samples=len(gaps.hop),
        dispatch_ms=overhead,
        dispatch_samples=len(gaps.dispatch),
        measured_in_flight=in_flight,
        activation_bytes_per_stage=act_bytes,
        message_bytes=tuple(sorted(all_sizes)),
        messages_per_step=len(sends),
        predicted_message_bytes=config.message_bytes(),
        order_matches=all(m.schedule.actions == plan.actions for m, _, _ in pairs),
        grad_max_abs_error=max(r.grad_max_abs_error or 0.0 for r in records),
        grad_max_rel_error=max(r.grad_max_rel_error or 0.0 for r in records),
        peak_device_bytes=tuple(
            max((s.peak_device_bytes or 0 for s in r.steps), default=0) or None for r in records
        ),
        peak_rss_bytes=tuple(r.peak_rss_bytes for r in records),
        device=records[0].device,
        backend=records[0].backend,
    )
