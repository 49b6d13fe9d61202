"""F, I and W of every model chunk of a plan: its layers' pass times (pplan.cost.passtime.layer_pass_times; under
block recompute only the first N layers of a chunk re-run their forward), the input embedding on the first chunk
and the output layer and loss on the last."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from pplan.cost.links import message_s
from pplan.cost.passes import ZERO, PassTimes
from pplan.cost.passtime import embedding_pass_times, layer_pass_times, output_pass_times
from pplan.model.activations import layer_offload_bytes
from pplan.plan.knobs import GradDtype
from pplan.plan.layout import Chunk
from pplan.plan.records import Plan
from pplan.plan.shape import Shape
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec


def chunk_pass_times(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> tuple[PassTimes, ...]:
    """F, I, W per model chunk, in model order."""
    chunks = plan.layout.chunks
    recomputed = tuple(plan.recomputed_layers(c.layers) for c in chunks)
    times = layout_pass_times(model, hw, plan.shape, chunks, recomputed, plan.grad_dtype)
    if not plan.offload_layers:
        return times
    first = times[0].plus(
        layer_offload_times(
            model, hw, plan.shape, plan.offload_layers, chunks[0].layers, chunks[0].dense_layers
        )
    )
    return (first, *times[1:])


@lru_cache(maxsize=1024)
def layer_offload_times(
    model: ModelSpec, hw: HardwareSpec, shape: Shape, offloaded: int, layers: int, dense_layers: int = 0
) -> PassTimes:
    """The exposed copies of layer offload (p = 1, no recompute: pplan.plan.rules.check_layer_offload) on a chunk
    of `layers` layers (a routed model's `dense_layers` dense ones first): each of the first N = `offloaded`
    layers copies its whole activations (pplan.model.activations.layer_offload_bytes) device → host once its
    forward ends, and back before its backward, over the `host_link`, c seconds a layer on one copy stream.
    Transformer Engine's offload handler spreads the N copies over the whole pass (its `layer_window_map`: group
    i's copy is waited for at layer ≈ (i + 1)·L/N), so with f and b the mean forward and backward of the L layers:
    F exposes max(0, max(f + N·c, N·f + c) − L·f) (copy k starts when layer k ends, the copies run back to back,
    the pass ends when the last lands), I exposes max(0, max(c − (L − N)·b, N·c − (L − 1)·b)) (the reloads, last
    layer first, start with the backward and each must land before its layer's backward) ("offload")."""
    link = hw.require_host_link("--offload-layers")
    dense = min(offloaded, dense_layers)
    copy = (
        sum(
            n * message_s(link, layer_offload_bytes(m, shape, 1))
            for m, n in ((model, offloaded - dense), (model.dense_part, dense))
            if n
        )
        / offloaded
    )
    kinds = ((model, layers - dense_layers), (model.dense_part, dense_layers))
    f = sum(n * layer_pass_times(m, hw, shape).f_s for m, n in kinds if n) / layers
    b = sum(n * layer_pass_times(m, hw, shape).i_s for m, n in kinds if n) / layers
    n = offloaded
    forward = max(0.0, max(f + n * copy, n * f + copy) - layers * f)
    backward = max(0.0, copy - (layers - n) * b, n * copy - (layers - 1) * b)
    return PassTimes((("offload", forward),), (("offload", backward),), ())


@lru_cache(maxsize=8192)
def layout_pass_times(
    model: ModelSpec,
    hw: HardwareSpec,
    shape: Shape,
    chunks: tuple[Chunk, ...],
    recomputed: tuple[int, ...] | None = None,
    grad_dtype: GradDtype = "fp32",
) -> tuple[PassTimes, ...]:
    """F, I, W per chunk of `chunks` for one layer setting (cached: a search asks for the same ones often). Under
    full recompute `recomputed[c]` of chunk c's layers re-run their forward (all of them when not given): the
    chunk's first layers, so a routed model's dense layers (which come first) before its routed ones. The first
    chunk adds the input embedding (`embedding_pass_times`, its gradient accumulated at `grad_dtype`), the last
    the output layer and loss."""
    kinds = [(model, layer_pass_times(model, hw, shape))]
    if model.moe is not None and any(c.dense_layers for c in chunks):
        kinds.append((model.dense_part, layer_pass_times(model.dense_part, hw, shape)))
    full = shape.recompute == "full"
    kept = [layer_pass_times(m, hw, replace(shape, recompute="none")) if full else t for m, t in kinds]
    out = output_pass_times(model, hw, shape)
    result = []
    alike: dict[
        tuple[int, int, int, bool, bool], PassTimes
    ] = {}  # chunks come in a few sizes: each done once
    for c, chunk in enumerate(chunks):
        n = chunk.layers if recomputed is None or not full else recomputed[c]
        key = (chunk.layers, chunk.dense_layers, n, chunk.has_output, chunk.has_embedding)
        if key not in alike:
            dense_rerun = min(n, chunk.dense_layers)
            counts = (
                (chunk.routed_layers, n - dense_rerun),  # (layers, of which re-run) per kind, routed first
                (chunk.dense_layers, dense_rerun),
            )
            times = ZERO
            for (layers, rerun), (_, layer), kept_layer in zip(counts, kinds, kept, strict=False):
                if rerun:
                    times = layer.scaled(rerun) if times is ZERO else times.plus(layer.scaled(rerun))
                if layers > rerun:
                    rest = kept_layer.scaled(layers - rerun)
                    times = rest if times is ZERO else times.plus(rest)
            if chunk.has_embedding:
                embedding = embedding_pass_times(model, hw, shape, grad_dtype)
                times = embedding if times is ZERO else times.plus(embedding)
            alike[key] = times.plus(out) if chunk.has_output else times
        result.append(alike[key])
    return tuple(result)
