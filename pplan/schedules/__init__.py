"""Pipeline schedules as data: per-rank action lists for every schedule family pplan knows.

Owns the action notation (torch's `2F0`, `1I3`, `1W3`, `0B5`), the `Schedule` type, one generator module per
family (gpipe, one_f_one_b, interleaved, zero_bubble, zbv, dualpipe), the name registry and the torch CSV export.
Timing lives in `pplan.timeline`; drawing in `pplan.render.schedule`. Pure: no I/O, no rich, no torch.
"""

from pplan.schedules.actions import (
    KINDS,
    Action,
    Kind,
    Schedule,
    ScheduleError,
    check,
    loop_placement,
    make_schedule,
    parse,
    v_placement,
)
from pplan.schedules.registry import SCHEDULE_NAMES, canonical_name, get_schedule
from pplan.schedules.torch_csv import to_torch_csv

__all__ = [
    "KINDS",
    "SCHEDULE_NAMES",
    "Action",
    "Kind",
    "Schedule",
    "ScheduleError",
    "canonical_name",
    "check",
    "get_schedule",
    "loop_placement",
    "make_schedule",
    "parse",
    "to_torch_csv",
    "v_placement",
]
