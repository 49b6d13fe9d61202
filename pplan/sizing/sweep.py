"""The points of a sizing sweep: the exact best plan at each GPU count and global batch (which counts and which
batch: pplan.sizing.policy).

The sweep of one hardware stops climbing once per-GPU throughput stops paying (`stops_paying`): after a count whose
tokens/s per GPU has fallen below `STOP_EFFICIENCY` of the best per-GPU figure seen, or after a count with no plan
beyond the counts that have one.

Each point is `recommend`'s answer for its hardware, GPU count and batch with one plan (`top_n` 1: the exact best
by pplan's own model), searched and explained as `recommend` does (`pplan.recommend.recommendations`, without the
knob notes), and from its plan: the step time and its interval, the failure-free work time for the
token budget, the wall time with interruptions (pplan.sizing.goodput), GPU-hours, cost and energy
(pplan.sizing.costs). A count where nothing fits says why in one line, and so does one whose run never finishes
(interruptions faster than the recovery from one: an infinite wall time, no cost, on no answer of time or cost).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pplan.model.params import total_params
from pplan.plan.records import PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.recommend import Recommendations, recommendations
from pplan.search import SearchRequest
from pplan.sizing.costs import DEFAULT_PUE, RunCost, run_cost
from pplan.sizing.goodput import CHECKPOINT_BYTES_PER_PARAM, Goodput, GoodputInputs, goodput
from pplan.sizing.policy import STOP_EFFICIENCY, BatchPolicy


@dataclass(frozen=True, slots=True)
class SizeQuery:
    """What every point of a sweep shares."""

    train_tokens: float
    seq_len: int
    batch: BatchPolicy
    search: SearchRequest
    """The search every point runs, its GPUs and batch replaced (constraints, precisions, stack, launcher)."""
    goodput: GoodputInputs
    prices: tuple[tuple[str, float], ...] = ()
    """Price per GPU-hour by hardware name (over the profile's own)."""
    pue: float = DEFAULT_PUE
    knobs: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    """Per hardware name, the search settings a named stack release's recipe sets there (its knobs differ by GPU)."""


@dataclass(frozen=True, slots=True)
class SizePoint:
    """One hardware and GPU count: its best plan and what training the budget on it takes."""

    hardware: str
    gpus: int
    global_batch: int
    """Sequences per step."""
    request: PlanRequest | None
    """The best plan (None: nothing fits; `reason` says why)."""
    reason: str | None = None
    step_s: float = math.nan
    step_interval_s: tuple[float, float] = (math.nan, math.nan)
    tokens_per_s: float = math.nan
    mfu: float = math.nan
    """Model FLOPs over the BF16 peak, the attention over the full s×s scores (the non-causal convention)."""
    steps: int = 0
    work_s: float = math.nan
    """Failure-free time to train the budget: steps × step time."""
    work_interval_s: tuple[float, float] = (math.nan, math.nan)
    goodput: Goodput | None = None
    wall_s: float = math.nan
    """With interruptions, checkpoints and restarts."""
    wall_interval_s: tuple[float, float] = (math.nan, math.nan)
    cost: RunCost | None = None
    calibrated: bool = False
    confidence: str = ""
    """What pplan says of the plan's step time (pplan.cost.uncertainty.Confidence.words)."""

    @property
    def fits(self) -> bool:
        return self.request is not None

    @property
    def finishes(self) -> bool:
        """Whether its run ends: a plan, and interruptions slower than the recovery from one (else the wall time
        is infinite, `reason` says why, and the point answers no question of time or cost)."""
        return self.fits and math.isfinite(self.wall_s)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus


def why_nothing(result: Recommendations) -> str:
    """One line: why a search found no plan (the nearest memory miss, else the commonest structural rejection)."""
    if result.closest_misses:
        miss = min(result.closest_misses, key=lambda m: m.need_bytes / m.usable_bytes)
        need = "needs" if miss.exact else "needs at least"
        return (
            f"out of memory: the nearest plan ({miss.summary}) {need} {miss.need_bytes / 1e9:.1f} of "
            f"{miss.usable_bytes / 1e9:.1f} GB"
        )
    if result.rejected:
        reason, count = result.rejected.most_common(1)[0]
        return f"no configuration: {reason.value} ({count:,} configurations)"
    return "no configuration"


def never_finishes(good: Goodput) -> str:
    """One line: why a run makes no progress (interruptions arrive faster than the run recovers from one)."""
    lost_s = good.restart_s + (good.interval_s + good.checkpoint_write_s) / 2
    return (
        f"never finishes: an interruption every {good.mtbf_s / 60:,.1f} minutes on average (the job's mean time "
        f"between interruptions) costs {lost_s / 60:,.1f} minutes to recover (restart, reading the checkpoint "
        "back, half a checkpoint interval of lost work); fewer GPUs or a lower --interruptions-per-gpu-hour"
    )


def checkpoint_bytes(model: ModelSpec) -> float:
    """Bytes one checkpoint writes (`CHECKPOINT_BYTES_PER_PARAM` per unique parameter)."""
    return float(total_params(model) * CHECKPOINT_BYTES_PER_PARAM)


def size_point(
    model: ModelSpec, hardware: HardwareSpec, gpus: int, global_batch: int, query: SizeQuery
) -> SizePoint:
    """The best plan at `gpus` GPUs and `global_batch` sequences, and the run it makes (module docstring)."""
    knobs = dict(dict(query.knobs).get(hardware.name, ()))
    request = replace(
        query.search,
        gpus=gpus,
        global_batch=global_batch,
        top_n=1,
        seq_len=query.seq_len,
        split_p2p=False,
        **knobs,
    )
    head = SizePoint(hardware=hardware.name, gpus=gpus, global_batch=global_batch, request=None)
    found = recommendations(model, hardware, request, knobs=False)
    if not found.candidates:
        return replace(head, reason=why_nothing(found))
    best = found.candidates[0]
    perf = best.report.performance
    assert perf is not None  # the search ranks by it
    tokens_per_step = global_batch * query.seq_len
    steps = math.ceil(query.train_tokens / tokens_per_step)
    work_s = steps * perf.step_s
    work_lo, work_hi = (steps * s for s in perf.step_interval_s)
    state = checkpoint_bytes(model)
    good = goodput(work_s, gpus, state, query.goodput)
    overhead = good.wall_s / work_s if math.isfinite(good.wall_s) else math.inf
    prices = dict(query.prices)
    price = prices.get(hardware.name, hardware.price_usd_per_gpu_hour)
    wall_lo = goodput(work_lo, gpus, state, query.goodput).wall_s
    wall_hi = goodput(work_hi, gpus, state, query.goodput).wall_s
    never = None if math.isfinite(good.wall_s) else never_finishes(good)
    return replace(
        head,
        reason=never,
        request=best.request,
        step_s=perf.step_s,
        step_interval_s=perf.step_interval_s,
        tokens_per_s=perf.tokens_per_s,
        mfu=perf.mfu,
        steps=steps,
        work_s=work_s,
        work_interval_s=(work_lo, work_hi),
        goodput=good,
        wall_s=work_s * overhead,
        wall_interval_s=(wall_lo, wall_hi),
        cost=None
        if never
        else run_cost(gpus, hardware.gpus_per_node, work_s * overhead, price, hardware.power, query.pue),
        calibrated=perf.calibrated,
        confidence=perf.confidence,
    )


def stops_paying(points: list[SizePoint]) -> bool:
    """Whether a hardware's sweep (its points so far, by count) should climb no further (module docstring)."""
    fitted = [p for p in points if p.fits]
    if not fitted:
        return False
    if not points[-1].fits:
        return True  # nothing fits here though a smaller count had a plan: the batch is spent
    best = max(p.tokens_per_s_per_gpu for p in fitted)
    return points[-1].tokens_per_s_per_gpu < STOP_EFFICIENCY * best


@dataclass(frozen=True, slots=True)
class PointTask:
    """One point to evaluate: `size_point`'s arguments."""

    model: ModelSpec
    hardware: HardwareSpec
    gpus: int
    global_batch: int
    query: SizeQuery


def evaluate(task: PointTask) -> SizePoint:
    """`size_point` for a task (what a worker process runs)."""
    return size_point(task.model, task.hardware, task.gpus, task.global_batch, task.query)


Runner = Callable[[list[PointTask]], list[SizePoint]]
"""Evaluates tasks, in order (pplan.cli.size runs them over the machine's cores)."""


def sweep(
    model: ModelSpec,
    hardwares: Sequence[HardwareSpec],
    counts: dict[str, tuple[int, ...]],
    query: SizeQuery,
    run: Runner,
    stop_early: bool = True,
) -> list[SizePoint]:
    """Every hardware's points, by hardware then count: in rounds of one octave per hardware (a count and the 1.5×
    one above it), each round's points evaluated together by `run`; a hardware stops after the round where
    `stops_paying` (when `stop_early`)."""
    done: dict[str, list[SizePoint]] = {hw.name: [] for hw in hardwares}
    queue = {hw.name: list(counts[hw.name]) for hw in hardwares}
    by_name = {hw.name: hw for hw in hardwares}
    while any(queue.values()):
        tasks = []
        for name, left in queue.items():
            smallest = counts[name][0]
            for gpus in left[:2]:
                batch = query.batch.sequences(gpus, smallest, query.seq_len)
                tasks.append(PointTask(model, by_name[name], gpus, batch, query))
            del left[:2]
        for point in run(tasks):
            done[point.hardware].append(point)
        for name in queue:
            if stop_early and stops_paying(done[name]):
                queue[name] = []
    return [p for hw in hardwares for p in sorted(done[hw.name], key=lambda p: p.gpus)]
