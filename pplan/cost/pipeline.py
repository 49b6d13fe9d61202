"""A plan's pipeline, simulated: pass durations and hop latencies per stage, the step's timeline summary, and
per-rank activation peaks.

This is where `explain` and `recommend` get the bubble, the micro-batches in flight and the message counts:
measured off the plan's schedule by the timeline simulator, at a cost independent of m (pplan.schedules.periodic plays a
few periods of the explicit schedule and extends them exactly), not asserted from closed forms.
Two duration models:
- `unit`: F = I = W = 1 on every stage and free hops: the textbook picture the closed forms describe;
- `analytic`: F, I, W per chunk from pplan.cost.passtime (FLOPs, bytes, tensor-parallel collectives, the output layer
  on the last chunk) and each hop's P2P message time on the link between the two ranks (pplan.cost.links).
Virtual stages are the schedule's; for DualPipe, up-pipeline stage p + k runs model chunk k.
`--schedule auto` (a tuned family) is the exception: its lists are built for this plan's analytic stage inputs
under a memory limit per stage (`auto_plan`, pplan.cost.autoplan), then simulated and profiled like any list.
Activation peaks depend only on the order of each rank's list, not on durations: per rank, the most bytes held
at once by the micro-batches in flight on its stages (pplan.schedules.periodic.in_flight_profile). With
activation offload the offloaded tensors are out of those bytes, and the host bytes per GPU are the same peak
taken over what each micro-batch offloads on each chunk (its layers that keep their activations × the bytes one
layer offloads).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from pplan.cost.autoplan import AutoPlan, memory_limits
from pplan.cost.chunktimes import chunk_pass_times
from pplan.cost.comm import p2p_message_bytes
from pplan.cost.links import p2p_message_matrix
from pplan.cost.memory import ActivationPeaks
from pplan.cost.passes import PassTimes
from pplan.frozen import changed
from pplan.model import activations as act
from pplan.plan.knobs import DurationModel
from pplan.plan.layout import Layout
from pplan.plan.records import Plan
from pplan.plan.shape import Shape
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import blocks_p2p
from pplan.schedules import Schedule, ScheduleFamily
from pplan.schedules.auto import AutoResult, auto_schedule
from pplan.schedules.periodic import in_flight_profile, summarise
from pplan.schedules.periodic.profile import InFlightProfile
from pplan.schedules.timeline import Durations, RunSummary, peak_in_flight, simulate


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
    lists: Schedule | None = None
    """A tuned family's (auto's) lists the run played; None for the other families (their lists are the
    registry's)."""


def stage_inputs(
    model: ModelSpec, hardware: HardwareSpec, plan: Plan, free_hops: bool = False
) -> StageInputs:
    """Analytic pass times per virtual stage and P2P message times between ranks. Where the stack sends blocking
    (`pplan.profiles.stacks.blocks_p2p`) a stage's forward ends only when its activation has reached the next rank,
    and its input-gradient pass when its gradient has reached the previous one: each message's time is part of the
    sending pass (`blocking_sends`), and the hop itself then costs nothing more. `free_hops`: no P2P time at all,
    neither in the hops nor in blocking sends (what separates exposed P2P time from the bubble)."""
    times = chunk_pass_times(model, hardware, plan)
    of_stage = plan.stage_chunks
    latency = stage_inputs_latency(model, hardware, plan)
    f = [times[c].f_s for c in of_stage]
    i = [times[c].i_s for c in of_stage]
    if free_hops:
        latency = tuple(tuple(0.0 for _ in row) for row in latency)
    elif blocks_p2p(plan.stack, plan.kind.name, plan.overlap_p2p_comm):
        for s, (fs, is_) in enumerate(blocking_sends(plan, latency)):
            f[s] += fs
            i[s] += is_
        latency = tuple(tuple(0.0 for _ in row) for row in latency)
    return StageInputs(
        times,
        Durations(f=tuple(f), i=tuple(i), w=tuple(times[c].w_s for c in of_stage)),
        latency,
    )


def stage_inputs_latency(
    model: ModelSpec, hardware: HardwareSpec, plan: Plan
) -> tuple[tuple[float, ...], ...]:
    """Seconds of one P2P message from rank a to rank b of `plan`'s pipeline."""
    return _latency(hardware, plan.tp, plan.cp, plan.dp, plan.pp, p2p_message_bytes(model, plan))


def blocking_sends(plan: Plan, latency: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, float], ...]:
    """Per virtual stage, the seconds its forward and its input-gradient pass spend sending to another rank: the
    forward to the next stage of each chain it is on, the input gradient to the previous one."""
    place = plan.placement
    out = [[0.0, 0.0] for _ in place]
    for chain in plan.chains:
        for a, b in pairwise(chain):
            if place[a] != place[b]:
                out[a][0] += latency[place[a]][place[b]]
                out[b][1] += latency[place[b]][place[a]]
    return tuple((x, y) for x, y in out)


