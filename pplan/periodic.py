"""A pipeline step's summary at any number of micro-batches m, exactly, at a cost that does not grow with m.

Owns `summarise` (what `pplan.timeline.simulate(get_schedule(...), ...).summary()` returns, without building or
playing the O(p·v·m) action lists), `in_flight_profile` (exact weighted peaks in flight for any per-stage
weights), `route` (which path answered) and the one table of schedule periods (`period`). Pure: no I/O.
Symbols: p ranks, v stages per rank, S stages, m micro-batches, Δ the period in micro-batches; times in the unit
of the durations given (seconds if seconds).

Two routes, both read off the generators' lists mechanically (never hand-written per family), both exact.

A. One period (1f1b, zb-h1, zb-h2, zbv, dualpipev, dualpipe, interleaved-1f1b, interleaved-zb). For m ≥ m0
rank r's list is
    P_r · Q_r(0) · Q_r(1) ··· Q_r(K−1) · S_r(K),   m = m0 + K·Δ,
a prefix, K copies of a period and a suffix: copy j is Q_r(0) with its micro-batches shifted by j·σ, the suffix
S_r(0) shifted by K·σ (σ per chain, micro-batches counted within their chain: σ = Δ for one chain, 1 for each of
DualPipe's two directions). Found for m0 = the first m of m's class mod Δ where the lists at m0 and m0 + Δ split
as P·S and P·Q·S(shifted) (longest common prefix, longest common shifted suffix), checked at m0 + 2Δ, m0 + 3Δ and
on every list this module plays. Measured m0 for p ≥ 2: 1f1b and zb-h1 p − 1 (warm-up F's, then (F, B) resp.
(F, I, W) steps, then the drain); zb-h2 2p (its W-filled skeleton repeats after the warm-up); zbv 2p − 1 and
dualpipev 2p (step 4 of their programs repeats one micro-batch at a time); dualpipe 2p with Δ = 2 (one
micro-batch more per direction; odd m is invalid); interleaved-1f1b 2p and interleaved-zb p with Δ = p (m a
multiple of p gives groups G = p, one more group per period). The other valid interleaved m (m < p², torch's
rounds rule, G = m/rounds ≠ p) have no period in m and are simulated in full, as is every m ≤ m0 + 3Δ (5Δ for
zb-h2), where the list is as short as the lists the fast path plays.

Exactness of A. The simulator is max-plus linear and homogeneous: end(a) = d(a) + max(end(previous on the rank),
end(dependency) + hop, ...), so shifting every input time by μ shifts every output by μ. A dependency on an
earlier action of the same rank costs nothing and never binds (ends do not decrease along a rank), so only the
rank order and the cross-rank edges matter. Label rank r's copy j with J = j + o_r, offsets o_r from difference
constraints (Bellman–Ford) so that every cross-rank edge between copies points to the same or an earlier label,
at most R labels back (all o_r = 0 and R ≤ 2 for every family above). Then, all checked on the list played:
1. the prefix and labels < k are closed under dependencies, so they have the same times with k copies as with
   any K ≥ k (the K-list is the k-list's prefix, then more copies);
2. label J ≥ O + R (O = max o_r) reads only labels J − R..J: the same passes, durations and hops for every copy,
   so the window X_J = (labels J − R' + 1..J), R' ≥ R, evolves as X_{J+1} = G(X_J) with one max-plus map G;
3. certificate: with k copies, X_{k−1} = X_{k−1−c} + μ on every action (one constant μ, cyclicity c ≥ 1, to
   1e-12 of the makespan). By homogeneity and induction X_{J+c} = X_J + μ for every later J, so for K ≡ k (mod c)
   the last R' + c labels of the K-list are the k-list's plus q·μ, q = (K − k)/c, and so is the suffix, which
   reads only those labels and itself (R' is widened until it does);
4. hence each rank's last end (+ q·μ), first start (unchanged), busy time (+ (K − k)·one copy's work), makespan,
   bubble and spans. G is non-expansive in the max norm, so a tolerance ε on the certificate moves the answer by
   at most q·ε (relative error ≲ 1e-12·k).
With no certificate at k copies (a long transient: near-tied critical cycles), k doubles (and moves to k ≡ K mod
c when c does not divide K − k); at k ≥ K the real list is played. An unproven number is never returned.
Peaks in flight depend only on each rank's order: a copy that is net zero per stage (checked) adds no new in-flight
count vector for K ≥ 1, so the k-list's peaks are the K-list's. P2P messages grow by one copy's count per copy.
An overlapped F&B pair reads its partner's input; no segment may end inside a pair (checked), so that stays
shift-invariant.

B. Phase blocks (gpipe, looped-bfs: every F of a chunk, chunk after chunk, then every B). Each rank's list is a
sequence of blocks, one (stage, kind) over all m micro-batches in ascending or descending order (read at m = 3
and 4, same sequence), and each block's cross-rank dependency is one block walking the micro-batches the same
way. Within a block at position j, end(j) = max(end(j−1), dep(j) + hop) + d. If dep is the upper envelope of
lines a + b·j, then max over j' ≤ j of (a + b·j' + (j − j' + 1)·d) is reached at j' = 0 or j' = j, so end is the
envelope of start + (j+1)·d and the lines (a + hop + d, max(b, d)): exact longest paths in O(S²) per call
(GPipe's classic F(r, j) = Σ_{r'≤r} f_r' + the r hops + j·max_{r'≤r} f_r' is the first blocks' case). The
moving point where looped BFS's second chunk stops waiting for the first chunk's last rank, which no bounded
certificate could cover, is just where two lines cross. In-flight counts change by whole blocks (m at a time).

Nothing here depends on published bubble formulas (Narayanan et al. 2021; Qi et al. 2024, arXiv 2401.10241);
those live with the generators and `pplan.timeline`, whose definitions `RunSummary` reuses.

Cost: what is duration-independent (decompositions, blocks, the compiled short lists and their labels, in-flight
profiles) is cached by (name, p, v, class of m mod Δ). A warm call plays one list of m0 + k·Δ micro-batches
(k = 3 usually, more after long transients), or evaluates O(S²) lines, for any m.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import mul

from pplan.errors import ConfigError
from pplan.schedules import Schedule, canonical_name, get_schedule, schedule_family
from pplan.timeline import (
    Durations,
    Latency,
    RunSummary,
    _compiled,
    _deltas,
    _latency_matrix,
    simulate,
)

Token = tuple[int, int, int, int]
"""One action as data that survives shifting: (stage, kind code F=0 I=1 W=2 B=3, index of its micro-batch
within its chain, 1 when it opens an overlapped F&B pair else 0)."""
Rows = tuple[tuple[Token, ...], ...]

_KIND = {"F": 0, "I": 1, "W": 2, "B": 3}
_HEAD = -(10**9)  # label of prefix actions
_TAIL = 10**9  # label of suffix actions
_TOLERANCE = 1e-12  # certificate tolerance, relative to the short list's makespan
_DETECT_SPAN = 8  # candidate m0 run from the record's m0 up to 8 periods further
_MAX_STRUCTURE_COPIES = 64


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


# ----------------------------------------------------------------------------------------- tokens and periods


def _tokens(schedule: Schedule) -> tuple[Rows, tuple[int, ...], tuple[int, ...]]:
    """Each rank's list as tokens, the micro-batches per chain, and each stage's chain."""
    chain_of = [0] * schedule.num_stages
    for c, chain in enumerate(schedule.chains):
        for s in chain:
            chain_of[s] = c
    members: list[set[int]] = [set() for _ in schedule.chains]
    for row in schedule.actions:
        for a in row:
            if a.kind == "F" and schedule.chains[chain_of[a.stage]][0] == a.stage:
                members[chain_of[a.stage]].add(a.microbatch)
    index = [{mb: i for i, mb in enumerate(sorted(ms))} for ms in members]
    rows = []
    for r, row in enumerate(schedule.actions):
        opens = set(schedule.overlaps[r]) if schedule.overlaps else set()
        rows.append(
            tuple(
                (a.stage, _KIND[a.kind], index[chain_of[a.stage]][a.microbatch], int(i in opens))
                for i, a in enumerate(row)
            )
        )
    return tuple(rows), tuple(len(ms) for ms in members), tuple(chain_of)


@dataclass(frozen=True, slots=True)
class _Decomposition:
    """rows(K) = P_r · Q_r(0..K−1) · S_r(K) for m = m0 + K·delta (see the module docstring)."""

    m0: int
    delta: int
    sigma: tuple[int, ...]  # per chain: micro-batch index shift per copy
    chain_of: tuple[int, ...]  # per stage
    prefix: Rows
    body: Rows  # Q_r(0)
    suffix: Rows  # S_r(0)

    def shift(self, tokens: Sequence[Token], copies: int) -> tuple[Token, ...]:
        sig, ch = self.sigma, self.chain_of
        return tuple((s, k, i + copies * sig[ch[s]], o) for s, k, i, o in tokens)

    def expand(self, copies: int) -> Rows:
        return tuple(
            pre
            + tuple(itertools.chain.from_iterable(self.shift(q, j) for j in range(copies)))
            + self.shift(suf, copies)
            for pre, q, suf in zip(self.prefix, self.body, self.suffix, strict=True)
        )

    def m_of(self, copies: int) -> int:
        return self.m0 + copies * self.delta


def _split(a: tuple[Token, ...], b: tuple[Token, ...], shifted_a: tuple[Token, ...]) -> int | None:
    """The longest prefix length n with a = a[:n]·a[n:] and b = a[:n]·Q·shift(a[n:]), or None."""
    n = 0
    while n < len(a) and a[n] == b[n]:
        n += 1
    tail = 0
    while tail < len(a) and shifted_a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    return n if n + tail >= len(a) and len(b) > len(a) else None


_Sample = tuple[Rows, tuple[int, ...], tuple[int, ...]] | None


def _sample(name: str, p: int, v: int | None, m: int, memo: dict[int, _Sample]) -> _Sample:
    """The tokens of the list at m (None when m is not valid for the family), memoised for one detection."""
    if m not in memo:
        try:
            memo[m] = _tokens(get_schedule(name, p, m, v))
        except ConfigError:
            memo[m] = None
    return memo[m]


def _detect_at(
    name: str, p: int, v: int | None, m0: int, delta: int, memo: dict[int, _Sample]
) -> _Decomposition | None:
    """Split the lists at m0 and m0 + Δ into prefix, period and suffix; check the split at m0 + 2Δ, m0 + 3Δ."""
    a_sample, b_sample = _sample(name, p, v, m0, memo), _sample(name, p, v, m0 + delta, memo)
    if a_sample is None or b_sample is None:
        return None
    (a_rows, a_sizes, chain_of), (b_rows, b_sizes, _) = a_sample, b_sample
    sigma = tuple(y - x for x, y in zip(a_sizes, b_sizes, strict=True))
    if any(s <= 0 for s in sigma):
        return None
    probe = _Decomposition(m0, delta, sigma, chain_of, (), (), ())
    prefix, body, suffix = [], [], []
    for a, b in zip(a_rows, b_rows, strict=True):
        n = _split(a, b, probe.shift(a, 1))
        if n is None:
            return None
        prefix.append(a[:n])
        body.append(b[n : n + len(b) - len(a)])
        suffix.append(a[n:])
    dec = _Decomposition(m0, delta, sigma, chain_of, tuple(prefix), tuple(body), tuple(suffix))
    for j in (2, 3):
        later = _sample(name, p, v, m0 + j * delta, memo)
        if later is None or dec.expand(j) != later[0]:
            return None
    return dec


def _detect(name: str, p: int, v: int | None, residue: int, delta: int) -> _Decomposition | None:
    """The first m0 ≡ residue (mod Δ) from the record's m0, up to 8 periods further, where the lists split into
    prefix, period and suffix."""
    memo: dict[int, _Sample] = {}
    m0 = max(_first_m0(name, p, residue), 1)
    last = m0 + _DETECT_SPAN * delta
    while m0 <= last:
        dec = _detect_at(name, p, v, m0, delta, memo)
        if dec is not None:
            return dec
        memo.pop(m0, None)
        m0 += delta
    return None


# ------------------------------------------------------------------------------------- the short lists, compiled


@dataclass(slots=True)
class _Run:
    """The real list with k copies (m = m0 + k·Δ), flattened for repeated play, and its labels.

    Positions follow the timeline's dependency-respecting order; index n is a sentinel whose end is 0.0, so a
    missing predecessor reads 0.0 and a missing hop costs 0.0."""

    k: int
    schedule: Schedule
    n: int
    prev: list[int]
    dep: list[int]  # cross-rank dependency (same-rank ones never bind), or n
    hop: list[int]  # index into the flattened p×p latency matrix, p·p (a 0.0) when none
    dep2: list[int]
    hop2: list[int]
    second: tuple[tuple[int, int, int], ...]
    """(position, dep2, hop2) of each position with a second cross-rank dependency, then (n, n, p·p)."""
    dur: list[int]  # index into the flattened (kind, stage) duration table
    first: tuple[int, ...]  # per rank: position of its first action (n when none)
    last: tuple[int, ...]
    work: tuple[tuple[tuple[int, int], ...], ...]  # per rank: (duration index, count) over its whole list
    groups: dict[int, list[int]]
    """Label J (complete ones: O ≤ J ≤ k − 1) → its positions, ordered by (rank, index in the copy)."""
    sound: bool  # labels < k read only labels < k; labels ≥ O + R read only the R labels before them
    tail_reach: int  # suffix actions depend on labels ≥ k − tail_reach (and on the suffix)
    p2p_fwd: int
    p2p_bwd: int
    peak_stage: tuple[int, ...]
    peak_rank: tuple[int, ...]


@dataclass(slots=True)
class _Structure:
    """Everything duration-independent about one (name, p, v, class of m)."""

    name: str
    p: int
    v: int | None
    dec: _Decomposition
    offset: tuple[int, ...]  # o_r
    lead: int  # O = max o_r
    reach: int  # R: a copy's cross-rank dependencies lie at most R labels back
    body_work: tuple[tuple[tuple[int, int], ...], ...]  # per rank: (duration index, count) of one copy
    body_fwd: int  # P2P forward messages per copy
    body_bwd: int
    start_k: int
    runs: dict[int, _Run] = field(default_factory=dict)

    def run(self, k: int) -> _Run | None:
        hit = self.runs.get(k)
        if hit is None:
            hit = _build_run(self, k)
            if hit is None:
                return None
            if len(self.runs) >= 16:
                self.runs.pop(next(iter(self.runs)))
            self.runs[k] = hit
        return hit


def _where(dec: _Decomposition, k: int) -> list[list[tuple[int, int]]]:
    """Per rank, per position: (copy j or −1 prefix / k suffix, index within the copy)."""
    out = []
    for pre, q, suf in zip(dec.prefix, dec.body, dec.suffix, strict=True):
        row = [(-1, i) for i in range(len(pre))]
        row += [(j, i) for j in range(k) for i in range(len(q))]
        row += [(k, i) for i in range(len(suf))]
        out.append(row)
    return out


def _real(dec: _Decomposition, name: str, p: int, v: int | None, k: int) -> Schedule | None:
    """The generator's list for k copies, if it is the decomposition's expansion."""
    try:
        schedule = get_schedule(name, p, dec.m_of(k), v)
    except ConfigError:
        return None
    return schedule if _tokens(schedule)[0] == dec.expand(k) else None


def _edges(schedule: Schedule) -> list[tuple[int, int, int]]:
    """(gid, target gid, slot) of every cross-rank dependency, in global ids (rank-major)."""
    comp = _compiled(schedule)
    out = []
    for pos, gid in enumerate(comp.order):
        if comp.dep_src_rank[pos] >= 0:
            out.append((gid, comp.order[comp.dep[pos]], 0))
        if comp.dep2_src_rank[pos] >= 0:
            out.append((gid, comp.order[comp.dep2[pos]], 1))
    return out


def _locate(offsets: Sequence[int], gid: int) -> tuple[int, int]:
    """(rank, index in its list) of a global id."""
    r = bisect_right(offsets, gid) - 1
    return r, gid - offsets[r]


def _offsets(dec: _Decomposition, name: str, p: int, v: int | None) -> tuple[tuple[int, ...], int] | None:
    """Per-rank label offsets o_r and the reach R, from the copy distances δ of every cross-rank edge."""
    k = 4
    while k <= _MAX_STRUCTURE_COPIES:
        schedule = _real(dec, name, p, v, k)
        if schedule is None:
            return None
        where = _where(dec, k)
        offsets = _compiled(schedule).offsets
        seen: dict[tuple[int, int, int], tuple[int, int]] = {}  # (rank, index in Q, slot) → (δ, target rank)
        needed: set[tuple[int, int, int]] = set()
        for gid, tgt, slot in _edges(schedule):
            r, i = _locate(offsets, gid)
            j, qi = where[r][i]
            if not 0 <= j < k:
                continue
            needed.add((r, qi, slot))
            rt, it = _locate(offsets, tgt)
            jt = where[rt][it][0]
            if 0 <= jt < k and seen.setdefault((r, qi, slot), (j - jt, rt)) != (j - jt, rt):
                return None  # not shift-invariant: no period after all
        if needed <= set(seen):
            return _solve_offsets(p, [(r, rt, d) for (r, _, _), (d, rt) in seen.items()])
        k *= 2
    return None


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


def _work(schedule_tokens: Sequence[Token], num_stages: int) -> tuple[tuple[int, int], ...]:
    counts: dict[int, int] = {}
    for s, kind, _, _ in schedule_tokens:
        key = kind * num_stages + s
        counts[key] = counts.get(key, 0) + 1
    return tuple(sorted(counts.items()))


def _net_zero(dec: _Decomposition, rows: Rows) -> bool:
    """Whether one copy leaves every stage's in-flight count unchanged (F enters; W, or an unsplit B, leaves)."""
    split = {(s, i) for row in rows for s, kind, i, _ in row if kind == 1}
    net: dict[int, int] = {}
    for q in dec.body:
        for s, kind, i, _ in q:
            step = 1 if kind == 0 else -1 if kind == 2 or (kind == 3 and (s, i) not in split) else 0
            net[s] = net.get(s, 0) + step
    return all(x == 0 for x in net.values())


