"""A plan's pipeline, simulated: pass durations and hop latencies per stage, the timeline, and per-rank peaks.

This is where `explain` gets its bubble, its micro-batches in flight and its message counts: measured off the
explicit schedule (pplan.schedules) by the timeline simulator (pplan.timeline), not asserted from closed forms.
Two duration models:
- `unit`: F = I = W = 1 on every stage and free hops: the textbook picture the closed forms describe;
- `analytic`: F, I, W per chunk from pplan.passtime (FLOPs, bytes, tensor-parallel collectives, the output layer
  on the last chunk) and each hop's P2P message time on the link between the two ranks (pplan.links).
Virtual stages are the schedule's; for DualPipe, up-pipeline stage p + k runs model chunk k.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from pplan import activations as act
from pplan.comm import p2p_message_bytes
from pplan.links import p2p_message_matrix
from pplan.passtime import PassTimes, chunk_pass_times
from pplan.plan import Plan
from pplan.schedules import Schedule
from pplan.specs import HardwareSpec, ModelSpec
from pplan.timeline import Durations, Timeline, peak_in_flight, simulate

DurationModel = Literal["unit", "analytic"]


@dataclass(frozen=True, slots=True)
class PipelineRun:
    """The simulated step and what memory needs from it, per pipeline rank."""

    timeline: Timeline
    duration_model: DurationModel
    chunk_times: tuple[PassTimes, ...] | None
    """Per model chunk, in seconds (analytic model only)."""
    activation_bytes: tuple[int, ...]
    """Peak bytes of transformer-layer activations held at once, per rank."""
    extra_activation_bytes: tuple[int, ...]
    """What the embedding / output-layer / logits buffers add to that peak, per rank."""
    in_flight_stage_units: tuple[float, ...]
    """Peak micro-batches in flight per rank, in units of one average stage (L/p layers)."""
    in_flight_per_stage: tuple[int, ...]
    """Peak micro-batches in flight per virtual stage."""


def stage_chunks(plan: Plan) -> tuple[int, ...]:
    """Model chunk run by each virtual stage of the plan's schedule."""
    n = len(plan.layout.chunks)
    return tuple(s % n for s in range(plan.pipeline.num_stages))


def simulate_plan(
    model: ModelSpec, hardware: HardwareSpec, plan: Plan, duration_model: DurationModel = "analytic"
) -> PipelineRun:
    chunks = plan.layout.chunks
    of_stage = stage_chunks(plan)
    per_layer = act.layer_activations(model, plan).total_bytes
    emb = act.embedding_end(model, plan).total_bytes
    out = act.output_end(model, plan).total_bytes
    layer_bytes = [chunks[c].layers * per_layer for c in of_stage]
    end_bytes = [
        (emb if chunks[c].has_embedding else 0) + (out if chunks[c].has_output else 0) for c in of_stage
    ]
    unit_layers = model.num_layers / plan.pp
    units = [chunks[c].layers / unit_layers for c in of_stage]

    times: tuple[PassTimes, ...] | None = None
    if duration_model == "unit":
        durations = Durations()
        latency: float | list[list[float]] = 0.0
    else:
        times = chunk_pass_times(model, hardware, plan)
        durations = Durations(
            f=[times[c].f_s for c in of_stage],
            i=[times[c].i_s for c in of_stage],
            w=[times[c].w_s for c in of_stage],
        )
        msg = p2p_message_bytes(model, plan)
        latency = p2p_message_matrix(hardware, plan.tp, plan.cp, plan.dp, plan.pp, msg)

    key = _run_key(plan, durations, latency, layer_bytes, end_bytes, units)
    hit = _RUNS.get(key)
    if hit is not None and hit[0]() is plan.pipeline:
        return PipelineRun(hit[1].timeline, duration_model, times, *hit[1].peaks)
    timeline = simulate(plan.pipeline, durations, latency, activation_bytes=layer_bytes)
    _, combined = peak_in_flight(plan.pipeline, [a + e for a, e in zip(layer_bytes, end_bytes, strict=True)])
    _, in_units = peak_in_flight(plan.pipeline, units)
    assert timeline.peak_bytes_per_rank is not None
    layers_peak = tuple(round(x) for x in timeline.peak_bytes_per_rank)
    peaks = _Peaks(
        layers_peak,
        tuple(max(0, round(c) - a) for c, a in zip(combined, layers_peak, strict=True)),
        in_units,
        timeline.peak_in_flight_per_stage,
    )
    if len(_RUNS) >= 512:
        _RUNS.clear()
    _RUNS[key] = (weakref.ref(plan.pipeline), _Cached(timeline, peaks))
    return PipelineRun(timeline, duration_model, times, *peaks)


@dataclass(frozen=True, slots=True)
class _Peaks:
    activation_bytes: tuple[int, ...]
    extra_activation_bytes: tuple[int, ...]
    in_flight_stage_units: tuple[float, ...]
    in_flight_per_stage: tuple[int, ...]

    def __iter__(self) -> Iterator[tuple[int, ...] | tuple[float, ...]]:
        return iter(
            (
                self.activation_bytes,
                self.extra_activation_bytes,
                self.in_flight_stage_units,
                self.in_flight_per_stage,
            )
        )


@dataclass(frozen=True, slots=True)
class _Cached:
    timeline: Timeline
    peaks: _Peaks


_RUNS: dict[tuple[object, ...], tuple[weakref.ref[Schedule], _Cached]] = {}
"""Simulated runs by their exact inputs: plans that differ only in how b, cp and d split the batch often give
the same schedule, pass times, hop times and bytes, so the search need not simulate them twice."""


def _run_key(
    plan: Plan,
    durations: Durations,
    latency: float | list[list[float]],
    layer_bytes: list[int],
    end_bytes: list[int],
    units: list[float],
) -> tuple[object, ...]:
    lat = latency if isinstance(latency, float) else tuple(tuple(row) for row in latency)
    per_stage = tuple(
        tuple(x) if isinstance(x, list | tuple) else (x,) for x in (durations.f, durations.i, durations.w)
    )
    return (id(plan.pipeline), per_stage, lat, tuple(layer_bytes), tuple(end_bytes), tuple(units))
