"""Rich tables for `pplan recommend`: the ranked candidates and why the rest were rejected."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from pplan.launchers.capabilities import SHORT, WORDS
from pplan.recommend import Annotation, Recommendation, Recommendations, safest_tied
from pplan.search import Rejection

EP_SUFFIX = "·ep"
"""Routed models' parallelism column adds the expert-parallel degree."""


OPTIONAL_COLUMNS = ("interval", "bubble", "x", "on")
"""Columns left out, in this order, when the table is wider than the terminal (rather than cutting every number
short): the interval is the calibration band widened per extrapolated axis, which `x` already counts."""

NEVER_SQUEEZED = {"#": 2, "Mtok/s": 6, "MFU": 3}
"""Columns kept whole however narrow the terminal (below the width of the table without its optional columns,
rich shortens the others)."""


RUNS_SHORT = SHORT
"""Each launcher's letter in the `on` column (its declaration's, pplan.launchers.capabilities)."""


def _tie_sentence(notes: Sequence[Annotation]) -> str:
    """Which plans are tied with the best and the safest of them, in words."""
    tied = [i for i, n in enumerate(notes, 1) if n.tied]
    if len(tied) < 2:
        return ""
    safest = safest_tied(list(notes))
    span = f"#1–#{tied[-1]}" if tied == list(range(1, tied[-1] + 1)) else ", ".join(f"#{i}" for i in tied)
    text = (
        f"{span} (≈) predict tokens/s within #1's interval: within the model's own error they are tied, so prefer "
        "the safest bet among them"
    )
    if safest is not None:
        n = notes[safest - 1]
        runs = " and ".join(LAUNCHER_WORDS[r] for r in n.runs_on) or "no launcher"
        text += (
            f": #{safest} ({n.extrapolated_axes} {'axis' if n.extrapolated_axes == 1 else 'axes'} outside the "
            f"calibrated envelope, runs on {runs}, "
            f"{n.knobs} non-default knob{'s' if n.knobs != 1 else ''})"
        )
        if safest != 1:
            text += "; --format megatron|megatron-bridge|torchtitan --pick safest prints its settings"
    return text + "."


LAUNCHER_WORDS = WORDS
"""Each launcher in prose (its declaration's)."""


def candidates_table(
    result: Recommendations, title: str, width: int | None = None, notes: Sequence[Annotation] = ()
) -> Table:
    """The ranked candidates; `width`: the terminal's columns, when the table must fit in them (the columns of
    `OPTIONAL_COLUMNS` are then left out as needed, and the caption says which)."""
    usable = result.candidates[0].report.memory.usable_bytes if result.candidates else 0
    routed = any(c.report.experts is not None for c in result.candidates)
    plan_column = "t·p·d·v·cp" + (EP_SUFFIX if routed else "")
    columns = (
        "#", plan_column, "schedule", "b×m", "rc/Z/g", "bubble", "GB", "Mtok/s", "interval", "x", "MFU", "on",
    )  # fmt: skip
    rows = [
        dict(zip(columns, _row(rank, cand, routed, notes[rank - 1] if notes else None), strict=True))
        for rank, cand in enumerate(result.candidates, 1)
    ]
    shown = list(columns)
    dropped: list[str] = []
    table = _table(title, shown, rows, plan_column)
    for col in OPTIONAL_COLUMNS:
        if width is None or _MEASURE.measure(table).maximum <= width:
            break
        shown.remove(col)
        dropped.append(col)
        table = _table(title, shown, rows, plan_column)
    column_notes = {
        "bubble": "bubble: idle / step, simulated. ",
        "interval": "interval: where the measured Mtok/s should fall (the calibration runs' 10th-90th percentile "
        "errors), widened per axis outside the calibrated envelope; ",
        "x": "x: how many axes outside the calibrated envelope (explain names them; --max-extrapolation filters). ",
    }
    left_out = (
        f"Not shown on this {width}-column terminal: {', '.join(dropped)} (a wider one, or --format json, has "
        f"{'them' if len(dropped) > 1 else 'it'}). "
        if dropped
        else ""
    )
    table.caption = (
        "t·p·d·v·cp: tensor, pipeline, data parallel, chunks per rank, context parallel"
        + (" (·ep: expert parallel; /etp: each expert split over etp ranks)" if routed else "")
        + "; fp8/mxfp8 after it: the GEMM precision. b×m: micro-batch × micro-batches. rc/Z/g: recomputation (bN: "
        "the first N layers of every chunk) / ZeRO stage (hS: sharded over groups of S, HSDP; k: gathered weights "
        "kept) / gradient dtype (f32, b16). "
        + ("" if "bubble" in dropped else column_notes["bubble"])
        + f"GB: peak on the most loaded stage (usable {usable / 1e9:.1f} GB). "
        + ("" if "interval" in dropped else column_notes["interval"])
        + ("" if "x" in dropped else column_notes["x"])
        + "MFU: model FLOPs with the attention over the full s×s scores (non-causal; explain also gives the causal "
        "count). on: the launchers that run it as planned (M Megatron-LM, T torchtitan). ≈: tied with #1 within the "
        "model's error. * the first and last chunks hold fewer layers than the others. " + left_out
    ).rstrip()
    table.caption_justify = "left"
    return table


