"""Looped placements: interleaved 1F1B (Megatron-LM), its zero-bubble variant, and looped breadth-first.

Both give each rank v ≥ 2 model chunks in the loop placement: virtual stage s lives on rank s mod p, so rank r
holds stages r, r + p, ..., r + (v−1)p and a micro-batch crosses every rank v times.

Interleaved 1F1B (Narayanan et al. 2021, arXiv 2104.04473, §2.2.2; Megatron-LM
`forward_backward_pipelining_with_interleaving`). A rank's work is m·v chunk-passes. Forwards are taken in
micro-batch groups of G (Megatron's `microbatch_group_size_per_vp_stage`, default p): G micro-batches through
chunk 0, the same G through chunk 1, ..., then the next group (Megatron's `get_schedule_table`); backwards follow
the same table with the chunk order reversed. Rank r warms up with w_r = 2(p − r − 1) + (v − 1)·G forwards (all
m·v when that is more), then alternates one forward and one backward, then drains. Bubble: (p−1)/(v·m) of the
ideal time (uniform stages, m ≥ p), v times smaller than 1F1B's, for v times the P2P messages: m·(v·p − 1)
each way.

m not a multiple of p: Megatron's short last group (G = p) can deadlock (p = 4, v = 3, m = 5: a rank's forward
of the short group waits behind its own backward) or lose bubble, so we take torch's relaxation
(ScheduleInterleaved1F1B): rounds = max(1, m // p) and G = m / rounds, which needs m to be a multiple of the
rounds (p = 4: m = 6 and 10 pass, 9 does not and is refused with the nearest valid m). Every m ≥ p that passes
keeps the (p−1)/(v·m) bubble exactly; the price is a larger G, so more warm-up forwards in flight.

Memory: rank r holds at most w_r + 1 = (v−1)·p + 2(p−1−r) + 1 chunk-micro-batches (G = p), as measured on
torch's Interleaved1F1B. A chunk is 1/v of a full stage, so rank 0 holds ((v−1)p + 2p − 1)/v
= p·(1 + (p−1)/(p·v)) full-stage micro-batch equivalents: Megatron's interleaving factor 1 + (p−1)/(p·v)
(`theoretical_memory_usage.py`; Korthikanti et al. 2022 write pm for p·v, with m counting chunks).

Looped BFS (Lamy-Poirier 2022, "Breadth-First Pipeline Parallelism", arXiv 2211.05953; torch's
ScheduleLoopedBFS): each rank runs every forward of its first chunk, then of its second, ..., then the backwards
chunk by chunk in reverse, micro-batches in reverse. It holds all m·v chunk-micro-batches at the turn.
"""

from __future__ import annotations

from pplan.errors import ConfigError
from pplan.schedules.actions import Action, Schedule, loop_placement, make_schedule
from pplan.schedules.rules import MICROBATCHES, need_m, need_positive, need_v


def megatron_order(m: int, v: int, group: int) -> list[tuple[int, int]]:
    """Megatron's schedule table: the k-th forward of a rank is (micro-batch, chunk) = table[k]."""
    table: list[tuple[int, int]] = []
    for first in range(0, m, group):
        last = min(first + group, m)  # the last group holds the remainder (m mod G micro-batches, or G)
        table += [(mb, chunk) for chunk in range(v) for mb in range(first, last)]
    return table


def table_prefix_counts(m: int, v: int, group: int, n: int) -> tuple[int, ...]:
    """Per chunk, how many of the first n entries of `megatron_order(m, v, group)` run it (without building it)."""
    counts = [0] * v
    for first in range(0, m, group):
        size = min(group, m - first)
        for chunk in range(v):
            take = min(size, n)
            counts[chunk] += take
            n -= take
            if n == 0:
                return tuple(counts)
    return tuple(counts)


