"""Route A's structure: everything duration-independent about one (name, p, v, class of m), compiled once.

Owns `Structure` and its cache (`structure_cached`, `STRUCTURES`; `STORES`, the hook that keeps structures beyond
the process): from the split (pplan.schedules.periodic.split), the labels' offsets and reach, the play list of one
steady label, the head's and the tail's rows, the work and messages of the fixed part and of one copy, and the
in-flight profile. pplan.schedules.periodic.play plays it per call;
why that is exact is in pplan.schedules.periodic's docstring.

Dependencies, by arithmetic. The timeline's cross-stage dependency of an action is the same micro-batch's pass
on the neighbouring stage (F: the previous stage's F; I or B: the next stage's I, else its B), i.e. its code
plus an offset that depends only on code mod 4S. A code c + jσ·4S of copy j reads code t + jσ·4S; when some
action of the period has t's residue mod σ·4S (residues are distinct, checked), with code c′, that action in
copy j − δ, δ = (c′ − t)/σ·4S, is the one read, for every j. Label rank r's copy j with J = j + o_r, offsets
o_r from difference constraints (Bellman–Ford) so that every cross-rank read between copies points to the same
or an earlier label, at most R labels back (all o_r = 0 and R ≤ 2 for every family in pplan.schedules.periodic's list).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import floordiv, mod
from typing import Protocol

from pplan.collector import collector_paused
from pplan.schedules.periodic._common import CACHE_LIMIT
from pplan.schedules.periodic.direct import NONE, Row, Rules
from pplan.schedules.periodic.profile import InFlightProfile, profile_rows
from pplan.schedules.periodic.split import Decomposition, Got, detect, moved, period


@dataclass(slots=True)
class _Tail:
    """The actions after label k − 1 (the copies with labels ≥ k, then the suffix) for every k ≥ k0, with their
    indices at k = 0 (k·σ is added)."""

    k0: int
    rows: list[Row]
    reach: int  # they read labels ≥ k − reach, and themselves
    top: int  # largest index at k = 0, plus one


@dataclass(slots=True)
class Structure:
    """Everything duration-independent about one (name, p, v, class of m).

    The labels' ends go into one flat list E: label J (rank r's copy J − o_r, rank after rank) at J·L. The
    head (prefix and labels < head_labels) and the tail are simulated directly (ends per stage and index), the
    head writing its labels' ends into E, the tail reading the last labels' ends from E."""

    name: str
    p: int
    v: int | None
    num_stages: int
    dec: Decomposition
    rules: Rules
    offset: tuple[int, ...]  # o_r
    lead: int  # O = max o_r
    reach: int  # R: a copy's cross-rank dependencies lie at most R labels back
    label: int  # L: actions per label (one copy per rank)
    head_labels: int  # the head plays the prefix and labels < head_labels
    head: list[Row]
    head_top: int  # largest index in the head, plus one
    carry: list[tuple[int, int, int, int]]
    """Per slot u of a label holding an F, I or B: (u, kind·S + stage, index in copy 0, o_r): where the tail finds
    the label's ends (`stream`)."""
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


def _work(codes: Iterable[int], unit: int) -> tuple[tuple[int, int], ...]:
    """(duration index, count): the code mod 4S is kind·S + stage, the flat duration table's index."""
    return tuple(sorted(Counter(map(mod, codes, itertools.repeat(unit))).items()))


def _messages(work: Iterable[tuple[int, int]], rules: Rules) -> tuple[int, int]:
    fwd = bwd = 0
    for sk, n in work:
        fwd += n * rules.fwd[sk]
        bwd += n * rules.bwd[sk]
    return fwd, bwd


def _net_zero(dec: Decomposition) -> bool:
    """Whether one copy leaves every stage's in-flight count unchanged (F enters; W, or a B, leaves: a valid list
    never has both B and I for one micro-batch)."""
    n = dec.num_stages
    net = [0] * n
    for q in dec.body:
        for c in q:
            kind = c % (4 * n) // n
            net[c % n] += 1 if kind == 0 else 0 if kind == 1 else -1
    return not any(net)


def _pair_cut(dec: Decomposition) -> bool:
    """Whether a segment ends with the F of an overlapped F&B pair: its partner (and so its dependency) would
    then change with the number of copies."""
    return any(
        len(seg) - 1 in flags
        for segs, flags3 in zip(zip(dec.prefix, dec.body, dec.suffix, strict=True), dec.pairs, strict=True)
        for seg, flags in zip(segs, flags3, strict=True)
    )


