"""Predicted against measured for a rebuilt run (pplan.logs.rebuild): step time, tokens/s, MFU in both conventions
and peak memory, and the terms most likely behind the gap.

A gap term is either a figure of the hardware profile (GEMM, attention, grouped-GEMM and FP8 efficiency, the
links' efficiency, the fixed cost per kernel) solved for, by bisection on pplan's own step time with the others
held, so that predicted equals measured; or a step-time term (bubble, exposed collectives) read in seconds: what it
would have to be, the rest held. Each says whether that is plausible (`PLAUSIBLE`: ranges published measurements
span, assumed), and the list is ordered plausible first, then by how little the figure has to move.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from pplan.cost.steptime import step_time
from pplan.documents.fromlog import (
    ComparisonOut,
    FromLogReport,
    GapTermOut,
    ReadFieldOut,
    SteadyStateOut,
)
from pplan.explain import explain_with_run
from pplan.logs.rebuild import Rebuilt
from pplan.logs.record import LogRecord, SteadyState
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import Schedule

USER_CALIBRATION_MARK = "runs of yours"
"""What `pplan calibrate` writes in a profile's description ("calibrated on N runs of yours"): how a profile is
known to be calibrated on the user's own logs."""
PLAUSIBLE = {
    "matmul": (0.30, 0.85),
    "fp8_matmul": (0.25, 0.80),
    "grouped_gemm": (0.15, 0.85),
    "attention": (0.15, 0.75),
    "intra_node": (0.40, 1.0),
    "inter_node": (0.30, 1.0),
    "kernel_overhead_us": (1.0, 30.0),
}
"""Ranges a fitted figure can plausibly take (assumed: about what published kernel and collective benchmarks span
on current GPUs); outside them the gap is more likely elsewhere."""
SECONDS_RATIO = (0.5, 2.0)
"""A step-time term read in seconds is plausible between half and twice pplan's figure (assumed)."""
TERM_NAMES = {
    "bubble": "pipeline bubble",
    "p2p": "exposed pipeline sends (p2p)",
    "tp_comm": "exposed tensor-parallel collectives",
    "dp_comm": "exposed data-parallel collectives",
    "ep_comm": "MoE: exposed expert all-to-all (dispatch and combine)",
    "optimizer": "optimizer step",
    "recompute": "recomputation",
}


@dataclass(frozen=True)
class Figure:
    key: str
    name: str
    now: float
    set: Callable[[HardwareSpec, float], HardwareSpec]
    low: float
    high: float


def _eff(key: str) -> Callable[[HardwareSpec, float], HardwareSpec]:
    return lambda hw, x: hw.with_efficiency(**{key: x})


def _link(tier: str) -> Callable[[HardwareSpec, float], HardwareSpec]:
    def change(hw: HardwareSpec, x: float) -> HardwareSpec:
        link = getattr(hw, tier)
        return hw.model_copy(update={tier: link.model_copy(update={"efficiency": x})})

    return change


