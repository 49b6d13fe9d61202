"""A plan's pipeline, simulated: pass durations and hop latencies per stage, the step's timeline summary, and
per-rank activation peaks.

This is where `explain` and `recommend` get the bubble, the micro-batches in flight and the message counts:
measured off the plan's schedule by the timeline simulator, at a cost independent of m (pplan.periodic plays a
few periods of the explicit schedule and extends them exactly), not asserted from closed forms.
Two duration models:
- `unit`: F = I = W = 1 on every stage and free hops: the textbook picture the closed forms describe;
- `analytic`: F, I, W per chunk from pplan.passtime (FLOPs, bytes, tensor-parallel collectives, the output layer
  on the last chunk) and each hop's P2P message time on the link between the two ranks (pplan.links).
Virtual stages are the schedule's; for DualPipe, up-pipeline stage p + k runs model chunk k.
Activation peaks depend only on the order of each rank's list, not on durations: per rank, the most bytes held
at once by the micro-batches in flight on its stages (pplan.periodic.in_flight_profile).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pplan import activations as act
from pplan.comm import p2p_message_bytes
from pplan.links import p2p_message_matrix
from pplan.memory import ActivationPeaks
from pplan.passtime import PassTimes, chunk_pass_times
from pplan.periodic import in_flight_profile, summarise
from pplan.plan import Plan, Shape
from pplan.specs import HardwareSpec, ModelSpec
from pplan.timeline import Durations, RunSummary

DurationModel = Literal["unit", "analytic"]


@dataclass(frozen=True, slots=True)
class StageInputs:
    """What the simulator needs of a plan: per virtual stage F, I, W seconds, and hop seconds between ranks."""

    chunk_times: tuple[PassTimes, ...]
    """Per model chunk, in seconds."""
    durations: Durations
    """Per virtual stage (tuples)."""
    latency: tuple[tuple[float, ...], ...]
    """Seconds of one P2P message from rank a to rank b."""


@dataclass(frozen=True, slots=True)
class PipelineRun:
    """The simulated step and what memory needs from it, per pipeline rank."""

    summary: RunSummary
    duration_model: DurationModel
    chunk_times: tuple[PassTimes, ...] | None
    """Per model chunk, in seconds (analytic model only)."""
    peaks: ActivationPeaks


def stage_inputs(model: ModelSpec, hardware: HardwareSpec, plan: Plan) -> StageInputs:
    """Analytic pass times per virtual stage and P2P message times between ranks."""
    times = chunk_pass_times(model, hardware, plan)
    of_stage = plan.stage_chunks
    msg = p2p_message_bytes(model, plan)
    return StageInputs(
        times,
        Durations(
            f=tuple(times[c].f_s for c in of_stage),
            i=tuple(times[c].i_s for c in of_stage),
            w=tuple(times[c].w_s for c in of_stage),
        ),
        _latency(hardware, plan.tp, plan.cp, plan.dp, plan.pp, msg),
    )


@lru_cache(maxsize=4096)
def _latency(
    hardware: HardwareSpec, t: int, cp: int, d: int, p: int, nbytes: int
) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(row) for row in p2p_message_matrix(hardware, t, cp, d, p, nbytes))


def activation_peaks(model: ModelSpec, plan: Plan) -> ActivationPeaks:
    """Per-rank peaks of activation bytes (layers, and what the model ends add) and of micro-batches in flight."""
    chunks = plan.layout.chunks
    of_stage = plan.stage_chunks
    per_layer, emb, out = _bytes_per_microbatch(model, plan.shape)
    layer_bytes = [chunks[c].layers * per_layer for c in of_stage]
    both = [
        layer_bytes[s] + (emb if chunks[c].has_embedding else 0) + (out if chunks[c].has_output else 0)
        for s, c in enumerate(of_stage)
    ]
    unit_layers = model.num_layers / plan.pp
    profile = in_flight_profile(plan.schedule, plan.pp, plan.generator_v, plan.num_microbatches)
    layers_peak = tuple(round(x) for x in profile.peak_per_rank(layer_bytes))
    combined = profile.peak_per_rank(both)
    return ActivationPeaks(
        layers_peak,
        tuple(max(0, round(c) - a) for c, a in zip(combined, layers_peak, strict=True)),
        profile.peak_per_rank([chunks[c].layers / unit_layers for c in of_stage]),
        profile.peak_per_stage,
    )


def warmup_peaks(model: ModelSpec, plan: Plan) -> ActivationPeaks:
    """What every rank holds when its first backward starts (the family's closed form,
    `ScheduleFamily.warmup_in_flight`): no peak of the step is lower, so memory computed from it is a proven
    lower bound on the memory `activation_peaks` gives, at no cost in m."""
    chunks = plan.layout.chunks
    of_stage = plan.stage_chunks
    per_layer, emb, out = _bytes_per_microbatch(model, plan.shape)
    unit_layers = model.num_layers / plan.pp
    warm = plan.kind.warmup_in_flight(plan.pp, plan.vp, plan.num_microbatches)
    per_stage = [0] * len(of_stage)
    layers, extra, units = [], [], []
    for r, counts in enumerate(warm):
        held = tuple(zip(plan.stages_of(r), counts, strict=True))
        for s, n in held:
            per_stage[s] = n
        layer_bytes = sum(n * chunks[of_stage[s]].layers * per_layer for s, n in held)
        end_bytes = sum(
            n
            * (
                (emb if chunks[of_stage[s]].has_embedding else 0)
                + (out if chunks[of_stage[s]].has_output else 0)
            )
            for s, n in held
        )
        layers.append(layer_bytes)
        extra.append(end_bytes)
        units.append(sum(n * chunks[of_stage[s]].layers / unit_layers for s, n in held))
    return ActivationPeaks(tuple(layers), tuple(extra), tuple(units), tuple(per_stage))


@lru_cache(maxsize=4096)
def _bytes_per_microbatch(model: ModelSpec, shape: Shape) -> tuple[int, int, int]:
    """One micro-batch's activation bytes: per layer, at the embedding end, at the output end."""
    return (
        act.layer_activations(model, shape).total_bytes,
        act.embedding_end(model, shape).total_bytes,
        act.output_end(model, shape).total_bytes,
    )


def simulate_plan(
    model: ModelSpec,
    hardware: HardwareSpec,
    plan: Plan,
    duration_model: DurationModel = "analytic",
    free_hops: bool = False,
) -> PipelineRun:
    """The plan's step, simulated with `duration_model` (free hops on request, to separate exposed P2P time)."""
    peaks = activation_peaks(model, plan)
    if duration_model == "unit":
        summary = summarise(plan.schedule, plan.pp, plan.generator_v, plan.num_microbatches, Durations(), 0.0)
        return PipelineRun(summary, duration_model, None, peaks)
    inputs = stage_inputs(model, hardware, plan)
    latency = 0.0 if free_hops else inputs.latency
    summary = summarise(
        plan.schedule, plan.pp, plan.generator_v, plan.num_microbatches, inputs.durations, latency
    )
    return PipelineRun(summary, duration_model, inputs.chunk_times, peaks)
