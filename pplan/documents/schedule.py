"""The versioned JSON shape of `pplan schedule --json` ("pplan.schedule/1"): one simulated step of one schedule,
its summary figures and every action's start and end. The shape only: `pplan.schedules.document_fields` gives a
`Timeline`'s fields by key.

The same block, with the bench's own keys after it, is the measured and the predicted step of `pplan.bench/1`.
Times are in the unit the durations were given in (ms in the bench). Compatibility: fields are only ever added
within a major version; a rename or removal bumps the number.
"""

from __future__ import annotations

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from pplan.documents.base import SCHEMA_KEY, Out
from pplan.schedules.actions import Kind

SCHEDULE_SCHEMA = "pplan.schedule/1"


class TimedAction(Out):
    action: str
    """torch's notation: stage, kind, micro-batch (e.g. `2F0`, `1I3`)."""
    stage: NonNegativeInt
    """Virtual stage (model chunk) the pass runs."""
    kind: Kind
    """F forward, B full backward, I input-gradient backward, W weight-gradient backward."""
    microbatch: NonNegativeInt
    """The micro-batch (0-based)."""
    start: NonNegativeFloat
    """When the pass starts, in the document's time unit."""
    end: NonNegativeFloat
    """When the pass ends, in the document's time unit."""


class ScheduleDocument(Out):
    schema_: str = Field(SCHEDULE_SCHEMA, alias=SCHEMA_KEY)
    """The document's version."""
    schedule: str
    """The schedule's canonical name."""
    pp: PositiveInt
    """Pipeline ranks p."""
    vp: PositiveInt
    """Stages (model chunks) per rank v."""
    microbatches: PositiveInt
    """Micro-batches m per step."""
    makespan: NonNegativeFloat
    """Time from the first pass's start to the last pass's end."""
    bubble_fraction_of_step: float
    """Idle / total step: (makespan − busiest rank's compute) / makespan."""
    bubble_fraction_of_ideal: float
    """Idle / ideal compute: (makespan − busiest rank's compute) / busiest rank's compute."""
    bubble_in_window_fraction_of_ideal: float
    """Qi et al.'s measure: the most idle time inside any rank's own first-to-last-action window, over the busiest
    rank's compute."""
    busy_per_rank: list[NonNegativeFloat]
    """Compute time per rank."""
    peak_in_flight_microbatches: list[NonNegativeInt]
    """Per rank: most stage-micro-batches (summed over the rank's stages) held at once."""
    peak_in_flight_per_stage: list[NonNegativeInt]
    """Per virtual stage: most micro-batches held at once (from the start of F to the end of B or W)."""
    p2p_messages_per_step: NonNegativeInt
    """Activations and gradients sent between ranks per step."""
    actions: list[list[TimedAction]]
    """Per rank, its passes in the order it runs them (which is time order)."""
