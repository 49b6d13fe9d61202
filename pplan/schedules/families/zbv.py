"""ZB-V (Qi et al. 2024, arXiv 2401.10241, §6): the zero-bubble schedule on a V placement; torch's
ScheduleZBVZeroBubble.

The model is cut into 2p chunks; rank r holds chunk (stage) r on the way down and chunk 2p − 1 − r on the way
back up, so stages p − 1 and p share rank p − 1 and that hop is local. Every rank runs, with c0 = its first
chunk and c1 = its second:
1. 2(p − r) − 1 forwards of c0;
2. r pairs (F c1, F c0);
3. p − r triples (F c1, I c1, W c1);
4. steady state: (F c0 while forwards remain, I c0, W c0, F c1, I c1, W c1) until both chunks have run every
   forward;
5. cool-down: r pairs (I c0, I c1), then p − r pairs (I c0, W c0), then the outstanding W's of c1, then of c0.
The lists are built for max(m, 2p − 1) micro-batches and the passes of micro-batches ≥ m are dropped, so any
m ≥ 1 runs (torch does the same). With F = I = W and m ≥ 2p − 1 the bubble is close to 0 (Qi et al. Table 2:
≈ 0), and a rank holds at most 2p chunk-micro-batches = p full-stage micro-batches, 1F1B's peak.
"""

from __future__ import annotations

from pplan.schedules.actions import Action, Schedule, make_schedule, v_placement
from pplan.schedules.rules import need_positive, need_v


def _zbv_rank(p: int, r: int, n: int) -> list[Action]:
    c0, c1 = r, 2 * p - 1 - r
    count = {"f0": 0, "f1": 0, "b0": 0, "b1": 0, "w0": 0, "w1": 0}
    row: list[Action] = []

    def emit(stage: int, kind: str, key: str) -> None:
        row.append(Action(stage, kind, count[key]))  # type: ignore[arg-type]
        count[key] += 1

    for _ in range(2 * (p - r) - 1):
        emit(c0, "F", "f0")
    for _ in range(r):
        emit(c1, "F", "f1")
        emit(c0, "F", "f0")
    for _ in range(p - r):
        emit(c1, "F", "f1")
        emit(c1, "I", "b1")
        emit(c1, "W", "w1")
    while count["f1"] < count["f0"] or count["f0"] < n:
        if count["f0"] < n:
            emit(c0, "F", "f0")
        emit(c0, "I", "b0")
        emit(c0, "W", "w0")
        emit(c1, "F", "f1")
        emit(c1, "I", "b1")
        emit(c1, "W", "w1")
    for _ in range(r):
        emit(c0, "I", "b0")
        emit(c1, "I", "b1")
    for _ in range(p - r):
        emit(c0, "I", "b0")
        emit(c0, "W", "w0")
    while count["w1"] < count["b1"]:
        emit(c1, "W", "w1")
    while count["w0"] < count["b0"]:
        emit(c0, "W", "w0")
    assert count["f0"] == count["b0"] == count["w0"] == n and count["f1"] == count["b1"] == count["w1"] == n
    return row


def zbv(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    need_v("zbv", v, "2", 2)
    n = max(m, 2 * p - 1)
    rows = [[a for a in _zbv_rank(p, r, n) if a.microbatch < m] for r in range(p)]
    return make_schedule("zbv", p, 2, m, v_placement(p), rows)