class _Layout:
    """Where label J's copies sit in E: rank r's copy J − o_r at J·L + (rank r's start within a label)."""

    def __init__(self, dec: Decomposition, rules: Rules, offset: Sequence[int]) -> None:
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
    """Action c of copy j reads the action with code c + offset (`Rules`) in the list; when that code's residue
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
            if got is None and second[sk] != NONE:
                t = c + second[sk]
                got = res.get(t % step)
            if got is None:
                return None
            row.append((got[0], got[1], (got[2] - t) // step))
        out.append(row)
    return out


def _steady(lay: _Layout, links: _Links, reach: int) -> list[tuple[int, int, int, int, int, int, int]] | None:
    """The play list of a label J ≥ O + R (see `Structure.steady`): its dependencies are in labels J − R..J,
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
            if off != NONE and (c + off) % unit in top:
                k0 = max(k0, (top[(c + off) % unit] - c - off) // step + 1)
    inside = set(moving)
    reach = 1  # a rank's first tail action follows its copy in label k − 1
    for c in moving:
        sk = c % unit
        if source[sk] < 0:
            continue
        for off in (first[sk], second[sk]):
            if off == NONE:
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
    rows: list[Row] = []
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


def _structure(name: str, p: int, v: int | None, residue: int) -> Structure | None:
    """Detect the period of one class of m and compile everything duration-independent about it (None: none)."""
    delta = period(name, p)
    if delta is None:
        return None
    memo: dict[int, Got] = {}
    dec = detect(name, p, v, residue, delta, memo)
    # Every rank works in every copy, a copy leaves in-flight counts unchanged, no segment splits an F&B pair.
    if dec is None or not all(dec.body) or not _net_zero(dec) or _pair_cut(dec):
        return None
    one = memo.get(dec.m_of(1))
    assert one is not None
    rules = Rules(one.placement, one.chains)
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
    head: list[Row] = []
    for r in range(p):
        codes = list(dec.prefix[r])
        pairs = list(dec.pairs[r][0])
        for j in range(head_labels - offset[r]):
            pairs += [len(codes) + i for i in dec.pairs[r][1]]
            codes += moved(dec.body[r], j * dec.step)
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
    return Structure(
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
        profile=profile_rows([one.kind_stage(r) for r in range(p)], one.placement, p),
    )


StructureKey = tuple[str, int, int | None, int]
"""(schedule name, p, the generator's v, m's class mod Δ)."""
STRUCTURES: dict[StructureKey, Structure | None] = {}
PROVIDERS: list[Callable[[StructureKey], tuple[Structure | None] | None]] = []
"""Asked, latest first, for a structure not cached before it is built here: the structure (in a 1-tuple: None is
an answer too), or None when the provider has none (pplan.search.prefetch builds them on another core)."""


class StructureStore(Protocol):
    """Structures kept beyond this process (the command line keeps them on disk: pplan.cli.cache). A structure is
    a function of its key and of pplan's code alone, so one kept is the one that would be built."""

    def get(self, key: StructureKey) -> tuple[Structure | None] | None:
        """The structure kept for `key` (in a 1-tuple: None is an answer too), or None when none is kept."""
        ...

    def put(self, key: StructureKey, structure: Structure | None) -> None:
        """Keep `structure`, just built for `key`."""
        ...

    def has(self, key: StructureKey) -> bool:
        """Whether a structure is kept for `key` (cheaper than `get`; `get` may still find it unusable)."""
        ...


STORES: list[StructureStore] = []
"""Asked before the providers, and told of every structure built here (empty: nothing is kept)."""


def structure_cached(name: str, p: int, v: int | None, residue: int) -> Structure | None:
    key = (name, p, v, residue)
    if key not in STRUCTURES:
        if len(STRUCTURES) >= CACHE_LIMIT:
            STRUCTURES.pop(next(iter(STRUCTURES)))
        got = next((x for x in (store.get(key) for store in STORES) if x is not None), None)
        if got is None:
            got = next((x for x in (provide(key) for provide in reversed(PROVIDERS)) if x is not None), None)
        if got is not None:
            STRUCTURES[key] = got[0]
        else:
            with collector_paused():
                STRUCTURES[key] = built = _structure(name, p, v, residue)
            for store in STORES:
                store.put(key, built)
    return STRUCTURES[key]
