"""The confidence data every interval and envelope is read from: the runs `pplan validate` and `pplan validate
--recent` score, reduced to what a query needs (`confidence_data`), and written with pplan
(pplan/validation/confidence_bands.json) by `scripts/fit_confidence_bands.py`, since scoring them takes seconds.

What is kept:
- `runs`: every counted run (a step set's end-to-end rows of `pplan validate`, layer sets left out; the rows of
  `pplan validate --recent` that are predicted and not flagged uncertain) with its axes (routing: dense or MoE,
  hardware, pplan's stack, release where the source names one, sequence band, GEMM precision) and its error
  (predicted − published) / published in sample and leaving its own set out of the fits;
- `bands`: per axis and routing, the 10th and 90th percentiles (linear interpolation between closest ranks,
  numpy's default) and the mean absolute error of those errors, in sample and left out, for the groups with at
  least `MIN_RUNS` runs: what README and `pplan explain`'s assumptions quote; the lookup itself
  (pplan.cost.uncertainty) takes the same percentiles over the runs of the plan's own cell;
- `envelopes`: per hardware, the range of the counted runs' cuts (t, p, cp, ep, ZeRO, model size, GPUs, schedules,
  TP overlap), and the fingerprint of the profile figures they were predicted with
  (pplan.profiles.hardware_spec.calibration_fingerprint): a profile whose figures differ is not calibrated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pplan.model.params import total_params
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan
from pplan.profiles.confidence import AXIS_NAMES, MIN_RUNS, PERCENTILES, percentile, seq_band
from pplan.profiles.hardware_spec import HardwareSpec, calibration_fingerprint
from pplan.profiles.model_spec import ModelSpec
from pplan.validation.published import SetCheck, row_model, run_request
from pplan.validation.recent import RecentRow
from pplan.validation.recent import row_model as recent_row_model

HardwareLoader = Callable[[str], HardwareSpec]
ModelLoader = Callable[[str], ModelSpec]


@dataclass(frozen=True, slots=True)
class ScoredRun:
    """One counted run: its axes, errors in and out of sample, and the plan it was predicted at."""

    set_name: str
    label: str
    routing: str
    hardware: str
    stack: str
    release: str
    seq_len: int
    precision: str
    error: float
    left_out_error: float
    model: ModelSpec
    plan: Plan

    def record(self) -> dict[str, Any]:
        """The run as `confidence_bands.json` keeps it (`runs`)."""
        return {
            "set": self.set_name, "label": self.label, "routing": self.routing, "hardware": self.hardware,
            "stack": self.stack, "release": self.release, "sequence": seq_band(self.seq_len),
            "precision": self.precision, "error": round(self.error, 4), "left_out_error": round(self.left_out_error, 4),
        }  # fmt: skip


def published_runs(
    sets: Sequence[dict[str, Any]], checks: Sequence[SetCheck], load_model: ModelLoader
) -> list[ScoredRun]:
    """The end-to-end rows of `pplan validate`'s sets (`check_sets`), at the plans `calibration_figures` reads."""
    out = []
    for data, check in zip(sets, checks, strict=True):
        if data.get("kind") == "layer":
            continue
        for row, inside, left in zip(data["rows"], check.in_sample.rows, check.left_out.rows, strict=True):
            model = row_model(data, row, load_model)
            plan = make_plan(model, run_request(row, data["stated"], data["assumed"], data["stack"]))
            out.append(
                ScoredRun(
                    set_name=data["name"], label=inside.label, routing="MoE" if model.moe else "dense",
                    hardware=data["hardware"], stack=plan.stack, release="", seq_len=plan.seq_len,
                    precision=plan.precision, error=inside.error, left_out_error=left.error, model=model, plan=plan,
                )
            )  # fmt: skip
    return out


def recent_runs(
    collection: dict[str, Any], rows: Iterable[RecentRow], load_model: ModelLoader
) -> list[ScoredRun]:
    """The counted rows of `pplan validate --recent` (`RecentRow.counted`, with `leave_one_set_out`'s errors)."""
    source = {row["id"]: row for data in collection["sets"] for row in data["rows"]}
    out = []
    for r in rows:
        if not r.counted or r.request is None or r.error is None:
            continue
        model = recent_row_model(source[r.id], load_model)
        plan = make_plan(model, r.request)
        left = r.left_out_error if r.left_out_error is not None else r.error
        out.append(
            ScoredRun(
                set_name=r.set_name, label=r.id, routing="MoE" if r.moe else "dense", hardware=r.hardware,
                stack=plan.stack, release=r.release, seq_len=r.seq_len, precision=plan.precision, error=r.error,
                left_out_error=left, model=model, plan=plan,
            )
        )  # fmt: skip
    return out


def _figures(errors: list[float]) -> dict[str, float]:
    return {
        "low": round(percentile(errors, PERCENTILES[0]), 4),
        "high": round(percentile(errors, PERCENTILES[1]), 4),
        "mape": round(sum(map(abs, errors)) / len(errors), 4),
    }


def band_table(runs: Sequence[ScoredRun]) -> list[dict[str, Any]]:
    """Per routing and axis (`AXIS_NAMES`, "all" for the routing's every run), each group of at least `MIN_RUNS`
    runs: its count and figures in sample and left out (module docstring)."""
    out = []
    for routing in ("dense", "MoE"):
        mine = [r for r in runs if r.routing == routing]
        groups: dict[tuple[str, str], list[ScoredRun]] = {("all", ""): mine}
        for r in mine:
            for axis in AXIS_NAMES:
                value = seq_band(r.seq_len) if axis == "sequence" else getattr(r, axis)
                if value:
                    groups.setdefault((axis, value), []).append(r)
        for (axis, value), members in groups.items():
            if len(members) < MIN_RUNS:
                continue
            out.append(
                {
                    "routing": routing, "axis": axis, "value": value, "runs": len(members),
                    "in_sample": _figures([r.error for r in members]),
                    "left_out": _figures([r.left_out_error for r in members]),
                }
            )  # fmt: skip
    return out


