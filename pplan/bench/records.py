"""What one benchmark run hands back from its ranks: plain, picklable records, no torch.

The worker (`pplan.bench.worker`, which needs torch) fills these on every rank; rank 0 gathers them and the
analysis (`pplan.bench.analysis`, pure) reads them. Times are `time.monotonic_ns()` nanoseconds on the rank's
own clock plus `clock_offset_ns` (zero when every rank shares one machine's monotonic clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pplan.schedules.actions import Kind


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One compute pass torch ran: `kind` F, I, W or B of `microbatch` through virtual `stage`."""

    stage: int
    kind: Kind
    microbatch: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class SendRecord:
    """One point-to-point message a stage posted: `direction` "fwd" (activation) or "bwd" (gradient)."""

    stage: int
    microbatch: int
    direction: str
    peer: int
    nbytes: int


@dataclass(slots=True)
class StepRecord:
    """One measured training step on one rank."""

    start_ns: int
    """When the rank left the barrier before `schedule.step`."""
    end_ns: int
    """When `schedule.step` returned."""
    ops: list[OpRecord] = field(default_factory=list)
    sends: list[SendRecord] = field(default_factory=list)
    saved_bytes: dict[tuple[int, int], int] = field(default_factory=dict)
    """(stage, micro-batch) → bytes autograd saved for the backward during that forward (views counted by their
    own size, parameters excluded, each tensor once)."""
    released_ns: dict[tuple[int, int], int] = field(default_factory=dict)
    """(stage, micro-batch) → when autograd freed the last tensor it had saved for that forward (the
    micro-batch leaves flight); absent when nothing saved could be followed (see the worker)."""
    peak_device_bytes: int | None = None
    """CUDA max memory allocated during the step (GPUs only)."""


@dataclass(slots=True)
class RankRecord:
    """Everything one rank measured in one case."""

    rank: int
    host: str
    stages: tuple[int, ...]
    clock_offset_ns: int = 0
    steps: list[StepRecord] = field(default_factory=list)
    grad_max_abs_error: float | None = None
    """Largest |pipeline gradient − single-process reference gradient| over this rank's parameters."""
    grad_max_rel_error: float | None = None
    """That error relative to the largest reference gradient of the same parameter."""
    peak_rss_bytes: int | None = None
    """The process's peak resident set (ru_maxrss), CPU runs; includes torch itself."""
    device: str = "cpu"
    backend: str = "gloo"
