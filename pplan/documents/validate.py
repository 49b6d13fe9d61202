"""The versioned JSON shape of `pplan validate --json` ("pplan.validate/3"): for every bundled set of published
runs, predicted against published time per run, in sample and with the set left out of the fit, and the mean and
worst absolute errors; with `--practice`, where each
published configuration ranks among `pplan recommend`'s candidates; with `--memory`, pplan's memory model against
published per-GPU memory (`memory`); published strong-scaling statements against pplan's MFU with the straggler
allowance fitted to them (`scaling`). The shapes only: `pplan.validation.document` fills them.

Compatibility: fields are only ever added within a major version; a rename or removal bumps the number (3: per-layer
sets, so a row's times are `published_s` / `predicted_s`, and the leave-one-set-out figures).
"""

from __future__ import annotations

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from pplan.documents.base import SCHEMA_KEY, Out

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
    """Predicted tokens per second of `best`."""
    gap: float | None
    """1 − published / best tokens per second (null when the published configuration does not fit)."""
    rank: PositiveInt | None
    """1-based rank of the published configuration among the simulated candidates (null: below them)."""
    passes: bool
    """In the top few or within the stated gap of the best."""


class RecomputeGapOut(Out):
    model: str
    """The model the published pair of runs trains."""
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
    """Leave one set out: the largest absolute error."""
    rows: list[ValidationRunOut]
    """Every run of the set, published against predicted."""
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
    """(korthikanti_gib − published) / published."""
    parts_gib: dict[str, NonNegativeFloat]
    """What predicted_gib sums."""
    reason: str | None
    """Why predicted and published differ, when |error| exceeds the note threshold (null otherwise)."""


class MemoryShareOut(Out):
    setting: str
    """The memory-saving technique (SP: sequence parallelism)."""
    run: str
    """The configuration: model, parallelism and micro-batch."""
    published_percent: NonNegativeFloat
    """Activations as a percentage of no recompute, as read off the figure."""
    predicted_percent: NonNegativeFloat
    """pplan's, with its default activation model."""
    error: float
    """(predicted − published) / published."""
    korthikanti_percent: NonNegativeFloat
    """The same with the `korthikanti` activation model."""
    korthikanti_error: float
    """(korthikanti_percent − published) / published."""
    reason: str | None
    """Why predicted and published differ, when |error| exceeds the note threshold (null otherwise)."""


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
    """Where Figure 1's bars come from (paper, figure, how read)."""
    figure_1_mape: NonNegativeFloat
    """Mean absolute error of Figure 1's bars, as a fraction."""
    figure_1_korthikanti_mape: NonNegativeFloat
    """The same with the `korthikanti` activation model."""
    figure_1: list[MemoryBarOut]
    """Figure 1: per-GPU memory per model and technique, published against predicted."""
    figure_7_source: str
    """Where Figure 7's bars come from (paper, figure, how read)."""
    figure_7_mape: NonNegativeFloat
    """Mean absolute error of Figure 7's bars, as a fraction."""
    figure_7_korthikanti_mape: NonNegativeFloat
    """The same with the `korthikanti` activation model."""
    figure_7: list[MemoryShareOut]
    """Figure 7: activation memory as a share of no recompute, per technique, published against predicted."""


class ScalingPointOut(Out):
    gpus: PositiveInt
    """GPUs in all at this point."""
    published_mfu: NonNegativeFloat
    """The MFU the source publishes at this count."""
    predicted_mfu: NonNegativeFloat
    """pplan's MFU without a straggler allowance (non-causal attention FLOPs, as the source counts)."""
    fitted_mfu: NonNegativeFloat
    """With the fitted allowance (`jitter`)."""


