"""The versioned JSON shape of `pplan recommend --format json` ("pplan.recommend/2"): the inputs, the exact top N
candidates (each with the plan, memory, pipeline and performance blocks of `pplan.explain/2`), the rejection
counts and the closest misses. `pplan schema recommend` prints its JSON Schema.

Compatibility: fields are only ever added within a major version; a rename or removal bumps the number.
"""

from __future__ import annotations

from pydantic import Field, NonNegativeFloat

from pplan.documents.base import SCHEMA_KEY, Out
from pplan.documents.explain import MemoryOut, PerformanceOut, PipelineOut, PlanOut

RECOMMEND_SCHEMA = "pplan.recommend/2"


class RecommendInputs(Out):
    model: str
    """The model profile's name."""
    hardware: str
    """The hardware profile's name."""
    gpus: int
    """GPUs in all."""
    global_batch: int
    """Sequences per optimizer step."""
    seq_len: int
    """Tokens per sequence."""
    launcher: str | None
    """Only configurations this launcher can run were kept (None: any)."""


class LauncherRun(Out):
    arguments: list[str] | None
    """The launcher's arguments for this plan, one shell word each (what `--format` prints, without the comments);
    null when the launcher cannot run it as planned."""
    environment: dict[str, str]
    """Environment variables the run needs set (name: value)."""
    refused: str | None = None
    """Why the launcher cannot run this plan as planned, in one line (null when it can)."""


class LauncherArguments(Out):
    megatron: LauncherRun
    """Megatron-LM's `pretrain_gpt.py` arguments (`--format megatron`)."""
    torchtitan: LauncherRun
    """torchtitan 0.3.x's `-m torchtitan.train` arguments (`--format torchtitan`)."""
    megatron_bridge: LauncherRun
    """Megatron-Bridge's recipe overrides, one `key=value` argument each (`--format megatron-bridge`)."""


class RecommendCandidate(Out):
    rank: int
    """1 for the best; the order of `candidates`."""
    plan: PlanOut
    """The configuration, as `pplan explain` reports it."""
    memory: MemoryOut
    """Its memory per GPU, as `pplan explain` reports it."""
    pipeline: PipelineOut
    """Its simulated schedule, as `pplan explain` reports it."""
    performance: PerformanceOut | None
    """Its step time and throughput, as `pplan explain` reports them."""
    explain_command: str
    """The `pplan explain` command line that shows this configuration in full."""
    runs_on: list[str]
    """The launchers that run it as planned (megatron, torchtitan; empty: neither)."""
    tied_with_best: bool
    """Its predicted tokens/s reaches the lower end of the best plan's interval: within the model's own error."""
    launchers: LauncherArguments
    """Each launcher's arguments for this plan, or why it refuses it."""


class ClosestMiss(Out):
    plan: str
    """The configuration, in one line."""
    need_bytes: NonNegativeFloat
    """Memory the most loaded stage needs (plus any requested headroom)."""
    usable_bytes: NonNegativeFloat
    """The usable memory it missed."""


class RecommendReport(Out):
    schema_: str = Field(RECOMMEND_SCHEMA, alias=SCHEMA_KEY)
    """The document's version: pplan.recommend/2."""
    inputs: RecommendInputs
    """The query."""
    candidates: list[RecommendCandidate]
    """The exact top N, best first: predicted tokens/s, ties to less peak memory, then the smaller model replica
    (t·p·cp), then enumeration order."""
    rejected: dict[str, int]
    """Configurations not shown, counted per reason."""
    closest_misses: list[ClosestMiss]
    """The configurations that missed usable memory by the least."""
    safest_tied_rank: int | None
    """Among the plans tied with the best, the safest bet: fewest axes outside the calibrated envelope, then most
    launchers, then fewest non-default knobs (null with fewer than two tied)."""
    least_gpus_that_fit: int | None
    """When nothing fits: the first whole-node count, doubling, at which the same query has a plan (null
    otherwise, or when none up to 16,384 has)."""
    better_global_batch: int | None
    """When the batch is awkward for the GPU count: the nearby batch whose best plan predicts more tokens/s (null
    otherwise)."""
    better_global_batch_tokens_per_s: float | None
    """The predicted tokens/s at `better_global_batch` (null with it)."""
    enumerated: int
    """Configurations the search enumerated."""
    bounded: int
    """Configurations whose exact memory and proven throughput bound were computed."""
    simulated: int
    """Configurations whose schedule was simulated for the exact throughput."""
