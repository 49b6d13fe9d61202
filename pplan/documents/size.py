"""`pplan size --json`: the `pplan.size/1` document's shape, a sizing sweep's points and answers (filled by
`pplan.sizing.document`).

Times in seconds (and days where named so), energy in kWh, cost in US dollars; every interval is the step time's
interval (the calibration runs' spread, `pplan explain`) carried through. MFU is model FLOPs over the BF16 peak with
the attention counted over the full s×s scores (the non-causal convention).
"""

from __future__ import annotations

from pydantic import Field

from pplan.documents.base import SCHEMA_KEY, Out

SIZE_SCHEMA = "pplan.size/1"


class SizeInputs(Out):
    model: str
    """The model profile's name."""
    hardware: list[str]
    """The hardware profiles compared."""
    gpus_per_node: dict[str, int]
    """Each hardware's node (NVLink domain) size: the counts swept are whole nodes of it."""
    train_tokens: float
    """Tokens to train on."""
    seq_len: int
    """Tokens per sequence."""
    batch_policy: str
    """The batch policy in words (fixed, or growing with the GPUs up to a ceiling)."""
    deadline_days: float | None
    """The deadline asked for (--days), or null."""
    budget_usd: float | None
    """The budget asked for (--budget), US dollars, or null."""
    prices_usd_per_gpu_hour: dict[str, float]
    """The price per GPU-hour of each hardware that has one (profile or --price); no price, no cost."""
    pue: float
    """Facility power usage effectiveness the energy is multiplied by."""
    interruptions_per_gpu_hour: float
    """Unexpected interruptions per GPU-hour."""
    restart_s: float
    """The relaunch time before the checkpoint is read back."""


class GoodputOut(Out):
    mtbf_s: float
    """The job's mean time between interruptions: 3600 / (rate × GPUs)."""
    checkpoint_bytes: float
    """Bytes of one checkpoint (weights and optimizer states)."""
    checkpoint_write_s: float
    """Time to write one checkpoint at the storage bandwidth."""
    restart_s: float
    """Relaunch plus reading the checkpoint back."""
    interval_s: float
    """Young's checkpoint interval √(2 · write · MTBF)."""
    fraction: float
    """Goodput: failure-free work time / wall time."""


class SizePointOut(Out):
    hardware: str
    """The hardware profile's name."""
    gpus: int
    """GPUs in all at this point."""
    global_batch: int
    """Sequences per step."""
    fits: bool
    """Whether any plan fits at this count."""
    reason: str | None
    """Why nothing fits at this count, or why its run never finishes (null when a plan does and its run ends)."""
    finishes: bool = True
    """Whether the run ends: false when interruptions arrive faster than the run recovers from one; its wall time,
    interval, GPU-hours, cost and energy are then null and it answers no question of time or cost."""
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
    """The best plan's predicted step time (null when nothing fits)."""
    step_interval_s: tuple[float, float] | None
    """[low, high] of the step time (pplan explain's interval)."""
    tokens_per_s: float | None
    """The best plan's predicted tokens per second, the whole job."""
    tokens_per_s_per_gpu: float | None
    """tokens_per_s / gpus."""
    mfu: float | None
    """Non-causal convention (module docstring)."""
    scaling_efficiency: float | None
    """Tokens/s per GPU against the smallest count of the same hardware that fits."""
    steps: int | None
    """Optimizer steps to train the budget."""
    work_days: float | None
    """Failure-free time to train the budget."""
    wall_days: float | None
    """With interruptions, checkpoints and restarts."""
    wall_interval_days: tuple[float, float] | None
    """[low, high] of wall_days from the step interval."""
    goodput: GoodputOut | None
    """The interruption overhead: checkpoints, restarts, goodput."""
    gpu_hours: float | None
    """GPUs × wall time, hours."""
    cost_usd: float | None
    """gpu_hours × the price per GPU-hour (null without a price)."""
    energy_kwh: float | None
    """Energy over the wall time, kWh, the PUE included."""
    calibrated: bool
    """Whether the plan is calibrated (pplan.cost.uncertainty: validated runs on its hardware with its routing,
    precision and stack)."""
    confidence: str | None = None
    """What pplan says of the plan's step time, the line `explain` prints (None: nothing fits)."""


class SizeAnswersOut(Out):
    least_gpus_that_fit: dict[str, int | None]
    """Per hardware: the smallest count in the sweep with a plan."""
    knee: dict[str, int | None]
    """Per hardware: the largest count up to which each step up still returned half its GPUs' share."""
    fewest_gpus_meeting_deadline: dict[str, int | None] | None
    """Per hardware, with a deadline: the smallest count that meets it at the estimate."""
    fewest_gpus_meeting_deadline_slow_end: dict[str, int | None] | None = None
    """Per hardware, with a deadline: the smallest count that meets it at the interval's slow end (its wall time
    from the step interval's high end)."""
    uncalibrated: dict[str, str] = Field(default_factory=dict)
    """Per hardware whose plans in the sweep are not calibrated: why, and the band its intervals use."""
    cheapest_meeting_deadline: str | None
    """With a deadline: "hardware × GPUs" of the least cost (GPU-hours without prices) that meets it."""
    cheapest_meeting_deadline_slow_end: str | None = None
    """The same at the interval's slow end."""
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
    """The query."""
    assumptions: list[str]
    """Everything pplan assumed rather than was told."""
    points: list[SizePointOut]
    """Every point of the sweep, by hardware then GPU count."""
    answers: SizeAnswersOut
    """The answers read off the points."""
