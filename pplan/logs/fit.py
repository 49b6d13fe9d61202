"""Fitting a hardware profile's efficiency figures to the user's own runs (`pplan calibrate`): each log rebuilt
(pplan.logs.rebuild), its steady-state step measured, and the figures the logs can identify fitted so that pplan's
own step time (pplan.cost.steptime) matches, least squares on the log of predicted / measured.

Which figures: the GEMM efficiency of each precision the runs use (BF16 `matmul`, FP8 `fp8_matmul`) and, for
routed runs, the grouped-GEMM efficiency, each only from runs of its kind; the inter-node link efficiency too when
at least `MIN_RUNS_FOR_LINK` runs cross nodes and their share of exposed inter-node time differs (runs that vary
the cut), since otherwise it cannot be told from the GEMM figure. Every other figure is the profile's. The fit's
error is given in sample and with each log left out of the fit (leave-one-log-out), beside the error of the
profile as it was (the public calibration). Pure: no files, no terminal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pplan.cost.pipeline import simulate_plan
from pplan.cost.steptime import step_time
from pplan.logs.rebuild import Rebuilt
from pplan.numeric import golden_section_min
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import Schedule

MIN_RUNS_FOR_LINK = 3
LINK_SPREAD = 0.01
"""The inter-node link is fitted only where a 10 % change of its efficiency moves the runs' steps by amounts that
differ by more than this (runs that vary the cut: tensor parallelism within a node and across two, say)."""
BOUNDS = (0.02, 1.0)
FIT_TOLERANCE = 1e-7
"""Where the golden-section search stops: far below the precision the profiles quote."""


@dataclass(frozen=True)
class Run:
    """One log's run: its rebuilt model and plan, and the measured steady-state step."""

    name: str
    model: ModelSpec
    plan: Plan
    lists: Schedule | None
    measured_s: float

    @property
    def kind(self) -> str:
        """The GEMM figure that prices most of this run: grouped_gemm (routed), fp8_matmul or matmul."""
        if self.model.moe is not None:
            return "grouped_gemm"
        return "matmul" if self.plan.precision == "bf16" else "fp8_matmul"


@dataclass(frozen=True)
class Fit:
    """The fitted figures and how well they do."""

    figures: dict[str, float]
    in_sample: list[float]
    """(predicted − measured) / measured per run, every run in the fit."""
    left_out: list[float]
    """The same with each run's own log left out of the fit (empty for a single run)."""
    before: list[float]
    """The same with the profile as it was (the public calibration)."""


def make_run(name: str, rebuilt: Rebuilt, measured_s: float) -> Run:
    plan = make_plan(rebuilt.model, rebuilt.request)
    lists = simulate_plan(rebuilt.model, rebuilt.hardware, plan, "analytic").lists
    return Run(name, rebuilt.model, plan, lists, measured_s)


def with_figures(hw: HardwareSpec, figures: dict[str, float]) -> HardwareSpec:
    eff = {k: v for k, v in figures.items() if k != "inter_node"}
    out = hw.with_efficiency(**eff) if eff else hw
    if "inter_node" in figures:
        link = out.inter_node.model_copy(update={"efficiency": figures["inter_node"]})
        out = out.model_copy(update={"inter_node": link})
    return out


def predict(run: Run, hw: HardwareSpec) -> float:
    return step_time(run.model, hw, run.plan, lists=run.lists).step_s


def errors(runs: Sequence[Run], hw: HardwareSpec) -> list[float]:
    return [predict(r, hw) / r.measured_s - 1 for r in runs]


def identifiable(runs: Sequence[Run], hw: HardwareSpec) -> list[str]:
    """The figures these runs can identify (module docstring), in fitting order."""
    kinds = list(dict.fromkeys(r.kind for r in runs))
    crossing = [r for r in runs if r.plan.gpus > hw.gpus_per_node]
    if len(crossing) >= MIN_RUNS_FOR_LINK:
        eff = hw.inter_node.efficiency
        shares = []
        for r in crossing:
            base = predict(r, hw)
            slower = predict(r, with_figures(hw, {"inter_node": eff * 0.9}))
            shares.append(slower / base - 1)
        if max(shares) - min(shares) > LINK_SPREAD:
            kinds.append("inter_node")
    return kinds


def fit(runs: Sequence[Run], hw: HardwareSpec, names: Sequence[str] | None = None) -> dict[str, float]:
    """Least squares on log(predicted / measured) over `runs` for the figures `names` (default: identifiable),
    by coordinate descent (golden-section search on each figure in turn)."""
    names = list(names) if names is not None else identifiable(runs, hw)
    figures: dict[str, float] = {}
    for rounds in range(3 if "inter_node" in names else 1):
        for name in names:
            mine = [r for r in runs if r.kind == name] if name != "inter_node" else list(runs)
            if not mine:
                continue

            def loss(x: float, name: str = name, mine: list[Run] = mine) -> float:
                trial = with_figures(hw, {**figures, name: x})
                return sum(math.log(predict(r, trial) / r.measured_s) ** 2 for r in mine)

            figures[name] = golden_section_min(loss, *BOUNDS, FIT_TOLERANCE)
        del rounds
    return figures


def calibrate(runs: Sequence[Run], hw: HardwareSpec) -> Fit:
    """Fit on every run, and on every run but one for each (leave-one-log-out)."""
    names = identifiable(runs, hw)
    figures = fit(runs, hw, names)
    in_sample = errors(runs, with_figures(hw, figures))
    left_out: list[float] = []
    if len(runs) > 1:
        for i, run in enumerate(runs):
            others = [r for j, r in enumerate(runs) if j != i]
            own = [n for n in names if n == "inter_node" or any(r.kind == n for r in others)]
            got = fit(others, hw, own)
            left_out.append(predict(run, with_figures(hw, got)) / run.measured_s - 1)
    return Fit(figures, in_sample, left_out, errors(runs, hw))


def mape(values: Sequence[float]) -> float:
    return sum(abs(v) for v in values) / len(values) if values else math.nan
