"""GPipe (Huang et al. 2019, arXiv 1811.06965): every forward of the step, then every backward.

Rank r holds stage r. It runs F of micro-batches 0..m−1, then B of 0..m−1 (torch's ScheduleGPipe order). Every
stage holds all m micro-batches' activations at the turn; the wall clock equals 1F1B's (Narayanan et al. 2021
§2.2: bubble (p−1)(t_f + t_b), or (p−1)/m of the ideal time).
"""

from __future__ import annotations

from pplan.schedules.actions import Action, Schedule, make_schedule
from pplan.schedules.rules import need_positive, need_v


def gpipe(p: int, m: int, v: int | None = None) -> Schedule:
    need_positive(p, m)
    need_v("gpipe", v, "1", 1)
    rows = [
        [Action(r, "F", mb) for mb in range(m)] + [Action(r, "B", mb) for mb in range(m)] for r in range(p)
    ]
    return make_schedule("gpipe", p, 1, m, tuple(range(p)), rows)
