"""How a sizing sweep fills `pplan size --json` ("pplan.size/1", the shapes in `pplan.documents.size`): each point
with its cut in the recommend table's notation (`point_document`) and the answers (`answers_document`)."""

from __future__ import annotations

from collections.abc import Sequence

from pplan.documents.size import GoodputOut, SizeAnswersOut, SizePointOut
from pplan.sizing import answers
from pplan.sizing.sweep import SizePoint, awkward_batch, forced_model_parallel

DAY_S = 86_400


def cut_text(point: SizePoint) -> str | None:
    """The plan's cut in the recommend table's notation."""
    r = point.request
    if r is None:
        return None
    d = point.gpus // (r.tp * r.pp * r.cp)
    ep = f"·{r.ep}" if r.ep > 1 else ""
    precision = f" {r.precision}" if r.precision != "bf16" else ""
    return f"{r.tp}·{r.pp}·{d}·{r.vp or 1}·{r.cp}{ep}{precision} {r.schedule} {r.micro_batch}×{r.global_batch // (r.micro_batch * d)}"


def point_document(
    point: SizePoint, points: Sequence[SizePoint], explain: str | None, gpus_per_node: int
) -> SizePointOut:
    """One point of `pplan.size/1`."""
    good = point.goodput
    cost = point.cost
    return SizePointOut(
        hardware=point.hardware,
        gpus=point.gpus,
        global_batch=point.global_batch,
        fits=point.fits,
        reason=point.reason,
        forced_model_parallel=forced_model_parallel(point.gpus, point.global_batch),
        awkward_batch=awkward_batch(point.gpus, point.global_batch, gpus_per_node),
        plan=cut_text(point),
        explain=explain,
        step_s=point.step_s if point.fits else None,
        step_interval_s=point.step_interval_s if point.fits else None,
        tokens_per_s=point.tokens_per_s if point.fits else None,
        tokens_per_s_per_gpu=point.tokens_per_s_per_gpu if point.fits else None,
        mfu=point.mfu if point.fits else None,
        scaling_efficiency=answers.scaling_efficiency(point, points),
        steps=point.steps if point.fits else None,
        work_days=point.work_s / DAY_S if point.fits else None,
        wall_days=point.wall_s / DAY_S if point.fits else None,
        wall_interval_days=(point.wall_interval_s[0] / DAY_S, point.wall_interval_s[1] / DAY_S)
        if point.fits
        else None,
        goodput=GoodputOut(
            mtbf_s=good.mtbf_s,
            checkpoint_bytes=good.checkpoint_bytes,
            checkpoint_write_s=good.checkpoint_write_s,
            restart_s=good.restart_s,
            interval_s=good.interval_s,
            fraction=good.fraction,
        )
        if good is not None
        else None,
        gpu_hours=cost.gpu_hours if cost is not None else None,
        cost_usd=cost.cost_usd if cost is not None else None,
        energy_kwh=cost.energy_kwh if cost is not None else None,
        calibrated=point.calibrated,
    )


def label(point: SizePoint | None) -> str | None:
    """ "hardware × GPUs" (None for none)."""
    return None if point is None else f"{point.hardware} × {point.gpus}"


def answers_document(
    points: Sequence[SizePoint], deadline_s: float | None, budget: float | None
) -> SizeAnswersOut:
    """The answers block of `pplan.size/1` (pplan.sizing.answers)."""
    fewest = answers.fewest_meeting(points, deadline_s) if deadline_s is not None else None
    cheapest = answers.cheapest_meeting(points, deadline_s) if deadline_s is not None else None
    miss = None
    if deadline_s is not None and cheapest is None:
        near = answers.nearest_miss(points)
        if near is not None:
            miss = f"{label(near)}: {near.wall_s / DAY_S:.1f} days"
    return SizeAnswersOut(
        least_gpus_that_fit={hw: p.gpus if p else None for hw, p in answers.least_fitting(points).items()},
        knee={
            hw: (k.gpus if (k := answers.knee(ps)) else None)
            for hw, ps in answers.by_hardware(points).items()
        },
        fewest_gpus_meeting_deadline={hw: p.gpus if p else None for hw, p in fewest.items()}
        if fewest is not None
        else None,
        cheapest_meeting_deadline=label(cheapest),
        fastest_within_budget=label(answers.fastest_within(points, budget)) if budget is not None else None,
        nearest_miss=miss,
        pareto=[label(p) or "" for p in answers.pareto(points)],
    )
