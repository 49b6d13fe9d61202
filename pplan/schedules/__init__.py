"""Pipeline schedules as data: per-rank action lists for every schedule family pplan knows.

Owns the action notation (torch's `2F0`, `1I3`, `1W3`, `0B5`), the `Schedule` type, one generator module per
family (gpipe, one_f_one_b, interleaved, zero_bubble, zbv, dualpipe), the family registry (`ScheduleFamily`: names,
rules, closed forms, launchers; pplan.schedules.registry) and the torch CSV export.
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
from pplan.schedules.registry import (
    DEFAULT_SCHEDULES,
    FAMILIES,
    SCHEDULE_NAMES,
    ScheduleFamily,
    canonical_name,
    get_schedule,
    megatron_family,
    schedule_family,
    without_pipeline,
)
from pplan.schedules.torch_csv import to_torch_csv

__all__ = [
    "DEFAULT_SCHEDULES",
    "FAMILIES",
    "KINDS",
    "SCHEDULE_NAMES",
    "Action",
    "Kind",
    "Schedule",
    "ScheduleError",
    "ScheduleFamily",
    "canonical_name",
    "check",
    "get_schedule",
    "loop_placement",
    "make_schedule",
    "megatron_family",
    "parse",
    "schedule_family",
    "to_torch_csv",
    "v_placement",
    "without_pipeline",
]
