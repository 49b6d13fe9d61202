"""A pipeline step's summary at any number of micro-batches m, exactly, at a cost that does not grow with m.

Owns `summarise` (what `pplan.timeline.simulate(get_schedule(...), ...).summary()` returns, without building or
playing the O(p·v·m) action lists), `in_flight_profile` (exact weighted peaks in flight for any per-stage
weights), `route` (which path answered) and the one table of schedule periods (`period`). Pure: no I/O.
Symbols: p ranks, v stages per rank, S stages, m micro-batches, Δ the period in micro-batches; times in the unit
of the durations given (seconds if seconds).

Three routes, all read off the generators' lists mechanically (never hand-written per family), all exact.

A. One period (1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe, interleaved-1f1b, interleaved-zb). For m ≥ m0
rank r's list is
    P_r · Q_r(0) · Q_r(1) ··· Q_r(K−1) · S_r(K),   m = m0 + K·Δ,
a prefix, K copies of a period and a suffix: copy j is Q_r(0) with its micro-batches shifted by j·σ, the suffix
S_r(0) shifted by K·σ (micro-batches counted within their chain: σ = Δ for one chain, 1 for each of DualPipe's
two directions; chains growing unequally are simulated in full). Each action is one integer, its code:
index·4S + kind·S + stage, so a shift by j copies adds j·σ·4S. The split is read off the lists at m0 and
m0 + Δ (longest common prefix; the rest a common suffix moved by one period), with m0 the first m of m's class
mod Δ from the family record's m0 (pplan.schedules.registry) where that works, and checked against the lists
at m0 + 2Δ and m0 + 3Δ (_CHECK_COPIES). Every list played beyond those is built from the split, not generated:
rows(K) = P·Q^K·S is trusted for every K from these four lists, the per-family argument below and the tests
(tests/test_periodic.py compares it with the generator far beyond the lists read). Measured m0 for p ≥ 2:
1f1b and zb-h1 p − 1 (warm-up F's, then (F, B) resp. (F, I, W) steps, then the drain: loops whose counts are
affine in m); zb-h2 2p (its W-filled skeleton repeats after the warm-up); zbv 2p − 1 and dualpipev 2p (step 4 of
their programs repeats one micro-batch at a time); dualpipe 2p with Δ = 2 (one micro-batch more per direction;
odd m is invalid); interleaved-1f1b 2p and interleaved-zb p with Δ = p (m a multiple of p gives groups G = p,
one more group per period). The other valid interleaved m (m < p², torch's rounds rule, G = m/rounds ≠ p) have
no period in m and are simulated in full, as is every m with too few copies for a certificate.

Dependencies, by arithmetic. The timeline's cross-stage dependency of an action is the same micro-batch's pass
on the neighbouring stage (F: the previous stage's F; I or B: the next stage's I, else its B), i.e. its code
plus an offset that depends only on code mod 4S. A code c + jσ·4S of copy j reads code t + jσ·4S; when some
action of the period has t's residue mod σ·4S (residues are distinct, checked), with code c′, that action in
copy j − δ, δ = (c′ − t)/σ·4S, is the one read, for every j. Label rank r's copy j with J = j + o_r, offsets
o_r from difference constraints (Bellman–Ford) so that every cross-rank read between copies points to the same
or an earlier label, at most R labels back (all o_r = 0 and R ≤ 2 for every family above).

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

B. Phase blocks (gpipe, looped-bfs: every F of a chunk, chunk after chunk, then every B). Each rank's list is a
sequence of blocks, one (stage, kind) over all m micro-batches in ascending or descending order (read at m = 3
and 4, same sequence), and each block's cross-rank dependency is one block walking the micro-batches the same
way. Within a block at position j, end(j) = max(end(j−1), dep(j) + hop) + d. If dep is the upper envelope of
lines a + b·j, then max over j' ≤ j of (a + b·j' + (j − j' + 1)·d) is reached at j' = 0 or j' = j, so end is the
envelope of start + (j+1)·d and the lines (a + hop + d, max(b, d)): exact longest paths in O(S²) per call
(GPipe's classic F(r, j) = Σ_{r'≤r} f_r' + the r hops + j·max_{r'≤r} f_r' is the first blocks' case). The
moving point where looped BFS's second chunk stops waiting for the first chunk's last rank, which no bounded
certificate could cover, is just where two lines cross. In-flight counts change by whole blocks (m at a time).

C. The full list, simulated directly (`_simulated`): ranks advance round after round as far as their inputs
have arrived, ends kept per stage and micro-batch, with the timeline's recurrence and its order of float
operations, so the summary is bit for bit `simulate(...).summary()`; deadlocks are left to `simulate`, which
names the stuck actions. Besides the cases above, a cold call takes C when the list at m has at most
_FULL_BELOW (0.7) times the micro-batches route A works through cold (the lists at m0..m0 + 3Δ and about one
more to compile and play): it then costs no more.

Nothing here depends on published bubble formulas (Narayanan et al. 2021; Qi et al. 2024, arXiv 2401.10241);
those live with the generators and `pplan.timeline`, whose definitions `RunSummary` reuses.

Cost. Cold, route A generates the four lists (most of its time: the generators and `make_schedule`'s check),
reads them as whole-list slices, compiles the period's play list and the head and tail, and plays; route C
generates the list at m once. What is duration-independent (the structure of a class: split, play lists, head
and tail, in-flight profile; the full lists read for C) is cached by (name, p, v, class of m) resp. by m. A warm
call simulates the head and tail, plays the labels up to the certificate (a few periods usually, up to ~100
after long transients) and extrapolates, for any m; the garbage collector is paused while lists are generated
and read (hundreds of thousands of short-lived objects).
"""

from __future__ import annotations

import gc
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from operator import add, and_, attrgetter, floordiv, mod, mul, sub

from pplan.errors import ConfigError
from pplan.schedules import Schedule, canonical_name, get_schedule, schedule_family
from pplan.timeline import Durations, Latency, RunSummary, _latency_matrix, simulate

Token = tuple[int, int, int, int]
"""One action as data that survives shifting: (stage, kind code F=0 I=1 W=2 B=3, index of its micro-batch
within its chain, 1 when it opens an overlapped F&B pair else 0)."""
Rows = tuple[tuple[Token, ...], ...]
Codes = tuple[tuple[int, ...], ...]
"""Per rank, each action as one integer: index·4S + kind·S + stage (S stages). Moving a copy by one period adds
σ·4S; the timeline's dependency of an action is its code plus an offset that depends only on code mod 4S."""

_KIND = {"F": 0, "I": 1, "W": 2, "B": 3}
_TOLERANCE = 1e-12  # certificate tolerance, relative to the latest label's ends
_DETECT_SPAN = 8  # candidate m0 run from the record's m0 up to 8 periods further
_CHECK_COPIES = (2, 3)  # the split read at m0 and m0 + Δ is checked against the lists at m0 + 2Δ and m0 + 3Δ
_FULL_BELOW = 0.7
"""Cold route choice: simulate the list at m in full when it has at most this share of the micro-batches the
periodic route works through cold (the lists it generates, at m0, m0 + Δ and the checked ones, and about one
more list's worth to compile and play its head and tail): measured, either route then costs about the same."""
_CACHE_LIMIT = 128
_NONE = -(1 << 62)  # added to a code: negative, so never an action's code