def _pair_cut(dec: _Decomposition) -> bool:
    """Whether a segment ends with the F of an overlapped F&B pair: its partner (and so its dependency) would
    then change with the number of copies."""
    return any(seg and seg[-1][3] for rows in (dec.prefix, dec.body, dec.suffix) for seg in rows)


def _body_messages(schedule: Schedule, dec: _Decomposition) -> tuple[int, int]:
    """P2P messages one copy sends (the timeline's count: an F whose previous stage, an I or B whose next stage
    lives on another rank)."""
    prev_stage: dict[int, int] = {}
    next_stage: dict[int, int] = {}
    for chain in schedule.chains:
        for up, down in itertools.pairwise(chain):
            next_stage[up], prev_stage[down] = down, up
    place = schedule.placement
    fwd = bwd = 0
    for r, q in enumerate(dec.body):
        for s, kind, _, _ in q:
            fwd += kind == 0 and s in prev_stage and place[prev_stage[s]] != r
            bwd += kind in (1, 3) and s in next_stage and place[next_stage[s]] != r
    return fwd, bwd


def _structure(name: str, p: int, v: int | None, residue: int) -> _Structure | None:
    """Detect the period of one class of m and everything duration-independent about it (None: none)."""
    delta = period(name, p)
    if delta is None:
        return None
    dec = _detect(name, p, v, residue, delta)
    # Every rank works in every copy, a copy leaves in-flight counts unchanged, no segment splits an F&B pair.
    if dec is None or not all(dec.body) or not _net_zero(dec, dec.expand(2)) or _pair_cut(dec):
        return None
    solved = _offsets(dec, name, p, v)
    if solved is None:
        return None
    off, reach = solved
    schedule = get_schedule(name, p, dec.m0, v)
    fwd, bwd = _body_messages(schedule, dec)
    work = tuple(_work(q, schedule.num_stages) for q in dec.body)
    lead = max(off)
    return _Structure(name, p, v, dec, off, lead, reach, work, fwd, bwd, start_k=lead + 2 * reach + 1)


