"""Route B, phase blocks (gpipe, looped-bfs: every F of a chunk, chunk after chunk, then every B).

Owns the block structure of a family (`Phases`, read once per (name, p, v): `phases_cached`) and the summary at
any m from it (`summarise_phases`). Each rank's list is a sequence of blocks, one (stage, kind) over all m
micro-batches in ascending or descending order (read at m = 3 and 4, same sequence), and each block's
cross-rank dependency is one block walking the micro-batches the same way. Within a block at position j,
end(j) = max(end(j−1), dep(j) + hop) + d. If dep is the upper envelope of lines a + b·j, then max over j' ≤ j
of (a + b·j' + (j − j' + 1)·d) is reached at j' = 0 or j' = j, so end is the envelope of start + (j+1)·d and the
lines (a + hop + d, max(b, d)): exact longest paths in O(S²) per call (GPipe's classic F(r, j) = Σ_{r'≤r} f_r'
+ the r hops + j·max_{r'≤r} f_r' is the first blocks' case). The moving point where looped BFS's second chunk
stops waiting for the first chunk's last rank, which no bounded certificate could cover, is just where two
lines cross. In-flight counts change by whole blocks (m at a time).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from pplan.errors import ConfigError
from pplan.schedules import Schedule
from pplan.schedules.periodic._common import generate, tables
from pplan.schedules.periodic.profile import pareto
from pplan.schedules.periodic.split import Token, tokens
from pplan.schedules.timeline import Durations, Latency, RunSummary


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
class Phases:
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


def _phases(name: str, p: int, v: int | None) -> Phases | None:
    """Blocks of a schedule whose lists at m = 3 and 4 are the same sequence of whole blocks (one chain)."""
    shapes = []
    for m in (3, 4):
        try:
            schedule = generate(name, p, m, v)
        except ConfigError:
            return None
        rows, sizes, _ = tokens(schedule)
        if len(sizes) != 1 or sizes[0] != m:
            return None
        runs = [_runs(row, m) for row in rows]
        if any(r is None for r in runs):
            return None
        shapes.append(runs)
    if shapes[0] != shapes[1]:
        return None
    return _link(schedule, [r for r in shapes[0] if r is not None])


def _link(schedule: Schedule, runs: list[list[tuple[int, int, bool]]]) -> Phases | None:
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
    return Phases(p, stages, tuple(blocks), first, last, fwd, bwd, peak_stage, stages_per_rank, frontier)


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
        frontier.append(pareto(seen))
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


def summarise_phases(ph: Phases, m: int, table: Sequence[float], lat: Sequence[float]) -> RunSummary:
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
def phases_cached(name: str, p: int, v: int | None) -> Phases | None:
    return _phases(name, p, v)


def block_tables(ph: Phases, durations: Durations, latency: Latency) -> tuple[list[float], list[float]]:
    return tables(ph.num_stages, ph.p, durations, latency)