def figures(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> list[Figure]:
    """The hardware figures that bear on this plan's step."""
    e = hw.efficiency
    out = [
        Figure("fp8_matmul", "FP8 GEMM efficiency", e.fp8_matmul_fraction, _eff("fp8_matmul"), 1e-3, 1.0)
        if plan.precision != "bf16"
        else Figure("matmul", "GEMM efficiency", e.matmul, _eff("matmul"), 1e-3, 1.0),
        Figure("attention", "attention efficiency", e.attention_fraction, _eff("attention"), 1e-3, 1.0),
        Figure(
            "kernel_overhead_us",
            "fixed cost per kernel (µs; host launch, ramp, tail)",
            e.kernel_overhead_us,
            _eff("kernel_overhead_us"),
            0.0,
            1000.0,
        ),
    ]
    if model.moe is not None:
        out.insert(
            0,
            Figure(
                "grouped_gemm",
                "MoE: grouped GEMM efficiency (routed experts)",
                e.grouped_gemm_fraction,
                _eff("grouped_gemm"),
                1e-3,
                1.0,
            ),
        )
    if plan.tp > 1 or plan.ep > 1 or plan.gpus > 1:
        out.append(
            Figure(
                "intra_node",
                "intra-node link efficiency",
                hw.intra_node.efficiency,
                _link("intra_node"),
                1e-3,
                1.0,
            )
        )
    if plan.gpus > hw.gpus_per_node:
        out.append(
            Figure(
                "inter_node",
                "inter-node link efficiency",
                hw.inter_node.efficiency,
                _link("inter_node"),
                1e-3,
                1.0,
            )
        )
    return out


def solve(
    model: ModelSpec, hw: HardwareSpec, plan: Plan, lists: Schedule | None, figure: Figure, target_s: float
) -> float | None:
    """The value of `figure` for which pplan's step equals `target_s`, the rest held; None when no value in the
    figure's range does."""

    def step(x: float) -> float:
        return step_time(model, figure.set(hw, x), plan, lists=lists).step_s

    lo, hi = figure.low, figure.high
    f_lo, f_hi = step(lo) - target_s, step(hi) - target_s
    if f_lo * f_hi > 0:
        return None
    for _ in range(40):
        mid = math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2
        f_mid = step(mid) - target_s
        if f_mid * f_lo <= 0:
            hi = mid
        else:
            lo, f_lo = mid, f_mid
        if hi - lo < 1e-4 * max(hi, 1e-9):
            break
    return (lo + hi) / 2


def gap_terms(
    model: ModelSpec,
    hw: HardwareSpec,
    plan: Plan,
    lists: Schedule | None,
    breakdown_s: dict[str, float],
    predicted_s: float,
    measured_s: float,
) -> list[GapTermOut]:
    """Every term that could close the gap (module docstring), most likely first."""
    gap = measured_s - predicted_s
    out: list[tuple[float, GapTermOut]] = []
    for fig in figures(model, hw, plan):
        needed = solve(model, hw, plan, lists, fig, measured_s)
        lo, hi = PLAUSIBLE[fig.key]
        if needed is None:
            why = f"no value of it alone closes a {gap:+.3f} s gap"
            out.append(
                (
                    math.inf,
                    GapTermOut(
                        term=fig.name,
                        predicted_s=0.0,
                        figure_now=fig.now,
                        figure_needed=None,
                        needed_s=None,
                        plausible=False,
                        why=why,
                    ),
                )
            )
            continue
        plausible = lo <= needed <= hi
        why = f"{fig.now:.3g} → {needed:.3g}; " + (
            f"inside the plausible {lo:g}–{hi:g}" if plausible else f"outside the plausible {lo:g}–{hi:g}"
        )
        move = abs(math.log(max(needed, 1e-9) / fig.now)) if fig.now > 0 else abs(needed)
        out.append(
            (
                move,
                GapTermOut(
                    term=fig.name,
                    predicted_s=0.0,
                    figure_now=fig.now,
                    figure_needed=needed,
                    needed_s=None,
                    plausible=plausible,
                    why=why,
                ),
            )
        )
    for key, name in TERM_NAMES.items():
        now = breakdown_s.get(key)
        if now is None or now <= 0:
            continue
        needed_s = now + gap
        ratio = needed_s / now
        plausible = SECONDS_RATIO[0] <= ratio <= SECONDS_RATIO[1]
        why = (
            (
                f"{now:.3f} s → {needed_s:.3f} s (× {ratio:.2f}); "
                + ("within" if plausible else "outside")
                + f" {SECONDS_RATIO[0]:g}–{SECONDS_RATIO[1]:g}× pplan's figure"
            )
            if needed_s >= 0
            else f"would have to be {needed_s:.3f} s, below zero"
        )
        move = abs(math.log(ratio)) if needed_s > 0 else math.inf
        out.append(
            (
                move,
                GapTermOut(
                    term=name,
                    predicted_s=now,
                    figure_now=None,
                    figure_needed=None,
                    needed_s=needed_s,
                    plausible=plausible and needed_s >= 0,
                    why=why,
                ),
            )
        )
    out.sort(key=lambda pair: (not pair[1].plausible, pair[0]))
    return [term for _, term in out]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def report(record: LogRecord, steady: SteadyState, rebuilt: Rebuilt, log_name: str) -> FromLogReport:
    """Explain the rebuilt plan and set it against what the log measured."""
    model, hw = rebuilt.model, rebuilt.hardware
    explained, plan, run = explain_with_run(model, hw, rebuilt.request)
    perf = explained.performance
    assert perf is not None  # analytic durations always price the step
    measured = steady.step_s
    described = steady.describe() + (f"; {record.step_source}" if record.step_source else "")
    tokens = plan.global_batch * plan.seq_len
    used = [it for it in record.iterations if it.number in steady.used]
    peak_predicted = max(stage.total_bytes for stage in explained.memory.stages)
    peak_measured = record.peak_reserved_bytes or record.peak_allocated_bytes
    rows = [
        ComparisonOut(
            quantity="step_s",
            predicted=perf.step_s,
            measured=measured,
            error=perf.step_s / measured - 1,
            note=described,
        ),
        ComparisonOut(
            quantity="tokens_per_s",
            predicted=perf.tokens_per_s,
            measured=tokens / measured,
            error=measured / perf.step_s - 1,
            note="global batch × sequence / step",
        ),
        ComparisonOut(
            quantity="mfu",
            predicted=perf.mfu,
            measured=perf.mfu * perf.step_s / measured,
            error=measured / perf.step_s - 1,
            note="pplan's FLOP count, attention over the full s×s scores, of the BF16 peak",
        ),
        ComparisonOut(
            quantity="mfu_causal",
            predicted=perf.mfu_causal,
            measured=perf.mfu_causal * perf.step_s / measured,
            error=measured / perf.step_s - 1,
            note="pplan's FLOP count, attention over the causal half, of the BF16 peak",
        ),
    ]
    if peak_measured:
        which = "max reserved" if record.peak_reserved_bytes else "max allocated"
        rows.append(
            ComparisonOut(
                quantity="peak_memory_bytes",
                predicted=peak_predicted,
                measured=peak_measured,
                error=peak_predicted / peak_measured - 1,
                note=f"busiest stage's total against the log's {which} ({record.memory_source})",
            )
        )
    terms = gap_terms(model, hw, plan, run.lists, perf.breakdown_s, perf.step_s, measured)
    read = [
        ReadFieldOut(field=key, value=str(getattr(rebuilt.request, key, record.value(key))), source=source)
        for key, source in sorted(rebuilt.read.items())
    ]
    return FromLogReport(
        log=log_name,
        stack=record.stack,
        gpu_name=record.gpu_name,
        model_source=rebuilt.model_source,
        hardware_source=rebuilt.hardware_source,
        read=read,
        assumed=rebuilt.assumed,
        steady_state=SteadyStateOut(
            statistic=steady.statistic,
            step_s=measured,
            iterations_used=list(steady.used),
            warmup_left_out=list(steady.warmup),
            outliers_left_out=list(steady.outliers),
            description=described,
        ),
        measured_step_s=measured,
        measured_tokens_per_s=tokens / measured,
        measured_mfu=rows[2].measured,
        measured_mfu_causal=rows[3].measured,
        logged_tflops_per_gpu=_median([it.tflops_per_gpu for it in used if it.tflops_per_gpu is not None]),
        logged_mfu=_median([it.mfu for it in used if it.mfu is not None]),
        measured_peak_reserved_bytes=record.peak_reserved_bytes,
        measured_peak_allocated_bytes=record.peak_allocated_bytes,
        comparison=rows,
        gap=perf.step_s / measured - 1,
        gap_terms=terms,
        calibrated_on_user_runs=USER_CALIBRATION_MARK in hw.description,
        explain=explained,
    )
