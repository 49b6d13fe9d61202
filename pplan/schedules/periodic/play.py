"""Route A per call: play a compiled structure label after label until a certificate holds, then extrapolate.

Owns the certificate (`_window`, `_certificate`: step 2 of the exactness argument in pplan.schedules.periodic's
docstring, to the relative tolerance `_TOLERANCE`), the play itself (`stream`: the head and the tail simulated
by pplan.schedules.periodic.direct, the labels between by the structure's steady play list) and the extrapolation from k
to K copies (`extrapolate`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import sub

from pplan.schedules.periodic.direct import advance, rulebook
from pplan.schedules.periodic.structure import Structure
from pplan.schedules.timeline import RunSummary

_TOLERANCE = 1e-12  # certificate tolerance, relative to the latest label's ends


def _window(struct: Structure, k: int, c: int) -> int | None:
    """First label of the window a cyclicity-c certificate compares at k copies: it spans the R′ + c last
    labels, R′ = max(R, tail reach − c) (the tail reads labels ≥ k − tail reach); None when it does not fit
    above the first complete label O, or label k − c does not follow the steady recurrence (k − c ≥ O + R)."""
    lo = k - c - max(struct.reach, struct.tail.reach - c)
    return lo if lo >= struct.lead and k - c >= struct.lead + struct.reach else None


def _certificate(struct: Structure, end: Sequence[float], k: int, c: int, lo: int) -> float | None:
    """μ with labels J + c = labels J + μ, action by action, for J in lo..k − c − 1 (pplan.schedules.periodic's
    docstring, step 2), to a tolerance relative to the latest label's ends; None when that fails. Checks one
    action per label first (a subset of the same conditions), then all of them."""
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


def stream(
    struct: Structure, table: Sequence[float], lat: Sequence[float], big_k: int
) -> tuple[int, int, float, list[float], list[float]] | str:
    """Simulate the head, then play label after label (labels < k are closed under dependencies, so their ends
    are the same for any number of copies after them) until a certificate holds at k copies with K ≡ k (mod c):
    c = 1 and the cyclicities seen before at every k, every c at powers of two. Then simulate the tail of the
    list with k copies. (k, c, μ, first start and last end per rank), or why not."""
    big_l, p, dec = struct.label, struct.p, struct.dec
    book, _, _ = rulebook(struct.rules, table, lat, struct.head_top)
    last = [0.0] * p
    keep: list[list[float]] = [[] for _ in range(p)]
    first = advance(struct.head, book, 0, last, keep)
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
    struct: Structure, end: Sequence[float], k: int, table: Sequence[float], lat: Sequence[float]
) -> list[float] | None:
    """Simulate the tail of the list with k copies from the ends of labels k − tail reach..k − 1; each rank's
    last end (None: the tail stalls)."""
    tail, big_l, sigma = struct.tail, struct.label, struct.dec.sigma
    book, _, _ = rulebook(struct.rules, table, lat, max(tail.top, struct.body_top) + (k + 1) * sigma)
    for label in range(k - tail.reach, k):
        x0 = label * big_l
        for u, sk, i0, o in struct.carry:
            if label >= o:  # rank r's copy label − o_r
                _, _, _, writes, put, _ = book[sk]
                assert writes is not None
                writes[put + i0 + (label - o) * sigma] = end[x0 + u]
    base = [0, *itertools.accumulate(len(q) for q in struct.dec.body)]
    last = [end[(k - 1) * big_l + base[r + 1] - 1] for r in range(struct.p)]  # copy k − o_r − 1's last action
    return None if advance(tail.rows, book, k * sigma, last, None) is None else last


def extrapolate(
    struct: Structure,
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