def period(name: str, p: int) -> int | None:
    """Δ: micro-batches one repetition of `name`'s steady state adds, or None when its lists have no single
    period (every F then every B): the family's record (pplan.schedules.registry) says."""
    steady = schedule_family(name).steady
    return None if steady is None else steady(p)[1]


def _first_m0(name: str, p: int, residue: int) -> int:
    """Where to start looking for the split: the record's m0, moved up into m's class mod Δ."""
    steady = schedule_family(name).steady
    assert steady is not None
    m0, delta = steady(p)
    return m0 + (residue - m0) % delta


# --------------------------------------------------------------------------------------------- reading lists

_STAGE = attrgetter("stage")
_KIND_OF = attrgetter("kind")
_MICROBATCH = attrgetter("microbatch")


@dataclass(frozen=True, slots=True)
class _Sample:
    """One generated list as three channels per rank, compared whole (slices): each action's stage, kind, and
    the index of its micro-batch within its chain; the positions opening an overlapped F&B pair per rank; the
    micro-batches per chain and the schedule's shape."""

    stage: tuple[list[int], ...]
    kind: tuple[list[str], ...]
    index: tuple[list[int], ...]
    pairs: tuple[frozenset[int], ...]
    sizes: tuple[int, ...]
    chain_of: tuple[int, ...]
    placement: tuple[int, ...]
    chains: tuple[tuple[int, ...], ...]

    def codes(self, r: int, lo: int = 0, hi: int | None = None) -> list[int]:
        """Codes of rank r's actions lo..hi − 1."""
        n = len(self.chain_of)
        base = {kind: code * n for kind, code in _KIND.items()}
        return list(
            map(
                add,
                map(mul, self.index[r][lo:hi], itertools.repeat(4 * n)),
                map(add, map(base.__getitem__, self.kind[r][lo:hi]), self.stage[r][lo:hi]),
            )
        )

    def kind_stage(self, r: int) -> list[int]:
        """kind·S + stage of rank r's actions (the flat duration table's index)."""
        n = len(self.chain_of)
        base = {kind: code * n for kind, code in _KIND.items()}
        return list(map(add, map(base.__getitem__, self.kind[r]), self.stage[r]))


def _read(schedule: Schedule) -> _Sample:
    chain_of = [0] * schedule.num_stages
    for c, chain in enumerate(schedule.chains):
        for s in chain:
            chain_of[s] = c
    members = []
    for chain in schedule.chains:
        row = schedule.actions[schedule.placement[chain[0]]]
        members.append(sorted(a.microbatch for a in row if a.stage == chain[0] and a.kind == "F"))
    stage = tuple(list(map(_STAGE, row)) for row in schedule.actions)
    kind = tuple(list(map(_KIND_OF, row)) for row in schedule.actions)
    if all(ms == list(range(ms[0], ms[0] + len(ms))) for ms in members if ms):
        low = [members[c][0] if members[c] else 0 for c in chain_of]
        if any(low):
            index = tuple(
                list(map(sub, map(_MICROBATCH, row), map(low.__getitem__, st)))
                for row, st in zip(schedule.actions, stage, strict=True)
            )
        else:
            index = tuple(list(map(_MICROBATCH, row)) for row in schedule.actions)
    else:  # a chain's micro-batches are not consecutive: number them
        number = [{mb: i for i, mb in enumerate(ms)} for ms in members]
        index = tuple([number[chain_of[a.stage]][a.microbatch] for a in row] for row in schedule.actions)
    pairs = tuple(map(frozenset, schedule.overlaps)) if schedule.overlaps else (frozenset(),) * schedule.p
    return _Sample(
        stage,
        kind,
        index,
        pairs,
        tuple(map(len, members)),
        tuple(chain_of),
        schedule.placement,
        schedule.chains,
    )