@lru_cache(maxsize=256)
def _structure_cached(name: str, p: int, v: int | None, residue: int) -> _Structure | None:
    return _structure(name, p, v, residue)


def _build_run(struct: _Structure, k: int) -> _Run | None:
    dec, p = struct.dec, struct.p
    schedule = _real(dec, struct.name, p, struct.v, k)
    if schedule is None:
        return None
    comp = _compiled(schedule)
    n = len(comp.order)
    stages = schedule.num_stages
    where = _where(dec, k)
    label_of_gid = []
    for r, row in enumerate(where):
        for j, _ in row:
            label_of_gid.append(_HEAD if j < 0 else _TAIL if j >= k else j + struct.offset[r])
    label = [label_of_gid[g] for g in comp.order]
    for pos in range(n):
        if label[pos] >= k:
            label[pos] = _TAIL  # copies beyond label k − 1 belong to the suffix

    prev = [x if x >= 0 else n for x in comp.prev]
    dep = [d if src >= 0 else n for d, src in zip(comp.dep, comp.dep_src_rank, strict=True)]
    dep2 = [d if src >= 0 else n for d, src in zip(comp.dep2, comp.dep2_src_rank, strict=True)]
    none = p * p
    hop = [src * p + dst if src >= 0 else none for src, dst in zip(comp.dep_src_rank, comp.rank, strict=True)]
    hop2 = [
        src * p + dst if src >= 0 else none for src, dst in zip(comp.dep2_src_rank, comp.rank, strict=True)
    ]
    dur = [kind * stages + s for kind, s in zip(comp.kind, comp.stage, strict=True)]

    sound, tail_reach = True, 0
    steady = struct.lead + struct.reach
    for pos in range(n):
        targets = [t for t in (dep[pos], dep2[pos], prev[pos]) if t < n]
        here = label[pos]
        if here < k:
            # closure, and the recurrence of step 2: a label ≥ O + R reads only labels J − R..J
            sound &= all(label[t] < k for t in targets)
            if here >= steady:
                sound &= all(0 <= here - label[t] <= struct.reach for t in targets)
        else:
            for t in targets:
                if label[t] < k:
                    tail_reach = max(tail_reach, k - label[t])
    pos_of = [0] * n
    for pos, gid in enumerate(comp.order):
        pos_of[gid] = pos
    groups: dict[int, list[int]] = {big_j: [] for big_j in range(struct.lead, k)}
    for r, row in enumerate(where):
        base = comp.offsets[r]
        for idx, (j, _) in enumerate(row):
            big_j = j + struct.offset[r]
            if 0 <= j < k and struct.lead <= big_j < k:
                groups[big_j].append(pos_of[base + idx])
    first = tuple(pos_of[comp.offsets[r]] if comp.offsets[r + 1] > comp.offsets[r] else n for r in range(p))
    last = tuple(
        pos_of[comp.offsets[r + 1] - 1] if comp.offsets[r + 1] > comp.offsets[r] else n for r in range(p)
    )
    rows = dec.expand(k)
    return _Run(
        k=k,
        schedule=schedule,
        n=n,
        prev=prev,
        dep=dep,
        hop=hop,
        dep2=dep2,
        hop2=hop2,
        second=(*((k, dep2[k], hop2[k]) for k in range(n) if dep2[k] < n), (n, n, none)),
        dur=dur,
        first=first,
        last=last,
        work=tuple(_work(row, stages) for row in rows),
        groups=groups,
        sound=sound,
        tail_reach=tail_reach,
        p2p_fwd=comp.p2p_fwd,
        p2p_bwd=comp.p2p_bwd,
        peak_stage=comp.peak_stage,
        peak_rank=comp.peak_rank,
    )


