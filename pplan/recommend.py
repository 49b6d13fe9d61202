"""`pplan recommend` as data, shaped like `explain` (pplan.explain): the search's exact top N (pplan.search), each
explained in full with what its memory knobs buy (pplan.search.knobs), what the answer says beyond them, and the
document (`recommend_report`, "pplan.recommend/2"). The CLI parses, calls `recommend_answer` and renders.

- Runs on: the launchers that run a plan as planned (`pplan.launchers.support.runs_on`).
- Tied: a plan whose predicted tokens/s reaches the lower end of the best plan's interval (the calibration runs'
  10th-90th percentile errors, widened per extrapolated axis): within the model's own error, no better than #1.
- Safest tied: among the tied, the fewest axes outside the calibrated envelope, then the most launchers that run
  it, then the fewest non-default knobs (`knob_count`), then the rank.
- Least GPUs: where nothing fits, the same query at whole-node counts doubling from the asked one, up to
  `MAX_GPUS` (also the most `pplan size` sweeps): the first with a plan.
- A better batch: where the asked batch forces a model-parallel size the count would not otherwise need
  (`awkward_batch`; `pplan size` marks such points too), the nearest batches below and above that do not; the
  best of each, shown when it predicts `BETTER_BATCH_GAIN` more tokens/s.
- Outside the envelope: where `--max-extrapolation` left nothing, the best plan without that filter.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pplan.collector import collector_paused
from pplan.documents.explain import ExplainReport
from pplan.documents.recommend import (
    ClosestMiss,
    LauncherArguments,
    LauncherRun,
    RecommendCandidate,
    RecommendInputs,
    RecommendReport,
)
from pplan.errors import PplanError
from pplan.explain import explain_with_run, performance
from pplan.launchers.support import runs_on
from pplan.plan.records import PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.search import LauncherFilter, Miss, Ranked, Rejection, SearchRequest, top_configurations
from pplan.search.knobs import knob_notes, stack_knob_notes
from pplan.search.result import Ranking
from pplan.search.space import Candidate

MAX_GPUS = 16_384
"""The most GPUs pplan answers for: the least-GPUs climb stops here, and `pplan size` sweeps no further."""
BETTER_BATCH_GAIN = 1.02
"""A nearby batch is suggested when its best plan predicts at least this much more tokens/s."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A configuration in the answer, with the full `explain` of it."""

    candidate: Candidate
    request: PlanRequest
    report: ExplainReport
    knobs: tuple[str, ...] = ()
    """What its ZeRO-2/3 or BF16 gradients buy in memory (pplan.search.knobs), one line each."""
    stack_knobs: tuple[str, ...] = ()
    """What its stack release's other dispatchers and EP overlap would buy (pplan.search.knobs), one line each."""

    @property
    def tokens_per_s(self) -> float:
        perf = self.report.performance
        assert perf is not None  # the search ranks by it
        return perf.tokens_per_s


@dataclass
class Recommendations:
    """The search's answer (pplan.search.Ranking) with every shown configuration explained."""

    candidates: list[Recommendation]
    rejected: Counter[Rejection] = field(default_factory=Counter)
    closest_misses: list[Miss] = field(default_factory=list)
    enumerated: int = 0
    bounded: int = 0
    """Configurations whose memory and proven throughput bound were computed."""
    simulated: int = 0
    """Configurations whose schedule was simulated for the exact throughput."""


def explained(
    model: ModelSpec, hw: HardwareSpec, req: SearchRequest, ranked: Ranked, knobs: bool = True
) -> Recommendation:
    """`ranked`'s `explain` (with the step-time breakdown's exposed P2P time apart from the bubble when the query
    asks: one more simulation) and, when `knobs`, its knob notes."""
    request = ranked.request
    report, plan, run = explain_with_run(model, hw, request, with_sensitivity=False, split_p2p=False)
    if req.split_p2p:
        report = report.model_copy(
            update={"performance": performance(model, hw, plan, run, with_sensitivity=False, split_p2p=True)}
        )
    notes = knob_notes(model, hw, request, ranked.scored.fitted.peak_bytes, run) if knobs else ()
    perf = report.performance
    stack = stack_knob_notes(model, hw, request, plan, perf.step_s) if knobs and perf is not None else ()
    return Recommendation(ranked.candidate, request, report, notes, stack)


