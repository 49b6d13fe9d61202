"""Predicted against published times (`pplan validate`), and the one-number fit per GPU type, in and out of sample.

The published sets (pplan/validation/published_runs.json, read by catalog.load_published_runs) are of two kinds:
- `step` sets: end-to-end runs, turned into plans with the settings their sources state and pplan's stated
  assumptions for the rest; each row's published step time (stated, or derived from a published TFLOP/s per GPU
  with the FLOP count the source names: `narayanan-eq3` hardware FLOPs with one recomputed forward, or `model`
  FLOPs) is compared with `steptime.step_time`;
- `layer` sets: one transformer layer's forward and backward times (Korthikanti et al. Table 4), compared with
  `passtime.layer_pass_times` (F, and I + W).
The fit adjusts one figure per GPU type and kind of set: the GEMM efficiency (`[efficiency] matmul` in the hardware
profile) to its BF16 dense sets, the FP8 GEMM efficiency (`fp8_matmul`) to its FP8 sets and the grouped-GEMM
efficiency of routed experts (`grouped_gemm`) to its mixture-of-experts sets (`fits` in the data), each
minimising the mean over those sets of each set's mean absolute percentage error (every set weighs the same,
however many rows it has); everything else (attention, HBM and kernel-overhead figures, links) stays as the
profile states it. Leave-one-set-out: each set is predicted with the efficiency fitted to the other sets of its GPU
type and kind (a set alone of its kind: with the unfitted default, FP8 and grouped GEMMs at the BF16 GEMMs'
fraction of their peak), so a set the model only matches because it was fitted to it shows: a one-row set fits
itself exactly in sample, and only its left-out error says anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from pplan.cost.passtime import layer_pass_times
from pplan.cost.steptime import step_time, straggler_s
from pplan.model.flops import hardware_flops_per_step, model_flops_per_step
from pplan.model.params import total_params
from pplan.numeric import golden_section_min
from pplan.plan.configuration import make_plan
from pplan.plan.copies import settings_read
from pplan.plan.knobs import Recompute
from pplan.plan.records import PlanRequest
from pplan.profiles.confidence import PERCENTILES, percentile
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import DEFAULT_STACK, StackName
from pplan.schedules import megatron_family
from pplan.search.knobs import peak_bytes
from pplan.search.space import divisors

ModelLoader = Callable[[str], ModelSpec]


@dataclass(frozen=True, slots=True)
class ValidationRow:
    set_name: str
    label: str
    published_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        """(predicted − published) / published."""
        return (self.predicted_s - self.published_s) / self.published_s


@dataclass(frozen=True, slots=True)
class RecomputeGap:
    """Full recompute against sequence parallelism with selective recompute for one model: step(full) / step(sel) − 1,
    the 'throughput increase' Korthikanti et al. Table 5 reports."""

    model: str
    published: float
    predicted: float


@dataclass(frozen=True, slots=True)
class ValidationSet:
    name: str
    source: str
    hardware: str
    quantity: str
    """What the rows compare: step time, or one layer's pass times."""
    rows: tuple[ValidationRow, ...]
    assumed: dict[str, Any]
    paired: bool = False
    """Rows come in (full recompute, selective) pairs of one model (`recompute_gaps`)."""

    @property
    def mape(self) -> float:
        return sum(abs(r.error) for r in self.rows) / len(self.rows)

    @property
    def worst(self) -> float:
        """The largest |error|."""
        return max(abs(r.error) for r in self.rows)

    @property
    def recompute_gaps(self) -> tuple[RecomputeGap, ...]:
        """For a set of (full recompute, selective) row pairs (`gaps` in the data): each pair's gap."""
        if not self.paired:
            return ()
        return tuple(
            RecomputeGap(
                full.label.split()[0],
                full.published_s / sel.published_s - 1,
                full.predicted_s / sel.predicted_s - 1,
            )
            for full, sel in zip(self.rows[::2], self.rows[1::2], strict=True)
        )


def _recompute(row: dict[str, Any], stated: dict[str, Any], assumed: dict[str, Any]) -> Recompute:
    """The run's recompute setting: its own, its set's, or the assumed one."""
    return cast(Recompute, _setting("recompute", "none", row, stated, assumed))