# ------------------------------------------------------------------------------------------- playing and proving


def _play(run: _Run, table: Sequence[float], lat: Sequence[float]) -> list[float]:
    """End time of every position: the timeline's recurrence with same-rank dependencies dropped (they never
    bind); the few positions with a second cross-rank dependency (overlapped F&B pairs) are played apart."""
    end = [0.0] * (run.n + 1)
    d = [table[x] for x in run.dur]
    h = [lat[x] for x in run.hop]
    prev, dep = run.prev, run.dep
    begin = 0
    for stop, dep2, hop2 in run.second:
        for k in range(begin, stop):
            t = end[prev[k]]
            x = end[dep[k]] + h[k]
            end[k] = (t if t >= x else x) + d[k]
        if stop < run.n:
            t = end[prev[stop]]
            x = end[dep[stop]] + h[stop]
            if x > t:
                t = x
            x = end[dep2] + lat[hop2]
            if x > t:
                t = x
            end[stop] = t + d[stop]
        begin = stop + 1
    return end


def _start(run: _Run, end: Sequence[float], lat: Sequence[float], pos: int) -> float:
    """Start of the action at `pos` (recomputed exactly as the timeline computes it)."""
    if pos >= run.n:
        return 0.0
    t = end[run.prev[pos]]
    t = max(t, end[run.dep[pos]] + lat[run.hop[pos]])
    return max(t, end[run.dep2[pos]] + lat[run.hop2[pos]])


