"""The versioned JSON shape of `pplan validate --json` ("pplan.validate/1"): for every bundled set of published
runs, predicted against published step time per run and the mean absolute error; with `--practice`, where each
published configuration ranks among `pplan recommend`'s candidates; and `validation_set_document`, how one set's
results fill it.

Compatibility: fields are only ever added within a major version; a rename or removal bumps the number.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from pplan.documents.base import SCHEMA_KEY, Out
from pplan.validation.practice import PracticeRow
from pplan.validation.published import ValidationSet

VALIDATE_SCHEMA = "pplan.validate/1"


class ValidationRunOut(Out):
    run: str
    """The run: model, parallelism, micro-batches, recomputation and GPUs."""
    published_step_s: PositiveFloat
    """Step time the source reports."""
    predicted_step_s: NonNegativeFloat
    """pplan's step time for the same configuration."""
    error: float
    """(predicted − published) / published."""


class PracticeOut(Out):
    published: str
    """The published configuration."""
    published_tokens_per_s: NonNegativeFloat | None
    """pplan's prediction for it (null when it does not fit under pplan's memory model)."""
    best: str
    """`pplan recommend`'s best configuration for the same model, GPUs and batch."""
    best_tokens_per_s: NonNegativeFloat
    gap: float | None
    """1 − published / best tokens per second (null when the published configuration does not fit)."""
    rank: PositiveInt | None
    """1-based rank of the published configuration among the simulated candidates (null: below them)."""
    passes: bool
    """In the top few or within the stated gap of the best."""


class ValidationSetOut(Out):
    set_: str = Field(alias="set")
    """The set's name."""
    source: str
    """The publication the runs come from."""
    hardware: str
    """The hardware profile the runs are predicted on."""
    matmul_efficiency: NonNegativeFloat
    """The GEMM efficiency used: the profile's, or fitted to this set with --fit."""
    fitted: bool
    """Whether matmul_efficiency was fitted to this set (--fit)."""
    assumed: dict[str, str | int | float | bool]
    """Settings the source does not state, with the value pplan assumed."""
    mape: NonNegativeFloat
    """Mean absolute error of the predicted step times, as a fraction."""
    rows: list[ValidationRunOut]
    practice: list[PracticeOut] | None = Field(None, exclude_if=lambda value: value is None)
    """With --practice only (the key is left out otherwise): each published configuration against recommend's
    best."""


class ValidateDocument(Out):
    schema_: str = Field(VALIDATE_SCHEMA, alias=SCHEMA_KEY)
    """The document's version."""
    sets: list[ValidationSetOut]
    """Every bundled set of published runs, in the bundled order."""


def validation_set_document(
    result: ValidationSet, matmul: float, fitted: bool, practice: Sequence[PracticeRow] | None = None
) -> ValidationSetOut:
    """One set of `pplan.validate/1`: `result` predicted with GEMM efficiency `matmul` (`fitted` to the set or
    the profile's), with the practice check when `practice` is given."""
    return ValidationSetOut(
        set_=result.name,
        source=result.source,
        hardware=result.hardware,
        matmul_efficiency=matmul,
        fitted=fitted,
        assumed=result.assumed,
        mape=result.mape,
        rows=[
            ValidationRunOut(
                run=r.label,
                published_step_s=r.published_step_s,
                predicted_step_s=r.predicted_step_s,
                error=r.error,
            )
            for r in result.rows
        ],
        practice=None
        if practice is None
        else [
            PracticeOut(
                published=r.published,
                published_tokens_per_s=r.published_tokens_per_s,
                best=r.best,
                best_tokens_per_s=r.best_tokens_per_s,
                gap=r.gap,
                rank=r.rank,
                passes=r.passes,
            )
            for r in practice
        ],
    )