def valid_interleaved_m(p: int, m: int) -> bool:
    """torch's rule (ScheduleInterleaved1F1B): m must be a multiple of its number of rounds max(1, m // p)."""
    return m % max(1, m // p) == 0


def default_group(p: int, m: int) -> int:
    """G = p when p divides m (Megatron's default); otherwise G = m / rounds with rounds = max(1, m // p)."""
    return m // max(1, m // p)


def interleaved_m_problem(p: int, m: int) -> str | None:
    """The rule on m of interleaved-1f1b and interleaved-zb (`valid_interleaved_m`), as the registry states it."""
    if valid_interleaved_m(p, m):
        return None
    return f"at --pp {p} needs m to be a multiple of its rounds max(1, m // p) = {max(1, m // p)}, got {m}"


def _need_valid_m(name: str, p: int, m: int) -> None:
    need_m(name, p, m, interleaved_m_problem, f" (a multiple of {p} always works)")


def interleaved_1f1b(p: int, m: int, v: int | None = None, group: int | None = None) -> Schedule:
    """Interleaved 1F1B with Megatron's ordering. `group` (G) defaults to `default_group(p, m)`; it must divide m
    and be at least min(p, m). Groups that do not divide m can deadlock (a rank's forward of the short last group
    then waits behind its own backward) or lose the (p−1)/(v·m) bubble, so they are refused.
    """
    need_positive(p, m)
    v = need_v("interleaved-1f1b", v, ">=2", 2)
    if group is None:
        _need_valid_m("interleaved-1f1b", p, m)
        g = default_group(p, m)
    else:
        g = group
        if m % g or g < min(p, m):
            raise ConfigError(
                MICROBATCHES,
                f"micro-batch group {g} must divide m = {m} and be at least min(p, m) = {min(p, m)}",
                f"use a group of {default_group(p, m) if valid_interleaved_m(p, m) else p}",
            )
    table = megatron_order(m, v, g)
    total = m * v
    rows: list[list[Action]] = []
    for r in range(p):
        warmup = min(2 * (p - r - 1) + (v - 1) * g, total)
        fwd = [Action(chunk * p + r, "F", mb) for mb, chunk in table]
        bwd = [Action((v - 1 - chunk) * p + r, "B", mb) for mb, chunk in table]
        row = fwd[:warmup]
        for k in range(total - warmup):
            row += [fwd[warmup + k], bwd[k]]
        row += bwd[total - warmup :]
        rows.append(row)
    return make_schedule("interleaved-1f1b", p, v, m, loop_placement(p, v), rows)


def interleaved_zb(p: int, m: int, v: int | None = None) -> Schedule:
    """Interleaved zero bubble (torch's ScheduleInterleavedZeroBubble: Qi et al.'s ZB1P on a loop placement).

    The forward and backward orders are interleaved 1F1B's (same micro-batch groups), with every backward split
    into I and W. Rank r warms up with (v−1)·G + (p − 1 − r) forwards, half of 1F1B's extra 2(p − 1 − r), then
    runs (F, I) pairs; after its first r pairs each I is followed by the W of the backward r places earlier (the
    ZB-H1 lag, so the last micro-batches' I's pass through without waiting), and the r outstanding W's run last.
    m follows interleaved-1f1b's rule.
    """
    need_positive(p, m)
    v = need_v("interleaved-zb", v, ">=2", 2)
    _need_valid_m("interleaved-zb", p, m)
    g = default_group(p, m)
    table = megatron_order(m, v, g)
    total = m * v
    rows: list[list[Action]] = []
    for r in range(p):
        warmup = min((v - 1) * g + (p - 1 - r), total)
        fwd = [Action(chunk * p + r, "F", mb) for mb, chunk in table]
        bwd = [Action((v - 1 - chunk) * p + r, "I", mb) for mb, chunk in table]
        wgt = [Action(a.stage, "W", a.microbatch) for a in bwd]
        row = fwd[:warmup]
        w_next = 0
        for k in range(total):
            if warmup + k < total:
                row.append(fwd[warmup + k])
            row.append(bwd[k])
            if k >= r:
                row.append(wgt[w_next])
                w_next += 1
        row += wgt[w_next:]
        rows.append(row)
    return make_schedule("interleaved-zb", p, v, m, loop_placement(p, v), rows)


def looped_bfs(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    v = need_v("looped-bfs", v, ">=2", 2)
    rows: list[list[Action]] = []
    for r in range(p):
        stages = [chunk * p + r for chunk in range(v)]
        row = [Action(s, "F", mb) for s in stages for mb in range(m)]
        row += [Action(s, "B", mb) for s in reversed(stages) for mb in reversed(range(m))]
        rows.append(row)
    return make_schedule("looped-bfs", p, v, m, loop_placement(p, v), rows)
