"""How pplan's validation results fill `pplan validate --json` ("pplan.validate/3", the shapes in
`pplan.documents.validate`): one set of published runs in and out of sample with its practice check
(`validation_set_document`), a strong-scaling statement (`scaling_document`), the published per-GPU memory
(`memory_document`) and the 2024–26 runs (`recent_document`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pplan.documents.base import Out
from pplan.documents.validate import (
    MemoryBarOut,
    MemoryShareOut,
    MemoryValidationOut,
    PracticeOut,
    RecentGroupOut,
    RecentOut,
    RecentRunOut,
    RecomputeGapOut,
    ScalingCheckOut,
    ScalingPointOut,
    ValidationRunOut,
    ValidationSetOut,
)
from pplan.validation.memory import MemoryValidation
from pplan.validation.practice import PracticeRow
from pplan.validation.published import ScalingCheck, SetCheck
from pplan.validation.recent import AXES, RECENT_FITS, RecentRow, group


def scaling_document(check: ScalingCheck) -> ScalingCheckOut:
    """A strong-scaling check as its block of `pplan.validate/3` (the fields are the check's, by name)."""
    return ScalingCheckOut(
        name=check.name, source=check.source, hardware=check.hardware, cut=check.cut,
        points=[ScalingPointOut(**asdict(p)) for p in check.points],
        published_ratio=check.published_ratio, predicted_ratio=check.predicted_ratio, jitter=check.jitter,
    )  # fmt: skip


def validation_set_document(
    check: SetCheck, fitted: bool, practice: Sequence[PracticeRow] | None = None
) -> ValidationSetOut:
    """One set of `pplan.validate/3`: `check` in and out of sample (`fitted`: its in-sample efficiency was fitted
    now rather than read from the profile), with the practice check when `practice` is given."""
    result, left = check.in_sample, check.left_out
    return ValidationSetOut(
        set_=result.name,
        source=result.source,
        hardware=result.hardware,
        quantity=result.quantity,
        matmul_efficiency=check.matmul,
        fitted=fitted,
        assumed=result.assumed,
        mape=result.mape,
        worst=result.worst,
        left_out_matmul_efficiency=check.left_out_matmul,
        efficiency_field=check.field,
        left_out_mape=left.mape,
        left_out_worst=left.worst,
        rows=[
            ValidationRunOut(
                run=r.label,
                published_s=r.published_s,
                predicted_s=r.predicted_s,
                error=r.error,
                left_out_error=o.error,
            )
            for r, o in zip(result.rows, left.rows, strict=True)
        ],
        recompute_gaps=[
            RecomputeGapOut(model=g.model, published=g.published, predicted=g.predicted)
            for g in result.recompute_gaps
        ]
        or None,
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


def memory_document(result: MemoryValidation) -> MemoryValidationOut:
    """The `memory` block of `pplan.validate/3`, from `pplan.validation.memory.validate_memory`'s result: every
    field of each document model read off the result's attribute of the same name (`set` is its `name`)."""
    bars = [MemoryBarOut(**_fields(MemoryBarOut, r, parts_gib=dict(r.parts_gib))) for r in result.figure_1]
    shares = [MemoryShareOut(**_fields(MemoryShareOut, r)) for r in result.figure_7]
    return MemoryValidationOut(
        **_fields(MemoryValidationOut, result, set_=result.name, figure_1=bars, figure_7=shares)
    )


def _fields(model: type[Out], source: object, **given: object) -> dict[str, Any]:
    """`model`'s fields (by name, not alias) from `source`'s attributes of the same name, except those `given`."""
    return {name: given[name] if name in given else getattr(source, name) for name in model.model_fields}


def recent_document(collection: dict[str, Any], rows: Sequence[RecentRow]) -> RecentOut:
    """The recent runs' block of `pplan.validate/3` (`rows`: `leave_one_set_out`'s)."""
    counted = [r for r in rows if r.counted]
    errors = [abs(r.error) for r in counted if r.error is not None]
    left_out = [abs(r.left_out_error) for r in counted if r.left_out_error is not None]
    return RecentOut(
        source=collection["about"],
        sources={s["name"]: s["source"] for s in collection["sets"]},
        rows=len(rows),
        counted=len(errors),
        mape=sum(errors) / len(errors) if errors else None,
        within_15=sum(e <= 0.15 for e in errors),
        left_out_mape=sum(left_out) / len(left_out) if left_out else None,
        left_out_within_15=sum(e <= 0.15 for e in left_out),
        fitted=[f"{hw} {name}" for hw, name in RECENT_FITS],
        groups=[RecentGroupOut(**asdict(g)) for axis in AXES for g in group(rows, axis)],
        runs=[
            RecentRunOut(
                id=r.id, set_=r.set_name, release=r.release, stack=r.stack, hardware=r.hardware, model=r.model,
                moe=r.moe, precision=r.precision, fp8_recipe=r.fp8_recipe, seq_len=r.seq_len,
                uncertain=r.uncertain, run=r.label, published_s=r.published_s, predicted_s=r.predicted_s,
                error=r.error, left_out_s=r.left_out_s, left_out_error=r.left_out_error, refused=r.refused,
                assumed=list(r.assumed), fits=r.fits,
            )
            for r in rows
        ],
    )  # fmt: skip
