"""Sanity against practice: would `recommend` have found the configurations published runs actually used?

For each bundled published run (pplan/validation/published_runs.json) the search runs with the run's model, hardware,
GPU count, global batch and sequence length, restricted to Megatron-LM (what those runs used) and to plans inside
the calibrated envelope (`--max-extrapolation 0`: outside it pplan has no data to rank plans against practice,
and its interval says so; pplan.cost.uncertainty). The published
(t, p, v, b) is then explained under the search's own assumptions (flash attention, sequence parallelism; the
run's TP overlap and GEMM precision, which the search uses too), with
the recompute and ZeRO choice that fits and runs fastest, and set beside the search's best: its rank among the
simulated candidates and its throughput gap. A run passes when it ranks in the top 5 or within 5 % of the best.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pplan.errors import PplanError
from pplan.explain import explain
from pplan.launchers.support import SearchFilter
from pplan.plan.knobs import Recompute
from pplan.plan.records import PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.recommend import recommendations
from pplan.search.space import search_for
from pplan.validation.published import fastest_micro_batch, row_model, row_request, tunes_micro_batch

TOP = 5
GAP = 0.05
PUBLISHED_CUT = (
    "gpus", "global_batch", "micro_batch", "tp", "pp", "vp", "cp", "schedule", "seq_len", "tp_comm_overlap",
    "precision", "fp8_param_gather", "ep", "etp",
)  # fmt: skip
"""What a published run's explained plan keeps of it (`run_request`); the rest are the search's own assumptions."""


@dataclass(frozen=True, slots=True)
class PracticeRow:
    set_name: str
    published: str
    """The published configuration."""
    published_tokens_per_s: float | None
    """pplan's prediction for it (None when it does not fit under pplan's memory model)."""
    best: str
    best_tokens_per_s: float
    rank: int | None
    """1-based rank among the simulated candidates (None when it ranks below them)."""

    @property
    def gap(self) -> float | None:
        """1 − published / best."""
        if self.published_tokens_per_s is None:
            return None
        return 1 - self.published_tokens_per_s / self.best_tokens_per_s

    @property
    def passes(self) -> bool:
        return (self.rank is not None and self.rank <= TOP) or (self.gap is not None and self.gap <= GAP)


def _describe(req: PlanRequest) -> str:
    v = f" v={req.vp}" if req.vp else ""
    return f"t={req.tp} p={req.pp}{v} cp={req.cp} b={req.micro_batch} {req.schedule} rc={req.recompute} Z{req.zero_stage}"


def _best_published(
    model: ModelSpec, hw: HardwareSpec, base: PlanRequest, tuned_micro_batch: bool
) -> tuple[PlanRequest, float] | None:
    """The published cut at the recompute and ZeRO stage (and, where its source tuned it, the micro-batch) that
    pplan predicts fastest among those that fit."""
    best: tuple[PlanRequest, float] | None = None
    options: tuple[Recompute, ...] = ("none", "selective", "full")
    for recompute in options:
        for zero in (0, 1):
            req = replace(base, recompute=recompute, zero_stage=zero)
            if tuned_micro_batch:
                req = fastest_micro_batch(model, hw, req)
            try:
                rep = explain(model, hw, req, with_sensitivity=False, split_p2p=False)
            except PplanError:
                continue
            if (
                rep.memory.fits
                and rep.performance
                and (best is None or rep.performance.tokens_per_s > best[1])
            ):
                best = (req, rep.performance.tokens_per_s)
    return best


def practice_rows(
    data: dict[str, Any], load_model: Callable[[str], ModelSpec], hardware: HardwareSpec
) -> list[PracticeRow]:
    rows: list[PracticeRow] = []
    if data.get("kind") == "layer":  # one layer's passes: no configuration to search for
        return rows
    for row in data["rows"]:
        model = row_model(data, row, load_model)
        run = row_request(data, row, model, hardware)
        base = PlanRequest(**{name: getattr(run, name) for name in PUBLISHED_CUT})
        found = recommendations(
            model,
            hardware,
            search_for(base, launcher="megatron", top_n=24, max_extrapolation=0),
            launcher=SearchFilter("megatron", model, base.tp_comm_overlap),
        )
        if not found.candidates:
            continue
        top = found.candidates[0]
        assert top.report.performance is not None
        best_tps = top.report.performance.tokens_per_s
        published = _best_published(model, hardware, base, tunes_micro_batch(row, data["assumed"]))
        rank = None
        if published is not None:
            faster = [
                c
                for c in found.candidates
                if c.report.performance and c.report.performance.tokens_per_s > published[1]
            ]
            rank = len(faster) + 1 if len(faster) < len(found.candidates) else None
        rows.append(
            PracticeRow(
                set_name=data["name"],
                published=_describe(published[0]) if published else _describe(base) + " (does not fit)",
                published_tokens_per_s=published[1] if published else None,
                best=_describe(top.request),
                best_tokens_per_s=best_tps,
                rank=rank,
            )
        )
    return rows