def _setting(key: str, default: Any, *sources: dict[str, Any]) -> Any:
    """A run's setting: the first of its row, its set's stated settings and the set's assumptions that names it."""
    for source in sources:
        if key in source:
            return source[key]
    return default


TUNED = "fastest"
"""A set's assumed micro-batch that starts with this word is tuned, not fixed (`fastest_micro_batch`)."""


def tunes_micro_batch(row: dict[str, Any], assumed: dict[str, Any]) -> bool:
    """The run states no micro-batch and its set assumes the one its authors tuned."""
    return "micro_batch" not in row and str(assumed.get("micro_batch", "")).startswith(TUNED)


_DERIVED_HERE = frozenset({"micro_batch", "vp", "schedule", "seq_len", "recompute", "stack", "release"})
"""A published run's settings `run_request` derives itself (a tuned micro-batch, the schedule from v, the
set's sequence, the recompute mode's spellings, the stack asked for; a set's `release` is its source's, not a
stack release pplan prices); the rest are read by name."""


def run_request(
    row: dict[str, Any], stated: dict[str, Any], assumed: dict[str, Any], stack: StackName = DEFAULT_STACK
) -> PlanRequest:
    """The plan request of one published run: its own settings, its set's stated ones and the set's assumptions
    (a tuned micro-batch, `fastest_micro_batch`'s to choose, is 1 here)."""
    vp = row.get("vp")
    family = megatron_family(vp)
    read = settings_read(row, stated, assumed, skip=_DERIVED_HERE)
    micro_batch = (
        1 if tunes_micro_batch(row, assumed) else int(row.get("micro_batch", assumed.get("micro_batch", 1)))
    )
    return PlanRequest(
        **read, micro_batch=micro_batch, vp=vp if family.fixed_v is None else None, schedule=family.name,
        seq_len=int(stated["seq_len"]), recompute=_recompute(row, stated, assumed), stack=stack,
    )  # fmt: skip


def row_request(
    data: dict[str, Any], row: dict[str, Any], model: ModelSpec, hardware: HardwareSpec
) -> PlanRequest:
    """The plan request of one published run on `hardware`: `run_request`, with a micro-batch the set assumes tuned
    (`TUNED`: Narayanan et al. tune it per model, SC'21 §5.6 and Takeaway #3) chosen as its authors would
    (`fastest_micro_batch`)."""
    base = run_request(row, data["stated"], data["assumed"], data["stack"])
    return fastest_micro_batch(model, hardware, base) if tunes_micro_batch(row, data["assumed"]) else base