@lru_cache(maxsize=4096)
def _latency(
    hardware: HardwareSpec, t: int, cp: int, d: int, p: int, nbytes: int
) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(row) for row in p2p_message_matrix(hardware, t, cp, d, p, nbytes))


def activation_peaks(
    model: ModelSpec, plan: Plan, hardware: HardwareSpec | None = None, lists: Schedule | None = None
) -> ActivationPeaks:
    """Per-rank peaks of activation bytes (layers, and what the model ends add) and of micro-batches in flight.
    A tuned schedule (auto) needs its `lists`, or the `hardware` they are built for (`tuned_lists`)."""
    chunks = plan.layout.chunks
    of_stage = plan.stage_chunks
    layer_bytes, both = _stage_bytes(model, plan)
    unit_layers = model.num_layers / plan.pp
    if plan.kind.tuned:
        profile = _profile_of(tuned_lists(model, hardware, plan, lists))
    else:
        profile = in_flight_profile(plan.schedule, plan.pp, plan.generator_v, plan.num_microbatches)
    layers_peak = tuple(round(x) for x in profile.peak_per_rank(layer_bytes))
    combined = profile.peak_per_rank(both)
    host = _host_bytes_per_microbatch(model, plan)
    return ActivationPeaks(
        layers_peak,
        tuple(max(0, round(c) - a) for c, a in zip(combined, layers_peak, strict=True)),
        profile.peak_per_rank([chunks[c].layers / unit_layers for c in of_stage]),
        profile.peak_per_stage,
        tuple(round(x) for x in profile.peak_per_rank([host[c] for c in of_stage])) if any(host) else (),
    )


def _stage_bytes(model: ModelSpec, plan: Plan) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """One micro-batch's activation bytes per virtual stage: its layers alone, and with the model ends."""
    chunks = plan.layout.chunks
    of_stage = plan.stage_chunks
    per_chunk, emb, out = _bytes_per_microbatch(model, plan)
    layer_bytes = tuple(per_chunk[c] for c in of_stage)
    both = tuple(
        layer_bytes[s] + (emb if chunks[c].has_embedding else 0) + (out if chunks[c].has_output else 0)
        for s, c in enumerate(of_stage)
    )
    return layer_bytes, both


def _profile_of(schedule: Schedule) -> InFlightProfile:
    """The in-flight profile of explicit lists with one stage per rank."""
    per_stage, _ = peak_in_flight(schedule, [1.0] * schedule.num_stages)
    peaks = tuple(round(x) for x in per_stage)
    return InFlightProfile(
        schedule.num_stages,
        peaks,
        tuple((s,) for s in range(schedule.num_stages)),
        tuple(((k,),) for k in peaks),
    )


def auto_memory_limits(model: ModelSpec, hardware: HardwareSpec, plan: Plan) -> tuple[int, ...]:
    """K per stage of a tuned plan (pplan.cost.autoplan.memory_limits), from its activation bytes per stage."""
    return memory_limits(model, hardware, plan, _stage_bytes(model, plan)[1])


@lru_cache(maxsize=256)
def auto_plan(model: ModelSpec, hardware: HardwareSpec, plan: Plan) -> AutoPlan:
    """The plan's automatic schedule (pplan.cost.autoplan): K per stage, then the lists
    `pplan.schedules.auto.auto_schedule` builds for the plan's analytic stage inputs (the durations and hop
    latencies the step is simulated with, blocking sends included)."""
    limits = auto_memory_limits(model, hardware, plan)
    inputs = stage_inputs(model, hardware, plan)
    result = _auto_lists(plan.pp, plan.num_microbatches, limits, inputs.durations, inputs.latency)
    return AutoPlan(limits, plan.memory_limit is None, result)


@lru_cache(maxsize=1024)
def _auto_lists(
    p: int, m: int, limits: tuple[int, ...], d: Durations, latency: tuple[tuple[float, ...], ...]
) -> AutoResult:
    """`auto_schedule`, remembered by its inputs: plans that differ only in what the pipeline does not see
    (ZeRO stage, gradient dtype) and leave the same limits share one search."""
    assert not isinstance(d.f, float) and not isinstance(d.i, float) and not isinstance(d.w, float)
    return auto_schedule(p, m, limits, d.f, d.i, d.w, [list(row) for row in latency])


def tuned_lists(
    model: ModelSpec, hardware: HardwareSpec | None, plan: Plan, lists: Schedule | None = None
) -> Schedule:
    """A tuned plan's lists: `lists` when given (a caller keeping the nominal plan's lists while it varies the
    hardware), else the ones `auto_plan` builds for `hardware`."""
    if lists is not None:
        return lists
    if hardware is None:
        raise TypeError(f"{plan.kind.name}'s lists need the hardware they are built for")
    return auto_plan(model, hardware, plan).result.schedule


