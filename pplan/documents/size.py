"""`pplan size --json`: the `pplan.size/1` document, a sizing sweep's points and answers (pplan.sizing).

Times in seconds (and days where named so), energy in kWh, cost in US dollars; every interval is the step time's
interval (the calibration runs' spread, `pplan explain`) carried through. MFU is model FLOPs over the BF16 peak with
the attention counted over the full s×s scores (the non-causal convention).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from pplan.documents.base import SCHEMA_KEY, Out
from pplan.sizing import answers
from pplan.sizing.sweep import SizePoint, awkward_batch, forced_model_parallel

SIZE_SCHEMA = "pplan.size/1"
DAY_S = 86_400


class SizeInputs(Out):
    model: str
    hardware: list[str]
    gpus_per_node: dict[str, int]
    """Each hardware's node (NVLink domain) size: the counts swept are whole nodes of it."""
    train_tokens: float
    seq_len: int
    batch_policy: str
    """The batch policy in words (fixed, or growing with the GPUs up to a ceiling)."""
    deadline_days: float | None
    budget_usd: float | None
    prices_usd_per_gpu_hour: dict[str, float]
    """The price per GPU-hour of each hardware that has one (profile or --price); no price, no cost."""
    pue: float
    interruptions_per_gpu_hour: float
    restart_s: float
    """The relaunch time before the checkpoint is read back."""


class GoodputOut(Out):
    mtbf_s: float
    """The job's mean time between interruptions: 3600 / (rate × GPUs)."""
    checkpoint_bytes: float
    checkpoint_write_s: float
    restart_s: float
    """Relaunch plus reading the checkpoint back."""
    interval_s: float
    """Young's checkpoint interval √(2 · write · MTBF)."""
    fraction: float
    """Goodput: failure-free work time / wall time."""


class SizePointOut(Out):
    hardware: str
    gpus: int
    global_batch: int
    """Sequences per step."""
    fits: bool
    reason: str | None
    """Why nothing fits at this count (null when a plan does)."""
    forced_model_parallel: int
    """The least t·p·cp the batch forces: d must divide the batch, so t·p·cp is a multiple of GPUs / gcd(GPUs,
    sequences)."""
    awkward_batch: bool
    """The batch forces a model-parallel size the count would not otherwise need (a factor other than 2, or more
    than a node): a different batch or count may run faster per GPU."""
    plan: str | None
    """The best plan's cut: t·p·d·v·cp(·ep) schedule b×m."""
    explain: str | None
    """The `pplan explain` command line that shows the plan in full."""
    step_s: float | None
    step_interval_s: tuple[float, float] | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    mfu: float | None
    """Non-causal convention (module docstring)."""
    scaling_efficiency: float | None
    """Tokens/s per GPU against the smallest count of the same hardware that fits."""
    steps: int | None
    work_days: float | None
    """Failure-free time to train the budget."""
    wall_days: float | None
    """With interruptions, checkpoints and restarts."""
    wall_interval_days: tuple[float, float] | None
    goodput: GoodputOut | None
    gpu_hours: float | None
    cost_usd: float | None
    energy_kwh: float | None
    calibrated: bool


class SizeAnswersOut(Out):
    least_gpus_that_fit: dict[str, int | None]
    """Per hardware: the smallest count in the sweep with a plan."""
    knee: dict[str, int | None]
    """Per hardware: the largest count up to which each step up still returned half its GPUs' share."""
    fewest_gpus_meeting_deadline: dict[str, int | None] | None
    """Per hardware, with a deadline: the smallest count that meets it."""
    cheapest_meeting_deadline: str | None
    """With a deadline: "hardware × GPUs" of the least cost (GPU-hours without prices) that meets it."""
    fastest_within_budget: str | None
    """With a budget: "hardware × GPUs" of the least wall time within it."""
    nearest_miss: str | None
    """When a deadline is given and nothing meets it: the fastest point, and its wall time."""
    pareto: list[str]
    """The points no other beats on both wall time and cost (GPU-hours without prices), fastest first."""


class SizeDocument(Out):
    schema_: str = Field(SIZE_SCHEMA, alias=SCHEMA_KEY)
    """The document's version."""
    inputs: SizeInputs
    assumptions: list[str]
    points: list[SizePointOut]
    """Every point of the sweep, by hardware then GPU count."""
    answers: SizeAnswersOut


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
