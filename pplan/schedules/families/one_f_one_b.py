"""1F1B, also called PipeDream-Flush (Narayanan et al. 2021, arXiv 2104.04473, §2.2; Megatron-LM's default).

Rank r holds stage r. It warms up with w_r = min(p − r − 1, m) forwards, then alternates one forward and one
full backward (F, B) until the forwards run out, then drains the remaining backwards. Stage r therefore holds at
most min(p − r, m) micro-batches in flight, against GPipe's m, for the same wall clock.

torch's Schedule1F1B runs min(m, p − r) forwards before its first backward: the same list, since our warm-up
plus the first steady-state F is that many forwards. torch requires m ≥ p; Megatron does not, and neither do we.
"""

from __future__ import annotations

from pplan.schedules.actions import Action, Schedule, make_schedule
from pplan.schedules.rules import need_positive, need_v


def one_f_one_b_rank(stage: int, warmup: int, m: int) -> list[Action]:
    """One rank's 1F1B list for `stage`: `warmup` forwards, then (F, B) pairs, then the remaining B."""
    warmup = min(warmup, m)
    row = [Action(stage, "F", mb) for mb in range(warmup)]
    for k in range(m - warmup):
        row += [Action(stage, "F", warmup + k), Action(stage, "B", k)]
    row += [Action(stage, "B", mb) for mb in range(m - warmup, m)]
    return row


def one_f_one_b(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    need_v("1f1b", v, "1", 1)
    rows = [one_f_one_b_rank(r, p - r - 1, m) for r in range(p)]
    return make_schedule("1f1b", p, 1, m, tuple(range(p)), rows)
