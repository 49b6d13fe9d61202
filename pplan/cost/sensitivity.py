"""Which inputs dominate a step-time prediction: each hardware figure moved by ±10 %, the step time re-predicted.

A user reads "GEMM efficiency ±10 % → step time −8.7 % / +10.6 %" and knows how far the prediction leans on it.
Efficiencies are capped at 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pplan.cost.steptime import step_time
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec, LinkSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import Schedule

STEP = 0.10


@dataclass(frozen=True, slots=True)
class Sensitivity:
    input: str
    minus_change: float
    """Relative step-time change when the input falls by 10 %."""
    plus_change: float
    """Relative step-time change when the input rises by 10 %."""


def _eff(hw: HardwareSpec, field: str, k: float) -> HardwareSpec:
    eff = hw.efficiency
    if field == "attention":
        value = min(1.0, eff.attention_fraction * k)
    elif field == "kernel_overhead_us":
        value = eff.kernel_overhead_us * k
    else:
        value = min(1.0, getattr(eff, field) * k)
    return hw.with_efficiency(**{field: value})


def _link(hw: HardwareSpec, tier: str, k: float, field: str = "bandwidth_gb_per_s") -> HardwareSpec:
    link: LinkSpec = getattr(hw, tier)
    return hw.model_copy(update={tier: link.model_copy(update={field: getattr(link, field) * k})})


INPUTS: tuple[tuple[str, Callable[[HardwareSpec, float], HardwareSpec]], ...] = (
    ("GEMM efficiency", lambda hw, k: _eff(hw, "matmul", k)),
    ("attention efficiency", lambda hw, k: _eff(hw, "attention", k)),
    ("HBM efficiency", lambda hw, k: _eff(hw, "hbm", k)),
    ("kernel overhead", lambda hw, k: _eff(hw, "kernel_overhead_us", k)),
    ("intra-node bandwidth", lambda hw, k: _link(hw, "intra_node", k)),
    ("inter-node bandwidth", lambda hw, k: _link(hw, "inter_node", k)),
    ("inter-node latency", lambda hw, k: _link(hw, "inter_node", k, "latency_us")),
    ("intra-node latency", lambda hw, k: _link(hw, "intra_node", k, "latency_us")),
)


def sensitivities(
    model: ModelSpec, hw: HardwareSpec, plan: Plan, base_step_s: float, lists: Schedule | None = None
) -> list[Sensitivity]:
    """Every input of INPUTS at −10 % and +10 %, sorted by the larger of the two effects. `lists`: a tuned plan's
    (auto's) lists, kept as built for `hw` (the plan as it would run; not re-tuned to each changed input)."""
    out = []
    for name, change in INPUTS:
        lo = step_time(model, change(hw, 1 - STEP), plan, lists=lists).step_s
        hi = step_time(model, change(hw, 1 + STEP), plan, lists=lists).step_s
        out.append(Sensitivity(name, lo / base_step_s - 1, hi / base_step_s - 1))
    return sorted(out, key=lambda s: -max(abs(s.minus_change), abs(s.plus_change)))