_MEASURE = Console(width=1 << 16, color_system=None)
"""Measures a table's width with nothing cut (a console wider than any table)."""


def _table(title: str, columns: list[str], rows: list[dict[str, str]], plan_column: str) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for col in columns:
        table.add_column(
            col,
            justify="left" if col in ("schedule", "rc/Z/g", plan_column) else "right",
            no_wrap=True,
            min_width=NEVER_SQUEEZED.get(col),
        )
    for row in rows:
        table.add_row(*(row[col] for col in columns))
    return table


def _row(rank: int, cand: Recommendation, routed: bool, note: Annotation | None) -> tuple[str, ...]:
    """One candidate's cells, in the table's column order."""
    r = cand.report
    plan, perf = r.plan, r.performance
    assert perf is not None
    worst = min(r.memory.stages, key=lambda s: s.headroom_bytes)
    layout = plan.layers_per_chunk
    schedule = plan.schedule + ("*" if layout[0] != layout[len(layout) // 2] else "")
    experts = f"·{plan.ep}" + (f"/{plan.etp}" if plan.etp > 1 else "") if routed else ""
    precision = "" if plan.precision == "bf16" else f" {plan.precision}"
    recompute = _recompute_short(plan.recompute_policy.layers, plan.recompute, plan.recompute_policy.method)
    zero = _zero_short(plan.zero_stage, plan.shard_group, plan.reshard_after_forward)
    low, high = perf.tokens_per_s_interval
    tied = note is not None and note.tied and rank > 1
    return (
        f"≈{rank}" if tied else str(rank),
        f"{plan.tp}·{plan.pp}·{plan.dp}·{plan.vp}·{plan.cp}{experts}{precision}",
        schedule,
        f"{plan.micro_batch}×{plan.num_microbatches}",
        f"{recompute}/{zero}/{GRAD_SHORT[plan.grad_dtype]}",
        f"{r.pipeline.bubble_fraction_of_step:.1%}",
        f"{worst.total_bytes / 1e9:.1f}",
        f"{perf.tokens_per_s / 1e6:.3f}",
        f"{low / 1e6:.2f}-{high / 1e6:.2f}",
        str(len(perf.extrapolation)) if perf.extrapolated else "",
        f"{perf.mfu:.0%}",
        "".join(RUNS_SHORT[r] for r in note.runs_on) or "–" if note is not None else "",
    )


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


def rejection_table(result: Recommendations) -> Table:
    table = Table(
        title="Why the rest were rejected", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False
    )
    table.add_column("reason")
    table.add_column("configurations", justify="right")
    for reason, count in sorted(result.rejected.items(), key=lambda kv: -kv[1]):
        table.add_row(str(reason), f"{count:,}")
    if result.rejected.get(Rejection.LAYER_SPLIT):
        table.caption = (
            f"{Rejection.LAYER_SPLIT}: --empty-end-chunks also tries an end chunk of the embedding or the loss "
            "alone where a cut has no other split."
        )
        table.caption_justify = "left"
    return table


def render_recommend(
    result: Recommendations,
    title: str,
    elapsed_s: float,
    width: int | None = None,
    notes: Sequence[Annotation] = (),
    status: str = "",
) -> RenderableType:
    """The recommend report; `width`: the terminal's columns (`candidates_table`); `notes`: each shown plan's
    annotation (pplan.recommend), `status`: the calibration status in words."""
    parts: list[RenderableType] = []
    if result.candidates:
        parts.append(candidates_table(result, title, width, notes))
        if status:
            parts.append(Text(status, style="bold" if status.startswith("NOT") else ""))
        tie = _tie_sentence(notes)
        if tie:
            parts.append(Text(tie))
    else:
        after = "Closest misses below." if result.closest_misses else "Why each was rejected below."
        parts.append(Text(f"No configuration fits. {after}", style="bold red"))
    knobs = [(i, c.knobs) for i, c in enumerate(result.candidates, 1) if c.knobs]
    if knobs:
        parts.append(Text("What the memory knobs buy (same plan, one notch down):", style="bold"))
        parts.extend(Text(f"  #{i}: " + "; ".join(lines)) for i, lines in knobs)
    stack = [(i, c.stack_knobs) for i, c in enumerate(result.candidates, 1) if c.stack_knobs]
    if stack:
        parts.append(
            Text(
                "What the release's other knobs would buy (not searched: the recipe's are ranked):",
                style="bold",
            )
        )
        parts.extend(Text(f"  #{i}: " + "; ".join(lines)) for i, lines in stack)
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