@collector_paused()
def recommendations(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    progress: Callable[[int], None] | None = None,
    launcher: LauncherFilter | None = None,
    knobs: bool = True,
) -> Recommendations:
    """The search's exact top `req.top_n`, each explained (`explained`; without the knob notes unless `knobs`).
    `progress(simulated)` is called per simulation. The cyclic garbage collector is paused meanwhile
    (pplan.collector)."""
    found = _each_dispatcher(model, hw, req, progress, launcher)
    shown = [explained(model, hw, req, ranked, knobs) for ranked in found.candidates]
    return Recommendations(
        shown, found.rejected, found.closest_misses, found.enumerated, found.bounded, found.simulated
    )


def _each_dispatcher(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    progress: Callable[[int], None] | None,
    launcher: LauncherFilter | None,
) -> Ranking:
    """The exact top `req.top_n` over every dispatcher `req.moe_dispatchers` names: one search per dispatcher (each
    exact for it), the union walked in the search's order (pplan.search.rank) with the dispatcher's place in the
    list before the enumeration order. A configuration another dispatcher already shows is counted as a same-cut
    twin (the faster dispatcher is shown); the rest past the top are ranked below it. The dispatcher changes no
    memory, so the closest misses are the first search's; the counts add up over the searches."""
    dispatchers = req.moe_dispatchers if model.moe is not None else ()
    if len(dispatchers) <= 1:
        one = replace(req, moe_dispatcher=dispatchers[0], moe_dispatchers=()) if dispatchers else req
        return top_configurations(model, hw, one, progress, launcher)
    runs = [
        top_configurations(model, hw, replace(req, moe_dispatcher=d, moe_dispatchers=()), progress, launcher)
        for d in dict.fromkeys(dispatchers)
    ]
    merged = Ranking([], Counter(), runs[0].closest_misses)
    for run in runs:
        merged.rejected.update(run.rejected)
        merged.enumerated += run.enumerated
        merged.bounded += run.bounded
        merged.simulated += run.simulated
    walked = sorted(
        ((k, r) for k, run in enumerate(runs) for r in run.candidates),
        key=lambda kr: (*kr[1].scored.key()[:-2], kr[0], *kr[1].scored.key()[-2:]),
    )
    seen: set[PlanRequest] = set()
    for _, ranked in walked:
        plan = replace(ranked.request, moe_dispatcher=req.moe_dispatcher)  # the configuration, any dispatcher
        if plan in seen:
            merged.rejected[Rejection.EQUIVALENT] += 1
        elif len(merged.candidates) >= req.top_n:
            merged.rejected[Rejection.BELOW_TOP] += 1
        else:
            seen.add(plan)
            merged.candidates.append(ranked)
    return merged


def forced_model_parallel(gpus: int, global_batch: int) -> int:
    """The least t·p·cp the batch forces on `gpus` GPUs: d = GPUs / (t·p·cp) must divide the batch's sequences, so
    t·p·cp is a multiple of GPUs / gcd(GPUs, batch)."""
    return gpus // math.gcd(gpus, global_batch)


def awkward_batch(gpus: int, global_batch: int, gpus_per_node: int) -> bool:
    """Whether the batch forces a model-parallel size the count would not otherwise need: a factor other than 2
    (a 1.5× count with a power-of-two batch), or more than one node's GPUs."""
    forced = forced_model_parallel(gpus, global_batch)
    odd = forced // (forced & -forced)
    return odd > 1 or forced > gpus_per_node


@dataclass(frozen=True, slots=True)
class Annotation:
    """What the table says of one shown plan besides its numbers."""

    runs_on: tuple[str, ...]
    tied: bool
    """Within the model's error of the best (module docstring); the best itself is tied with itself."""
    extrapolated_axes: int
    knobs: int


def knob_count(req: PlanRequest) -> int:
    """Non-default knobs a plan needs: recomputation, ZeRO-2/3, hybrid sharding, activation offload, an uneven
    layer split."""
    return sum(
        (
            req.recompute != "none",
            req.zero_stage >= 2,
            req.shard_group is not None,
            bool(req.offload_modules),
            req.first_stage_layers is not None or req.last_stage_layers is not None,
        )
    )


def microbatches(req: PlanRequest) -> int:
    """m = B / (b · d)."""
    return req.global_batch // (req.micro_batch * (req.gpus // (req.tp * req.pp * req.cp)))