def warmup_peaks(model: ModelSpec, plan: Plan) -> ActivationPeaks:
    """What every rank holds when its first backward starts (the family's closed form,
    `ScheduleFamily.warmup_in_flight`): no peak of the step is lower, so memory computed from it is a proven
    lower bound on the memory `activation_peaks` gives, at no cost in m."""
    counts, per_stage = _warmup_counts(plan.kind, plan.pp, plan.vp, plan.num_microbatches, plan.layout)
    unit_layers = model.num_layers / plan.pp
    if (
        not plan.offload_modules
        and not plan.offload_layers
        and not any(c.dense_layers for c in plan.layout.chunks)
        and (plan.recompute != "full" or plan.recompute_layers is None or plan.recompute_method != "block")
    ):
        # every chunk keeps the same bytes per layer (none, selective, full with one checkpoint per layer), or
        # per group of layers (uniform): summed per layer where it can be, the search's hot path
        per_layer, emb, out = _layer_bytes(model, activation_shape(plan.shape))
        if plan.recompute_group == 1:
            return ActivationPeaks(
                tuple(layers * per_layer for _, layers, _, _ in counts),
                tuple(e * emb + o * out for _, _, e, o in counts),
                tuple(layers / unit_layers for _, layers, _, _ in counts),
                per_stage,
            )
    per_chunk, emb, out = _bytes_per_microbatch(model, plan)
    host = _host_bytes_per_microbatch(model, plan)
    return ActivationPeaks(
        tuple(sum(n * per_chunk[c] for c, n in held) for held, _, _, _ in counts),
        tuple(e * emb + o * out for _, _, e, o in counts),
        tuple(layers / unit_layers for _, layers, _, _ in counts),
        per_stage,
        tuple(sum(n * host[c] for c, n in held) for held, _, _, _ in counts) if any(host) else (),
    )


def warmup_held(plan: Plan) -> tuple[int, ...]:
    """Micro-batches each rank holds at its first backward, summed over its chunks (what `warmup_peaks` counts)."""
    counts, _ = _warmup_counts(plan.kind, plan.pp, plan.vp, plan.num_microbatches, plan.layout)
    return tuple(sum(n for _, n in held) for held, _, _, _ in counts)


@lru_cache(maxsize=4096)
def _warmup_counts(
    family: ScheduleFamily, p: int, v: int, m: int, layout: Layout
) -> tuple[tuple[tuple[tuple[tuple[int, int], ...], int, int, int], ...], tuple[int, ...]]:
    """Per rank at its first backward: ((chunk, micro-batches held), ...), and the layers, embedding ends and
    output ends summed over the micro-batches it holds; and per stage, the micro-batches it holds then."""
    chunks = layout.chunks
    n_chunks = len(chunks)
    stages = family.rank_stages(p, v)
    per_stage = [0] * sum(len(x) for x in stages)
    per_rank = []
    for r, held in enumerate(family.warmup_in_flight(p, v, m)):
        layers = ends_e = ends_o = 0
        of_chunk: list[tuple[int, int]] = []
        for s, n in zip(stages[r], held, strict=True):
            per_stage[s] = n
            c = chunks[s % n_chunks]
            of_chunk.append((s % n_chunks, n))
            layers += n * c.layers
            ends_e += n * c.has_embedding
            ends_o += n * c.has_output
        per_rank.append((tuple(of_chunk), layers, ends_e, ends_o))
    return tuple(per_rank), tuple(per_stage)


@lru_cache(maxsize=4096)
def activation_shape(shape: Shape) -> Shape:
    """`shape` with the fields activation bytes do not read at their defaults: the expert-parallel degree and the
    all-to-all's overlap (a routed layer's saved tensors depend on etp, not ep), a split backward and
    tensor-parallel overlap (pplan.model.activations reads none of them). The cuts of every ep and schedule
    family of a search then share their activation bytes (`_layer_bytes`, `_chunk_bytes`)."""
    if shape.ep == 1 and not (shape.expert_comm_overlap or shape.splits_backward or shape.tp_comm_overlap):
        return shape
    return changed(shape, ep=1, expert_comm_overlap=False, splits_backward=False, tp_comm_overlap=False)


@lru_cache(maxsize=4096)
def _layer_bytes(model: ModelSpec, shape: Shape) -> tuple[int, int, int]:
    """One micro-batch's bytes per layer (every layer alike), at the embedding end, at the output end."""
    return (
        act.layer_activations(model, shape).total_bytes,
        act.embedding_end(model, shape).total_bytes,
        act.output_end(model, shape).total_bytes,
    )


