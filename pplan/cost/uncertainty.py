"""How far a predicted step time can be trusted, decided in one place (`confidence`): whether the plan is
calibrated, the band of errors its interval is read from, the axes on which it leaves the calibrated envelope,
and the sentence every command prints (`Confidence.words`).

Everything comes from the runs `pplan validate` and `pplan validate --recent` score, shipped with pplan
(pplan/validation/confidence_bands.json, pplan.validation.bands; read by pplan.profiles.catalog.load_confidence):
- The band. The errors e = (predicted − published) / published of the runs like the plan, each run predicted with
  its own set left out of every fit; their 10th and 90th percentiles e_lo ≤ e_hi (linear between closest ranks).
  "Like the plan": its routing (dense or MoE, never mixed), then, in turn, its hardware, sequence band, GEMM
  precision and stack, each kept where at least `MIN_RUNS` runs remain (else the broader group stands). With
  published = predicted / (1 + e), the measured step of a plan like those runs lies in
      [step / (1 + e_hi), step / (1 + e_lo)]
  for 80 % of them; each end is taken no nearer than the prediction itself (e_lo ≤ 0 ≤ e_hi), so the interval
  always holds the predicted step, even where the runs like the plan all erred one way. On hardware without validated runs, or whose profile figures are not those the runs were
  predicted with, the band is the routing's every run's, at least ±`UNCALIBRATED_BAND` (assumed).
- Calibrated: the hardware has validated runs with the plan's routing, precision and stack (at least
  `MIN_CELL_RUNS` of them). The stack release is not yet a plan setting, so runs of every release count.
- The envelope. One named reason per axis the plan leaves (`Extrapolation`): the tensor, pipeline, context or
  expert parallel degree above the hardware's validated runs', context parallelism across nodes where none of
  them did, the ZeRO stage, the model size, the GPU count, the schedule family, overlapped tensor-parallel
  collectives where no run overlapped them (each from the hardware's `envelopes`), and, from the runs themselves,
  a sequence band, routing, precision or stack with fewer than `MIN_CELL_RUNS` runs on the hardware, or a GPU type
  with none. Each reason widens both ends by `WIDENING_PER_REASON` of the step: there is no data off the envelope
  to say by how much, so this is an assumption, stated where the interval is printed.
- A profile `pplan calibrate` fitted to the user's own training logs (its `[user_fit]`) is judged by those runs
  instead (`_user_confidence`): calibrated, its band their errors (each log left out of the fit where there are two
  or more), no envelope widening (pplan keeps no record of their cuts).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pplan.model.params import total_params
from pplan.plan.records import Plan
from pplan.profiles.catalog import load_confidence
from pplan.profiles.confidence import (
    MIN_RUNS,
    PERCENTILES,
    EnvelopeRecord,
    RunRecord,
    percentile,
    seq_band,
)
from pplan.profiles.hardware_spec import HardwareSpec, calibration_fingerprint
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import StackName

WIDENING_PER_REASON = 0.05
"""Each axis off the calibrated envelope widens the interval by this fraction of the step on both sides (assumed)."""
UNCALIBRATED_BAND = 0.15
"""The least error band assumed on a GPU type with no validated run (± this fraction)."""
MIN_CELL_RUNS = 3
"""Validated runs a hardware needs with a plan's routing, precision, stack or sequence band for the plan to be
inside the envelope on that axis (fewer: an extrapolation)."""
ASSUMPTION = (
    f"the step-time interval is the 10th-90th percentile of the errors of the validated runs like the plan "
    f"(pplan validate and validate --recent; same routing, then hardware, sequence band, precision and stack where "
    f"{MIN_RUNS} or more runs remain), each run predicted with its own set left out of the fits, its ends no nearer "
    f"than the prediction itself (e_lo ≤ 0 ≤ e_hi); widened by "
    f"{WIDENING_PER_REASON:.0%} of the step per axis on which the plan leaves the calibrated envelope (assumed: no "
    f"data says how far); at least ±{UNCALIBRATED_BAND:.0%} on a GPU type with no validated run"
)


@dataclass(frozen=True, slots=True)
class Extrapolation:
    """One axis on which a plan lies outside the runs pplan was validated on."""

    axis: str
    """t, p, cp, ep, cp across nodes, ZeRO, model size, sequence, GPUs, schedule, precision, TP overlap, stack,
    experts, routing, GPU."""
    detail: str
    """The plan's value against the validated range, in words."""

    def __str__(self) -> str:
        return f"{self.axis}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Band:
    """The errors of the validated runs a plan is judged by (module docstring)."""

    group: str
    """The runs, in words: "MoE runs on h100-sxm-80gb at bf16"."""
    runs: int
    low: float
    """10th percentile of their left-out errors (e_lo): what intervals use."""
    high: float
    mape: float
    in_sample_low: float
    """The same percentiles and mean absolute error in sample (every fit made with all sets)."""
    in_sample_high: float
    in_sample_mape: float

    def describe(self) -> str:
        return (
            f"{self.group} (n = {self.runs}): {self.low:+.1%} to {self.high:+.1%} (10th-90th percentile of their "
            f"errors, each run's set left out of the fits; mean absolute {self.mape:.1%})"
        )


