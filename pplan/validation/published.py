"""Predicted against published step times (`pplan validate`), and the one-number fit per GPU type.

The published runs (pplan/validation/published_runs.json, read by catalog.load_published_runs) are turned into plans
with the settings their sources state and pplan's stated assumptions for the rest; each row's published step
time is compared with `steptime.step_time`. The fit adjusts one figure per GPU type, the GEMM efficiency
(`[efficiency] matmul` in the hardware profile), to minimise the mean absolute percentage error of its set;
everything else (attention, HBM and kernel-overhead figures, links) stays as the profile states it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from pplan.cost.steptime import step_time
from pplan.model.flops import hardware_flops_per_step
from pplan.plan.configuration import PlanRequest, Recompute, make_plan
from pplan.profiles.specs import HardwareSpec, ModelSpec
from pplan.schedules import megatron_family

PIPELINED_FULL = "full where pipelined (p > 1), none otherwise"
"""A recompute rule for runs whose source states no per-run setting (see published_runs.json)."""


@dataclass(frozen=True, slots=True)
class ValidationRow:
    set_name: str
    label: str
    published_step_s: float
    predicted_step_s: float

    @property
    def error(self) -> float:
        """(predicted − published) / published."""
        return (self.predicted_step_s - self.published_step_s) / self.published_step_s


@dataclass(frozen=True, slots=True)
class ValidationSet:
    name: str
    source: str
    hardware: str
    rows: tuple[ValidationRow, ...]
    assumed: dict[str, Any]

    @property
    def mape(self) -> float:
        return sum(abs(r.error) for r in self.rows) / len(self.rows)


def _recompute(row: dict[str, Any], stated: dict[str, Any], assumed: dict[str, Any], pp: int) -> Recompute:
    """The run's recompute setting: its own, its set's, or the assumed rule (`PIPELINED_FULL` resolved on p)."""
    given = row.get("recompute", stated.get("recompute", assumed.get("recompute", "none")))
    if given == PIPELINED_FULL:
        return "full" if pp > 1 else "none"
    return cast(Recompute, given)


def _request(row: dict[str, Any], stated: dict[str, Any], assumed: dict[str, Any]) -> PlanRequest:
    pp = int(row["pp"])
    vp = row.get("vp")
    family = megatron_family(vp)
    return PlanRequest(
        gpus=int(row["gpus"]),
        global_batch=int(row["global_batch"]),
        micro_batch=int(row.get("micro_batch", assumed.get("micro_batch", 1))),
        tp=int(row["tp"]),
        pp=pp,
        vp=vp if family.fixed_v is None else None,
        cp=int(row.get("cp", 1)),
        schedule=family.name,
        seq_len=int(stated["seq_len"]),
        recompute=_recompute(row, stated, assumed, pp),
        sequence_parallel=bool(assumed.get("sequence_parallel", True)),
        flash_attention=bool(assumed.get("flash_attention", True)),
        zero_stage=int(assumed.get("zero_stage", 0)),
        grad_dtype=assumed.get("grad_dtype", "fp32"),
        overlap_grad_reduce=bool(assumed.get("overlap_grad_reduce", True)),
        overlap_param_gather=bool(assumed.get("overlap_param_gather", True)),
    )


def validate_set(
    data: dict[str, Any],
    load_model: Callable[[str], ModelSpec],
    hardware: HardwareSpec,
) -> ValidationSet:
    """Predict every row of one published set on `hardware`."""
    stated, assumed = data["stated"], data["assumed"]
    rows = []
    for row in data["rows"]:
        model = load_model(row["model"])
        req = _request(row, stated, assumed)
        plan = make_plan(model, req)
        predicted = step_time(model, hardware, plan).step_s
        if "published_step_s" in row:
            published = float(row["published_step_s"])
        else:  # Narayanan et al.: TFLOP/s per GPU counted with Eq. 3 (full recompute)
            flops = hardware_flops_per_step(model, plan.seq_len, plan.global_batch, "full")
            published = flops / (plan.gpus * float(row["published_tflops_per_gpu"]) * 1e12)
        label = (
            f"{row['model']} t{plan.tp} p{plan.pp} v{plan.vp} d{plan.dp} b{plan.micro_batch} "
            f"m{plan.num_microbatches} rc:{plan.recompute} on {plan.gpus}"
        )
        rows.append(ValidationRow(data["name"], label, published, predicted))
    return ValidationSet(data["name"], data["source"], data["hardware"], tuple(rows), dict(assumed))


def fit_matmul_to_published(
    data: dict[str, Any],
    load_model: Callable[[str], ModelSpec],
    hardware: HardwareSpec,
    lo: float = 0.2,
    hi: float = 1.0,
    tol: float = 1e-4,
) -> tuple[float, ValidationSet]:
    """The GEMM efficiency minimising the set's mean absolute percentage error (golden-section search)."""
    ratio = (5**0.5 - 1) / 2

    def cost(x: float) -> float:
        return validate_set(data, load_model, hardware.with_efficiency(matmul=x)).mape

    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = cost(c), cost(d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = cost(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = cost(d)
    best = (a + b) / 2
    return best, validate_set(data, load_model, hardware.with_efficiency(matmul=best))