def _host_bytes_per_microbatch(model: ModelSpec, plan: Plan) -> tuple[int, ...]:
    """One micro-batch's offloaded bytes per model chunk: its layers that keep their activations (not
    full-recompute checkpoints) × what one layer offloads (pplan.model.activations.offloaded_layer); under layer
    offload (p = 1: one chunk) the whole activations of its first `offload_layers` layers."""
    chunks = plan.layout.chunks
    if plan.offload_layers:
        return (act.layer_offload_bytes(model, plan.shape, plan.offload_layers, chunks[0].dense_layers),)
    per_layer = act.offloaded_layer(model, plan.shape).total_bytes
    return tuple((c.layers - plan.recomputed_layers(c.layers)) * per_layer for c in chunks)


def chunk_activation_bytes(model: ModelSpec, plan: Plan) -> tuple[int, ...]:
    """One micro-batch's activation bytes on each model chunk (its transformer layers)."""
    return _bytes_per_microbatch(model, plan)[0]


def _bytes_per_microbatch(model: ModelSpec, plan: Plan) -> tuple[tuple[int, ...], int, int]:
    """One micro-batch's activation bytes: per model chunk (its layers, `plan.recomputed_layers` of them
    recomputed), at the embedding end, at the output end."""
    chunks = plan.layout.chunks
    recomputed = tuple(plan.recomputed_layers(c.layers) for c in chunks)
    layers = tuple((c.layers, c.dense_layers) for c in chunks)
    return _chunk_bytes(
        model, activation_shape(plan.shape), layers, recomputed, plan.recompute_group, plan.offload_layers
    )


@lru_cache(maxsize=4096)
def _chunk_bytes(
    model: ModelSpec,
    shape: Shape,
    layers: tuple[tuple[int, int], ...],
    recomputed: tuple[int, ...],
    group: int,
    offloaded: int = 0,
) -> tuple[tuple[int, ...], int, int]:
    """Per chunk of (layers, dense layers of a routed model), its bytes; the recomputed layers are the chunk's
    first, so a routed model's dense layers (which come first) before its routed ones. Under layer offload (one
    chunk) the first chunk's first `offloaded` layers keep nothing on the GPU
    (pplan.model.activations.layer_offload_bytes)."""
    per_chunk: list[int] = []
    for (n, dense), k in zip(layers, recomputed, strict=True):
        total = act.chunk_layer_bytes(model, shape, n - dense, k - min(k, dense), group)
        if dense:
            total += act.chunk_layer_bytes(model.dense_part, shape, dense, min(k, dense), group)
        if offloaded and not per_chunk:
            total -= act.layer_offload_bytes(model, shape, offloaded, dense)
        per_chunk.append(total)
    return (
        tuple(per_chunk),
        act.embedding_end(model, shape).total_bytes,
        act.output_end(model, shape).total_bytes,
    )


def simulate_plan(
    model: ModelSpec,
    hardware: HardwareSpec,
    plan: Plan,
    duration_model: DurationModel = "analytic",
    free_hops: bool = False,
    lists: Schedule | None = None,
) -> PipelineRun:
    """The plan's step, simulated with `duration_model` (free hops on request, to separate exposed P2P time);
    `lists`: a tuned plan's lists to play instead of building them for `hardware` (`tuned_lists`)."""
    tuned = tuned_lists(model, hardware, plan, lists) if plan.kind.tuned else None
    peaks = activation_peaks(model, plan, hardware, tuned)
    if duration_model == "unit":
        if tuned is not None:
            return PipelineRun(
                simulate(tuned, Durations(), 0.0).summary(), duration_model, None, peaks, tuned
            )
        summary = _summary(plan.schedule, plan.pp, plan.generator_v, plan.num_microbatches, Durations(), 0.0)
        return PipelineRun(summary, duration_model, None, peaks)
    inputs = stage_inputs(model, hardware, plan, free_hops)
    latency = 0.0 if free_hops else inputs.latency
    if tuned is not None:  # the lists built for the real hops, played as asked
        summary = simulate(tuned, inputs.durations, latency).summary()
    else:
        summary = _summary(
            plan.schedule, plan.pp, plan.generator_v, plan.num_microbatches, inputs.durations, latency
        )
    return PipelineRun(summary, duration_model, inputs.chunk_times, peaks, tuned)


@lru_cache(maxsize=1024)
def _summary(
    name: str,
    p: int,
    v: int | None,
    m: int,
    durations: Durations,
    latency: float | tuple[tuple[float, ...], ...],
) -> RunSummary:
    """`pplan.schedules.periodic.summarise`, remembered: configurations that differ only in what the pipeline does not see
    (ZeRO stage, gradient dtype) and the `explain` of the shown ones simulate the same step."""
    return summarise(name, p, v, m, durations, latency)
