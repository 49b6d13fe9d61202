"""The versioned JSON shape of `pplan validate --json` ("pplan.validate/3"): for every bundled set of published
runs, predicted against published time per run, in sample and with the set left out of the fit, and the mean and
worst absolute errors; with `--practice`, where each
published configuration ranks among `pplan recommend`'s candidates; with `--memory`, pplan's memory model against
published per-GPU memory (`memory`); published strong-scaling statements against pplan's MFU with the straggler
allowance fitted to them (`scaling`); and `validation_set_document` / `memory_document` / `scaling_document`, how
results fill them.

Compatibility: fields are only ever added within a major version; a rename or removal bumps the number (3: per-layer
sets, so a row's times are `published_s` / `predicted_s`, and the leave-one-set-out figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from pplan.documents.base import SCHEMA_KEY, Out
from pplan.validation.memory import MemoryValidation
from pplan.validation.practice import PracticeRow
from pplan.validation.published import ScalingCheck, SetCheck
from pplan.validation.recent import AXES, RECENT_FITS, RecentRow, group

VALIDATE_SCHEMA = "pplan.validate/3"


class ValidationRunOut(Out):
    run: str
    """The run: model, parallelism, micro-batches, recomputation and GPUs (or, in a per-layer set, the experiment
    and the pass)."""
    published_s: PositiveFloat
    """The time the source reports: seconds per step, or per pass of one layer (the set's `quantity`)."""
    predicted_s: NonNegativeFloat
    """pplan's time for the same, in sample."""
    error: float
    """(predicted − published) / published, in sample."""
    left_out_error: float
    """The same with the GEMM efficiency fitted without this set (leave one set out)."""


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


class RecomputeGapOut(Out):
    model: str
    published: float
    """Published step(full recompute) / step(sequence parallelism + selective recompute) − 1."""
    predicted: float
    """pplan's, in sample."""


class ValidationSetOut(Out):
    set_: str = Field(alias="set")
    """The set's name."""
    source: str
    """The publication the runs come from."""
    hardware: str
    """The hardware profile the runs are predicted on."""
    quantity: str
    """What the rows compare: step time, or one layer's pass times."""
    matmul_efficiency: NonNegativeFloat
    """The efficiency the set calibrates (`efficiency_field`) in sample: the profile's, or (with --fit) fitted now
    to all this GPU type's sets of its precision."""
    fitted: bool
    """Whether matmul_efficiency was fitted now (--fit)."""
    assumed: dict[str, str | int | float | bool]
    """Settings the source does not state, with the value pplan assumed."""
    mape: NonNegativeFloat
    """In sample: mean absolute error of the predicted times, as a fraction."""
    worst: NonNegativeFloat
    """In sample: the largest absolute error."""
    left_out_matmul_efficiency: NonNegativeFloat | None
    """The same efficiency fitted to this GPU type's other sets of its precision (this one left out); null when no
    other set fits it, and the set is predicted with the profile's unfitted default (FP8 GEMMs at the BF16 GEMMs'
    fraction of their peak)."""
    left_out_mape: NonNegativeFloat
    """Leave one set out: mean absolute error with `left_out_matmul_efficiency`."""
    left_out_worst: NonNegativeFloat
    rows: list[ValidationRunOut]
    efficiency_field: str = "matmul"
    """Which efficiency the set calibrates: `matmul` (BF16 GEMMs) or `fp8_matmul` (FP8 GEMMs)."""
    recompute_gaps: list[RecomputeGapOut] | None = Field(None, exclude_if=lambda value: value is None)
    """Sets of (full, selective recompute) pairs only: the throughput gained by selective recompute, per model."""
    practice: list[PracticeOut] | None = Field(None, exclude_if=lambda value: value is None)
    """With --practice only (the key is left out otherwise): each published configuration against recommend's
    best."""


class MemoryBarOut(Out):
    label: str
    """The source's name for the model (22B, 175B, ...)."""
    run: str
    """The configuration: model, parallelism, micro-batch size and micro-batches."""
    quantity: str
    """What the bar measures: parameters + optimizer states, or activations ("act.") under a setting (SP: sequence
    parallelism, selective: selective recompute)."""
    published_gib: PositiveFloat
    """GiB per GPU as read off the figure."""
    predicted_gib: NonNegativeFloat
    """pplan's GiB per GPU of the first pipeline stage, with its default activation model."""
    error: float
    """(predicted − published) / published."""
    korthikanti_gib: NonNegativeFloat
    """The same with the `korthikanti` activation model (the source's Table 2 formula)."""
    korthikanti_error: float
    parts_gib: dict[str, NonNegativeFloat]
    """What predicted_gib sums."""
    reason: str | None
    """Why predicted and published differ, when |error| exceeds the note threshold (null otherwise)."""


class MemoryShareOut(Out):
    setting: str
    """The memory-saving technique (SP: sequence parallelism)."""
    run: str
    published_percent: NonNegativeFloat
    """Activations as a percentage of no recompute, as read off the figure."""
    predicted_percent: NonNegativeFloat
    """pplan's, with its default activation model."""
    error: float
    """(predicted − published) / published."""
    korthikanti_percent: NonNegativeFloat
    korthikanti_error: float
    reason: str | None


class MemoryValidationOut(Out):
    set_: str = Field(alias="set")
    """The set's name."""
    source: str
    """The publication the figures come from."""
    precision: str
    """How precisely the published values are known."""
    hardware: str
    """The hardware profile whose usable memory the plans are checked against."""
    stage: str
    """Which pipeline stage is compared, and why."""
    activation_model: str
    """The activation model the predictions, errors and means use (the other is shown beside)."""
    note_above: NonNegativeFloat
    """Rows with |error| above this fraction carry a reason."""
    assumed: dict[str, str | int | float | bool]
    """Settings the source does not state, with the value pplan assumed."""
    figure_1_source: str
    figure_1_mape: NonNegativeFloat
    """Mean absolute error of Figure 1's bars, as a fraction."""
    figure_1_korthikanti_mape: NonNegativeFloat
    figure_1: list[MemoryBarOut]
    figure_7_source: str
    figure_7_mape: NonNegativeFloat
    """Mean absolute error of Figure 7's bars, as a fraction."""
    figure_7_korthikanti_mape: NonNegativeFloat
    figure_7: list[MemoryShareOut]


class ScalingPointOut(Out):
    gpus: PositiveInt
    published_mfu: NonNegativeFloat
    predicted_mfu: NonNegativeFloat
    """pplan's MFU without a straggler allowance (non-causal attention FLOPs, as the source counts)."""
    fitted_mfu: NonNegativeFloat
    """With the fitted allowance (`jitter`)."""


class ScalingCheckOut(Out):
    name: str
    source: str
    hardware: str
    cut: str
    """The model, cut and global batch every point runs (the source's row it comes from)."""
    points: list[ScalingPointOut]
    published_ratio: PositiveFloat
    """MFU at the last GPU count over MFU at the first, as published."""
    predicted_ratio: PositiveFloat
    """The same ratio as pplan predicts it without a straggler allowance."""
    jitter: NonNegativeFloat
    """The straggler coefficient of variation (explain/recommend --jitter) that brings pplan's ratio nearest the
    published one, from 0 to 0.05: 0 when pplan's drop is already at least the published one."""


def scaling_document(check: ScalingCheck) -> ScalingCheckOut:
    """A strong-scaling check as its block of `pplan.validate/3` (the fields are the check's, by name)."""
    return ScalingCheckOut(
        name=check.name, source=check.source, hardware=check.hardware, cut=check.cut,
        points=[ScalingPointOut(**asdict(p)) for p in check.points],
        published_ratio=check.published_ratio, predicted_ratio=check.predicted_ratio, jitter=check.jitter,
    )  # fmt: skip


class RecentRunOut(Out):
    id: str
    """The run's id in the collection (its source set, release, system, model, precision and GPUs)."""
    set_: str = Field(alias="set")
    release: str
    """The software release that ran it, as its source names it."""
    stack: str
    """megatron-bridge, nemo, torchtitan or deepseek."""
    hardware: str
    """pplan's hardware profile, or the published hardware where pplan has none."""
    model: str
    moe: bool
    precision: str
    fp8_recipe: str
    """The FP8 scaling its source states: current, blockwise, mx, tensorwise, rowwise, unstated, or none (BF16)."""
    seq_len: PositiveInt
    uncertain: bool
    """Flagged uncertain by the collection (a field inferred, inconsistent or a reduced-layer proxy): not counted."""
    run: str
    """The plan pplan predicted: t, p, v, cp, ep, d, micro-batch and m (empty when refused)."""
    published_s: PositiveFloat | None
    """Seconds per step as published or derived from the published throughput (null: not comparable)."""
    predicted_s: NonNegativeFloat | None
    error: float | None
    """(predicted − published) / published; null when refused."""
    left_out_s: NonNegativeFloat | None
    """The step predicted with the profile figures fitted to this collection (`fitted`) refitted without the
    run's own set: out of sample (null when refused)."""
    left_out_error: float | None
    """(left_out_s − published) / published."""
    refused: str | None
    """What pplan is missing to express the run, in one line (null: predicted)."""
    assumed: list[str]
    """What pplan assumed where the source is silent."""
    fits: bool
    """Whether the plan fits in pplan's memory model."""


class RecentGroupOut(Out):
    axis: str
    """set, sequence, precision, routing, hardware, stack or release."""
    name: str
    rows: int
    counted: int
    """Rows predicted and not flagged uncertain: the ones the figures are over."""
    refused: int
    mape: NonNegativeFloat | None
    """Mean absolute error over the counted rows (null: none counted)."""
    mean_error: float | None
    """Signed mean error (positive: pplan predicts slower steps than published)."""
    worst: NonNegativeFloat | None
    within_15: int
    """Counted rows within 15 %."""
    left_out_mape: NonNegativeFloat | None
    """The same four figures with every set's rows predicted from fits made without that set."""
    left_out_mean_error: float | None
    left_out_worst: NonNegativeFloat | None
    left_out_within_15: int


class RecentOut(Out):
    source: str
    """What the runs are and where they come from (each set's source is in `groups` of axis `set` by name)."""
    sources: dict[str, str]
    """Each set's source, by the set's name."""
    rows: int
    counted: int
    mape: NonNegativeFloat | None
    """Mean absolute error over every counted row."""
    within_15: int
    left_out_mape: NonNegativeFloat | None
    """The same, every set predicted from fits made without it (leave one set out)."""
    left_out_within_15: int
    fitted: list[str]
    """The profile figures fitted to this collection's dense runs ("hardware field"), in fit order; every other
    figure is out of sample."""
    groups: list[RecentGroupOut]
    """The counted rows' figures per group on each axis, axes in a fixed order."""
    runs: list[RecentRunOut]


class ValidateDocument(Out):
    schema_: str = Field(VALIDATE_SCHEMA, alias=SCHEMA_KEY)
    """The document's version."""
    sets: list[ValidationSetOut]
    """Every bundled set of published runs, in the bundled order."""
    scaling: list[ScalingCheckOut]
    """Every bundled strong-scaling statement, with the straggler allowance fitted to it."""
    memory: MemoryValidationOut | None = Field(None, exclude_if=lambda value: value is None)
    """With --memory only (the key is left out otherwise): pplan's memory model against published per-GPU
    memory."""
    recent: RecentOut | None = Field(None, exclude_if=lambda value: value is None)
    """With --recent only (the key is left out otherwise): the bundled 2024–2026 published runs at their published
    cuts, predicted with the profiles as they stand and leaving each set out of the fits made to this collection."""


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