def envelope(runs: Sequence[ScoredRun], hardware: HardwareSpec) -> dict[str, Any]:
    """The range of `runs`' cuts on one hardware, and its profile's fingerprint (module docstring)."""
    params = [total_params(r.model) / 1e9 for r in runs]
    plans = [r.plan for r in runs]
    return {
        "fingerprint": calibration_fingerprint(hardware),
        "runs": len(runs),
        "tp_max": max(p.tp for p in plans),
        "pp_max": max(p.pp for p in plans),
        "cp_max": max(p.cp for p in plans),
        "cp_across_nodes": any(p.cp > 1 and p.tp * p.cp > hardware.gpus_per_node for p in plans),
        "ep_max": max(p.ep for p in plans),
        "zero_max": max(p.zero_stage for p in plans),
        "params_min_b": math.floor(min(params) * 10) / 10,
        "params_max_b": math.ceil(max(params) * 10) / 10,
        "gpus_max": max(p.gpus for p in plans),
        "schedules": sorted({p.kind.name for p in plans}),
        "tp_comm_overlap": any(p.tp_comm_overlap for p in plans),
    }


ABOUT = (
    "Derived by scripts/fit_confidence_bands.py from the runs pplan validate and pplan validate --recent score "
    "(pplan/validation/bands.py); tests/test_confidence.py recomputes it. error: (predicted - published) / published "
    "in sample; left_out_error: the same with the run's own set left out of every fit. Bands: 10th and 90th "
    "percentiles (linear between closest ranks) and mean absolute error, per routing and axis, groups of at least "
    "min_runs runs. Envelopes: the range of the counted runs' cuts per hardware, with the fingerprint of the profile "
    "figures they were predicted with."
)


def confidence_data(runs: Sequence[ScoredRun], load_hardware: HardwareLoader) -> dict[str, Any]:
    """The whole of `confidence_bands.json` from the scored runs (module docstring)."""
    by_hw: dict[str, list[ScoredRun]] = {}
    for r in runs:
        by_hw.setdefault(r.hardware, []).append(r)
    return {
        "about": ABOUT,
        "percentiles": list(PERCENTILES),
        "min_runs": MIN_RUNS,
        "bands": band_table(runs),
        "envelopes": {hw: envelope(members, load_hardware(hw)) for hw, members in sorted(by_hw.items())},
        "runs": [r.record() for r in runs],
    }


def fit_confidence(
    sets: Sequence[dict[str, Any]],
    collection: dict[str, Any],
    load_model: ModelLoader,
    load_hardware: HardwareLoader,
) -> dict[str, Any]:
    """Score every bundled run now (`pplan validate`'s sets with the profiles' figures, `pplan validate --recent`'s
    rows with each set left out) and reduce them to `confidence_bands.json` (`confidence_data`)."""
    from pplan.validation.published import check_sets
    from pplan.validation.recent import leave_one_set_out, predict_all

    scored = published_runs(sets, check_sets(sets, load_model, load_hardware, False), load_model)
    rows = leave_one_set_out(
        collection, predict_all(collection, load_model, load_hardware), load_model, load_hardware
    )
    return confidence_data(scored + recent_runs(collection, rows, load_model), load_hardware)


README_AXES = ("all", "hardware", "sequence", "precision", "stack")
"""The axes README's table shows (the releases are in the JSON: too many rows to print)."""


def readme_table(data: dict[str, Any]) -> str:
    """The bands as README shows them: one row per routing and group of `README_AXES`, in and out of sample."""

    def cell(f: dict[str, float]) -> str:
        return f"{f['low']:+.1%} … {f['high']:+.1%} ({f['mape']:.1%})"

    lines = [
        "| routing | group | runs | in sample: 10th … 90th pct (mean abs.) | left out: 10th … 90th pct (mean abs.) |",
        "|---|---|---:|---|---|",
    ]
    for routing in ("dense", "MoE"):
        for axis in README_AXES:
            for b in data["bands"]:
                if b["routing"] == routing and b["axis"] == axis:
                    group = "every run" if axis == "all" else f"{axis} {b['value']}"
                    lines.append(
                        f"| {routing} | {group} | {b['runs']} | {cell(b['in_sample'])} | {cell(b['left_out'])} |"
                    )
    return "\n".join(lines) + "\n"


def readme_calibrated(data: dict[str, Any]) -> str:
    """Where a plan is calibrated (pplan.cost.uncertainty.MIN_CELL_RUNS runs or more with its hardware, routing,
    precision and stack), as README shows it: per hardware and stack, the precisions with their runs."""
    from pplan.cost.uncertainty import MIN_CELL_RUNS

    cells: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for r in data["runs"]:
        by_routing = cells.setdefault((r["hardware"], r["stack"]), {"dense": {}, "MoE": {}})
        by_routing[r["routing"]][r["precision"]] = by_routing[r["routing"]].get(r["precision"], 0) + 1
    lines = ["| hardware | stack | dense | MoE |", "|---|---|---|---|"]
    for (hw, stack), by_routing in sorted(cells.items()):
        shown = [
            ", ".join(f"{p} ({n})" for p, n in sorted(got.items()) if n >= MIN_CELL_RUNS) or "–"
            for got in (by_routing["dense"], by_routing["MoE"])
        ]
        if shown != ["–", "–"]:
            lines.append(f"| {hw} | {stack} | {shown[0]} | {shown[1]} |")
    return "\n".join(lines) + "\n"