def fastest_micro_batch(model: ModelSpec, hardware: HardwareSpec, base: PlanRequest) -> PlanRequest:
    """`base` at the micro-batch b with the shortest predicted step among the b that divide its per-replica batch
    and fit in memory (pplan's own models); smallest b first: past the first that does not fit, none does (a
    larger b keeps more activations). `base` unchanged when none fits."""
    replicas = base.gpus // (base.tp * base.pp * base.cp)
    best: tuple[float, PlanRequest] | None = None
    for b in divisors(base.global_batch // replicas):
        req = replace(base, micro_batch=b)
        memory = peak_bytes(model, hardware, req)
        if memory is None:  # no valid plan (e.g. m not a multiple of p for the interleaved schedule)
            continue
        if memory[0] > memory[1]:
            break
        step_s = step_time(model, hardware, make_plan(model, req), split_p2p=False).step_s
        if best is None or step_s < best[0]:
            best = (step_s, req)
    return base if best is None else best[1]


def row_model(data: dict[str, Any], row: dict[str, Any], load_model: ModelLoader) -> ModelSpec:
    """The row's model: a bundled profile, or the set's template with the row's shape (`shape`)."""
    if "shape" not in row:
        return load_model(row["model"])
    return ModelSpec.model_validate(
        {"name": row["model"], "source": data["source"], **data["model_template"], **row["shape"]}
    )


def _published_step_s(
    data: dict[str, Any], row: dict[str, Any], model: ModelSpec, gpus: int, seq: int
) -> float:
    """The row's published step time: stated, or FLOPs per step / (GPUs × published TFLOP/s), with the FLOP count
    the source uses."""
    if "published_step_s" in row:
        return float(row["published_step_s"])
    batch = int(row["global_batch"])
    if "published_tokens_per_s_per_gpu" in row:
        return batch * seq / (gpus * float(row["published_tokens_per_s_per_gpu"]))
    if data["flops"] == "narayanan-eq3":  # Eq. 3 counts one recomputed forward for every run
        flops = hardware_flops_per_step(model, seq, batch, "full")
    else:
        assert data["flops"] == "model", data["flops"]
        flops = model_flops_per_step(model, seq, batch)
    return flops / (gpus * float(row["published_tflops_per_gpu"]) * 1e12)


def validate_set(data: dict[str, Any], load_model: ModelLoader, hardware: HardwareSpec) -> ValidationSet:
    """Predict every row of one published set on `hardware`."""
    if data.get("kind") == "layer":
        return _validate_layers(data, load_model, hardware)
    rows = []
    for row in data["rows"]:
        model = row_model(data, row, load_model)
        plan = make_plan(model, row_request(data, row, model, hardware))
        predicted = step_time(model, hardware, plan).step_s
        published = _published_step_s(data, row, model, plan.gpus, plan.seq_len)
        sp = " sp" if plan.sequence_parallel else ""
        label = (
            f"{row['model']} t{plan.tp} p{plan.pp} v{plan.vp} d{plan.dp} b{plan.micro_batch} "
            f"m{plan.num_microbatches} rc:{plan.recompute}{sp} on {plan.gpus}"
        )
        rows.append(ValidationRow(data["name"], label, published, predicted))
    return ValidationSet(
        data["name"],
        data["source"],
        data["hardware"],
        "step time (s)",
        tuple(rows),
        dict(data["assumed"]),
        "gaps" in data,
    )


def _validate_layers(data: dict[str, Any], load_model: ModelLoader, hardware: HardwareSpec) -> ValidationSet:
    """One layer's forward and backward (I + W) times against Table 4's, per experiment."""
    stated = data["stated"]
    model = load_model(stated["model"])
    rows = []
    for row in data["rows"]:
        t = int(stated["tensor_parallel"])
        # one layer on t GPUs, one micro-batch a step: the row's and the experiment's settings by name
        read = settings_read(row, stated, skip=frozenset({"release"}))
        req = PlanRequest(**read, gpus=t, global_batch=read["micro_batch"], tp=t, stack=data["stack"])
        times = layer_pass_times(model, hardware, make_plan(model, req).shape)
        for name, published, predicted in (
            ("forward", row["forward_ms"], times.f_s),
            ("backward", row["backward_ms"], times.i_s + times.w_s),
        ):
            label = f"{row['experiment']}: {name}"
            rows.append(ValidationRow(data["name"], label, float(published) / 1e3, predicted))
    return ValidationSet(
        data["name"],
        data["source"],
        data["hardware"],
        "one layer's pass (s)",
        tuple(rows),
        dict(data["assumed"]),
    )


def fit_efficiency(
    sets: Sequence[dict[str, Any]],
    load_model: ModelLoader,
    hardware: HardwareSpec,
    field: str = "matmul",
    lo: float = 0.3,
    hi: float = 0.9,
    tol: float = 1e-3,
) -> float:
    """The efficiency `field` (the GEMM efficiency, or the FP8 GEMM efficiency for FP8 sets) minimising the mean
    over `sets` of each set's mean absolute percentage error (golden-section search between `lo` and `hi` to `tol`,
    the precision the profiles quote; the error is unimodal in the efficiency for these sets)."""

    def cost(x: float) -> float:
        hw = hardware.with_efficiency(**{field: x})
        return sum(validate_set(data, load_model, hw).mape for data in sets) / len(sets)

    return golden_section_min(cost, lo, hi, tol)


@dataclass(frozen=True, slots=True)
class SetCheck:
    """One set predicted in sample (with its GPU type's efficiency fitted to all that type's sets, or the profile's)
    and out of sample (fitted to the type's other sets)."""

    in_sample: ValidationSet
    matmul: float
    """The fitted efficiency (`field`) of `in_sample`."""
    left_out: ValidationSet
    left_out_matmul: float | None
    """The efficiency fitted without this set (None: no other set of its GPU type fits it, so the set is
    predicted with the profile's default for it, unfitted)."""
    field: str = "matmul"
    """Which efficiency the set calibrates: `matmul` (BF16 GEMMs) or `fp8_matmul` (FP8 GEMMs)."""


def check_sets(
    sets: Sequence[dict[str, Any]],
    load_model: ModelLoader,
    load_hardware: Callable[[str], HardwareSpec],
    refit: bool,
) -> list[SetCheck]:
    """Every set in and out of sample (`refit`: fit each GPU type's efficiencies now rather than read the
    profile's). BF16 sets fit the GEMM efficiency; FP8 sets (`fits: fp8_matmul`) the FP8 GEMM efficiency, with the
    GEMM efficiency held at its BF16 fit (the layers' BF16 work: attention, router, output layer)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for data in sets:
        groups.setdefault((data["hardware"], _fits(data)), []).append(data)
    fitted: dict[tuple[str, str], float] = {}

    def fit(name: str, field: str, among: list[dict[str, Any]]) -> float:
        base = load_hardware(name)
        if field != "matmul":
            base = base.with_efficiency(matmul=fitted_of(name, "matmul"))
        return fit_efficiency(among, load_model, base, field)

    def fitted_of(name: str, field: str) -> float:
        if (name, field) not in fitted:
            stated = getattr(load_hardware(name).efficiency, field)
            fitted[name, field] = fit(name, field, groups[name, field]) if refit or stated is None else stated
        return fitted[name, field]

    out = []
    for data in sets:
        name, field = data["hardware"], _fits(data)
        hardware = load_hardware(name)
        if field != "matmul":
            hardware = hardware.with_efficiency(matmul=fitted_of(name, "matmul"))
        value = fitted_of(name, field)
        others = [x for x in groups[name, field] if x is not data]
        without = fit(name, field, others) if others else (value if field == "matmul" else None)
        out.append(
            SetCheck(
                in_sample=validate_set(data, load_model, hardware.with_efficiency(**{field: value})),
                matmul=value,
                left_out=validate_set(data, load_model, hardware.with_efficiency(**{field: without})),
                left_out_matmul=without,
                field=field,
            )
        )
    return out


def _fits(data: dict[str, Any]) -> str:
    """The efficiency a set calibrates (`fits` in the data; the GEMM efficiency unless it says otherwise)."""
    return str(data.get("fits", "matmul"))


def calibration_figures(
    sets: Sequence[dict[str, Any]], checks: Sequence[SetCheck], load_model: ModelLoader
) -> dict[str, dict[str, Any]]:
    """Per GPU type, the `[calibration]` section its profile carries (pplan.profiles.hardware_spec.CalibrationSpec): the
    10th and 90th percentiles of the leave-one-set-out errors of its end-to-end runs, and the envelope (ranges of
    t, p, cp, ZeRO stage, model size, sequence, GPUs, schedules, stacks) of those runs."""
    out: dict[str, dict[str, Any]] = {}
    for data, check in zip(sets, checks, strict=True):
        if data.get("kind") == "layer":
            continue
        fig = out.setdefault(data["hardware"], {"errors": [], "plans": [], "stacks": set()})
        fig["errors"] += [r.error for r in check.left_out.rows]
        fig["stacks"].add(data["stack"])
        for row in data["rows"]:
            model = row_model(data, row, load_model)
            request = run_request(row, data["stated"], data["assumed"], data["stack"])
            fig["plans"].append((model, make_plan(model, request)))
    return {name: _section(fig) for name, fig in out.items()}


def _section(fig: dict[str, Any]) -> dict[str, Any]:
    plans = fig["plans"]
    params = [total_params(m) / 1e9 for m, _ in plans]
    return {
        "runs": len(fig["errors"]),
        "error_low": round(min(0.0, percentile(fig["errors"], PERCENTILES[0])), 3),
        "error_high": round(max(0.0, percentile(fig["errors"], PERCENTILES[1])), 3),
        "tp_max": max(p.tp for _, p in plans),
        "pp_max": max(p.pp for _, p in plans),
        "cp_max": max(p.cp for _, p in plans),
        "zero_max": max(p.zero_stage for _, p in plans),
        "params_min_b": math.floor(min(params) * 10) / 10,
        "params_max_b": math.ceil(max(params) * 10) / 10,
        "seq_len_min": min(p.seq_len for _, p in plans),
        "seq_len_max": max(p.seq_len for _, p in plans),
        "gpus_max": max(p.gpus for _, p in plans),
        "schedules": sorted({p.kind.name for _, p in plans}),
        "stacks": sorted(fig["stacks"]),
        "precisions": sorted({p.precision for _, p in plans}),
        "routed": any(m.moe is not None for m, _ in plans),
        "ep_max": max(p.ep for _, p in plans),
        "tp_comm_overlap": any(p.tp_comm_overlap for _, p in plans),
    }


JITTER_GRID = tuple(i / 10_000 for i in range(0, 501))
"""The straggler coefficients of variation the strong-scaling fit tries: 0 to 5 % in steps of 0.01 %."""


@dataclass(frozen=True, slots=True)
class ScalingPoint:
    gpus: int
    published_mfu: float
    predicted_mfu: float
    """Without a straggler allowance."""
    fitted_mfu: float
    """With the fitted allowance (`ScalingCheck.jitter`)."""


@dataclass(frozen=True, slots=True)
class ScalingCheck:
    """A published strong-scaling statement (one model and cut at several GPU counts, one global batch) against
    pplan's MFU at each count, and the straggler allowance (pplan.cost.steptime.jitter_s) that best reproduces the
    published drop from the first count to the last: the coefficient of variation c on `JITTER_GRID` minimising
    |predicted ratio − published ratio| (the smallest on a tie)."""

    name: str
    source: str
    hardware: str
    cut: str
    points: tuple[ScalingPoint, ...]
    jitter: float

    @property
    def published_ratio(self) -> float:
        return self.points[-1].published_mfu / self.points[0].published_mfu

    @property
    def predicted_ratio(self) -> float:
        return self.points[-1].predicted_mfu / self.points[0].predicted_mfu


def strong_scaling(
    statement: dict[str, Any], sets: Sequence[dict[str, Any]], load_model: ModelLoader, hardware: HardwareSpec
) -> ScalingCheck:
    """`statement`'s points predicted with the cut and settings of its set's row (`set`, `row`) at each GPU count."""
    data = next(s for s in sets if s["name"] == statement["set"])
    row = next(r for r in data["rows"] if r["model"] == statement["row"])
    model = row_model(data, row, load_model)
    parts = []
    for point in statement["points"]:
        run = {**row, "gpus": int(point["gpus"]), "global_batch": int(statement["global_batch"])}
        plan = make_plan(model, run_request(run, data["stated"], data["assumed"], data["stack"]))
        step = step_time(model, hardware, plan)
        per_c = straggler_s(
            1.0, max(step.run.summary.busy_per_rank), plan.gpus
        )  # the allowance per unit of c
        parts.append((plan, step, per_c))

    def mfus(c: float) -> list[float]:
        return [st.mfu / (1 + c * per_c / st.step_s) for _, st, per_c in parts]  # exactly st.mfu at c = 0

    published = float(statement["points"][-1]["mfu"]) / float(statement["points"][0]["mfu"])

    def miss(c: float) -> tuple[float, float]:
        first, *_, last = mfus(c)
        return abs(last / first - published), c

    jitter = min(JITTER_GRID, key=miss)
    plan = parts[0][0]
    v = f" v{plan.vp}" if plan.vp > 1 else ""
    return ScalingCheck(
        name=statement["name"],
        source=statement["source"],
        hardware=statement["hardware"],
        cut=f"{statement['row']} t{plan.tp} p{plan.pp}{v} b{plan.micro_batch}, batch {plan.global_batch:,}",
        points=tuple(
            ScalingPoint(int(p["gpus"]), float(p["mfu"]), st.mfu, fitted)
            for p, (_, st, _), fitted in zip(statement["points"], parts, mfus(jitter), strict=True)
        ),
        jitter=jitter,
    )