@dataclass(frozen=True, slots=True)
class Confidence:
    """What pplan says of a plan's step time: one decision, printed by every command."""

    calibrated: bool
    band: Band
    error_low: float
    """The band's low end as used: min(0, e_lo), or −`UNCALIBRATED_BAND` where lower on uncalibrated hardware."""
    error_high: float
    extrapolations: tuple[Extrapolation, ...]
    words: str
    """One sentence: calibrated or not, on which runs, and the band."""

    @property
    def extrapolated(self) -> bool:
        return bool(self.extrapolations)


@dataclass(frozen=True, slots=True)
class StepInterval:
    low_s: float
    high_s: float
    error_low: float
    """The band's low error before widening (e_lo)."""
    error_high: float
    extrapolations: tuple[Extrapolation, ...]
    confidence: Confidence

    @property
    def extrapolated(self) -> bool:
        return bool(self.extrapolations)


GATES = ("hardware", "sequence", "precision", "stack")
"""The axes a band narrows on after the routing, in turn (module docstring)."""


def _value(run: RunRecord, axis: str) -> str:
    return str(getattr(run, axis))


@lru_cache(maxsize=256)
def band_for(routing: str, hardware: str | None, sequence: str, precision: str, stack: str) -> Band:
    """The band of the validated runs like a plan (module docstring); `hardware` None: any hardware."""
    runs = [r for r in load_confidence().runs if r.routing == routing]
    wanted = {"hardware": hardware, "sequence": sequence, "precision": precision, "stack": stack}
    words = [f"{routing} runs"]
    for axis in GATES:
        value = wanted[axis]
        if value is None:
            continue
        narrower = [r for r in runs if _value(r, axis) == value]
        if len(narrower) >= MIN_RUNS:
            runs = narrower
            words.append(
                {"hardware": "on ", "sequence": "at s ", "precision": "at ", "stack": "with "}[axis] + value
            )
    left = [r.left_out_error for r in runs]
    inside = [r.error for r in runs]
    return Band(
        group=" ".join(words),
        runs=len(runs),
        low=percentile(left, PERCENTILES[0]),
        high=percentile(left, PERCENTILES[1]),
        mape=sum(map(abs, left)) / len(left),
        in_sample_low=percentile(inside, PERCENTILES[0]),
        in_sample_high=percentile(inside, PERCENTILES[1]),
        in_sample_mape=sum(map(abs, inside)) / len(inside),
    )


@lru_cache(maxsize=64)
def _validated(hw: HardwareSpec) -> bool:
    """Whether `hw` has validated runs and its figures are those they were predicted with (cached per spec)."""
    record = load_confidence().envelopes.get(hw.name)
    return (
        record is not None
        and record.runs >= MIN_CELL_RUNS
        and record.fingerprint == calibration_fingerprint(hw)
    )


def _count(hardware: str, **axes: str) -> int:
    return _counts().get((hardware, *sorted(axes.items())), 0)


@lru_cache(maxsize=1)
def _counts() -> dict[tuple[object, ...], int]:
    """Runs per hardware and per combination of routing, precision, stack and sequence band that `_reasons` asks."""
    out: dict[tuple[object, ...], int] = {}
    for r in load_confidence().runs:
        for axes in (
            {"routing": r.routing},
            {"sequence": r.sequence},
            {"routing": r.routing, "precision": r.precision},
            {"routing": r.routing, "precision": r.precision, "stack": r.stack},
        ):
            key = (r.hardware, *sorted(axes.items()))
            out[key] = out.get(key, 0) + 1
    return out


