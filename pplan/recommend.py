"""`recommend` beyond the search (pplan.search): what each shown plan runs on, which plans lie within the model's
own error of the best (tied) and the safest of those, the least GPUs that fit when nothing does, and a nearby
global batch when the asked one is awkward for the GPU count.

- Runs on: the launchers that run a plan as planned (`pplan.launchers.support.runs_on`).
- Tied: a plan whose predicted tokens/s reaches the lower end of the best plan's interval (the calibration runs'
  10th-90th percentile errors, widened per extrapolated axis): within the model's own error, no better than #1.
- Safest tied: among the tied, the fewest axes outside the calibrated envelope, then the most launchers that run
  it, then the fewest non-default knobs (`knob_count`), then the rank.
- Least GPUs: the same query at whole-node counts doubling from the asked one, up to `MAX_GPUS`: the first with a
  plan.
- A better batch: where the asked batch forces a model-parallel size the count would not otherwise need
  (pplan.sizing.sweep.awkward_batch), the nearest batches below and above that do not; the best of each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pplan.launchers.support import runs_on
from pplan.plan.configuration import PlanRequest
from pplan.profiles.specs import HardwareSpec, ModelSpec
from pplan.search import LauncherFilter, Recommendation, SearchRequest, SearchResult, search
from pplan.sizing.sweep import MAX_GPUS, awkward_batch


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


def annotate(model: ModelSpec, result: SearchResult) -> list[Annotation]:
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
        found = search(model, hw, replace(request, gpus=gpus, top_n=1, prefetch=False), None, launcher)
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
        found = search(
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
    found = search(
        model, hw, replace(request, max_extrapolation=None, top_n=1, prefetch=False), None, launcher
    )
    return found.candidates[0] if found.candidates else None
