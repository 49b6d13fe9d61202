"""The validated runs' confidence data as pplan ships it (pplan/validation/confidence_bands.json, derived by
pplan.validation.bands and read by `pplan.profiles.catalog.load_confidence`), its shape validated, and the
conventions every band follows: which percentiles, the least runs a group needs, the axes, the sequence bands.

pplan.cost.uncertainty is the one reader that turns these into an interval, an envelope and words.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

PERCENTILES = (0.1, 0.9)
"""Every band is the 10th and 90th percentile of its runs' errors, (predicted − published) / published."""
MIN_RUNS = 5
"""A group of fewer runs says nothing of its own: a plan in it is judged by the broader group it falls in, and an
axis with fewer runs on the plan's hardware is outside the calibrated envelope."""
AXIS_NAMES = ("hardware", "stack", "release", "sequence", "precision")
"""The axes a run is grouped on besides its routing (dense or MoE)."""
ROUTINGS = ("dense", "MoE")


def seq_band(seq_len: int) -> str:
    """The sequence band a run or plan falls in."""
    if seq_len <= 4096:
        return "≤ 4k"
    if seq_len <= 8192:
        return "8k"
    if seq_len <= 32768:
        return "16k–32k"
    return "64k–1M"


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    k = q * (len(ordered) - 1)
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class Figures(_Shape):
    low: float
    """10th percentile of the errors."""
    high: float
    """90th percentile."""
    mape: float = Field(ge=0)
    """Mean absolute error."""


class BandRecord(_Shape):
    """One group's figures (`pplan.validation.bands.band_table`)."""

    routing: str
    axis: str
    """One of `AXIS_NAMES`, or "all": every run of the routing."""
    value: str
    runs: int = Field(gt=0)
    in_sample: Figures
    left_out: Figures
    """Each run predicted with its own set left out of every fit: what intervals use."""


class EnvelopeRecord(_Shape):
    """The range of the counted runs' cuts on one hardware (`pplan.validation.bands.envelope`)."""

    fingerprint: str
    """`calibration_fingerprint` of the profile the runs were predicted with."""
    runs: int = Field(gt=0)
    tp_max: int
    pp_max: int
    cp_max: int
    cp_across_nodes: bool
    ep_max: int
    zero_max: int
    params_min_b: float
    params_max_b: float
    gpus_max: int
    schedules: tuple[str, ...]
    tp_comm_overlap: bool


class RunRecord(_Shape):
    """One counted run (`pplan.validation.bands.ScoredRun.record`)."""

    set: str
    label: str
    routing: str
    hardware: str
    stack: str
    release: str
    """The stack release where the source names one ("" where not)."""
    sequence: str
    precision: str
    error: float
    left_out_error: float


class ConfidenceData(_Shape):
    """The whole file."""

    about: str
    percentiles: tuple[float, float]
    min_runs: int
    bands: tuple[BandRecord, ...]
    envelopes: dict[str, EnvelopeRecord]
    runs: tuple[RunRecord, ...]