def _certificate(struct: _Structure, run: _Run, end: Sequence[float], tol: float) -> tuple[int, float] | None:
    """(c, μ) with labels J + c = labels J + μ on the last window (see the module docstring), or None."""
    if not run.sound:
        return None
    k = run.k
    for c in range(1, k):
        width = max(struct.reach, run.tail_reach - c)
        lo = k - c - width
        if lo < struct.lead or k - c < struct.lead + struct.reach:
            return None
        first = run.groups[lo]
        mu = end[run.groups[lo + c][0]] - end[first[0]]
        if all(
            abs(end[b] - end[a] - mu) <= tol
            for big_j in range(lo, k - c)
            for a, b in zip(run.groups[big_j], run.groups[big_j + c], strict=True)
        ):
            return c, mu
    return None


def _busy(work: Sequence[Sequence[tuple[int, int]]], table: Sequence[float]) -> list[float]:
    return [sum(table[x] * count for x, count in row) for row in work]


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


def _tables(schedule: Schedule, durations: Durations, latency: Latency) -> tuple[list[float], list[float]]:
    """Flat (kind, stage) durations (F, I, W, B = I + W) and the flat p×p latency matrix plus a trailing 0.0."""
    f, i, w = durations.per_stage(schedule.num_stages)
    b = [x + y for x, y in zip(i, w, strict=True)]
    lat = [x for row in _latency_matrix(latency, schedule.p) for x in row] + [0.0]
    return [*f, *i, *w, *b], lat


