"""Pipeline schedules as data: per-rank action lists for every schedule family pplan knows.

Owns the action notation (torch's `2F0`, `1I3`, `1W3`, `0B5`) and the `Schedule` type (`actions`), one generator
module per family (`families/`: gpipe, one_f_one_b, interleaved, zero_bubble, zbv, dualpipe), the family registry
(`registry`: names, rules, closed forms, launchers), the rules on p, v and m (`rules`), the published closed-form
bubbles (`closed_forms`), the caps on a pipeline's size (`limits`), the simulator (`timeline`: when each action
runs), its summary at any m at a cost independent of m (`periodic/`), proven makespan lower bounds (`bounds`),
bubble-against-m curves (`bubble`), the torch CSV export (`torch_csv`) and a simulated step as the
`pplan.schedule/1` document's fields (`document_fields`).
Drawing lives in `pplan.render.schedule`. Pure: no I/O, no rich, no torch.
"""

from pplan.schedules.actions import (
    ACTION_KINDS,
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
    "ACTION_KINDS",
    "DEFAULT_SCHEDULES",
    "FAMILIES",
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
