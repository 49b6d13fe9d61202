"""Rich tables for `pplan recommend`: the ranked candidates and why the rest were rejected."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pplan.search import SearchResult

EP_SUFFIX = "·ep"
"""Routed models' parallelism column adds the expert-parallel degree."""


def candidates_table(result: SearchResult, title: str) -> Table:
    usable = result.candidates[0].report.memory.usable_bytes if result.candidates else 0
    routed = any(c.report.experts is not None for c in result.candidates)
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    columns = (
        "#",
        "t·p·d·v·cp" + (EP_SUFFIX if routed else ""),
        "schedule",
        "b×m",
        "rc/Z/g",
        "bubble",
        "GB",
        "Mtok/s",
        "interval",
        "x",
        "MFU",
    )
    keep = {"#": 2, "Mtok/s": 6, "x": 1}  # never squeezed away on a narrow terminal
    for col in columns:
        table.add_column(
            col,
            justify="left" if col in ("schedule", "rc/Z/g") or col.startswith("t·p") else "right",
            no_wrap=True,
            min_width=keep.get(col),
        )
    for rank, cand in enumerate(result.candidates, 1):
        r = cand.report
        plan, perf = r.plan, r.performance
        assert perf is not None
        worst = min(r.memory.stages, key=lambda s: s.headroom_bytes)
        layout = plan.layers_per_chunk
        schedule = plan.schedule + ("*" if layout[0] != layout[len(layout) // 2] else "")
        table.add_row(
            str(rank), f"{plan.tp}·{plan.pp}·{plan.dp}·{plan.vp}·{plan.cp}" + (f"·{plan.ep}" + (f"/{plan.etp}" if plan.etp > 1 else "") if routed else "")
            + ("" if plan.precision == "bf16" else f" {plan.precision}"), schedule,
            f"{plan.micro_batch}×{plan.num_microbatches}", f"{_recompute_short(plan.recompute_policy.layers, plan.recompute, plan.recompute_policy.method)}/{_zero_short(plan.zero_stage, plan.shard_group, plan.reshard_after_forward)}/{GRAD_SHORT[plan.grad_dtype]}",
            f"{r.pipeline.bubble_fraction_of_step:.1%}", f"{worst.total_bytes / 1e9:.1f}",
            f"{perf.tokens_per_s / 1e6:.3f}",
            f"{perf.tokens_per_s_interval[0] / 1e6:.2f}-{perf.tokens_per_s_interval[1] / 1e6:.2f}",
            str(len(perf.extrapolation)) if perf.extrapolated else "", f"{perf.mfu:.0%}",
        )  # fmt: skip
    table.caption = (
        "t·p·d·v·cp: tensor, pipeline, data parallel, chunks per rank, context parallel"
        + (" (·ep: expert parallel; /etp: each expert split over etp ranks)" if routed else "")
        + "; fp8/mxfp8 after it: the GEMM precision. b×m: micro-batch × "
        "micro-batches. rc/Z/g: recomputation (bN: the first N layers of every chunk) / ZeRO stage (hS: sharded over groups of S, HSDP; k: gathered weights kept) / gradient dtype (f32, b16). bubble: idle / step, simulated. GB: peak on the most "
        "loaded stage (usable "
        + f"{usable / 1e9:.1f}"
        + " GB). interval: where the measured Mtok/s should fall (the calibration runs' 10th-90th percentile "
        "errors), widened per axis outside the calibrated envelope; x: how many axes (explain names them; "
        "--max-extrapolation filters). MFU: model FLOPs with the attention over the full s×s scores (non-causal; explain also gives the causal"
        " count). * the first and last chunks hold fewer layers than the others."
    )
    table.caption_justify = "left"
    return table


RECOMPUTE_SHORT = {"none": "none", "selective": "sel", "full": "full"}


def _recompute_short(layers: int | None, mode: str, method: str | None) -> str:
    """`full`, or `b3` for the first 3 layers of every chunk (block), `u4` for checkpoints of 4 layers."""
    if mode == "full" and layers is not None:
        return f"{'b' if method == 'block' else 'u'}{layers}"
    return RECOMPUTE_SHORT[mode]


GRAD_SHORT = {"fp32": "f32", "bf16": "b16"}


def _zero_short(stage: int, shard_group: int | None, reshard: bool) -> str:
    """`3`, or `3h8` sharded over groups of 8 (HSDP), `3k` keeping the gathered weights, `3h8k` both."""
    return f"{stage}{'' if shard_group is None else f'h{shard_group}'}{'' if reshard else 'k'}"


def rejection_table(result: SearchResult) -> Table:
    table = Table(
        title="Why the rest were rejected", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False
    )
    table.add_column("reason")
    table.add_column("configurations", justify="right")
    for reason, count in sorted(result.rejected.items(), key=lambda kv: -kv[1]):
        table.add_row(str(reason), f"{count:,}")
    return table


def render_recommend(result: SearchResult, title: str, elapsed_s: float) -> RenderableType:
    parts: list[RenderableType] = []
    if result.candidates:
        parts.append(candidates_table(result, title))
    else:
        after = "Closest misses below." if result.closest_misses else "Why each was rejected below."
        parts.append(Text(f"No configuration fits. {after}", style="bold red"))
    knobs = [(i, c.knobs) for i, c in enumerate(result.candidates, 1) if c.knobs]
    if knobs:
        parts.append(Text("What the memory knobs buy (same plan, one notch down):", style="bold"))
        parts.extend(Text(f"  #{i}: " + "; ".join(lines)) for i, lines in knobs)
    parts.append(
        Text(
            f"{result.enumerated:,} configurations enumerated, {result.bounded:,} bounded (exact memory, proven "
            f"throughput bound), {result.simulated:,} simulated: the exact top {len(result.candidates)}, in "
            f"{elapsed_s:.2f} s.",
            style="grey62",
        )
    )
    parts.append(rejection_table(result))
    if result.closest_misses:
        parts.append(Text("Closest misses on memory:", style="bold"))
        for miss in result.closest_misses:
            parts.append(
                Text(
                    f"  • {miss.summary}: needs {'' if miss.exact else 'at least '}{miss.need_bytes / 1e9:.1f} GB of "
                    f"{miss.usable_bytes / 1e9:.1f} GB usable"
                )
            )
    return Group(*parts)