def _block_tables(ph: _Phases, durations: Durations, latency: Latency) -> tuple[list[float], list[float]]:
    f, i, w = durations.per_stage(ph.num_stages)
    b = [x + y for x, y in zip(i, w, strict=True)]
    lat = [x for row in _latency_matrix(latency, ph.p) for x in row] + [0.0]
    return [*f, *i, *w, *b], lat


def _full(name: str, p: int, v: int | None, m: int, durations: Durations, latency: Latency) -> RunSummary:
    return simulate(get_schedule(name, p, m, v), durations, latency).summary()


def _fast_structure(name: str, p: int, v: int | None, m: int) -> tuple[_Structure, int] | None:
    """The cached structure for m's class and m's number of copies K, when the fast path applies."""
    delta = period(name, p)
    if delta is None:
        return None
    struct = _structure_cached(name, p, v, m % delta)
    if struct is None or m < struct.dec.m0 or (m - struct.dec.m0) % delta:
        return None
    return struct, (m - struct.dec.m0) // delta


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
    its periodic class are simulated in full. Raises what `get_schedule` and `simulate` raise.
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
    found = _fast_structure(name, p, v, m)
    if found is None:
        return _full(name, p, v, m, durations, latency), Route(
            False, 0, 0, "m below m0 or outside the periodic class"
        )
    struct, big_k = found
    k = struct.start_k
    if big_k <= k:
        return _full(name, p, v, m, durations, latency), Route(False, 0, 0, "m within a few periods of m0")
    while k < big_k:
        run = struct.run(k)
        if run is None:
            break
        table, lat = _tables(run.schedule, durations, latency)
        end = _play(run, table, lat)
        cert = _certificate(struct, run, end, _TOLERANCE * max(end))
        if cert is None:
            k *= 2
            continue
        c, mu = cert
        if (big_k - k) % c:
            k += (big_k - k) % c
            continue
        summary = _extrapolate(struct, run, end, table, lat, big_k, (big_k - k) // c * mu)
        return summary, Route(True, k, c, "certificate")
    why = "no certificate below K copies" if k >= big_k else "short list not the expansion"
    return _full(name, p, v, m, durations, latency), Route(False, 0, 0, why)


def _extrapolate(
    struct: _Structure,
    run: _Run,
    end: Sequence[float],
    table: Sequence[float],
    lat: Sequence[float],
    big_k: int,
    shift: float,
) -> RunSummary:
    extra = big_k - run.k
    busy = [
        x + extra * y for x, y in zip(_busy(run.work, table), _busy(struct.body_work, table), strict=True)
    ]
    last = tuple(end[pos] + shift if pos < run.n else 0.0 for pos in run.last)
    return RunSummary(
        makespan=max(last),
        busy_per_rank=tuple(busy),
        first_start_per_rank=tuple(_start(run, end, lat, pos) for pos in run.first),
        last_end_per_rank=last,
        peak_in_flight_per_stage=run.peak_stage,
        peak_in_flight_per_rank=run.peak_rank,
        p2p_forward_messages=run.p2p_fwd + extra * struct.body_fwd,
        p2p_backward_messages=run.p2p_bwd + extra * struct.body_bwd,
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


def _pareto(vectors: set[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """The vectors no other vector dominates (≥ in every entry), in a stable order."""
    ordered = sorted(vectors, key=lambda x: (-sum(x), x))
    kept: list[tuple[int, ...]] = []
    for vec in ordered:
        if not any(all(a >= b for a, b in zip(other, vec, strict=True)) for other in kept):
            kept.append(vec)
    return tuple(kept)


def _profile_of(schedule: Schedule) -> InFlightProfile:
    stages_per_rank = tuple(schedule.stages_of(r) for r in range(schedule.p))
    frontier = []
    for r, row in enumerate(_deltas(schedule)):
        slot = {s: i for i, s in enumerate(stages_per_rank[r])}
        cur = [0] * len(slot)
        seen: set[tuple[int, ...]] = set()
        for s, sign in row:
            cur[slot[s]] += sign
            if sign > 0:
                seen.add(tuple(cur))
        frontier.append(_pareto(seen))
    peak_stage = _compiled(schedule).peak_stage
    return InFlightProfile(schedule.num_stages, peak_stage, stages_per_rank, tuple(frontier))


@lru_cache(maxsize=256)
def _profile_class(name: str, p: int, v: int | None, residue: int) -> InFlightProfile | None:
    """The profile shared by every m ≥ m0 + Δ of one class (None when the short list cannot be built)."""
    struct = _structure_cached(name, p, v, residue)
    run = None if struct is None else struct.run(struct.start_k)
    return None if run is None else _profile_of(run.schedule)


@lru_cache(maxsize=256)
def _profile_full(name: str, p: int, v: int | None, m: int) -> InFlightProfile:
    return _profile_of(get_schedule(name, p, m, v))


def clear_caches() -> None:
    """Forget every cached structure, short list and profile (for cold-start measurements)."""
    _structure_cached.cache_clear()
    _phases_cached.cache_clear()
    _profile_class.cache_clear()
    _profile_full.cache_clear()


def in_flight_profile(name: str, p: int, v: int | None, m: int) -> InFlightProfile:
    """The in-flight profile of `get_schedule(name, p, m, v)`. For m ≥ m0 + Δ of a periodic class it comes from
    a short list with the same in-flight moments (a copy of the period is net zero per stage, so copies beyond
    the first add no new vectors) and is cached by (name, p, v, class of m); otherwise from the list itself,
    cached by m."""
    name = canonical_name(name)
    phases = _phases_cached(name, p, v) if period(name, p) is None and m >= 1 else None
    if phases is not None:
        return InFlightProfile(
            phases.num_stages,
            tuple(m * x for x in phases.peak_stage),
            phases.stages_per_rank,
            tuple(tuple(tuple(m * x for x in vec) for vec in vectors) for vectors in phases.frontier),
        )
    found = _fast_structure(name, p, v, m)
    if found is not None and found[1] >= 1:
        profile = _profile_class(name, p, v, m % found[0].dec.delta)
        if profile is not None:
            return profile
    return _profile_full(name, p, v, m)