def annotate(model: ModelSpec, result: Recommendations) -> list[Annotation]:
    """Each shown plan's annotation, in rank order."""
    if not result.candidates:
        return []
    best = result.candidates[0].report.performance
    assert best is not None
    floor = best.tokens_per_s_interval[0]
    out = []
    for cand in result.candidates:
        perf = cand.report.performance
        assert perf is not None
        out.append(
            Annotation(
                runs_on=runs_on(model, cand.request, microbatches(cand.request)),
                tied=perf.tokens_per_s >= floor,
                extrapolated_axes=len(perf.extrapolation),
                knobs=knob_count(cand.request),
            )
        )
    return out


def safest_tied(annotations: list[Annotation]) -> int | None:
    """The 1-based rank of the safest tied plan (module docstring); None with fewer than two tied."""
    tied = [(i, a) for i, a in enumerate(annotations, 1) if a.tied]
    if len(tied) < 2:
        return None
    return min(tied, key=lambda ia: (ia[1].extrapolated_axes, -len(ia[1].runs_on), ia[1].knobs, ia[0]))[0]


def least_gpus_that_fit(
    model: ModelSpec, hw: HardwareSpec, request: SearchRequest, launcher: LauncherFilter | None
) -> tuple[int, Recommendation] | None:
    """The first whole-node count, doubling from the request's, at which the same query has a plan, with it."""
    node = hw.gpus_per_node
    gpus = max(node, -(-request.gpus // node) * node * 2)
    while gpus <= MAX_GPUS:
        found = recommendations(
            model, hw, replace(request, gpus=gpus, top_n=1, prefetch=False), None, launcher
        )
        if found.candidates:
            return gpus, found.candidates[0]
        gpus *= 2
    return None


def better_batch(
    model: ModelSpec, hw: HardwareSpec, request: SearchRequest, launcher: LauncherFilter | None
) -> tuple[int, Recommendation] | None:
    """Where the asked batch is awkward for the GPU count: the best plan at the nearest batch below and above that
    is not (a multiple of the GPUs per node's share: GPUs / node sequences), whichever predicts more tokens/s;
    None when the asked batch is not awkward or neither has a plan."""
    node = hw.gpus_per_node
    if not awkward_batch(request.gpus, request.global_batch, node):
        return None
    step = max(1, request.gpus // node)
    below = request.global_batch // step * step
    options = [b for b in (below, below + step) if b > 0 and b != request.global_batch]
    best: tuple[int, Recommendation] | None = None
    for batch in options:
        found = recommendations(
            model, hw, replace(request, global_batch=batch, top_n=1, prefetch=False), None, launcher
        )
        if not found.candidates:
            continue
        perf, kept = found.candidates[0].report.performance, best[1].report.performance if best else None
        assert perf is not None
        if kept is None or perf.tokens_per_s > kept.tokens_per_s:
            best = (batch, found.candidates[0])
    return best


def best_outside_envelope(
    model: ModelSpec, hw: HardwareSpec, request: SearchRequest, launcher: LauncherFilter | None
) -> Recommendation | None:
    """Where `--max-extrapolation` left nothing: the best plan without that filter (whose `explain` names the axes
    on which it leaves the calibrated envelope); None when there is none either."""
    found = recommendations(
        model, hw, replace(request, max_extrapolation=None, top_n=1, prefetch=False), None, launcher
    )
    return found.candidates[0] if found.candidates else None


@dataclass(frozen=True, slots=True)
class Recommended:
    """Everything `pplan recommend` shows: the explained answer and what the module docstring adds to it."""

    inputs: RecommendInputs
    result: Recommendations
    notes: list[Annotation]
    """Each shown plan's annotation, in rank order."""
    elapsed_s: float
    """Wall time of the search and the explanations of what it shows."""
    least: tuple[int, Recommendation] | None = None
    better: tuple[int, Recommendation] | None = None
    outside: Recommendation | None = None


def recommend_answer(
    model: ModelSpec,
    hw: HardwareSpec,
    request: SearchRequest,
    launcher: LauncherFilter | None = None,
    progress: Callable[[int], None] | None = None,
) -> Recommended:
    """The search's exact top N, explained (`recommendations`), with each plan's annotation and, as the answer
    calls for them, the best plan outside the calibrated envelope, the least GPUs that fit and a better batch."""
    started = time.perf_counter()
    result = recommendations(model, hw, request, progress, launcher)
    elapsed = time.perf_counter() - started
    inputs = RecommendInputs(
        model=model.name,
        hardware=hw.name,
        gpus=request.gpus,
        global_batch=request.global_batch,
        seq_len=request.seq_len or model.seq_len,
        launcher=request.launcher,
    )
    notes = annotate(model, result)
    outside = None
    if not result.candidates and Rejection.EXTRAPOLATED in result.rejected and not result.closest_misses:
        outside = best_outside_envelope(model, hw, request, launcher)
    least = (
        None
        if result.candidates or outside is not None
        else least_gpus_that_fit(model, hw, request, launcher)
    )
    better = better_batch(model, hw, request, launcher) if result.candidates else None
    if better is not None and better[1].tokens_per_s < BETTER_BATCH_GAIN * result.candidates[0].tokens_per_s:
        better = None
    return Recommended(inputs, result, notes, elapsed, least, better, outside)


def recommend_report(
    answer: Recommended,
    command: Callable[[PlanRequest], str],
    launchers: Callable[[PlanRequest], LauncherArguments],
) -> RecommendReport:
    """The `--format json` document ("pplan.recommend/2"; `pplan schema recommend` prints its JSON Schema);
    `command`: the `pplan explain` line of a shown plan; `launchers`: its launcher arguments
    (`launcher_arguments`)."""
    result, notes, least, better = answer.result, answer.notes, answer.least, answer.better
    return RecommendReport(
        inputs=answer.inputs,
        candidates=[
            RecommendCandidate(
                rank=i,
                plan=c.report.plan,
                memory=c.report.memory,
                pipeline=c.report.pipeline,
                performance=c.report.performance,
                explain_command=command(c.request),
                runs_on=list(note.runs_on),
                tied_with_best=note.tied,
                launchers=launchers(c.request),
            )
            for i, (c, note) in enumerate(zip(result.candidates, notes, strict=True), 1)
        ],
        safest_tied_rank=safest_tied(notes),
        least_gpus_that_fit=least[0] if least else None,
        better_global_batch=better[0] if better else None,
        better_global_batch_tokens_per_s=better[1].tokens_per_s if better else None,
        rejected={str(reason): n for reason, n in result.rejected.items()},
        closest_misses=[
            ClosestMiss(plan=m.summary, need_bytes=m.need_bytes, usable_bytes=m.usable_bytes)
            for m in result.closest_misses
        ],
        enumerated=result.enumerated,
        bounded=result.bounded,
        simulated=result.simulated,
    )


def launcher_arguments(model: ModelSpec, request: PlanRequest) -> LauncherArguments:
    """What each candidate of the document carries: Megatron-LM's `pretrain_gpt.py` arguments, torchtitan 0.3.x's
    (`-m torchtitan.train`) and Megatron-Bridge's recipe overrides for `request`'s plan (those `--format
    megatron|torchtitan|megatron-bridge` print), each with the environment it needs, or the one-line reason the
    launcher refuses the plan."""
    from pplan.launchers.capabilities import capabilities_of
    from pplan.launchers.megatron import megatron_args, megatron_env
    from pplan.launchers.megatron_bridge import bridge_env, bridge_override_args
    from pplan.launchers.support import check_supported
    from pplan.launchers.torchtitan import torchtitan_args
    from pplan.plan.configuration import make_plan

    plan = make_plan(model, request)

    def run(launcher: str) -> LauncherRun:
        try:
            check_supported(launcher, plan, model)
            if launcher == "megatron-bridge":
                return LauncherRun(arguments=bridge_override_args(model, plan), environment=bridge_env(plan))
            if capabilities_of(launcher).release is None:  # not a torchtitan release: Megatron-LM's arguments
                return LauncherRun(arguments=megatron_args(model, plan), environment=megatron_env(plan))
            return LauncherRun(arguments=torchtitan_args(model, plan), environment={})
        except PplanError as err:
            return LauncherRun(arguments=None, environment={}, refused=err.one_line())

    return LauncherArguments(
        megatron=run("megatron"), torchtitan=run("torchtitan"), megatron_bridge=run("megatron-bridge")
    )
