"""The auto scheduler's list builder: one setting of its knobs (`Policy`), the event-driven greedy that builds
and times every rank's list under it (`play`, step 1 of pplan.schedules.auto's algorithm) and how two played
candidates compare (`Candidate`: makespan, then window idle time, then fewer micro-batches held)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pplan.schedules.auto.inputs import CODE_F, CODE_I, CODE_W, INF, Problem, peak_per_stage

Mode = Literal["F-first", "I-first", "alternate"]
"""Which pass a free rank prefers: F-first (an F whenever memory and its activation allow, else I, else W);
I-first (an I whenever its gradient has arrived, else F, else W); alternate (after the warm-up, I and F in turn,
as 1F1B does, with W filling whatever the next of them cannot start)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One setting of the greedy list scheduler's knobs (see the module docstring, step 1).

    `warmup[r]`: the most forwards rank r runs before its first I (1 ≤ warmup[r] ≤ min(K_r, m)).
    `w_delay`: how W's fill idle time. A rank with nothing ready defers its pending W's; when the pass it waits
    for becomes ready at t, W's go, from its idle start on, into the gap while each ends by t + w_delay·W_r: 0
    fills only what fits (the pass is not delayed), ∞ runs a W whenever the rank would idle. None: W's never fill
    idle time. In every case a W runs when the lag forces it, when memory blocks the next F, or when only W's
    are left.
    `f_lookahead`: I-first only: no F (duration F_r) while the next I is known to become ready within
    f_lookahead·F_r.
    `w_lag[r]`: when rank r has more than this many W's pending (I done, W not), the oldest runs before anything
    else; None: no such limit. `zb_h1_policy` (alternate, warm-up p − r, lag r, no filling) is exactly ZB-H1.
    """

    mode: Mode
    warmup: tuple[int, ...]
    w_delay: float | None = 0.0
    f_lookahead: float = 0.0
    w_lag: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.mode == "alternate":
            # Rank r runs F(w_r + k) only after I(k), which waits for I(k) on rank r + 1, which (alternating)
            # runs after F(w_{r+1} + k − 1) there: the lists deadlock unless w_{r+1} ≤ w_r. Keep the running min.
            object.__setattr__(self, "warmup", tuple(itertools.accumulate(self.warmup, min)))

    def label(self) -> str:
        """A short description, e.g. `F-first warm-up 4..1 W-delay 0.5`."""
        warm = f"{self.warmup[0]}..{self.warmup[-1]}" if len(self.warmup) > 1 else f"{self.warmup[0]}"
        fill = "no W fill" if self.w_delay is None else f"W-delay {self.w_delay:g}"
        text = f"{self.mode} warm-up {warm} {fill}"
        if self.mode == "I-first":
            text += f" F-lookahead {self.f_lookahead:g}"
        if self.w_lag is not None:
            text += f" W-lag {self.w_lag[0]}..{self.w_lag[-1]}"
        return text


@dataclass(frozen=True, slots=True)
class Candidate:
    """One played candidate: its lists (per rank, codes 3·mb + kind), its makespan and its window idle time
    (the most idle time inside one rank's own first-start-to-last-end window), in seconds, and the micro-batches
    it holds in flight at its peaks, summed over the stages."""

    rows: tuple[tuple[int, ...], ...]
    makespan_s: float
    window_idle_s: float
    label: str
    held: int = 0

    def beats(self, other: Candidate) -> bool:
        """Shorter makespan (beyond float rounding, a relative 1e-12); on a tie, less window idle time (Qi et
        al.'s bubble, the tie-break)."""
        if _shorter(self.makespan_s, other.makespan_s):
            return True
        tie = not _shorter(other.makespan_s, self.makespan_s)
        return tie and self.window_idle_s < other.window_idle_s - 1e-12 * other.makespan_s

    def leaner(self, other: Candidate) -> bool:
        """As good by `beats` either way, holding fewer micro-batches at the stages' peaks: the result takes it
        (less memory for the same step), though the search climbs only on `beats`."""
        return not self.beats(other) and not other.beats(self) and self.held < other.held

    def unbeatable(self, bound_s: float) -> bool:
        """At the lower bound with no window idle time: no candidate can beat it."""
        return not _shorter(bound_s, self.makespan_s) and self.window_idle_s <= 1e-12 * self.makespan_s


def _shorter(a_s: float, b_s: float) -> bool:
    """Whether time a is shorter than b by more than float rounding (a relative 1e-12)."""
    return a_s < b_s * (1 - 1e-12)


def make_candidate(
    prob: Problem,
    rows: Sequence[Sequence[int]],
    first_s: Sequence[float],
    last_s: Sequence[float],
    label: str,
) -> Candidate:
    """A candidate from its lists and each rank's first start and last end: the makespan, and the window idle
    time, the most any rank's span exceeds its busy time m·(F + I + W)."""
    idle = max(last_s[r] - first_s[r] - prob.m * (prob.f[r] + prob.i[r] + prob.w[r]) for r in range(prob.p))
    kept = tuple(tuple(row) for row in rows)
    return Candidate(kept, max(last_s), max(0.0, idle), label, sum(peak_per_stage(kept)))


def play(prob: Problem, pol: Policy) -> Candidate:
    """Build every rank's list by the event-driven greedy of the module docstring (step 1) and time it.

    A heap holds (time, −rank) wake-ups; ties go to the downstream rank, so a rank deciding at t knows what its
    downstream neighbour started at t. At a wake-up the rank starts a pass (`_chooser`), or sleeps until the pass
    it waits for becomes ready (∞ while unknown: the neighbour that produces it wakes it). Each pass starts at
    max(rank free, pass ready): the earliest its list position allows. Deferred W's are placed, when the awaited
    F or I starts, into the idle gap before it (`Policy.w_delay`); a W feeds no other rank, so placing it late
    changes nothing any other rank has seen."""
    p, m, lat_f, lat_i = prob.p, prob.m, prob.lat_f_in, prob.lat_i_in
    f, i, w = prob.f, prob.i, prob.w
    slack = [0.0 if pol.w_delay is None or x <= 0 else pol.w_delay * x for x in w]
    fill = pol.w_delay is not None
    nf, ni, nw = [0] * p, [0] * p, [0] * p  # next micro-batch to F, to I, to W
    free, first = [0.0] * p, [0.0] * p  # each rank's last end and first start
    fend = [[INF] * m for _ in range(p)]
    iend = [[INF] * m for _ in range(p)]
    rows: list[list[int]] = [[] for _ in range(p)]
    wake_at = [0.0] * p
    heap = [(0.0, -r) for r in range(p)]
    heapq.heapify(heap)
    choose = _chooser(prob, pol)
    lag = pol.w_lag if pol.w_lag is not None else (m,) * p
    last_rank, total = p - 1, 3 * m
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        t, neg = pop(heap)
        r = -neg
        if t != wake_at[r]:
            continue  # superseded by an earlier wake-up
        a, b, c = nf[r], ni[r], nw[r]
        # ti, tf: when the next I and the next F become ready (∞ while unknown).
        ti = (fend[r][b] if r == last_rank else iend[r + 1][b] + lat_i[r]) if b < a else INF
        tf = (fend[r - 1][a] + lat_f[r] if r else 0.0) if a < m else INF
        kind, ready = choose(r, t, a, b, c, ti, tf)
        if kind < 0:
            wake_at[r] = ready
            if ready < INF:
                push(heap, (ready, neg))
            continue
        start = free[r]
        if kind != CODE_W and fill:
            row = rows[r]
            while c < b and start < ready and start + w[r] <= ready + slack[r]:
                row.append(3 * c + 2)  # a deferred W into the idle gap before this pass
                start += w[r]
                c += 1
            nw[r] = c
        if ready > start:
            start = ready
        if kind == CODE_F:
            if a == 0:
                first[r] = start
            nf[r] = a + 1
            end = start + f[r]
            fend[r][a] = end
            rows[r].append(3 * a)
            # Wake the downstream rank if this is the F it needs next (the heap entry at max(ready, its free)).
            if r < last_rank and nf[r + 1] == a:
                arrive = end + lat_f[r + 1]
                at = arrive if arrive > free[r + 1] else free[r + 1]
                if at < wake_at[r + 1]:
                    wake_at[r + 1] = at
                    push(heap, (at, -r - 1))
        elif kind == CODE_I:
            ni[r] = b + 1
            end = start + i[r]
            iend[r][b] = end
            rows[r].append(3 * b + 1)
            if r and ni[r - 1] == b:  # likewise upstream, for the I it needs next
                arrive = end + lat_i[r - 1]
                at = arrive if arrive > free[r - 1] else free[r - 1]
                if at < wake_at[r - 1]:
                    wake_at[r - 1] = at
                    push(heap, (at, 1 - r))
        else:
            c += 1
            end = start + w[r]
            rows[r].append(3 * c - 1)
        # W's the rank runs next whatever it learns (past its lag, or only W's left): append them now.
        b = ni[r]
        while c < b and (b - c > lag[r] or (b == m and nf[r] == m)):
            rows[r].append(3 * c + 2)
            end += w[r]
            c += 1
        nw[r] = c
        free[r] = end
        if len(rows[r]) < total:
            wake_at[r] = end if end > t else t
            push(heap, (wake_at[r], neg))
        else:
            wake_at[r] = INF
    assert all(len(row) == total for row in rows), f"the greedy stalled with policy {pol}"
    return make_candidate(prob, rows, first, free, pol.label())


Chooser = Callable[[int, float, int, int, int, float, float], tuple[int, float]]
"""(rank r, time t, next F, next I, next W micro-batch, ti, tf) → (kind, when that pass became ready) to start
it now, or (−1, when to look again; ∞ until a neighbour wakes the rank)."""


def _chooser(prob: Problem, pol: Policy) -> Chooser:
    """The policy's rule for what a free rank starts (module docstring, step 1), as a closure over the problem.
    (W's forced by the lag, and the W's left at the end, `play` appends itself.)

    The mode picks a ready F or I; the next F is not ready while memory blocks it (the in-flight count F's − W's
    has reached the rank's min(K_r, m), or before its first I its warm-up count). With none ready, a W runs if
    memory blocks the F the rank wants; else the rank waits, its W's deferred (`Policy.w_delay`)."""
    m, caps, warmup, mode = prob.m, prob.cap, pol.warmup, pol.mode
    f_hold = [pol.f_lookahead * x if x > 0 else 0.0 for x in prob.f]

    def choose(r: int, t: float, nf: int, ni: int, nw: int, ti: float, tf: float) -> tuple[int, float]:
        warm, cap = warmup[r], caps[r]
        blocked = nf < m and nf - nw >= (cap if ni else min(cap, warm))
        if blocked:
            tf = INF
        if mode == "alternate":
            want_f = nf < m and (nf < warm or ni > nf - warm)
            nt = tf if want_f else ti
            if nt <= t:
                return (CODE_F if want_f else CODE_I), nt
            blocked = blocked and want_f
        elif mode == "F-first":
            if tf <= t:
                return CODE_F, tf
            if ti <= t:
                return CODE_I, ti
            nt = min(ti, tf)
        else:
            if ti <= t:
                return CODE_I, ti
            nt = min(ti, tf)
            if tf <= t:
                if ti - t >= f_hold[r]:
                    return CODE_F, tf
                nt = ti  # F held back: look again when the I is ready
        if blocked and nw < ni:
            return CODE_W, 0.0  # frees the memory the F it wants needs
        return -1, nt

    return choose
