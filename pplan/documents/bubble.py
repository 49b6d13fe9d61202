"""`pplan bubble --format json`: the `pplan.bubble/1` document, the bubble against the number of micro-batches
for each schedule the chart draws, at p ranks (filled by `pplan.cli.schedule` from
`pplan.schedules.bubble.bubble_curves`).

Each schedule is simulated on uniform stages with equal forward, input-gradient and weight-gradient passes; a
fraction is idle time over the busiest rank's compute (the ideal time), as the table prints it in percent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveInt

from pplan.documents.base import SCHEMA_KEY, Out

BUBBLE_SCHEMA = "pplan.bubble/1"


class BubbleCurveOut(Out):
    label: str
    """The schedule as the table's row names it (e.g. `interleaved v=2`)."""
    schedule: str
    """The schedule's name, as `pplan schedule NAME` takes it."""
    v: PositiveInt
    """Model chunks per rank (1 where the schedule does not interleave)."""
    microbatches: list[PositiveInt]
    """The m values simulated, ascending: those of the query the schedule's rules allow (interleaving needs m to
    be a multiple of its rounds)."""
    bubble_fraction_of_ideal: list[NonNegativeFloat]
    """The bubble at each m of `microbatches` (same order): idle time over the busiest rank's compute."""


class BubbleDocument(Out):
    schema_: str = Field(BUBBLE_SCHEMA, alias=SCHEMA_KEY)
    """The document's version."""
    pp: PositiveInt
    """Pipeline ranks p."""
    measure: Literal["span", "step"]
    """Which idle time is charged: span, the idle time inside each rank's own first-to-last-pass window (Qi et
    al.); step, the whole synchronous step (makespan less the busiest rank's compute)."""
    microbatches: list[PositiveInt]
    """The m values asked for, ascending."""
    curves: list[BubbleCurveOut]
    """One per schedule, in the table's row order."""