def _where(hardware: str, what: str, **axes: str) -> str:
    """The values of `what` the hardware's runs with `axes` have, with their counts."""
    got: dict[str, int] = {}
    for r in load_confidence().runs:
        if r.hardware == hardware and all(_value(r, k) == v for k, v in axes.items()):
            got[_value(r, what)] = got.get(_value(r, what), 0) + 1
    return ", ".join(f"{v} ({n})" for v, n in sorted(got.items(), key=lambda kv: -kv[1])) or "none"


def _run_reasons(
    hw: str, routing: str, sequence: str, precision: str, stack: str
) -> tuple[list[Extrapolation], bool]:
    """The reasons the validated runs themselves give (module docstring), and whether the plan is calibrated."""
    out: list[Extrapolation] = []
    if _count(hw, sequence=sequence) < MIN_CELL_RUNS:
        out.append(
            Extrapolation(
                "sequence",
                f"s in {sequence}: {_count(hw, sequence=sequence)} validated run(s) on {hw} there (runs by band: "
                f"{_where(hw, 'sequence')})",
            )
        )
    if _count(hw, routing=routing) < MIN_CELL_RUNS:
        axis = "experts" if routing == "MoE" else "routing"
        out.append(
            Extrapolation(
                axis,
                f"{_count(hw, routing=routing)} validated {routing} run(s) on {hw}: the band is every {routing} run's",
            )
        )
        return out, False
    if _count(hw, routing=routing, precision=precision) < MIN_CELL_RUNS:
        out.append(
            Extrapolation(
                "precision",
                f"{precision}: {_count(hw, routing=routing, precision=precision)} validated {routing} run(s) on {hw} "
                f"at it (validated: {_where(hw, 'precision', routing=routing)})",
            )
        )
        return out, False
    cell = _count(hw, routing=routing, precision=precision, stack=stack)
    if cell < MIN_CELL_RUNS:
        out.append(
            Extrapolation(
                "stack",
                f"{stack}: {cell} validated {routing} run(s) on {hw} at {precision} with it (validated with: "
                f"{_where(hw, 'stack', routing=routing, precision=precision)}); its efficiencies are theirs",
            )
        )
        return out, False
    return out, True


def confidence(
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
) -> Confidence:
    """The one decision on a plan's step time, from the fields it reads (what the search knows of a configuration
    before its plan): module docstring."""
    routing = "MoE" if model.moe is not None else "dense"
    sequence = seq_band(seq_len)
    if hw.user_fit is not None:
        return _user_confidence(hw)
    if not _validated(hw):
        band = band_for(routing, None, sequence, precision, stack)
        record = load_confidence().envelopes.get(hw.name)
        why = (
            "its profile's figures are not those its validated runs were predicted with"
            if record is not None and record.runs >= MIN_CELL_RUNS
            else f"{record.runs if record else 0} validated runs on it"
        )
        gpu = Extrapolation("GPU", f"{hw.name}: {why}; its efficiencies are assumed")
        low, high = min(band.low, -UNCALIBRATED_BAND), max(band.high, UNCALIBRATED_BAND)
        words = (
            f"NOT calibrated: {hw.name} has no validated runs behind these figures ({why}); the interval is at "
            f"least ±{UNCALIBRATED_BAND:.0%} and the {band.describe()}."
        )
        return Confidence(False, band, low, high, (gpu,), words)
    out = _envelope_reasons(load_confidence().envelopes[hw.name], model, hw, tp, pp, cp, ep, zero_stage, gpus,
                            schedule, tp_comm_overlap)  # fmt: skip
    reasons, calibrated = _run_reasons(hw.name, routing, sequence, precision, stack)
    out += reasons
    band = band_for(routing, hw.name, sequence, precision, stack)
    cell = _count(hw.name, routing=routing, precision=precision, stack=stack)
    words = (
        f"Calibrated: {cell} {routing} runs on {hw.name} at {precision} with {stack} are validated (pplan validate); "
        f"the interval is the {band.describe()}"
        if calibrated
        else f"NOT calibrated: {reasons[-1]}; the interval is the {band.describe()}"
    )
    if out:
        axes = "axis" if len(out) == 1 else "axes"
        words += f", widened by {WIDENING_PER_REASON:.0%} of the step on each of {len(out)} {axes} outside the envelope"
    return Confidence(calibrated, band, min(0.0, band.low), max(0.0, band.high), tuple(out), words + ".")


