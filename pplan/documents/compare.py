"""`pplan compare --format json`: the `pplan.compare/1` document, two explain reports term by term (filled by
`pplan.cli.compare` from `pplan.compare`).

Times in seconds, memory in GB (10⁹ bytes) of each plan's most loaded stage, MFU and bubble in percent.
"""

from __future__ import annotations

from pydantic import Field

from pplan.documents.base import SCHEMA_KEY, Out

COMPARE_SCHEMA = "pplan.compare/1"


class CompareTermOut(Out):
    group: str
    """step (a part of the step time, then the step time), throughput, or memory."""
    name: str
    """The term, as explain names it (e.g. compute, tp comm, tokens/s, total GB)."""
    unit: str
    """s, tokens/s, %, or GB."""
    a: float
    """Plan A's value."""
    b: float
    """Plan B's value."""
    delta: float
    """B − A."""
    ratio: float | None
    """B / A (null where A is 0)."""
    moved_by: list[str]
    """The settings that differ between the plans and drive this term (empty where it does not differ)."""


class SettingChangeOut(Out):
    setting: str
    """As the explain report's plan block names it (model and hardware: their names)."""
    a: str
    """Its value in plan A."""
    b: str
    """Its value in plan B."""


class TieOut(Out):
    tied: bool
    """B's step time lies within A's interval: at pplan's accuracy neither plan is the faster."""
    a_interval_s: tuple[float, float]
    """A's step-time interval (`performance.step_interval_s`)."""
    b_step_s: float
    """B's predicted step time, seconds."""


class CompareDocument(Out):
    schema_: str = Field(COMPARE_SCHEMA, alias=SCHEMA_KEY)
    """The document's version."""
    a: str
    """Plan A's cut in one line."""
    b: str
    """Plan B's cut in one line."""
    changed: list[SettingChangeOut]
    """The settings whose values differ."""
    terms: list[CompareTermOut]
    """Every step-time part, the throughput and the most loaded stage's memory, A against B."""
    tie: TieOut | None
    """Null when a report has no step time (durations other than analytic)."""
