"""DualPipe and DualPipeV (DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437, §3.2.1, Table 2).

DualPipe (bidirectional): p ranks (p even), two pipelines over the same ranks in opposite directions, each with
its own copy of the model's parameters. Encoding used here: stages 0..p−1 are the "down" pipeline, stage k on
rank k; stages p..2p−1 are the "up" pipeline, stage p + k on rank p − 1 − k (so rank r holds down stage r and up
stage 2p − 1 − r). Micro-batches 0..m/2−1 enter at rank 0 and flow down; micro-batches m/2..m−1 enter at rank
p − 1 and flow up. Stage p + k runs the same layers as stage k (the second parameter copy), so its durations are
normally the same.

DualPipeV: the same program folded into a V on p ranks: one pipeline of 2p chunks, rank r holds stages r and
2p − 1 − r (torch's ScheduleDualPipeV), all m micro-batches enter at rank 0, and one copy of the parameters.

Both follow DeepSeek's eight-step program. Write n for the ranks per direction's half (n = p/2 for DualPipe,
n = p for DualPipeV), h for a rank's position in its half (h = min(r, p − 1 − r) for DualPipe, h = r for V),
M for the micro-batches per direction (m/2 for DualPipe, m for V), c0 the rank's chunk nearer the start of its
pipeline and c1 the other:
1. 2(n − h − 1) × F c0;
2. (h + 1) × (F c0, F c1);
3. (n − h − 1) × (I c1, W, F c1);
4. (M − 2n + h + 1) × (F c0 & B c1, F c1 & B c0);
5. (n − h − 1) × (B c1, F c1 & B c0);
6. (h + 1) × (B c1, B c0), switching to split backwards (I, W deferred) half-way through;
7. (n − h − 1) × (W, I c0);
8. (h + 1) × W;
where W takes the oldest deferred weight pass, and "F & B" is DeepSeek's overlapped forward-backward pair.
Step 4 needs M ≥ 2n, i.e. m ≥ 2p for both schedules (DualPipe also needs p and m even).

The pair overlaps compute with the all-to-all communication of expert parallelism, which this compute-only model
does not have, so we run a pair as F then B back to back: F&B = F + B here. DeepSeek's Table 2 bubble for
DualPipe is (PP/2 − 1)(F&B + B − 3W) with B the full backward; in our notation (B = I + W) that is
(p/2 − 1)(F + 2I − W). For DualPipeV PP counts the 2p chunks, so the same formula reads (p − 1)(F + 2I − W) per
chunk pass. Activations: PP + 1 micro-batches per device (Table 2).
"""

from __future__ import annotations

from pplan.schedules.actions import Action, Kind, Schedule, dual_placement, make_schedule, v_placement
from pplan.schedules.rules import need_m, need_p, need_positive, need_v


def dualpipev_m_problem(p: int, m: int) -> str | None:
    """DualPipeV's rule on m (step 4 of the program needs M ≥ 2n with M = m, n = p; torch's ScheduleDualPipeV)."""
    if m < 2 * p:
        return f"needs at least {2 * p} micro-batches (DualPipeV's steady state needs m ≥ 2p), got {m}"
    return None


def dualpipe_p_problem(p: int) -> str | None:
    """DualPipe's rule on p: even, half the ranks leading each direction."""
    if p % 2:
        return f"needs an even value (half the ranks lead each direction), got {p}"
    return None


def dualpipe_m_problem(p: int, m: int) -> str | None:
    """DualPipe's rule on m (and on p, without which no m runs): p even, m even, m ≥ 2p (DeepSeek-V3 §3.2.1; the
    reference implementation's assertion)."""
    if (problem := dualpipe_p_problem(p)) is not None:
        return problem
    if m % 2:
        return f"needs an even value (half the micro-batches enter from each end), got {m}"
    if m < 2 * p:
        return f"needs at least {2 * p} micro-batches (each direction's steady state needs m/2 ≥ p), got {m}"
    return None


def _dual_rank(
    n: int, h: int, total: int, c0: int, c1: int, mb0: int, mb1: int
) -> tuple[list[Action], list[int]]:
    """One rank's DeepSeek program and the positions of its overlapped F&B pairs. c0/c1 are the rank's stages;
    mb0/mb1 the first micro-batch id of each one's direction."""
    row: list[Action] = []
    pairs: list[int] = []
    fwd = {c0: 0, c1: 0}
    bwd = {c0: 0, c1: 0}
    base = {c0: mb0, c1: mb1}
    deferred: list[Action] = []

    def f(stage: int) -> None:
        row.append(Action(stage, "F", base[stage] + fwd[stage]))
        fwd[stage] += 1

    def b(stage: int, split: bool) -> None:
        kind: Kind = "I" if split else "B"
        mb = base[stage] + bwd[stage]
        row.append(Action(stage, kind, mb))
        bwd[stage] += 1
        if split:
            deferred.append(Action(stage, "W", mb))

    def w() -> None:
        if deferred:
            row.append(deferred.pop(0))

    def f_and_b(forward: int, backward: int) -> None:
        pairs.append(len(row))
        f(forward)
        b(backward, split=False)

    for _ in range(2 * (n - h - 1)):
        f(c0)
    for _ in range(h + 1):
        f(c0)
        f(c1)
    for _ in range(n - h - 1):
        b(c1, split=True)
        w()
        f(c1)
    for i in range(total - 2 * n + h + 1):
        if i == 0 and h == n - 1:  # DeepSeek runs the middle rank's first pair unoverlapped
            f(c0)
            b(c1, split=False)
        else:
            f_and_b(c0, c1)
        f_and_b(c1, c0)
    for _ in range(n - h - 1):
        b(c1, split=False)
        f_and_b(c1, c0)
    steps6 = h + 1
    split = False
    for i in range(steps6):
        if i == steps6 // 2 and h % 2 == 1:
            split = True
        b(c1, split)
        if i == steps6 // 2 and h % 2 == 0:
            split = True
        b(c0, split)
    for _ in range(n - h - 1):
        w()
        b(c0, split=True)
    for _ in range(h + 1):
        w()
    while deferred:  # never taken for valid inputs; keeps every W in the list whatever the counts
        w()
    assert fwd[c0] == fwd[c1] == bwd[c0] == bwd[c1] == total
    return row, pairs


def dualpipev(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    need_v("dualpipev", v, "2", 2)
    need_m("dualpipev", p, m, dualpipev_m_problem)
    built = [_dual_rank(p, r, m, r, 2 * p - 1 - r, 0, 0) for r in range(p)]
    rows, pairs = [b[0] for b in built], [b[1] for b in built]
    return make_schedule("dualpipev", p, 2, m, v_placement(p), rows, overlaps=pairs)


def dualpipe(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    need_v("dualpipe", v, "2", 2)
    need_p("dualpipe", p, dualpipe_p_problem)
    need_m("dualpipe", p, m, dualpipe_m_problem)
    n, half = p // 2, m // 2
    built = []
    for r in range(p):
        down, up = r, 2 * p - 1 - r
        if r < n:
            built.append(_dual_rank(n, r, half, down, up, 0, half))
        else:
            built.append(_dual_rank(n, p - 1 - r, half, up, down, half, 0))
    rows, pairs = [b[0] for b in built], [b[1] for b in built]
    placement = dual_placement(p)
    chains = (tuple(range(p)), tuple(range(p, 2 * p)))
    return make_schedule("dualpipe", p, 2, m, placement, rows, chains, overlaps=pairs)
