"""How a sizing sweep fills `pplan size --json` ("pplan.size/1", the shapes in `pplan.documents.size`):
`size_document` builds the whole document from the query, the swept points and the goal: the inputs, the
assumptions in words (`assumptions`), each point with its cut in the recommend table's notation (`point_document`)
and the answers (`answers_document`). The command line only parses, calls this and renders."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pplan.documents.size import GoodputOut, SizeAnswersOut, SizeDocument, SizeInputs, SizePointOut
from pplan.plan.records import PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.recommend import awkward_batch, forced_model_parallel
from pplan.sizing import answers
from pplan.sizing.costs import prices_per_gpu_hour
from pplan.sizing.goodput import CHECKPOINT_BYTES_PER_PARAM, INTERRUPTIONS_PER_GPU_HOUR
from pplan.sizing.policy import STOP_EFFICIENCY
from pplan.sizing.sweep import SizePoint, SizeQuery

DAY_S = 86_400


def size_document(
    model: ModelSpec,
    hardware: Sequence[HardwareSpec],
    query: SizeQuery,
    points: Sequence[SizePoint],
    *,
    deadline_days: float | None,
    budget_usd: float | None,
    stop_early: bool,
    command: Callable[[str, PlanRequest], str],
) -> SizeDocument:
    """The `pplan size --json` document ("pplan.size/1"; `pplan schema size` prints its JSON Schema) of a sweep's
    `points`; `command(hardware, request)`: the `pplan explain` line of a point's plan."""
    node = {s.name: s.gpus_per_node for s in hardware}
    deadline_s = deadline_days * DAY_S if deadline_days is not None else None
    return SizeDocument(
        inputs=SizeInputs(
            model=model.name, hardware=[s.name for s in hardware], gpus_per_node=node,
            train_tokens=query.train_tokens, seq_len=query.seq_len, batch_policy=query.batch.describe(query.seq_len),
            deadline_days=deadline_days, budget_usd=budget_usd,
            prices_usd_per_gpu_hour=prices_per_gpu_hour(hardware, query.prices), pue=query.pue,
            interruptions_per_gpu_hour=query.goodput.interruptions_per_gpu_hour, restart_s=query.goodput.restart_s,
        ),
        assumptions=assumptions(query, hardware, stop_early),
        points=[
            point_document(p, points, command(p.hardware, p.request) if p.request else None, node[p.hardware])
            for p in points
        ],
        answers=answers_document(points, deadline_s, budget_usd),
    )  # fmt: skip


def assumptions(query: SizeQuery, hardware: Sequence[HardwareSpec], stop_early: bool) -> list[str]:
    """What the sweep assumed, one sentence each: the batch policy, the plan at each point, interruptions,
    checkpoints and restarts, the wall-time formula, energy, what has no energy or no cost, and the counts."""
    g = query.goodput
    storage = (
        f"{g.storage_bytes_per_s / 1e9:g} GB/s for the whole job (--storage-gb-per-s)"
        if g.storage_bytes_per_s
        else f"{g.storage_bytes_per_s_per_gpu / 1e6:.0f} MB/s per GPU of the job (Llama 3's storage: 2 TB/s "
        "sustained for 16,384 GPUs, arXiv 2407.21783 §3.3.1; --storage-gb-per-s)"
    )
    out = [
        query.batch.describe(query.seq_len),
        "each point is recommend's exact best plan for its hardware, GPU count and batch (top 1 by pplan's model); "
        "its explain line reproduces it",
        f"interruptions: {g.interruptions_per_gpu_hour:.3g} per GPU-hour"
        + (" (Llama 3 405B: 419 unexpected in 54 days on 16,384 H100s, arXiv 2407.21783 §3.3.4)"
           if g.interruptions_per_gpu_hour == INTERRUPTIONS_PER_GPU_HOUR else " (--interruptions-per-gpu-hour)"),
        f"checkpoints: {CHECKPOINT_BYTES_PER_PARAM} bytes per parameter (BF16 weights, FP32 master weights and "
        f"Adam's two moments) written at {storage}, blocking, every √(2 · write · MTBF) of work (Young 1974); "
        f"a restart takes {g.restart_s / 60:g} minutes (assumed; --restart-minutes) plus reading the checkpoint back",
        "wall time = work · (1 + write/interval) / (1 − (restart + (interval + write)/2) / MTBF) (first order)",
        f"energy at full board power plus each node's other parts, datasheet maxima (an upper bound), × PUE "
        f"{query.pue:g}",
    ]  # fmt: skip
    unpowered = [s.name for s in hardware if s.power is None]
    if unpowered:
        out.append(f"no energy for {', '.join(unpowered)}: its profile has no [power]")
    prices_given = dict(query.prices)
    unpriced = [s.name for s in hardware if s.name not in prices_given and s.price_usd_per_gpu_hour is None]
    if unpriced:
        out.append(f"no cost for {', '.join(unpriced)}: no price (--price NAME=USD; pplan never guesses one)")
    if stop_early:
        out.append(
            f"counts: whole nodes, powers of two and the 1.5× between, from one node; a hardware stops after the first "
            f"count below {STOP_EFFICIENCY:.0%} of its best tokens/s per GPU, or with no plan past ones that fit"
        )
    return out


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
        finishes=point.finishes,
        wall_days=point.wall_s / DAY_S if point.finishes else None,
        wall_interval_days=(point.wall_interval_s[0] / DAY_S, point.wall_interval_s[1] / DAY_S)
        if point.finishes
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
        confidence=point.confidence if point.fits else None,
    )


def label(point: SizePoint | None) -> str | None:
    """ "hardware × GPUs" (None for none)."""
    return None if point is None else f"{point.hardware} × {point.gpus}"


def answers_document(
    points: Sequence[SizePoint], deadline_s: float | None, budget: float | None
) -> SizeAnswersOut:
    """The answers block of `pplan.size/1` (pplan.sizing.answers)."""
    fewest = answers.fewest_meeting(points, deadline_s) if deadline_s is not None else None
    slow = answers.fewest_meeting(points, deadline_s, slow_end=True) if deadline_s is not None else None
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
        fewest_gpus_meeting_deadline_slow_end={hw: p.gpus if p else None for hw, p in slow.items()}
        if slow is not None
        else None,
        uncalibrated=answers.uncalibrated(points),
        cheapest_meeting_deadline=label(cheapest),
        cheapest_meeting_deadline_slow_end=label(answers.cheapest_meeting(points, deadline_s, slow_end=True))
        if deadline_s is not None
        else None,
        fastest_within_budget=label(answers.fastest_within(points, budget)) if budget is not None else None,
        nearest_miss=miss,
        pareto=[label(p) or "" for p in answers.pareto(points)],
    )
