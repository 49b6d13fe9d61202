"""How far a predicted step time can be trusted: an interval from the calibration errors, widened and explained where
the plan leaves the calibrated envelope.

The hardware profile's `[calibration]` (pplan.profiles.hardware_spec.CalibrationSpec, derived by `pplan validate --fit`)
records the 10th and 90th percentiles e_lo ≤ 0 ≤ e_hi of (predicted − published) / published over the public runs
on that GPU type, each predicted with the efficiency fitted without its set, and the envelope of those runs. With
published = predicted / (1 + e), the measured step of a plan like those runs lies in
    [step / (1 + e_hi), step / (1 + e_lo)]
for 80 % of them. A plan outside the envelope gets one named reason per axis it leaves (`Extrapolation`): the tensor,
pipeline or context parallel degree, context parallelism across nodes, the ZeRO stage, the model size, the sequence
length, the GPU count, the schedule family, overlapped tensor-parallel collectives where no run overlapped them, the
software stack, or a GPU type with no calibrated run. Each reason widens both ends by `WIDENING_PER_REASON` of the
step: there is no data off the envelope to say by how much, so this is an assumption, stated where the interval is
printed. A GPU type without `[calibration]` starts from ±`UNCALIBRATED_BAND`, also assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.model.params import total_params
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS, StackName

WIDENING_PER_REASON = 0.05
"""Each axis off the calibrated envelope widens the interval by this fraction of the step on both sides (assumed)."""
UNCALIBRATED_BAND = 0.15
"""The error band assumed on a GPU type with no calibrated run (± this fraction)."""
ASSUMPTION = (
    f"the step-time interval is the 10th-90th percentile of the calibration runs' leave-one-set-out errors "
    f"(the hardware profile's [calibration]), widened by {WIDENING_PER_REASON:.0%} of the step per axis on which "
    f"the plan leaves the calibrated envelope (assumed: no data says how far); ±{UNCALIBRATED_BAND:.0%} on a GPU "
    "type with no calibrated run"
)


@dataclass(frozen=True, slots=True)
class Extrapolation:
    """One axis on which a plan lies outside the runs pplan was calibrated on."""

    axis: str
    """t, p, cp, cp across nodes, ZeRO, model size, sequence, GPUs, schedule, TP overlap, stack, GPU."""
    detail: str
    """The plan's value against the calibrated range, in words."""

    def __str__(self) -> str:
        return f"{self.axis}: {self.detail}"


@dataclass(frozen=True, slots=True)
class StepInterval:
    low_s: float
    high_s: float
    error_low: float
    """The calibration band's low error before widening (e_lo)."""
    error_high: float
    extrapolations: tuple[Extrapolation, ...]

    @property
    def extrapolated(self) -> bool:
        return bool(self.extrapolations)


def extrapolations(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> tuple[Extrapolation, ...]:
    """Every axis on which `plan` lies outside `hw`'s calibrated envelope (module docstring), in a fixed order."""
    return envelope_misses(
        model, hw, tp=plan.tp, pp=plan.pp, cp=plan.cp, zero_stage=plan.zero_stage, seq_len=plan.seq_len,
        gpus=plan.gpus, schedule=plan.kind.name, stack=plan.stack, tp_comm_overlap=plan.tp_comm_overlap,
        precision=plan.precision, ep=plan.ep,
    )  # fmt: skip


ROUTED_REASON = (
    "a routed (mixture-of-experts) model: no calibration run on this GPU type had experts, so the expert "
    "all-to-all, grouped-GEMM and routing terms are unfitted"
)


def envelope_misses(
    model: ModelSpec,
    hw: HardwareSpec,
    *,
    tp: int,
    pp: int,
    cp: int,
    zero_stage: int,
    seq_len: int,
    gpus: int,
    schedule: str,
    stack: StackName,
    tp_comm_overlap: bool = False,
    precision: str = "bf16",
    ep: int = 1,
) -> tuple[Extrapolation, ...]:
    """`extrapolations` from the fields it reads (what the search knows of a configuration before its plan)."""
    cal = hw.calibration
    routed = (Extrapolation("experts", ROUTED_REASON),) if model.moe is not None else ()
    if cal is None:
        gpu = Extrapolation("GPU", f"no public run on {hw.name} was fitted; its efficiencies are assumed")
        return (gpu, *routed)
    out: list[Extrapolation] = [] if cal.routed else list(routed)

    def above(axis: str, value: int, most: int, what: str) -> None:
        if value > most:
            out.append(Extrapolation(axis, f"{what} = {value:,}, above the calibrated {most:,}"))

    above("t", tp, cal.tp_max, "tensor parallel t")
    above("p", pp, cal.pp_max, "pipeline parallel p")
    above("cp", cp, cal.cp_max, "context parallel cp")
    above("ep", ep, cal.ep_max, "expert parallel ep")
    if cp > 1 and tp * cp > hw.gpus_per_node:
        out.append(
            Extrapolation(
                "cp across nodes",
                f"a context-parallel group spans nodes (t·cp = {tp * cp} > {hw.gpus_per_node} GPUs per "
                "node); no calibration run's did",
            )
        )
    above("ZeRO", zero_stage, cal.zero_max, "ZeRO stage")
    params_b = total_params(model) / 1e9
    if not cal.params_min_b <= params_b <= cal.params_max_b:
        out.append(
            Extrapolation(
                "model size",
                f"{params_b:,.1f}B parameters, outside the calibrated {cal.params_min_b:g}B-{cal.params_max_b:g}B",
            )
        )
    if not cal.seq_len_min <= seq_len <= cal.seq_len_max:
        out.append(
            Extrapolation(
                "sequence",
                f"s = {seq_len:,}, outside the calibrated {cal.seq_len_min:,}-{cal.seq_len_max:,}",
            )
        )
    above("GPUs", gpus, cal.gpus_max, "GPUs")
    if schedule not in cal.schedules:
        out.append(
            Extrapolation("schedule", f"{schedule}; the calibration runs use {', '.join(cal.schedules)}")
        )
    if precision not in cal.precisions:
        out.append(
            Extrapolation("precision", f"{precision}; the calibration runs use {', '.join(cal.precisions)}")
        )
    if tp_comm_overlap and not cal.tp_comm_overlap:
        out.append(
            Extrapolation(
                "TP overlap", "no calibration run on this GPU overlapped its tensor-parallel collectives"
            )
        )
    if stack not in cal.stacks or not STACKS[stack].calibrated:
        out.append(
            Extrapolation(
                "stack",
                f"{stack} has no calibrated run; its efficiencies are {', '.join(cal.stacks)}'s",
            )
        )
    return tuple(out)


def step_interval(step_s: float, hw: HardwareSpec, reasons: tuple[Extrapolation, ...]) -> StepInterval:
    """The interval on a predicted `step_s` (module docstring)."""
    cal = hw.calibration
    low, high = (
        (cal.error_low, cal.error_high) if cal is not None else (-UNCALIBRATED_BAND, UNCALIBRATED_BAND)
    )
    widen = WIDENING_PER_REASON * len(reasons)
    return StepInterval(
        low_s=step_s / (1 + high) - widen * step_s,
        high_s=step_s / (1 + low) + widen * step_s,
        error_low=low,
        error_high=high,
        extrapolations=reasons,
    )


def plan_interval(model: ModelSpec, hw: HardwareSpec, plan: Plan, step_s: float) -> StepInterval:
    """`step_interval` of `plan`'s predicted `step_s` with its extrapolation reasons."""
    return step_interval(step_s, hw, extrapolations(model, hw, plan))