def _user_confidence(hw: HardwareSpec) -> Confidence:
    """A profile `pplan calibrate` fitted to the user's own logs (`[user_fit]`): judged by those runs' errors, each
    log left out of the fit where there are two or more. No envelope is known of them (pplan keeps no record of
    their cuts), so nothing is widened; the sentence says how many runs and how they were scored."""
    fit = hw.user_fit
    assert fit is not None
    how = "each log left out of the fit" if fit.left_out else "in sample: one log leaves none out"
    band = Band(
        group=f"your runs on {hw.name}",
        runs=fit.runs,
        low=fit.error_low,
        high=fit.error_high,
        mape=fit.mape,
        in_sample_low=fit.error_low,
        in_sample_high=fit.error_high,
        in_sample_mape=fit.in_sample_mape,
    )
    words = (
        f"Calibrated on {fit.runs} run{'s' if fit.runs != 1 else ''} of yours (pplan calibrate): the interval is "
        f"their errors, {fit.error_low:+.1%} to {fit.error_high:+.1%} (10th-90th percentile, {how}; mean absolute "
        f"{fit.mape:.1%}), not the public runs'."
    )
    return Confidence(True, band, min(0.0, fit.error_low), max(0.0, fit.error_high), (), words)


def _envelope_reasons(
    env: EnvelopeRecord,
    model: ModelSpec,
    hw: HardwareSpec,
    tp: int,
    pp: int,
    cp: int,
    ep: int,
    zero_stage: int,
    gpus: int,
    schedule: str,
    tp_comm_overlap: bool,
) -> list[Extrapolation]:
    """The cut's axes outside the hardware's validated runs' ranges (`envelopes`)."""
    out: list[Extrapolation] = []

    def above(axis: str, value: int, most: int, what: str) -> None:
        if value > most:
            out.append(Extrapolation(axis, f"{what} = {value:,}, above the validated {most:,}"))

    above("t", tp, env.tp_max, "tensor parallel t")
    above("p", pp, env.pp_max, "pipeline parallel p")
    above("cp", cp, env.cp_max, "context parallel cp")
    above("ep", ep, env.ep_max, "expert parallel ep")
    if cp > 1 and tp * cp > hw.gpus_per_node and not env.cp_across_nodes:
        out.append(
            Extrapolation(
                "cp across nodes",
                f"a context-parallel group spans nodes (t·cp = {tp * cp} > {hw.gpus_per_node} GPUs per "
                "node); no validated run's did",
            )
        )
    above("ZeRO", zero_stage, env.zero_max, "ZeRO stage")
    params_b = total_params(model) / 1e9
    if not env.params_min_b <= params_b <= env.params_max_b:
        out.append(
            Extrapolation(
                "model size",
                f"{params_b:,.1f}B parameters, outside the validated {env.params_min_b:g}B-{env.params_max_b:g}B",
            )
        )
    above("GPUs", gpus, env.gpus_max, "GPUs")
    if schedule not in env.schedules:
        out.append(
            Extrapolation("schedule", f"{schedule}; the validated runs use {', '.join(env.schedules)}")
        )
    if tp_comm_overlap and not env.tp_comm_overlap:
        out.append(
            Extrapolation(
                "TP overlap", "no validated run on this GPU overlapped its tensor-parallel collectives"
            )
        )
    return out


def plan_confidence(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> Confidence:
    """`confidence` of a plan."""
    return confidence(
        model, hw, tp=plan.tp, pp=plan.pp, cp=plan.cp, zero_stage=plan.zero_stage, seq_len=plan.seq_len,
        gpus=plan.gpus, schedule=plan.kind.name, stack=plan.stack, tp_comm_overlap=plan.tp_comm_overlap,
        precision=plan.precision, ep=plan.ep,
    )  # fmt: skip


def extrapolations(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> tuple[Extrapolation, ...]:
    """Every axis on which `plan` lies outside the calibrated envelope (module docstring), in a fixed order."""
    return plan_confidence(model, hw, plan).extrapolations


def step_interval(step_s: float, conf: Confidence) -> StepInterval:
    """The interval on a predicted `step_s` (module docstring)."""
    widen = WIDENING_PER_REASON * len(conf.extrapolations)
    return StepInterval(
        low_s=step_s / (1 + conf.error_high) - widen * step_s,
        high_s=step_s / (1 + conf.error_low) + widen * step_s,
        error_low=conf.error_low,
        error_high=conf.error_high,
        extrapolations=conf.extrapolations,
        confidence=conf,
    )


def plan_interval(model: ModelSpec, hw: HardwareSpec, plan: Plan, step_s: float) -> StepInterval:
    """`step_interval` of `plan`'s predicted `step_s` with its confidence."""
    return step_interval(step_s, plan_confidence(model, hw, plan))
