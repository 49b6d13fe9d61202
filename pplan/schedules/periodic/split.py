"""Reading generated lists, and splitting them into prefix · period · suffix (route A's first step).

Owns the period table (`period`; `first_m0`, where to start looking, both from the family's record in
pplan.schedules.registry), the lists read as whole-list channels (`Sample`, `read`) or tokens (`tokens`), and
the split (`Decomposition`, `detect`). Symbols as in pplan.schedules.periodic.

For m ≥ m0 rank r's list is P_r · Q_r(0) · Q_r(1) ··· Q_r(K−1) · S_r(K), m = m0 + K·Δ: copy j is Q_r(0) with
its micro-batches shifted by j·σ, the suffix S_r(0) shifted by K·σ (micro-batches counted within their chain:
σ = Δ for one chain, 1 for each of DualPipe's two directions; chains growing unequally are simulated in full).
Each action is one integer, its code: index·4S + kind·S + stage, so a shift by j copies adds j·σ·4S. The split
is read off the lists at m0 and m0 + Δ (longest common prefix; the rest a common suffix moved by one period),
with m0 the first m of m's class mod Δ from the family record's m0 where that works, and checked against the
lists at m0 + 2Δ and m0 + 3Δ (CHECK_COPIES). Every list played beyond those is built from the split, not
generated: rows(K) = P·Q^K·S is trusted for every K from these four lists, the per-family argument below and
the tests (tests/test_periodic.py compares it with the generator far beyond the lists read). Measured m0 for
p ≥ 2: 1f1b and zb-h1 p − 1 (warm-up F's, then (F, B) resp. (F, I, W) steps, then the drain: loops whose
counts are affine in m); zb-h2 2p (its W-filled skeleton repeats after the warm-up); zbv 2p − 1 and dualpipev
2p (step 4 of their programs repeats one micro-batch at a time); dualpipe 2p with Δ = 2 (one micro-batch more
per direction; odd m is invalid); interleaved-1f1b 2p and interleaved-zb p with Δ = p (m a multiple of p
gives groups G = p, one more group per period). The other valid interleaved m (m < p², torch's rounds rule,
G = m/rounds ≠ p) have no period in m and are simulated in full, as is every m with too few copies for a
certificate.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import add, attrgetter, mul, sub

from pplan.errors import ConfigError
from pplan.schedules import Schedule, schedule_family
from pplan.schedules.periodic._common import generate

Token = tuple[int, int, int, int]
"""One action as data that survives shifting: (stage, kind code F=0 I=1 W=2 B=3, index of its micro-batch
within its chain, 1 when it opens an overlapped F&B pair else 0)."""
Rows = tuple[tuple[Token, ...], ...]
Codes = tuple[tuple[int, ...], ...]
"""Per rank, each action as one integer: index·4S + kind·S + stage (S stages). Moving a copy by one period adds
σ·4S; the timeline's dependency of an action is its code plus an offset that depends only on code mod 4S."""

_KIND = {"F": 0, "I": 1, "W": 2, "B": 3}
_DETECT_SPAN = 8  # candidate m0 run from the record's m0 up to 8 periods further
CHECK_COPIES = (2, 3)  # the split read at m0 and m0 + Δ is checked against the lists at m0 + 2Δ and m0 + 3Δ


def period(name: str, p: int) -> int | None:
    """Δ: micro-batches one repetition of `name`'s steady state adds, or None when its lists have no single
    period (every F then every B): the family's record (pplan.schedules.registry) says."""
    steady = schedule_family(name).steady
    return None if steady is None else steady(p)[1]


def first_m0(name: str, p: int, residue: int) -> int:
    """Where to start looking for the split: the record's m0, moved up into m's class mod Δ."""
    steady = schedule_family(name).steady
    assert steady is not None
    m0, delta = steady(p)
    return m0 + (residue - m0) % delta


_STAGE = attrgetter("stage")
_KIND_OF = attrgetter("kind")
_MICROBATCH = attrgetter("microbatch")


@dataclass(frozen=True, slots=True)
class Sample:
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


def read(schedule: Schedule) -> Sample:
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
    return Sample(
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


def tokens(schedule: Schedule) -> tuple[Rows, tuple[int, ...], tuple[int, ...]]:
    """Each rank's list as tokens, the micro-batches per chain, and each stage's chain."""
    got = read(schedule)
    rows = tuple(_decode(got.codes(r), got.pairs[r], schedule.num_stages) for r in range(schedule.p))
    return rows, got.sizes, got.chain_of


@dataclass(frozen=True, slots=True)
class Decomposition:
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


def moved(codes: Sequence[int], by: int) -> list[int]:
    return list(map(add, codes, itertools.repeat(by)))


Got = Sample | None


def _sample(name: str, p: int, v: int | None, m: int, memo: dict[int, Got]) -> Got:
    """The list at m read into codes (None when m is not valid for the family), memoised for one detection."""
    if m not in memo:
        try:
            memo[m] = read(generate(name, p, m, v))
        except ConfigError:
            memo[m] = None
    return memo[m]


def _detect_at(
    name: str, p: int, v: int | None, m0: int, delta: int, memo: dict[int, Got]
) -> Decomposition | None:
    """Split the lists at m0 and m0 + Δ into prefix, period and suffix (the longest common prefix; the rest a
    common suffix moved by one period); check the split on the lists at m0 + jΔ, j in CHECK_COPIES."""
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
            or b.index[r][n + lb :] != moved(a.index[r][n:], sigma)
        ):
            return None
        if {i - lb for i in b.pairs[r] if i >= n + lb} != {i for i in a.pairs[r] if i >= n}:
            return None
        cuts.append((n, lb))
    for j in CHECK_COPIES:
        later = _sample(name, p, v, m0 + j * delta, memo)
        if later is None or later.sizes != tuple(x + j * sigma for x in a.sizes):
            return None
        for r, (n, lb) in enumerate(cuts):
            body = slice(n, n + lb)
            index = a.index[r][:n]
            for c in range(j):
                index += moved(b.index[r][body], c * sigma)
            if (
                later.stage[r] != a.stage[r][:n] + b.stage[r][body] * j + a.stage[r][n:]
                or later.kind[r] != a.kind[r][:n] + b.kind[r][body] * j + a.kind[r][n:]
                or later.index[r] != index + moved(a.index[r][n:], j * sigma)
            ):
                return None
            flags = {i for i in a.pairs[r] if i < n}
            flags.update(i + c * lb for c in range(j) for i in b.pairs[r] if n <= i < n + lb)
            flags.update(i + j * lb for i in a.pairs[r] if i >= n)
            if later.pairs[r] != flags:
                return None
    return Decomposition(
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


def detect(
    name: str, p: int, v: int | None, residue: int, delta: int, memo: dict[int, Got]
) -> Decomposition | None:
    """The first m0 ≡ residue (mod Δ) from the record's m0, up to 8 periods further, where the lists split into
    prefix, period and suffix."""
    m0 = max(first_m0(name, p, residue), 1)
    last = m0 + _DETECT_SPAN * delta
    while m0 <= last:
        dec = _detect_at(name, p, v, m0, delta, memo)
        if dec is not None:
            return dec
        memo.pop(m0, None)
        m0 += delta
    return None
