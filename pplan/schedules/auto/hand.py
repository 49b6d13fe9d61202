"""The hand-made schedules auto compares with (step 3 of pplan.schedules.auto's algorithm): ZB-H1, ZB-H2 and
1F1B from their generators (`hand_schedule`), their lists timed as the simulator does (`_replay`), and the
safeguards: the hand-made lists that fit the memory limit, played beside the search's best (`safeguards`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from pplan.errors import ConfigError
from pplan.schedules.actions import Schedule
from pplan.schedules.auto.greedy import Candidate, Policy, make_candidate, play
from pplan.schedules.auto.inputs import CODE_F, CODE_I, CODE_W, INF, KIND, Problem, fits, peak_per_stage
from pplan.schedules.auto.policies import zb_h1_policy
from pplan.schedules.families.one_f_one_b import one_f_one_b
from pplan.schedules.families.zero_bubble import zb_h1, zb_h2

_GENERATORS = {"zb-h1": zb_h1, "zb-h2": zb_h2, "1f1b": one_f_one_b}


def hand_schedule(name: str, p: int, m: int) -> Schedule:
    """The hand-made schedule `name` ("zb-h1", "zb-h2" or "1f1b") from its pplan generator, or a ConfigError."""
    generator = _GENERATORS.get(name.lower())
    if generator is None:
        raise ConfigError(
            "name", f"{name!r} is not a hand-made schedule auto compares with", "use zb-h1, zb-h2 or 1f1b"
        )
    return generator(p, m, None)


def _hand_rows(name: str, p: int, m: int) -> tuple[tuple[int, ...], ...]:
    """The schedule's lists as codes 3·mb + kind, a full backward B written as I then W at its place."""
    rows = []
    for row in hand_schedule(name, p, m).actions:
        out: list[int] = []
        for a in row:
            base = 3 * a.microbatch
            if a.kind == "B":
                out += (base + CODE_I, base + CODE_W)
            else:
                out.append(base + KIND.index(a.kind))
        rows.append(tuple(out))
    return tuple(rows)


def _replay(prob: Problem, rows: Sequence[Sequence[int]], label: str) -> Candidate | None:
    """Time given lists, each pass at the earliest its position allows (the simulator's model, specialised to
    one stage per rank): rounds advance every rank until its next pass waits on one not yet timed. None when the
    lists deadlock."""
    p, m, lat_f, lat_i = prob.p, prob.m, prob.lat_f_in, prob.lat_i_in
    times = (prob.f, prob.i, prob.w)
    fend = [[INF] * m for _ in range(p)]
    iend = [[INF] * m for _ in range(p)]
    pos = [0] * p
    free, first = [0.0] * p, [0.0] * p
    progress = True
    while progress:
        progress = False
        for r in range(p):
            row, k, t = rows[r], pos[r], free[r]
            while k < len(row):
                mb, kind = divmod(row[k], 3)
                if kind == CODE_F:
                    ready = fend[r - 1][mb] + lat_f[r] if r > 0 else 0.0
                elif kind == CODE_I:
                    ready = iend[r + 1][mb] + lat_i[r] if r < p - 1 else fend[r][mb]
                else:
                    ready = iend[r][mb]
                if ready == INF:
                    break
                start = max(t, ready)
                if k == 0:
                    first[r] = start
                t = start + times[kind][r]
                if kind == CODE_F:
                    fend[r][mb] = t
                elif kind == CODE_I:
                    iend[r][mb] = t
                k += 1
            if k != pos[r]:
                pos[r], free[r] = k, t
                progress = True
    if any(pos[r] != len(rows[r]) for r in range(p)):
        return None
    return make_candidate(prob, rows, first, free, label)


def _published_peak(name: str, p: int, m: int) -> tuple[int, ...]:
    """Per stage, the peak in flight Qi et al. 2024 (Table 2) give for the hand-made schedule, capped by m: ZB-H1
    p, ZB-H2 2p − 1, the same on every stage (the tests check it against the lists). Lets `safeguards` skip
    generating lists that cannot fit."""
    return (min(p if name == "zb-h1" else 2 * p - 1, m),) * p


def safeguards(prob: Problem, played: set[Policy]) -> Iterator[Candidate]:
    """The hand-made schedules whose lists fit min(K_s, m) micro-batches in flight on each stage s: ZB-H1
    through its policy (unless the search played it), ZB-H2's lists replayed."""
    if fits(_published_peak("zb-h1", prob.p, prob.m), prob):
        pol = zb_h1_policy(prob)
        if pol not in played:
            yield replace(play(prob, pol), label="zb-h1's own lists (its policy)")
    if fits(_published_peak("zb-h2", prob.p, prob.m), prob):
        rows = _hand_rows("zb-h2", prob.p, prob.m)
        cand = _replay(prob, rows, "zb-h2's own lists") if fits(peak_per_stage(rows), prob) else None
        if cand is not None:
            yield cand