def _decode(codes: Iterable[int], pairs: Iterable[int], num_stages: int) -> tuple[Token, ...]:
    flags = dict.fromkeys(pairs, 1)
    unit = 4 * num_stages
    return tuple(
        (c % num_stages, c % unit // num_stages, c // unit, flags.get(n, 0)) for n, c in enumerate(codes)
    )


def _tokens(schedule: Schedule) -> tuple[Rows, tuple[int, ...], tuple[int, ...]]:
    """Each rank's list as tokens, the micro-batches per chain, and each stage's chain."""
    got = _read(schedule)
    rows = tuple(_decode(got.codes(r), got.pairs[r], schedule.num_stages) for r in range(schedule.p))
    return rows, got.sizes, got.chain_of


@dataclass(frozen=True, slots=True)
class _Decomposition:
    """rows(K) = P_r · Q_r(0..K−1) · S_r(K) for m = m0 + K·delta (see the module docstring), as codes; one σ
    for every chain (copy j's codes are copy 0's plus j·σ·4S)."""

    m0: int
    delta: int
    sigma: int  # micro-batch index shift per copy, in every chain
    num_stages: int
    prefix: Codes
    body: Codes  # Q_r(0)
    suffix: Codes  # S_r(0)
    pairs: tuple[tuple[frozenset[int], frozenset[int], frozenset[int]], ...]  # per rank, per segment

    @property
    def step(self) -> int:
        """What one copy adds to a code."""
        return self.sigma * 4 * self.num_stages

    def expand(self, copies: int) -> Rows:
        """The tokens of the list with `copies` copies (for tests)."""
        out = []
        for r, (pre, q, suf) in enumerate(zip(self.prefix, self.body, self.suffix, strict=True)):
            pp, pq, ps = self.pairs[r]
            codes = list(pre)
            flags = list(pp)
            for j in range(copies):
                flags += [len(codes) + i for i in pq]
                codes += [c + j * self.step for c in q]
            flags += [len(codes) + i for i in ps]
            codes += [c + copies * self.step for c in suf]
            out.append(_decode(codes, flags, self.num_stages))
        return tuple(out)

    def m_of(self, copies: int) -> int:
        return self.m0 + copies * self.delta


def _lcp(x: Sequence[object], y: Sequence[object]) -> int:
    """Length of the longest common prefix of two lists (slice comparisons, bisected)."""
    n = min(len(x), len(y))
    if x[:n] == y[:n]:
        return n
    lo, hi = 0, n  # x[:lo] == y[:lo], x[:hi] != y[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _moved(codes: Sequence[int], by: int) -> list[int]:
    return list(map(add, codes, itertools.repeat(by)))


_Got = _Sample | None


def _sample(name: str, p: int, v: int | None, m: int, memo: dict[int, _Got]) -> _Got:
    """The list at m read into codes (None when m is not valid for the family), memoised for one detection."""
    if m not in memo:
        try:
            memo[m] = _read(get_schedule(name, p, m, v))
        except ConfigError:
            memo[m] = None
    return memo[m]


def _detect_at(
    name: str, p: int, v: int | None, m0: int, delta: int, memo: dict[int, _Got]
) -> _Decomposition | None:
    """Split the lists at m0 and m0 + Δ into prefix, period and suffix (the longest common prefix; the rest a
    common suffix moved by one period); check the split on the lists at m0 + jΔ, j in _CHECK_COPIES."""
    a, b = _sample(name, p, v, m0, memo), _sample(name, p, v, m0 + delta, memo)
    if a is None or b is None:
        return None
    sigmas = {y - x for x, y in zip(a.sizes, b.sizes, strict=True)}
    if len(sigmas) != 1 or min(sigmas) <= 0:
        return None  # chains that grow unequally are simulated in full
    (sigma,) = sigmas
    cuts: list[tuple[int, int]] = []  # per rank: (prefix length, period length)
    for r in range(p):
        lb = len(b.stage[r]) - len(a.stage[r])
        if lb <= 0:
            return None
        n = min(_lcp(a.stage[r], b.stage[r]), _lcp(a.kind[r], b.kind[r]), _lcp(a.index[r], b.index[r]))
        n = min([n, *(i for i in a.pairs[r] ^ b.pairs[r] if i < n)])
        if (
            b.stage[r][n + lb :] != a.stage[r][n:]
            or b.kind[r][n + lb :] != a.kind[r][n:]
            or b.index[r][n + lb :] != _moved(a.index[r][n:], sigma)
        ):
            return None
        if {i - lb for i in b.pairs[r] if i >= n + lb} != {i for i in a.pairs[r] if i >= n}:
            return None
        cuts.append((n, lb))
    for j in _CHECK_COPIES:
        later = _sample(name, p, v, m0 + j * delta, memo)
        if later is None or later.sizes != tuple(x + j * sigma for x in a.sizes):
            return None
        for r, (n, lb) in enumerate(cuts):
            body = slice(n, n + lb)
            index = a.index[r][:n]
            for c in range(j):
                index += _moved(b.index[r][body], c * sigma)
            if (
                later.stage[r] != a.stage[r][:n] + b.stage[r][body] * j + a.stage[r][n:]
                or later.kind[r] != a.kind[r][:n] + b.kind[r][body] * j + a.kind[r][n:]
                or later.index[r] != index + _moved(a.index[r][n:], j * sigma)
            ):
                return None
            flags = {i for i in a.pairs[r] if i < n}
            flags.update(i + c * lb for c in range(j) for i in b.pairs[r] if n <= i < n + lb)
            flags.update(i + j * lb for i in a.pairs[r] if i >= n)
            if later.pairs[r] != flags:
                return None
    return _Decomposition(
        m0,
        delta,
        sigma,
        len(a.chain_of),
        tuple(tuple(a.codes(r, 0, n)) for r, (n, _) in enumerate(cuts)),
        tuple(tuple(b.codes(r, n, n + lb)) for r, (n, lb) in enumerate(cuts)),
        tuple(tuple(a.codes(r, n)) for r, (n, _) in enumerate(cuts)),
        tuple(
            (
                frozenset(i for i in a.pairs[r] if i < n),
                frozenset(i - n for i in b.pairs[r] if n <= i < n + lb),
                frozenset(i - n for i in a.pairs[r] if i >= n),
            )
            for r, (n, lb) in enumerate(cuts)
        ),
    )


def _detect(
    name: str, p: int, v: int | None, residue: int, delta: int, memo: dict[int, _Got]
) -> _Decomposition | None:
    """The first m0 ≡ residue (mod Δ) from the record's m0, up to 8 periods further, where the lists split into
    prefix, period and suffix."""
    m0 = max(_first_m0(name, p, residue), 1)
    last = m0 + _DETECT_SPAN * delta
    while m0 <= last:
        dec = _detect_at(name, p, v, m0, delta, memo)
        if dec is not None:
            return dec
        memo.pop(m0, None)
        m0 += delta
    return None


# ---------------------------------------------------------------------------------- the structure, compiled


_Row = tuple[list[int], list[int], frozenset[int]]
"""One rank's actions to simulate directly: kind·S + stage of each (the flat duration table's index), the
index of its micro-batch within its chain, and the positions that open an overlapped F&B pair."""


@dataclass(slots=True)
class _Tail:
    """The actions after label k − 1 (the copies with labels ≥ k, then the suffix) for every k ≥ k0, with their
    indices at k = 0 (k·σ is added)."""

    k0: int
    rows: list[_Row]
    reach: int  # they read labels ≥ k − reach, and themselves
    top: int  # largest index at k = 0, plus one


@dataclass(slots=True)
class _Structure:
    """Everything duration-independent about one (name, p, v, class of m).

    The labels' ends go into one flat list E: label J (rank r's copy J − o_r, rank after rank) at J·L. The
    head (prefix and labels < head_labels) and the tail are simulated directly (ends per stage and index), the
    head writing its labels' ends into E, the tail reading the last labels' ends from E."""

    name: str
    p: int
    v: int | None
    num_stages: int
    dec: _Decomposition
    rules: _Rules
    offset: tuple[int, ...]  # o_r
    lead: int  # O = max o_r
    reach: int  # R: a copy's cross-rank dependencies lie at most R labels back
    label: int  # L: actions per label (one copy per rank)
    head_labels: int  # the head plays the prefix and labels < head_labels
    head: list[_Row]
    head_top: int  # largest index in the head, plus one
    carry: list[tuple[int, int, int, int]]
    """Per slot u of a label holding an F, I or B: (u, kind·S + stage, index in copy 0, o_r): where the tail finds
    the label's ends (`_stream`)."""
    body_top: int  # largest index in copy 0, plus one
    steady: list[tuple[int, int, int, int, int, int, int]]
    """Any label J ≥ head_labels: per action, in a dependency-respecting order, (slot u within the label,
    distance back in E to prev, to dep, hop, distance to dep2, hop2, duration index)."""
    paired: bool
    tail: _Tail
    min_k: int  # the least k a certificate can be read at
    fixed_work: tuple[
        tuple[tuple[int, int], ...], ...
    ]  # per rank: (duration index, count) of prefix + suffix
    body_work: tuple[tuple[tuple[int, int], ...], ...]  # per rank: (duration index, count) of one copy
    fixed_fwd: int  # P2P forward messages of prefix + suffix
    fixed_bwd: int
    body_fwd: int  # P2P forward messages per copy
    body_bwd: int
    profile: InFlightProfile  # of every list with K ≥ 1 copies


def _links(placement: Sequence[int], chains: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    prev_stage = [-1] * len(placement)
    next_stage = [-1] * len(placement)
    for chain in chains:
        for up, down in itertools.pairwise(chain):
            next_stage[up], prev_stage[down] = down, up
    return prev_stage, next_stage


def _solve_offsets(p: int, edges: list[tuple[int, int, int]]) -> tuple[tuple[int, ...], int] | None:
    """o with o[target] ≤ o[source] + δ on every edge (Bellman–Ford from a virtual source), shifted to min 0,
    and the reach max(1, δ + o[source] − o[target]). None on a negative cycle (a deadlock)."""
    dist = [0] * p
    for _ in range(p + 1):
        changed = False
        for src, tgt, d in edges:
            if dist[src] + d < dist[tgt]:
                dist[tgt] = dist[src] + d
                changed = True
        if not changed:
            low = min(dist)
            off = tuple(x - low for x in dist)
            reach = max([1] + [d + off[src] - off[tgt] for src, tgt, d in edges])
            return off, reach
    return None


class _Rules:
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
        self.first = [_NONE] * self.unit
        self.second = [_NONE] * self.unit
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


def _work(codes: Iterable[int], unit: int) -> tuple[tuple[int, int], ...]:
    """(duration index, count): the code mod 4S is kind·S + stage, the flat duration table's index."""
    return tuple(sorted(Counter(map(mod, codes, itertools.repeat(unit))).items()))


def _messages(work: Iterable[tuple[int, int]], rules: _Rules) -> tuple[int, int]:
    fwd = bwd = 0
    for sk, n in work:
        fwd += n * rules.fwd[sk]
        bwd += n * rules.bwd[sk]
    return fwd, bwd


def _net_zero(dec: _Decomposition) -> bool:
    """Whether one copy leaves every stage's in-flight count unchanged (F enters; W, or a B, leaves: a valid list
    never has both B and I for one micro-batch)."""
    n = dec.num_stages
    net = [0] * n
    for q in dec.body:
        for c in q:
            kind = c % (4 * n) // n
            net[c % n] += 1 if kind == 0 else 0 if kind == 1 else -1
    return not any(net)


def _pair_cut(dec: _Decomposition) -> bool:
    """Whether a segment ends with the F of an overlapped F&B pair: its partner (and so its dependency) would
    then change with the number of copies."""
    return any(
        len(seg) - 1 in flags
        for segs, flags3 in zip(zip(dec.prefix, dec.body, dec.suffix, strict=True), dec.pairs, strict=True)
        for seg, flags in zip(segs, flags3, strict=True)
    )


class _Layout:
    """Where label J's copies sit in E: rank r's copy J − o_r at J·L + (rank r's start within a label)."""

    def __init__(self, dec: _Decomposition, rules: _Rules, offset: Sequence[int]) -> None:
        self.dec = dec
        self.rules = rules
        self.p = len(dec.body)
        self.offset = offset
        self.lead = max(offset)
        self.body_base = list(itertools.accumulate((len(x) for x in dec.body), initial=0))
        self.label = self.body_base[-1]


def _residues(lay: _Layout) -> dict[int, tuple[int, int, int]] | None:
    """Body code mod σ·4S → (rank, position in the copy, code): the copy of the period holding any code of the
    same residue (None when two share a residue: a list with copies enough would repeat a pass)."""
    step = lay.dec.step
    out: dict[int, tuple[int, int, int]] = {}
    for r, q in enumerate(lay.dec.body):
        for n, c in enumerate(q):
            out[c % step] = (r, n, c)
    return out if len(out) == lay.label else None


_Links = list[list[tuple[int, int, int] | None]]
"""Per rank, per action of the period: (rank, position, δ) of its cross-stage dependency, or None."""


def _body_links(lay: _Layout, res: dict[int, tuple[int, int, int]]) -> _Links | None:
    """Action c of copy j reads the action with code c + offset (`_Rules`) in the list; when that code's residue
    mod σ·4S is the period's (rank, position, code c′), it sits in copy j − δ of the period for every j, with
    δ = (c′ − c − offset)/σ·4S. None when some dependency is not in the period."""
    rules, step = lay.rules, lay.dec.step
    unit, first, second, source = rules.unit, rules.first, rules.second, rules.source
    out: _Links = []
    for q in lay.dec.body:
        row: list[tuple[int, int, int] | None] = []
        for c in q:
            sk = c % unit
            if source[sk] < 0:
                row.append(None)
                continue
            t = c + first[sk]
            got = res.get(t % step)
            if got is None and second[sk] != _NONE:
                t = c + second[sk]
                got = res.get(t % step)
            if got is None:
                return None
            row.append((got[0], got[1], (got[2] - t) // step))
        out.append(row)
    return out


def _steady(lay: _Layout, links: _Links, reach: int) -> list[tuple[int, int, int, int, int, int, int]] | None:
    """The play list of a label J ≥ O + R (see `_Structure.steady`): its dependencies are in labels J − R..J,
    at the same places for every such J; ordered to respect those inside the label."""
    rules, p, big_l = lay.rules, lay.p, lay.label
    unit = rules.unit
    zero = p * p
    entries: list[tuple[int, int, int, int, int, int, int]] = []
    waits: list[tuple[int, int]] = []  # per slot: the slots of the same label it reads (big_l: none)
    for r, (q, row) in enumerate(zip(lay.dec.body, links, strict=True)):
        base = lay.body_base[r]
        deps: list[tuple[int | None, int, int]] = []  # (distance back in E, hop, slot when in the same label)
        for n, got in enumerate(row):
            if got is None:
                deps.append((None, zero, big_l))
                continue
            rt, nt, delta = got
            back = delta + lay.offset[r] - lay.offset[rt]  # labels back
            if not 0 <= back <= reach:
                return None
            ut = lay.body_base[rt] + nt
            if rt == r:
                if back == 0 and nt >= n:
                    return None  # would wait for a later action of its own rank
                deps.append((None, zero, big_l))
            else:
                deps.append((back * big_l + base + n - ut, rt * p + r, ut if back == 0 else big_l))
        pairs = lay.dec.pairs[r][1]
        for n, c in enumerate(q):
            pd = 1 if n else big_l - len(q) + 1
            dist, hop, within = deps[n]
            d2, h2, w2 = (
                (deps[n + 1][0], deps[n + 1][1], deps[n + 1][2]) if n in pairs else (None, zero, big_l)
            )
            if d2 is not None:
                d2 -= 1  # the partner's distance, from one slot earlier
            waits.append((within, w2))
            entries.append(
                (base + n, pd, pd if dist is None else dist, hop, pd if d2 is None else d2, h2, c % unit)
            )
    done = bytearray(big_l + 1)
    done[big_l] = 1
    heads = list(lay.body_base[:-1])
    ends = lay.body_base[1:]
    order: list[int] = []
    live = list(range(p))
    while live:
        still = []
        moved = False
        for r in live:
            h = start = heads[r]
            while h < ends[r] and done[waits[h][0]] and done[waits[h][1]]:
                done[h] = 1
                h += 1
            if h != start:
                order += range(start, h)
                heads[r] = h
                moved = True
            if h < ends[r]:
                still.append(r)
        if not moved:
            return None
        live = still
    return [entries[u] for u in order]


def _tail(lay: _Layout, res: dict[int, tuple[int, int, int]], start: int) -> _Tail | None:
    """The tail's actions at the least k0 ≥ `start` from which none can read the prefix: each reads the token of
    its own micro-batch, whose index grows with k past every index the prefix holds for that stage and kind.
    From there on each reads the same place relative to label k for every k (the residue argument of
    `_body_links`), which gives the reach. None when a dependency is nowhere to be found."""
    rules, dec = lay.rules, lay.dec
    unit, step, first, second, source = rules.unit, dec.step, rules.first, rules.second, rules.source
    codes = sorted(itertools.chain.from_iterable(dec.prefix))
    top = dict(
        zip(map(mod, codes, itertools.repeat(unit)), codes, strict=True)
    )  # largest code per kind·S + stage
    rows_codes = [
        [c - x * step for x in range(lay.offset[r], 0, -1) for c in dec.body[r]] + list(dec.suffix[r])
        for r in range(lay.p)
    ]
    moving = sorted(itertools.chain.from_iterable(rows_codes), reverse=True)
    low = dict(zip(map(mod, moving, itertools.repeat(unit)), moving, strict=True))  # smallest code per class
    k0 = start
    for sk, c in low.items():
        for off in (first[sk], second[sk]):
            if off != _NONE and (c + off) % unit in top:
                k0 = max(k0, (top[(c + off) % unit] - c - off) // step + 1)
    inside = set(moving)
    reach = 1  # a rank's first tail action follows its copy in label k − 1
    for c in moving:
        sk = c % unit
        if source[sk] < 0:
            continue
        for off in (first[sk], second[sk]):
            if off == _NONE:
                continue
            t = c + off
            if t in inside:
                break
            got = res.get(t % step)
            if got is not None and t < got[2]:  # in copy j = k + (t − c′)/σ·4S < k of rank got[0]
                reach = max(reach, -((t - got[2]) // step + lay.offset[got[0]]))
                break
        else:
            return None
    rows: list[_Row] = []
    for r, tail_codes in enumerate(rows_codes):
        pq, ps = dec.pairs[r][1], dec.pairs[r][2]
        size = len(dec.body[r])
        pairs = [x * size + i for x in range(lay.offset[r]) for i in pq]
        pairs += [lay.offset[r] * size + i for i in ps]
        rows.append(
            (
                list(map(mod, tail_codes, itertools.repeat(unit))),
                list(map(floordiv, tail_codes, itertools.repeat(unit))),
                frozenset(pairs),
            )
        )
    return _Tail(k0, rows, reach, max((max(row[1]) + 1 for row in rows if row[1]), default=0))


def _structure(name: str, p: int, v: int | None, residue: int) -> _Structure | None:
    """Detect the period of one class of m and compile everything duration-independent about it (None: none)."""
    delta = period(name, p)
    if delta is None:
        return None
    memo: dict[int, _Got] = {}
    dec = _detect(name, p, v, residue, delta, memo)
    # Every rank works in every copy, a copy leaves in-flight counts unchanged, no segment splits an F&B pair.
    if dec is None or not all(dec.body) or not _net_zero(dec) or _pair_cut(dec):
        return None
    one = memo.get(dec.m_of(1))
    assert one is not None
    rules = _Rules(one.placement, one.chains)
    lay = _Layout(dec, rules, (0,) * p)
    res = _residues(lay)
    links = None if res is None else _body_links(lay, res)
    if res is None or links is None:
        return None
    edges = [
        (r, got[0], got[2]) for r, row in enumerate(links) for got in row if got is not None and got[0] != r
    ]
    solved = _solve_offsets(p, edges)
    if solved is None:
        return None
    offset, reach = solved
    lay = _Layout(dec, rules, offset)
    steady = _steady(lay, links, reach)
    if steady is None:
        return None
    lead = max(offset)
    head_labels = lead + reach
    unit = rules.unit
    head: list[_Row] = []
    for r in range(p):
        codes = list(dec.prefix[r])
        pairs = list(dec.pairs[r][0])
        for j in range(head_labels - offset[r]):
            pairs += [len(codes) + i for i in dec.pairs[r][1]]
            codes += _moved(dec.body[r], j * dec.step)
        head.append(
            (
                list(map(mod, codes, itertools.repeat(unit))),
                list(map(floordiv, codes, itertools.repeat(unit))),
                frozenset(pairs),
            )
        )
    tail = _tail(lay, res, head_labels + 1)
    if tail is None:
        return None
    carry = [
        (lay.body_base[r] + n, c % unit, c // unit, offset[r])
        for r, q in enumerate(dec.body)
        for n, c in enumerate(q)
        if c % unit // dec.num_stages != 2
    ]
    fixed = tuple(_work(pre + suf, unit) for pre, suf in zip(dec.prefix, dec.suffix, strict=True))
    body = tuple(_work(q, unit) for q in dec.body)
    fixed_fwd, fixed_bwd = _messages(itertools.chain.from_iterable(fixed), rules)
    body_fwd, body_bwd = _messages(itertools.chain.from_iterable(body), rules)
    return _Structure(
        name=name,
        p=p,
        v=v,
        num_stages=dec.num_stages,
        dec=dec,
        rules=rules,
        offset=offset,
        lead=lead,
        reach=reach,
        label=lay.label,
        head_labels=head_labels,
        head=head,
        head_top=max((max(row[1]) + 1 for row in head if row[1]), default=0),
        carry=carry,
        body_top=max((x[2] + 1 for x in carry), default=0),
        steady=steady,
        paired=any(h2 != p * p for *_, h2, _ in steady),
        tail=tail,
        min_k=max(tail.k0, head_labels, lead + reach + 1),
        fixed_work=fixed,
        body_work=body,
        fixed_fwd=fixed_fwd,
        fixed_bwd=fixed_bwd,
        body_fwd=body_fwd,
        body_bwd=body_bwd,
        profile=_profile_rows([one.kind_stage(r) for r in range(p)], one.placement, p),
    )


_STRUCTURES: dict[tuple[str, int, int | None, int], _Structure | None] = {}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while lists are generated and read: that allocates hundreds of
    thousands of objects, and each automatic collection would walk the ones alive (10-20% of the time).
    Nothing is lost: whatever cycles appear are collected once it runs again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _structure_cached(name: str, p: int, v: int | None, residue: int) -> _Structure | None:
    key = (name, p, v, residue)
    if key not in _STRUCTURES:
        if len(_STRUCTURES) >= _CACHE_LIMIT:
            _STRUCTURES.pop(next(iter(_STRUCTURES)))
        with _collector_paused():
            _STRUCTURES[key] = _structure(name, p, v, residue)
    return _STRUCTURES[key]


# ------------------------------------------------------------------------------------------- playing and proving


_Rule = tuple[list[float] | None, int, float, list[float] | None, int, float]


def _rulebook(
    rules: _Rules, table: Sequence[float], lat: Sequence[float], width: int
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


def _advance(
    rows: Sequence[_Row], book: list[_Rule], shift: int, last: list[float], keep: list[list[float]] | None
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


def _window(struct: _Structure, k: int, c: int) -> int | None:
    """First label of the window a cyclicity-c certificate compares at k copies: it spans the R′ + c last
    labels, R′ = max(R, tail reach − c) (the tail reads labels ≥ k − tail reach); None when it does not fit
    above the first complete label O, or label k − c does not follow the steady recurrence (k − c ≥ O + R)."""
    lo = k - c - max(struct.reach, struct.tail.reach - c)
    return lo if lo >= struct.lead and k - c >= struct.lead + struct.reach else None


def _certificate(struct: _Structure, end: Sequence[float], k: int, c: int, lo: int) -> float | None:
    """μ with labels J + c = labels J + μ, action by action, for J in lo..k − c − 1 (module docstring, step
    3), to a tolerance relative to the latest label's ends; None when that fails. Checks one action per label
    first (a subset of the same conditions), then all of them."""
    big_l = struct.label
    tol = _TOLERANCE * max(end[(k - 1) * big_l : k * big_l])
    mu = end[(lo + c) * big_l] - end[lo * big_l]
    for u in (0, big_l - 1):
        seq = end[lo * big_l + u : k * big_l : big_l]
        diffs = list(map(sub, seq[c:], seq[:-c]))
        if max(diffs) - mu > tol or mu - min(diffs) > tol:
            return None
    diffs = list(map(sub, end[(lo + c) * big_l : k * big_l], end[lo * big_l : (k - c) * big_l]))
    return mu if max(diffs) - mu <= tol and mu - min(diffs) <= tol else None


def _stream(
    struct: _Structure, table: Sequence[float], lat: Sequence[float], big_k: int
) -> tuple[int, int, float, list[float], list[float]] | str:
    """Simulate the head, then play label after label (labels < k are closed under dependencies, so their ends
    are the same for any number of copies after them) until a certificate holds at k copies with K ≡ k (mod c):
    c = 1 and the cyclicities seen before at every k, every c at powers of two. Then simulate the tail of the
    list with k copies. (k, c, μ, first start and last end per rank), or why not."""
    big_l, p, dec = struct.label, struct.p, struct.dec
    book, _, _ = _rulebook(struct.rules, table, lat, struct.head_top)
    last = [0.0] * p
    keep: list[list[float]] = [[] for _ in range(p)]
    first = _advance(struct.head, book, 0, last, keep)
    if first is None:
        return "the head's lists wait on each other"
    end = [0.0] * (struct.head_labels * big_l)
    base = [0, *itertools.accumulate(len(q) for q in dec.body)]
    for r, ends in enumerate(keep):
        n, size = len(dec.prefix[r]), len(dec.body[r])
        for j in range(struct.head_labels - struct.offset[r]):
            at = (j + struct.offset[r]) * big_l + base[r]
            end[at : at + size] = ends[n + j * size : n + (j + 1) * size]
    steady = [(u, pd, dd, lat[h], d2, lat[h2], table[du]) for u, pd, dd, h, d2, h2, du in struct.steady]
    zeros = [0.0] * big_l
    seen: list[int] = []  # cyclicities that held before, with K − k not a multiple
    k = struct.head_labels
    while k < big_k:
        if k >= struct.min_k:
            for c in range(1, k) if k & (k - 1) == 0 else (1, *seen):
                lo = _window(struct, k, c)
                if lo is None:
                    break
                mu = _certificate(struct, end, k, c, lo)
                if mu is None:
                    continue
                if (big_k - k) % c == 0:
                    final = _tail_ends(struct, end, k, table, lat)
                    if final is None:
                        return "the tail's lists wait on each other"
                    return k, c, mu, first, final
                if c not in seen:
                    seen.append(c)
        x0 = k * big_l
        end.extend(zeros)
        if struct.paired:
            for u, pd, dd, hop, d2, hop2, dur in steady:
                x = x0 + u
                t = end[x - pd]
                y = end[x - dd] + hop
                if y > t:
                    t = y
                y = end[x - d2] + hop2
                if y > t:
                    t = y
                end[x] = t + dur
        else:
            for u, pd, dd, hop, _, _, dur in steady:
                x = x0 + u
                t = end[x - pd]
                y = end[x - dd] + hop
                if y > t:
                    t = y
                end[x] = t + dur
        k += 1
    return "no certificate below K copies"


def _tail_ends(
    struct: _Structure, end: Sequence[float], k: int, table: Sequence[float], lat: Sequence[float]
) -> list[float] | None:
    """Simulate the tail of the list with k copies from the ends of labels k − tail reach..k − 1; each rank's
    last end (None: the tail stalls)."""
    tail, big_l, sigma = struct.tail, struct.label, struct.dec.sigma
    book, _, _ = _rulebook(struct.rules, table, lat, max(tail.top, struct.body_top) + (k + 1) * sigma)
    for label in range(k - tail.reach, k):
        x0 = label * big_l
        for u, sk, i0, o in struct.carry:
            if label >= o:  # rank r's copy label − o_r
                _, _, _, writes, put, _ = book[sk]
                assert writes is not None
                writes[put + i0 + (label - o) * sigma] = end[x0 + u]
    base = [0, *itertools.accumulate(len(q) for q in struct.dec.body)]
    last = [end[(k - 1) * big_l + base[r + 1] - 1] for r in range(struct.p)]  # copy k − o_r − 1's last action
    return None if _advance(tail.rows, book, k * sigma, last, None) is None else last


# ------------------------------------------------------------------------- phase blocks (gpipe, looped-bfs)


@dataclass(frozen=True, slots=True)
class _Block:
    """One run of a rank's list: one (stage, kind) over every micro-batch, in ascending or descending order."""

    rank: int
    stage: int
    kind: int
    ascending: bool
    prev: int  # index of the rank's previous block, or −1
    dep: int  # index of the block its cross-rank dependency lies in, or −1 (none, or same rank: never binds)
    hop: int  # flat latency index of that dependency (p·p: none)


@dataclass(frozen=True, slots=True)
class _Phases:
    """Every rank's list as blocks (see `_phases`), in a dependency-respecting order, for any m."""

    p: int
    num_stages: int
    blocks: tuple[_Block, ...]
    first: tuple[int, ...]  # per rank: its first block (−1 when none)
    last: tuple[int, ...]
    fwd_blocks: int  # blocks whose every action sends an activation to another rank
    bwd_blocks: int
    peak_stage: tuple[int, ...]  # per stage, in units of m
    stages_per_rank: tuple[tuple[int, ...], ...]
    frontier: tuple[tuple[tuple[int, ...], ...], ...]  # per rank, in units of m


def _runs(row: Sequence[Token], n: int) -> list[tuple[int, int, bool]] | None:
    """(stage, kind, ascending) of each maximal run of one (stage, kind), when every run is one pass of every
    micro-batch 0..n−1 in monotone order and nothing overlaps; else None."""
    out = []
    for i in range(0, len(row), n):
        run = row[i : i + n]
        keys = {(s, kind) for s, kind, _, _ in run}
        idx = [x for _, _, x, _ in run]
        if len(run) != n or len(keys) != 1 or any(o for *_, o in run):
            return None
        if idx not in (list(range(n)), list(range(n - 1, -1, -1))):
            return None
        ((s, kind),) = keys
        out.append((s, kind, idx[0] == 0))
    return out


def _phases(name: str, p: int, v: int | None) -> _Phases | None:
    """Blocks of a schedule whose lists at m = 3 and 4 are the same sequence of whole blocks (one chain)."""
    shapes = []
    for m in (3, 4):
        try:
            schedule = get_schedule(name, p, m, v)
        except ConfigError:
            return None
        rows, sizes, _ = _tokens(schedule)
        if len(sizes) != 1 or sizes[0] != m:
            return None
        runs = [_runs(row, m) for row in rows]
        if any(r is None for r in runs):
            return None
        shapes.append(runs)
    if shapes[0] != shapes[1]:
        return None
    return _link(schedule, [r for r in shapes[0] if r is not None])


def _link(schedule: Schedule, runs: list[list[tuple[int, int, bool]]]) -> _Phases | None:
    """The blocks' dependencies (the timeline's rules, block by block) and a dependency-respecting order."""
    p, stages = schedule.p, schedule.num_stages
    chain = schedule.chains[0]
    up = {b: a for a, b in itertools.pairwise(chain)}
    down = {a: b for a, b in itertools.pairwise(chain)}
    where = {(s, kind): (r, i) for r, row in enumerate(runs) for i, (s, kind, _) in enumerate(row)}
    raw: dict[tuple[int, int], tuple[int, int] | None] = {}
    for r, row in enumerate(runs):
        for i, (s, kind, asc) in enumerate(row):
            if kind == 0:
                target = (up[s], 0) if s in up else None
            elif kind in (1, 3):
                target = None if s not in down else (down[s], 1) if (down[s], 1) in where else (down[s], 3)
            else:
                target = (s, 1)
            found = None if target is None else where.get(target)
            if target is not None and found is None:
                return None
            if found is not None and found[0] == r:
                if found[1] >= i:
                    return None  # would deadlock
                found = None  # same rank, earlier: never binds
            if found is not None and runs[found[0]][found[1]][2] != asc:
                return None  # the dependency walks the micro-batches the other way
            raw[(r, i)] = found
    order = _block_order(runs, raw)
    if order is None:
        return None
    index = {key: k for k, key in enumerate(order)}
    blocks = []
    fwd = bwd = 0
    for r, i in order:
        s, kind, asc = runs[r][i]
        found = raw[(r, i)]
        dep = -1 if found is None else index[found]
        hop = p * p if found is None else found[0] * p + r
        blocks.append(_Block(r, s, kind, asc, index[(r, i - 1)] if i else -1, dep, hop))
        if kind == 0 and s in up and schedule.placement[up[s]] != r:
            fwd += 1
        if kind in (1, 3) and s in down and schedule.placement[down[s]] != r:
            bwd += 1
    first = tuple(index[(r, 0)] if runs[r] else -1 for r in range(p))
    last = tuple(index[(r, len(runs[r]) - 1)] if runs[r] else -1 for r in range(p))
    peak_stage, stages_per_rank, frontier = _block_peaks(schedule, runs)
    return _Phases(p, stages, tuple(blocks), first, last, fwd, bwd, peak_stage, stages_per_rank, frontier)


def _block_order(
    runs: list[list[tuple[int, int, bool]]], raw: dict[tuple[int, int], tuple[int, int] | None]
) -> list[tuple[int, int]] | None:
    """Advance every rank as far as its blocks' dependencies allow, round after round (None: a cycle)."""
    heads = [0] * len(runs)
    done: set[tuple[int, int]] = set()
    order: list[tuple[int, int]] = []
    progress = True
    while progress:
        progress = False
        for r, row in enumerate(runs):
            while heads[r] < len(row):
                found = raw[(r, heads[r])]
                if found is not None and found not in done:
                    break
                done.add((r, heads[r]))
                order.append((r, heads[r]))
                heads[r] += 1
                progress = True
    return order if len(order) == sum(len(row) for row in runs) else None


def _block_peaks(
    schedule: Schedule, runs: list[list[tuple[int, int, bool]]]
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...], tuple[tuple[tuple[int, ...], ...], ...]]:
    """In-flight counts in units of m: an F block adds m to its stage, a W block or an unsplit B block removes
    m; within an F block the count only grows, so its end is the block's peak moment."""
    split = {s for row in runs for s, kind, _ in row if kind == 1}
    peak = [0] * schedule.num_stages
    stages_per_rank = tuple(schedule.stages_of(r) for r in range(schedule.p))
    frontier = []
    for r, row in enumerate(runs):
        slot = {s: i for i, s in enumerate(stages_per_rank[r])}
        cur = [0] * len(slot)
        seen: set[tuple[int, ...]] = set()
        for s, kind, _ in row:
            if kind == 0:
                cur[slot[s]] += 1
                peak[s] = max(peak[s], cur[slot[s]])
                seen.add(tuple(cur))
            elif kind == 2 or (kind == 3 and s not in split):
                cur[slot[s]] -= 1
        frontier.append(_pareto(seen))
    return tuple(peak), stages_per_rank, tuple(frontier)


def _best(pieces: Sequence[tuple[float, float]], j: float) -> float:
    return max(a + b * j for a, b in pieces)


def _prune(pieces: list[tuple[float, float]], top: float) -> list[tuple[float, float]]:
    """Drop lines a + b·j that another line beats (or equals) at both ends of j ∈ [0, top]."""
    pieces.sort(key=lambda x: (-x[0], -x[1]))
    kept: list[tuple[float, float]] = []
    best_end = float("-inf")
    for a, b in pieces:
        end = a + b * top
        if end > best_end:
            kept.append((a, b))
            best_end = end
    return kept


def _summarise_phases(ph: _Phases, m: int, table: Sequence[float], lat: Sequence[float]) -> RunSummary:
    """Each block's end times as the upper envelope of lines in the position j within the block:
    end(j) = max(end(j − 1), dep(j) + hop) + d solves to max(start + (j+1)·d, max over lines a + b·j of dep of
    a + hop + d + max(b, d)·j), since max over j' ≤ j of (a + b·j' + (j − j' + 1)·d) sits at j' = 0 or j' = j."""
    top = float(m - 1)
    lines: list[list[tuple[float, float]]] = []
    busy = [0.0] * ph.p
    for blk in ph.blocks:
        d = table[blk.kind * ph.num_stages + blk.stage]
        busy[blk.rank] += m * d
        start = _best(lines[blk.prev], top) if blk.prev >= 0 else 0.0
        pieces = [(start + d, d)]
        if blk.dep >= 0:
            hop = lat[blk.hop]
            pieces += [(a + hop + d, max(b, d)) for a, b in lines[blk.dep]]
        lines.append(_prune(pieces, top))
    last = tuple(_best(lines[b], top) if b >= 0 else 0.0 for b in ph.last)
    first = [0.0] * ph.p  # a rank's first pass waits only for its input (nothing of its own runs before it)
    for r, b in enumerate(ph.first):
        if b >= 0 and ph.blocks[b].dep >= 0:
            head = ph.blocks[b]
            first[r] = max(0.0, _best(lines[head.dep], 0.0) + lat[head.hop])
    profile_rank = [max([0] + [sum(vec) for vec in vectors]) for vectors in ph.frontier]
    return RunSummary(
        makespan=max(last),
        busy_per_rank=tuple(busy),
        first_start_per_rank=tuple(first),
        last_end_per_rank=last,
        peak_in_flight_per_stage=tuple(m * x for x in ph.peak_stage),
        peak_in_flight_per_rank=tuple(m * x for x in profile_rank),
        p2p_forward_messages=m * ph.fwd_blocks,
        p2p_backward_messages=m * ph.bwd_blocks,
    )


@lru_cache(maxsize=256)
def _phases_cached(name: str, p: int, v: int | None) -> _Phases | None:
    return _phases(name, p, v)


# --------------------------------------------------------------------------------------------------- the API


def _tables(
    num_stages: int, p: int, durations: Durations, latency: Latency
) -> tuple[list[float], list[float]]:
    """Flat (kind, stage) durations (F, I, W, B = I + W) and the flat p×p latency matrix plus a trailing 0.0."""
    f, i, w = durations.per_stage(num_stages)
    b = [x + y for x, y in zip(i, w, strict=True)]
    lat = [x for row in _latency_matrix(latency, p) for x in row] + [0.0]
    return [*f, *i, *w, *b], lat


def _block_tables(ph: _Phases, durations: Durations, latency: Latency) -> tuple[list[float], list[float]]:
    return _tables(ph.num_stages, ph.p, durations, latency)


@dataclass(frozen=True, slots=True)
class _Lists:
    """One generated list, read for `_advance` (duration-independent, cached by (name, p, v, m))."""

    rows: list[_Row]
    rules: _Rules
    width: int  # micro-batches per chain, at most
    fwd: int  # P2P messages
    bwd: int
    profile: InFlightProfile


def _lists(schedule: Schedule) -> _Lists:
    got = _read(schedule)
    rules = _Rules(schedule.placement, schedule.chains)
    rows = [(got.kind_stage(r), got.index[r], got.pairs[r]) for r in range(schedule.p)]
    return _Lists(
        rows,
        rules,
        max(got.sizes, default=0),
        sum(sum(map(rules.fwd.__getitem__, row[0])) for row in rows),
        sum(sum(map(rules.bwd.__getitem__, row[0])) for row in rows),
        _profile_rows([row[0] for row in rows], schedule.placement, schedule.p),
    )


def _simulated(lists: _Lists, num_stages: int, durations: Durations, latency: Latency) -> RunSummary | None:
    """`simulate(schedule, durations, latency).summary()`, the same floats, without compiling: `_advance` over
    the whole lists (busy time summed in list order, as the timeline does). None when the lists deadlock."""
    p = len(lists.rows)
    table, lat = _tables(num_stages, p, durations, latency)
    book, _, _ = _rulebook(lists.rules, table, lat, lists.width)
    last = [0.0] * p
    first = _advance(lists.rows, book, 0, last, None)
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


_PROFILES: dict[tuple[str, int, int | None, int], InFlightProfile] = {}
_LISTS: dict[tuple[str, int, int | None, int], _Lists] = {}
_LISTS_LIMIT = 16


def _full_lists(name: str, p: int, v: int | None, m: int) -> tuple[_Lists, Schedule]:
    key = (name, p, v, m)
    schedule = get_schedule(name, p, m, v)
    if key not in _LISTS:
        with _collector_paused():
            if len(_LISTS) >= _LISTS_LIMIT:
                _LISTS.pop(next(iter(_LISTS)))
            _LISTS[key] = _lists(schedule)
        _keep_profile(key, _LISTS[key].profile)
    return _LISTS[key], schedule


def _full(name: str, p: int, v: int | None, m: int, durations: Durations, latency: Latency) -> RunSummary:
    """The full simulation of the list at m (read once; its profile kept for `in_flight_profile`)."""
    lists, schedule = _full_lists(name, p, v, m)
    summary = _simulated(lists, schedule.num_stages, durations, latency)
    return simulate(schedule, durations, latency).summary() if summary is None else summary  # raises


def _keep_profile(key: tuple[str, int, int | None, int], profile: InFlightProfile) -> None:
    if len(_PROFILES) >= _CACHE_LIMIT:
        _PROFILES.pop(next(iter(_PROFILES)))
    _PROFILES[key] = profile


def _plan(name: str, p: int, v: int | None, m: int, least: int | None) -> tuple[_Structure, int] | str:
    """The structure of m's class and m's number of copies K ≥ `least` (None: the structure's least k, plus one),
    or why the full list is played instead. Cold, the list at m is played in full when it is not much longer
    than the lists the periodic route would generate (_FULL_BELOW)."""
    delta = period(name, p)
    assert delta is not None
    residue = m % delta
    if (name, p, v, residue) not in _STRUCTURES:
        m0 = max(_first_m0(name, p, residue), 1)
        if m < m0:
            return "m below m0 or outside the periodic class"
        worked = sum(m0 + j * delta for j in (0, 1, 1, *_CHECK_COPIES))
        if m <= _FULL_BELOW * worked:
            return "the list at m is about as short as the lists read off"
    struct = _structure_cached(name, p, v, residue)
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
        phases = _phases_cached(name, p, v)
        if phases is None:
            return _full(name, p, v, m, durations, latency), Route(
                False, 0, 0, "no period and no phase blocks"
            )
        if m < 1:
            return _full(name, p, v, m, durations, latency), Route(False, 0, 0, "m < 1")  # raises
        table, lat = _block_tables(phases, durations, latency)
        return _summarise_phases(phases, m, table, lat), Route(True, 0, 0, "phase blocks")
    plan = _plan(name, p, v, m, None)
    if isinstance(plan, str):
        return _full(name, p, v, m, durations, latency), Route(False, 0, 0, plan)
    struct, big_k = plan
    table, lat = _tables(struct.num_stages, p, durations, latency)
    played = _stream(struct, table, lat, big_k)
    if isinstance(played, str):
        return _full(name, p, v, m, durations, latency), Route(False, 0, 0, played)
    k, c, mu, first, last = played
    summary = _extrapolate(struct, first, last, table, big_k, (big_k - k) // c * mu)
    return summary, Route(True, k, c, "certificate")


def _extrapolate(
    struct: _Structure,
    first: list[float],
    last: list[float],
    table: Sequence[float],
    big_k: int,
    shift: float,
) -> RunSummary:
    """The list with K copies from the one with k: each rank's last end + q·μ, first start unchanged, busy time
    and messages counted (fixed part + K copies), peaks in flight those of any K ≥ 1."""
    ends = tuple(x + shift for x in last)
    busy = tuple(
        sum(table[x] * n for x, n in fixed) + big_k * sum(table[x] * n for x, n in body)
        for fixed, body in zip(struct.fixed_work, struct.body_work, strict=True)
    )
    profile = struct.profile
    return RunSummary(
        makespan=max(ends),
        busy_per_rank=busy,
        first_start_per_rank=tuple(first),
        last_end_per_rank=ends,
        peak_in_flight_per_stage=profile.peak_per_stage,
        peak_in_flight_per_rank=profile.unit_peak_per_rank(),
        p2p_forward_messages=struct.fixed_fwd + big_k * struct.body_fwd,
        p2p_backward_messages=struct.fixed_bwd + big_k * struct.body_bwd,
    )


# --------------------------------------------------------------------------------------------- peaks in flight


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
        equals `pplan.timeline.peak_in_flight(schedule, weights)[1]`."""
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


def _pareto(vectors: set[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
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


def _profile_rows(rows: Sequence[Sequence[int]], placement: Sequence[int], p: int) -> InFlightProfile:
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
            frontier.append(_pareto(vectors))
    return InFlightProfile(num_stages, tuple(peak), stages_per_rank, tuple(frontier))


def _profile_full(name: str, p: int, v: int | None, m: int) -> InFlightProfile:
    key = (name, p, v, m)
    if key not in _PROFILES:
        with _collector_paused():
            schedule = get_schedule(name, p, m, v)
            got = _read(schedule)
            profile = _profile_rows([got.kind_stage(r) for r in range(p)], schedule.placement, p)
        _keep_profile(key, profile)
    return _PROFILES[key]


def clear_caches() -> None:
    """Forget every cached structure and profile (for cold-start measurements)."""
    _STRUCTURES.clear()
    _phases_cached.cache_clear()
    _PROFILES.clear()
    _LISTS.clear()


def in_flight_profile(name: str, p: int, v: int | None, m: int) -> InFlightProfile:
    """The in-flight profile of `get_schedule(name, p, m, v)`. For m ≥ m0 + Δ of a periodic class whose list is
    long enough for the periodic route, it is the class's (read off the list at m0 + Δ when the period was
    detected: a copy of the period is net zero per stage, so copies beyond the first add no new vectors);
    otherwise from the list itself, cached by m."""
    name = canonical_name(name)
    phases = _phases_cached(name, p, v) if period(name, p) is None and m >= 1 else None
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
    return _profile_full(name, p, v, m)