class ScalingCheckOut(Out):
    name: str
    """The statement checked, by name."""
    source: str
    """The publication the statement comes from."""
    hardware: str
    """The hardware profile the points are predicted on."""
    cut: str
    """The model, cut and global batch every point runs (the source's row it comes from)."""
    points: list[ScalingPointOut]
    """Each GPU count, published against predicted MFU."""
    published_ratio: PositiveFloat
    """MFU at the last GPU count over MFU at the first, as published."""
    predicted_ratio: PositiveFloat
    """The same ratio as pplan predicts it without a straggler allowance."""
    jitter: NonNegativeFloat
    """The straggler coefficient of variation (explain/recommend --jitter) that brings pplan's ratio nearest the
    published one, from 0 to 0.05: 0 when pplan's drop is already at least the published one."""


class RecentRunOut(Out):
    id: str
    """The run's id in the collection (its source set, release, system, model, precision and GPUs)."""
    set_: str = Field(alias="set")
    """The set (source collection) the run belongs to."""
    release: str
    """The software release that ran it, as its source names it."""
    stack: str
    """megatron-bridge, nemo, torchtitan or deepseek."""
    hardware: str
    """pplan's hardware profile, or the published hardware where pplan has none."""
    model: str
    """The model trained, as the source names it."""
    moe: bool
    """Whether the model routes tokens to experts (mixture of experts)."""
    precision: str
    """The GEMM precision: bf16, fp8 or mxfp8."""
    fp8_recipe: str
    """The FP8 scaling its source states: current, blockwise, mx, tensorwise, rowwise, unstated, or none (BF16)."""
    seq_len: PositiveInt
    """Tokens per sequence."""
    uncertain: bool
    """Flagged uncertain by the collection (a field inferred, inconsistent or a reduced-layer proxy): not counted."""
    run: str
    """The plan pplan predicted: t, p, v, cp, ep, d, micro-batch and m (empty when refused)."""
    published_s: PositiveFloat | None
    """Seconds per step as published or derived from the published throughput (null: not comparable)."""
    predicted_s: NonNegativeFloat | None
    """pplan's step time for the run, in sample (null when refused)."""
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
    """The group's value on its axis (e.g. a set's name, `fp8`, `h100-sxm-80gb`)."""
    rows: int
    """Runs in the group."""
    counted: int
    """Rows predicted and not flagged uncertain: the ones the figures are over."""
    refused: int
    """Runs pplan cannot express (`refused`)."""
    mape: NonNegativeFloat | None
    """Mean absolute error over the counted rows (null: none counted)."""
    mean_error: float | None
    """Signed mean error (positive: pplan predicts slower steps than published)."""
    worst: NonNegativeFloat | None
    """The largest absolute error over the counted rows."""
    within_15: int
    """Counted rows within 15 %."""
    left_out_mape: NonNegativeFloat | None
    """The same four figures with every set's rows predicted from fits made without that set."""
    left_out_mean_error: float | None
    """Leave one set out: the signed mean error."""
    left_out_worst: NonNegativeFloat | None
    """Leave one set out: the largest absolute error."""
    left_out_within_15: int
    """Leave one set out: counted rows within 15 %."""


class RecentOut(Out):
    source: str
    """What the runs are and where they come from (each set's source is in `groups` of axis `set` by name)."""
    sources: dict[str, str]
    """Each set's source, by the set's name."""
    rows: int
    """Runs in the collection."""
    counted: int
    """Rows predicted and not flagged uncertain: the ones the figures are over."""
    mape: NonNegativeFloat | None
    """Mean absolute error over every counted row."""
    within_15: int
    """Counted rows within 15 %."""
    left_out_mape: NonNegativeFloat | None
    """The same, every set predicted from fits made without it (leave one set out)."""
    left_out_within_15: int
    """Leave one set out: counted rows within 15 %."""
    fitted: list[str]
    """The profile figures fitted to this collection's dense runs ("hardware field"), in fit order; every other
    figure is out of sample."""
    groups: list[RecentGroupOut]
    """The counted rows' figures per group on each axis, axes in a fixed order."""
    runs: list[RecentRunOut]
    """Every run, published against predicted."""


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
