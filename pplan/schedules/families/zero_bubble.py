"""Qi et al.'s handcrafted zero-bubble schedules ZB-H1 and ZB-H2 (arXiv 2401.10241, §3.1), one stage per rank.

Both split the backward into I (gradient of the input, which the previous stage waits for) and W (gradient of
the weights, which nobody waits for) and use W to fill idle time. Symbols: p ranks = stages, m micro-batches,
F, I, W the pass times of one stage (uniform stages).

ZB-H1: stage i warms up with min(p − i − 1, m) forwards like 1F1B, then runs (F, I) pairs, each followed by
the W of the micro-batch i places earlier; the i outstanding W's run at the end. Stage i therefore lags its W's
by i micro-batches, which lets the last micro-batch's I's travel up the pipeline without waiting behind W's.
Measured with our timeline: bubble (p−1)(F + I − W) exactly when W ≤ F, W ≤ I and m ≥ p (1/3 of 1F1B's
(p−1)(F + I + W) for equal passes); peak in flight p micro-batches on every stage. Qi et al.'s claim is that the
peak over all workers stays 1F1B's p; it cannot stay p − i on stage i, because the last stage must hold p W's
back to empty the tail (with one in flight there the bubble is at least (p−1)(F + I)).

ZB-H2: stage i warms up with min(2(p − i) − 1, m) forwards, then alternates I and F; a W runs whenever the
next I or F cannot start yet, or when another F would put more than 2p − 1 micro-batches in flight. The lists
are fixed once by playing those rules with F = I = W (zero latency), the setting Qi et al. design for; the
result is their parallelogram: every stage busy from its first forward (at i·F) to its last W. The idle time
inside each stage's own window is (p−1)(F + I − 2W) (0 for equal passes) when W ≤ F, W ≤ I and m ≥ 2p − 1;
the step's makespan still includes the (p−1)·F skew, which Qi et al. remove by dropping the synchronisation
before the optimizer step. Peak in flight: 2p − 1 micro-batches (on every stage once m ≥ 2p − 1).
"""

from __future__ import annotations

from pplan.schedules.actions import Action, Kind, Schedule, make_schedule
from pplan.schedules.rules import need_positive, need_v


def zb_h1(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    need_v("zb-h1", v, "1", 1)
    rows: list[list[Action]] = []
    for i in range(p):
        warmup = min(p - i - 1, m)
        row = [Action(i, "F", mb) for mb in range(warmup)]
        w_done = 0
        for k in range(m):
            if k + warmup < m:
                row.append(Action(i, "F", k + warmup))
            row.append(Action(i, "I", k))
            if k >= i:
                row.append(Action(i, "W", k - i))
                w_done += 1
        row += [Action(i, "W", mb) for mb in range(w_done, m)]
        rows.append(row)
    return make_schedule("zb-h1", p, 1, m, tuple(range(p)), rows)


def zb_h2(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    need_v("zb-h2", v, "1", 1)
    return make_schedule("zb-h2", p, 1, m, tuple(range(p)), _fill_with_w(p, m, 2 * p - 1))


def _fill_with_w(p: int, m: int, cap: int) -> list[list[Action]]:
    """ZB-H2's lists: play the skeleton (warm-up forwards, then I and F alternating) with unit pass times and
    insert a W wherever the skeleton's next pass cannot start, or would exceed `cap` micro-batches in flight."""
    skeleton: list[list[tuple[Kind, int]]] = []
    for i in range(p):
        warmup = min(2 * (p - i) - 1, m)
        sk: list[tuple[Kind, int]] = [("F", mb) for mb in range(warmup)]
        for k in range(m):
            sk.append(("I", k))
            if k + warmup < m:
                sk.append(("F", k + warmup))
        skeleton.append(sk)

    never = 1 << 60
    f_end = [[never] * m for _ in range(p)]
    i_end = [[never] * m for _ in range(p)]
    nxt = [0] * p
    pending: list[list[int]] = [[] for _ in range(p)]
    in_flight = [0] * p
    rows: list[list[Action]] = [[] for _ in range(p)]
    t = 0
    limit = 4 * (3 * m + p)
    while any(nxt[i] < len(skeleton[i]) or pending[i] for i in range(p)):
        assert t < limit, "ZB-H2 construction stalled"
        for i in range(p):
            pick: tuple[Kind, int] | None = None
            if nxt[i] < len(skeleton[i]):
                kind, mb = skeleton[i][nxt[i]]
                if kind == "I":
                    ready = f_end[i][mb] <= t and (i == p - 1 or i_end[i + 1][mb] <= t)
                else:
                    ready = (i == 0 or f_end[i - 1][mb] <= t) and in_flight[i] < cap
                if ready:
                    pick = (kind, mb)
                    nxt[i] += 1
            if pick is None and pending[i]:
                pick = ("W", pending[i].pop(0))
            if pick is None:
                continue
            kind, mb = pick
            rows[i].append(Action(i, kind, mb))
            if kind == "F":
                f_end[i][mb] = t + 1
                in_flight[i] += 1
            elif kind == "I":
                i_end[i][mb] = t + 1
                pending[i].append(mb)
            else:
                in_flight[i] -= 1
        t += 1
    return rows
