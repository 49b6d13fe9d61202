"""What interruptions cost a long run: a failure rate per GPU-hour, a blocking checkpoint every τ seconds of work,
and a restart after each failure.

Symbols: G GPUs; λ interruptions per GPU-hour, so the job's mean time between interruptions is M = 3600 / (λ·G)
seconds; δ the checkpoint write time (blocking); R the restart time (relaunch plus reading the checkpoint back);
W the work, the failure-free training time. A first-order model (Young 1974, "A first order approximation to the
optimum checkpoint interval", CACM 17(9); Daly 2006, FGCS 22(3), for the higher orders not used here):
- checkpoints add δ per τ of work: W·(1 + δ/τ) of failure-free wall time;
- interruptions arrive at 1/M per second of wall time and each loses R plus, on average, half a segment of
  work and checkpoint, (τ + δ)/2;
- so the wall time T solves T = W·(1 + δ/τ) + (T / M)·(R + (τ + δ)/2):
      T = W·(1 + δ/τ) / (1 − (R + (τ + δ)/2) / M),
  defined while the denominator is positive (otherwise the run makes no progress);
- Young's interval τ* = √(2·δ·M) minimises the overhead δ/τ + τ/(2M) to first order.
Goodput is W / T: the fraction of wall time spent on work that is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16_384
INTERRUPTIONS_PER_GPU_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS)
"""The default rate: 419 unexpected interruptions in a 54-day snapshot of Llama 3 405B pre-training on 16,384 H100
GPUs (Llama Team, "The Llama 3 Herd of Models", arXiv 2407.21783, §3.3.4): 1.97e-5 per GPU-hour. Planned
interruptions (47 in the same period) are left out."""
STORAGE_BYTES_PER_S_PER_GPU = 2e12 / LLAMA3_GPUS
"""The default checkpoint bandwidth per GPU of the job: the Llama 3 cluster's storage (Tectonic) sustains 2 TB/s
(peak 7 TB/s) for 16,384 GPUs (same report, §3.3.1), 122 MB/s per GPU; a job on G GPUs is taken to get G times that."""
CHECKPOINT_BYTES_PER_PARAM = 14
"""A checkpoint's bytes per parameter: BF16 weights (2), FP32 master weights (4) and Adam's two FP32 moments (8);
gradients are not saved."""
RESTART_S = 600.0
"""Assumed: ten minutes to relaunch a job after an interruption (scheduling, process start, communicator set-up),
before the checkpoint is read back; no public report states one (--restart-minutes)."""


@dataclass(frozen=True, slots=True)
class GoodputInputs:
    """How often a run is interrupted and what a checkpoint and a restart take."""

    interruptions_per_gpu_hour: float = INTERRUPTIONS_PER_GPU_HOUR
    storage_bytes_per_s_per_gpu: float = STORAGE_BYTES_PER_S_PER_GPU
    """Checkpoint bandwidth per GPU of the job (the job's total: G times this), unless `storage_bytes_per_s`."""
    storage_bytes_per_s: float | None = None
    """A fixed total checkpoint bandwidth, whatever the GPU count."""
    restart_s: float = RESTART_S


@dataclass(frozen=True, slots=True)
class Goodput:
    """The interruption overhead of one run (module docstring's symbols)."""

    mtbf_s: float
    """M: the job's mean time between interruptions."""
    checkpoint_bytes: float
    checkpoint_write_s: float
    """δ."""
    restart_s: float
    """R: the relaunch plus reading the checkpoint back."""
    interval_s: float
    """τ: Young's interval √(2δM)."""
    work_s: float
    """W."""
    wall_s: float
    """T (infinite when the run makes no progress)."""

    @property
    def fraction(self) -> float:
        """Goodput W / T (0 when the run makes no progress)."""
        return self.work_s / self.wall_s if math.isfinite(self.wall_s) else 0.0


def young_interval_s(write_s: float, mtbf_s: float) -> float:
    """τ* = √(2·δ·M) (Young 1974)."""
    return math.sqrt(2 * write_s * mtbf_s)


def wall_time_s(work_s: float, interval_s: float, write_s: float, restart_s: float, mtbf_s: float) -> float:
    """T = W·(1 + δ/τ) / (1 − (R + (τ + δ)/2) / M); infinite when the denominator is not positive."""
    lost = (restart_s + (interval_s + write_s) / 2) / mtbf_s
    if lost >= 1:
        return math.inf
    return work_s * (1 + write_s / interval_s) / (1 - lost)


def goodput(work_s: float, gpus: int, checkpoint_bytes: float, inputs: GoodputInputs) -> Goodput:
    """The interruption overhead of `work_s` seconds of failure-free training on `gpus` GPUs whose checkpoint holds
    `checkpoint_bytes` (module docstring)."""
    mtbf_s = 3600 / (inputs.interruptions_per_gpu_hour * gpus)
    bandwidth = inputs.storage_bytes_per_s or inputs.storage_bytes_per_s_per_gpu * gpus
    write_s = checkpoint_bytes / bandwidth
    restart_s = inputs.restart_s + checkpoint_bytes / bandwidth  # read back at the write bandwidth
    interval_s = young_interval_s(write_s, mtbf_s)
    return Goodput(
        mtbf_s=mtbf_s,
        checkpoint_bytes=checkpoint_bytes,
        checkpoint_write_s=write_s,
        restart_s=restart_s,
        interval_s=interval_s,
        work_s=work_s,
        wall_s=wall_time_s(work_s, interval_s, write_s, restart_s, mtbf_s),
    )
