"""One simulated step as the fields of the `pplan.schedule/1` document (`pplan schedule --json`; the measured and
predicted steps of `pplan.bench/1` extend it), by key: plain data, so the schedules know nothing of the document
models (`pplan.documents.schedule` validates them)."""

from __future__ import annotations

from typing import Any

from pplan.schedules.bubble import in_window_fraction_of_ideal
from pplan.schedules.timeline import Timeline


def schedule_fields(timeline: Timeline) -> dict[str, Any]:
    """The `pplan.schedule/1` fields of `timeline`, by key (validate them into `ScheduleDocument`, or into a
    document that extends it)."""
    sched = timeline.schedule
    return {
        "schedule": sched.name,
        "pp": sched.p,
        "vp": sched.v,
        "microbatches": sched.m,
        "makespan": timeline.makespan,
        "bubble_fraction_of_step": timeline.bubble_fraction_of_step,
        "bubble_fraction_of_ideal": timeline.bubble_fraction_of_ideal,
        "bubble_in_window_fraction_of_ideal": in_window_fraction_of_ideal(timeline),
        "busy_per_rank": list(timeline.busy_per_rank),
        "peak_in_flight_microbatches": list(timeline.peak_in_flight_per_rank),
        "peak_in_flight_per_stage": list(timeline.peak_in_flight_per_stage),
        "p2p_messages_per_step": timeline.p2p_messages,
        "actions": [
            [
                {
                    "action": str(a),
                    "stage": a.stage,
                    "kind": a.kind,
                    "microbatch": a.microbatch,
                    "start": t0,
                    "end": t1,
                }
                for a, t0, t1 in timeline.intervals(rank)
            ]
            for rank in range(sched.p)
        ],
    }
