"""Pass durations for `pplan schedule --durations FILE` (`StageDurationsSpec`), validated like a profile: each of
F, B, W one number or one per stage, every number finite and in range, not all zero."""

from __future__ import annotations

from typing import Annotated

from pydantic import Discriminator, Field, Tag, model_validator

from pplan.profiles.fields import FrozenSpec, SpecRuleError

MAX_DURATION = 1e12
"""Largest duration a durations file takes, in its own unit."""
MAX_STAGES = 10**5
"""Most per-stage values a durations list takes."""
Duration = Annotated[float, Field(ge=0, le=MAX_DURATION, allow_inf_nan=False)]


def _number_or_list(value: object) -> str:
    return "list" if isinstance(value, list) else "number"


DurationOrList = Annotated[
    Annotated[Duration, Tag("number")] | Annotated[list[Duration], Field(max_length=MAX_STAGES), Tag("list")],
    Discriminator(_number_or_list),
]


class StageDurationsSpec(FrozenSpec):
    """Pass durations for `pplan schedule --durations FILE`, in any one consistent unit.

    Each of f, b, w is one number for every stage or a list with one per (virtual) stage (at most 10^5); every
    number is finite, 0 to 10^12, and not all of f, b, w are zero.
    """

    f: DurationOrList = 1.0
    """Forward."""
    b: DurationOrList = 1.0
    """Input-gradient backward (Qi et al.'s B; torch's I)."""
    w: DurationOrList = 1.0
    """Weight-gradient backward."""
    comm: Duration = 0.0
    """Latency of one hop between ranks."""

    @model_validator(mode="after")
    def _check_some_work(self) -> StageDurationsSpec:
        values = [x for v in (self.f, self.b, self.w) for x in (v if isinstance(v, list) else [v])]
        if values and not any(values):
            raise SpecRuleError(
                "f", "every duration of f, b and w is zero", "give some pass a positive duration"
            )
        return self
