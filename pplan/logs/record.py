"""What was read from a training log: configuration fields with their provenance, the iterations measured, and the
steady state over them (which iterations were used, which were left out and why, and the statistic: the median of
the steady-state iterations' step times)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

STACK_MEGATRON = "megatron-core"
STACK_BRIDGE = "megatron-bridge"
STACK_TORCHTITAN = "torchtitan"
"""The stacks a log is read as (pplan.profiles.stacks' names)."""
INTERNAL = frozenset({"tps_divisor"})
"""Fields kept for the readers' own use, not part of the parse."""
WARMUP_SLOWER = 1.10
"""A leading logged iteration more than this factor slower than the median of the rest is warm-up (compilation,
allocator growth, NCCL set-up) and left out."""
OUTLIER_SLOWER = 1.5
"""A later iteration more than this factor slower than the steady median (a profiling step, a checkpoint save,
an evaluation) is named as left out; the median would ignore it anyway."""
MIN_SINGLE_ITERATION = 20
"""A log with one iteration line counts it as steady state only past this iteration (an excerpt from mid-run);
earlier, the line may average the warm-up in."""


@dataclass(frozen=True)
class LogField:
    """One configuration value the log printed, and where: e.g. "arguments block", "run name", "world line"."""

    value: Any
    source: str


@dataclass(frozen=True)
class Iteration:
    """One logged iteration (or one logged interval, for stacks that print the mean over it)."""

    number: int
    step_s: float
    line: int
    """1-based line of the cleaned log it was read from."""
    tflops_per_gpu: float | None = None
    tokens_per_s_per_gpu: float | None = None
    global_batch: int | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class SteadyState:
    """The steady-state step time and how it was taken."""

    step_s: float
    used: tuple[int, ...]
    """Iteration numbers whose step times the median was taken over."""
    warmup: tuple[int, ...]
    """Leading iterations left out as warm-up."""
    outliers: tuple[int, ...]
    """Later iterations far slower than the rest (profiling, checkpointing), named; the median ignores them."""
    statistic: str = "median"
    rampup: tuple[int, ...] = ()
    """Leading iterations at a smaller global batch than the run's last (Megatron's batch-size ramp-up), left out;
    also counted in `warmup`."""

    def describe(self) -> str:
        """One line: the statistic, the iterations used and those left out."""
        text = f"{self.statistic} of {len(self.used)} steady-state iteration line(s) {_span(self.used)}"
        if self.rampup:
            text += f"; batch ramp-up left out: {_span(self.rampup)}"
        warm = tuple(n for n in self.warmup if n not in self.rampup)
        if warm:
            text += f"; warm-up left out: {_span(warm)}"
        if self.outliers:
            text += f"; slow outliers (profiling, checkpoints) left out: {_span(self.outliers)}"
        return text


def _span(numbers: tuple[int, ...]) -> str:
    if len(numbers) <= 4:
        return ", ".join(str(n) for n in numbers)
    return f"{numbers[0]}–{numbers[-1]}"


def steady_state(iterations: list[Iteration]) -> SteadyState | None:
    """The steady state of `iterations` (sorted by number): leading warm-up dropped, the median of the rest; None
    when nothing is left that can be trusted as steady (module constants say when)."""
    its = sorted(iterations, key=lambda it: it.number)
    if not its:
        return None
    final = its[-1].global_batch
    ramp: list[Iteration] = []
    while final and len(its) > 1 and its[0].global_batch and its[0].global_batch != final:
        ramp.append(its.pop(0))  # Megatron's --rampup-batch-size: the run's step is the one at its full batch
    if len(its) == 1:
        only = its[0]
        if only.number < MIN_SINGLE_ITERATION and not ramp:
            return None
        ramped = tuple(it.number for it in ramp)
        return SteadyState(only.step_s, (only.number,), ramped, (), rampup=ramped)
    # the first logged line holds (or averages in) the first, compiling iteration; after a ramp-up it does not
    warmup = ramp if ramp else [its[0]]
    rest = its if ramp else its[1:]
    while len(rest) > 2:
        typical = statistics.median(it.step_s for it in rest[1:])
        if rest[0].step_s > WARMUP_SLOWER * typical:
            warmup.append(rest.pop(0))
        else:
            break
    median = statistics.median(it.step_s for it in rest)
    outliers = [it for it in rest if it.step_s > OUTLIER_SLOWER * median]
    used = [it for it in rest if it not in outliers]
    step = statistics.median(it.step_s for it in used)
    return SteadyState(
        step,
        tuple(it.number for it in used),
        tuple(it.number for it in warmup),
        tuple(it.number for it in outliers),
        rampup=tuple(it.number for it in ramp),
    )


@dataclass
class LogRecord:
    """Everything read from one log. `fields` holds configuration in pplan's names (module pplan.logs.read lists
    them); `missing` is filled by the caller that knows what it needs."""

    stack: str | None = None
    """megatron-core, megatron-bridge (NeMo 2 / Megatron-Bridge) or torchtitan; None: no iteration line found."""
    fields: dict[str, LogField] = field(default_factory=dict)
    iterations: list[Iteration] = field(default_factory=list)
    peak_reserved_bytes: int | None = None
    peak_allocated_bytes: int | None = None
    memory_source: str | None = None
    gpu_name: str | None = None
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    tps_steps: list[Iteration] = field(default_factory=list)
    """torchtitan step lines with tps whose step time needs the plan (the log gives no local batch): step_s 0
    until pplan.logs.torchtitan.for_plan sets it from the rebuilt plan's global batch, sequence and GPUs."""
    step_source: str | None = None
    """How the step times were derived where that is not the log's own time field (said beside the steady state)."""

    def put(self, name: str, value: Any, source: str, overwrite: bool = False) -> None:
        """Record `name` (first reading wins unless `overwrite`); None values are not readings."""
        if value is None:
            return
        if overwrite or name not in self.fields:
            self.fields[name] = LogField(value, source)

    def value(self, name: str, default: Any = None) -> Any:
        got = self.fields.get(name)
        return got.value if got is not None else default

    @property
    def steady(self) -> SteadyState | None:
        return steady_state(self.iterations)

    def add_iteration(self, it: Iteration) -> None:
        """Keep the first reading of each iteration number (every rank prints the same line)."""
        if all(x.number != it.number for x in self.iterations):
            self.iterations.append(it)

    def note_memory(self, reserved: int | None, allocated: int | None, source: str) -> None:
        """The peaks over every line read (a pipelined Megatron run prints one memory line per stage)."""
        if reserved is not None:
            self.peak_reserved_bytes = max(self.peak_reserved_bytes or 0, reserved)
        if allocated is not None:
            self.peak_allocated_bytes = max(self.peak_allocated_bytes or 0, allocated)
        if reserved is not None or allocated is not None:
            self.memory_source = source

    def summary(self) -> dict[str, Any]:
        """The parse as plain data (the test corpus's expected JSON compares against this)."""
        steady = self.steady
        return {
            "stack": self.stack,
            "gpu_name": self.gpu_name,
            "fields": {k: _plain(v.value) for k, v in sorted(self.fields.items()) if k not in INTERNAL},
            "iterations": [it.number for it in sorted(self.iterations, key=lambda it: it.number)],
            "steady_step_s": round(steady.step_s, 6) if steady else None,
            "steady_iterations": list(steady.used) if steady else [],
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "peak_allocated_bytes": self.peak_allocated_bytes,
        }


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, float):
        return round(value, 6)
    return value
