"""Rich tables for an `ExplainReport`: configuration, memory per stage, pipeline, communication, assumptions."""

from __future__ import annotations

import io
from collections.abc import Callable

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from pplan.documents.explain import ExpertsOut, ExplainReport, PerformanceOut, PlanOut, StageMemory
from pplan.render.placement import placement_rows
from pplan.schedules import ScheduleFamily, schedule_family


def gb(n: float) -> str:
    """Decimal gigabytes (1 GB = 10⁹ bytes), as vendor datasheets and most papers write them."""
    return f"{n / 1e9:,.2f} GB"


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _experts_parts(ex: ExpertsOut) -> list[RenderableType]:
    """The routed model's section: expert parallelism, all-to-all bytes and overlap, parameters by part."""
    rows = [
        (
            "experts",
            f"{ex.num_experts} routed, top-{ex.top_k}; {ex.routed_layers} routed layers, {ex.dense_layers} dense; "
            f"ep={ex.ep} etp={ex.etp} ({ex.experts_per_rank} experts per rank), expert data parallel "
            f"{ex.expert_dp}",
        ),
        (
            "all-to-all",
            f"dispatch {mb(ex.dispatch_bytes_per_microbatch)} per routed layer per micro-batch (n·k·h·2; the combine "
            f"as much back, the backward both again) over {ex.a2a_link}: {ex.a2a_forward_s * 1e3:.2f} ms per "
            f"layer and pass",
        ),
        (
            "  per stage",
            ", ".join(gb(b) for b in ex.a2a_bytes_per_microbatch_per_stage[:8])
            + (" …" if len(ex.a2a_bytes_per_microbatch_per_stage) > 8 else "")
            + " per micro-batch",
        ),
        (
            "  exposed",
            f"{ex.a2a_exposed_forward_s * 1e3:.2f} ms forward, {ex.a2a_exposed_backward_s * 1e3:.2f} ms backward "
            f"per layer; {ex.overlap}",
        ),
    ]
    parts = [p for p in _PART_COLUMNS if any(p in stage for stage in ex.stage_params)]
    table = Table(
        title="Parameters per GPU by part, billions (before data-parallel sharding)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("stage", justify="right")
    for part in parts:
        table.add_column(_PART_COLUMNS[part], justify="right")
    for r, stage in enumerate(ex.stage_params):
        table.add_row(str(r), *(f"{stage.get(part, 0.0) / 1e9:.2f}" for part in parts))
    legend = "; ".join(f"{short} {part}" for part, short in _PART_COLUMNS.items() if part in parts)
    return [_kv("Experts", rows), table, Text(legend), Text()]


_PART_COLUMNS = {
    "attention": "attn",
    "routed experts": "experts",
    "router and shared experts": "router+shared",
    "dense MLP": "dense",
    "norms": "norms",
    "ends": "ends",
    "multi-token prediction": "mtp",
}
"""The parts of `ExpertsOut.stage_params`, in the order shown, with their column headings."""


def _kv(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left", box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, value)
    return table


def shown_stages(stages: list[StageMemory], all_stages: bool) -> list[StageMemory]:
    """Every stage when few (or asked), else the first two, the middle one and the last two."""
    if all_stages or len(stages) <= 8:
        return stages
    n = len(stages)
    keep = sorted({0, 1, n // 2, n - 2, n - 1})
    return [stages[i] for i in keep]


def memory_table(report: ExplainReport, all_stages: bool = False) -> Table:
    """Per-stage memory in GB (10⁹ bytes), columns that are zero everywhere left out, never wider than
    `TABLE_COLUMNS`: two decimals where they fit, else one decimal and no layers column, else whole GB (no figure
    is cut); a stage that fits with less than `TIGHT_FRACTION` of usable memory free is marked tight."""
    mem = report.memory
    stages = shown_stages(mem.stages, all_stages)
    columns: list[tuple[str, Callable[[StageMemory], str]]] = [
        ("stage", lambda s: str(s.stage)),
        ("L", lambda s: str(s.layers)),
        ("wts", lambda s: _g(s.weights_bytes)),
        ("grad", lambda s: _g(s.grads_bytes)),
        ("opt", lambda s: _g(s.optimizer_bytes)),
        ("mb", _in_flight),
        ("act", lambda s: _g(s.activation_bytes)),
    ]
    if any(s.extra_activation_bytes for s in stages):
        columns.append(("ext", lambda s: _g(s.extra_activation_bytes)))
    if any(s.recompute_working_bytes for s in stages):
        columns.append(("rcmp", lambda s: _g(s.recompute_working_bytes)))
    if any(s.gathered_weights_bytes for s in stages):
        columns.append(("gath", lambda s: _g(s.gathered_weights_bytes)))
    if any(s.offload_buffer_bytes for s in stages):
        columns.append(("offl", lambda s: _g(s.offload_buffer_bytes)))
    if any(s.fp8_weight_cache_bytes for s in stages):
        columns.insert(3, ("fp8w", lambda s: _g(s.fp8_weight_cache_bytes)))
    if any(s.fragmentation_bytes for s in stages):
        columns.append(("frag", lambda s: _g(s.fragmentation_bytes)))
    columns += [("total", lambda s: _g(s.total_bytes)), ("free", lambda s: _g(s.headroom_bytes))]
    title = mem_title(mem.usable_bytes)
    table = _memory_table(report, stages, columns, title)
    for decimals, unit in ((1, "0.1 GB"), (0, "1 GB")):  # every knob at once, or hundreds of GB
        if _width(table) <= TABLE_COLUMNS:
            break
        columns = [
            (n, _decimals(fmt, decimals) if n not in ("stage", "mb") else fmt)
            for n, fmt in columns
            if n != "L"
        ]
        table = _memory_table(report, stages, columns, f"{title}; to {unit}, layers per chunk above")
    return table


def _memory_table(
    report: ExplainReport,
    stages: list[StageMemory],
    columns: list[tuple[str, Callable[[StageMemory], str]]],
    title: str,
) -> Table:
    """The memory table of `stages` with `columns` (`memory_table`)."""
    mem = report.memory
    caption = (
        "L layers; wts/grad/opt weights, gradients, optimizer states; fp8w FP8 weight copies (FP8 "
        "plans); mb micro-batches in flight "
        "(in units of the stage's layers); act their activations; ext embedding/output/logits buffers; "
        "rcmp one recomputed checkpoint; gath ZeRO-3's gathered weights (two units, or the rank's all with no reshard "
        "after forward); offl activation offload in transit; "
        "frag allocator fragmentation; "
        "free headroom"
    )
    if any(s.fits and s.headroom_bytes < TIGHT_FRACTION * mem.usable_bytes for s in stages):
        caption += (
            f"; tight: fits with less than {TIGHT_FRACTION:.0%} of usable memory free (within pplan's error)"
        )
    if len(stages) < len(mem.stages):
        caption = f"{len(mem.stages)} stages, {len(stages)} shown (--all-stages shows every one). {caption}"
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
        caption=caption,
        caption_justify="left",
    )
    rows = [[fmt(s) for _, fmt in columns] for s in stages]
    for i, (name, _) in enumerate(columns):
        widest = max([len(name), *(len(row[i]) for row in rows)])
        table.add_column(name, justify="right", no_wrap=True, min_width=widest)
    table.add_column("fits", no_wrap=True, min_width=5)
    for s, row in zip(stages, rows, strict=True):
        table.add_row(*row, _fits(s, mem.usable_bytes))
    return table


def _width(table: Table) -> int:
    """Characters the widest row of `table` takes when nothing is cut."""
    console = Console(width=10_000, file=io.StringIO())
    return Measurement.get(console, console.options, table).maximum


def usable_line(report: ExplainReport) -> Text:
    """`usable 82.90 GB = 85.90 GB HBM − 0.81 context − …`: the plan's usable memory and the parts taken off, in
    GB (10⁹ bytes), the unit of every memory figure pplan prints."""
    mem = report.memory
    terms = []
    for part in mem.usable_parts:
        term = f"{_g(part.bytes)} {part.name}"
        if part.name == "NCCL" and mem.nccl_communicators:
            n = len(mem.nccl_communicators)
            term += f" ({n} communicators × {_g(part.bytes / n)}: {', '.join(mem.nccl_communicators)})"
        terms.append(term)
    text = f"usable {_g(mem.usable_bytes)} GB = {_g(report.hardware.hbm_bytes)} GB HBM"
    text += "".join(f" − {t}" for t in terms)
    if mem.fragmentation_fraction_of_dynamic:
        text += (
            f"; allocator fragmentation {mem.fragmentation_fraction_of_dynamic:.0%} of each stage's dynamic bytes, "
            "in its total"
        )
    return Text(text)


def _g(n: float) -> str:
    return f"{n / 1e9:.2f}"


TABLE_COLUMNS = 80
"""The terminal width the memory table keeps within: where its figures at two decimals would not fit, one decimal
and no layers column (the configuration lists the layers per chunk), then whole GB; no figure is ever cut."""
TIGHT_FRACTION = 0.03
"""A stage that fits with less than this fraction of its usable memory free is marked tight."""


def mem_title(usable_bytes: int) -> str:
    """The memory table's title."""
    return f"Memory per GPU, GB (10⁹ bytes); usable {usable_bytes / 1e9:.2f} GB"


def _decimals(fmt: Callable[[StageMemory], str], decimals: int) -> Callable[[StageMemory], str]:
    """`fmt` (a two-decimal GB figure) to `decimals` decimals."""
    return lambda s: f"{float(fmt(s)):.{decimals}f}"


def _fits(s: StageMemory, usable_bytes: int) -> Text:
    """The fits cell: yes, tight (fits with less than `TIGHT_FRACTION` of usable memory free) or NO."""
    if not s.fits:
        return Text("NO", style="bold red")
    if s.headroom_bytes < TIGHT_FRACTION * usable_bytes:
        return Text("tight", style="yellow")
    return Text("yes", style="green")


def _in_flight(s: StageMemory) -> str:
    return f"{s.in_flight_microbatches:.3g}"


def render_explain(report: ExplainReport, all_stages: bool = False) -> RenderableType:
    plan, mem, pipe, comm = report.plan, report.memory, report.pipeline, report.communication
    bpp = mem.bytes_per_param
    config = _kv(
        "Configuration",
        [
            (
                "model",
                f"{report.model.name}: {report.model.params_total / 1e9:,.2f} B parameters, "
                f"{report.model.num_layers} layers",
            ),
            ("hardware", f"{report.hardware.name} ({report.hardware.gpu}), {plan.gpus} GPUs"),
            *placement_rows(report.placement),
            ("parallelism", f"t={plan.tp} p={plan.pp} d={plan.dp} v={plan.vp} cp={plan.cp}"),
            ("schedule", plan.schedule),
            (
                "batch",
                f"global {plan.global_batch} × {plan.seq_len} tokens, micro-batch {plan.micro_batch}, "
                f"m={plan.num_microbatches}",
            ),
            ("layers per chunk", ", ".join(str(n) for n in plan.layers_per_chunk)),
            (
                "recompute",
                f"{_recompute_text(plan)}; sequence parallel {'on' if plan.sequence_parallel else 'off'}; "
                f"flash attention {'on' if plan.flash_attention else 'off'}",
            ),
            *(
                [("offload", _offload_text(plan, mem.offload_bytes_per_layer, mem.host_offload_bytes))]
                if plan.offload_modules
                else []
            ),
            (
                "states",
                f"{bpp.total:g} bytes/parameter = weights {bpp.weights:g} + grads {bpp.grads:g} + "
                f"optimizer {bpp.optimizer:g} (ZeRO {plan.zero_stage}{_shard_text(plan)}, grads {plan.grad_dtype})",
            ),
            (
                "activations",
                f"{plan.activation_model}: "
                + _activations_text(plan, mem.activation_bytes_per_layer, mem.activation_bytes_per_chunk),
            ),
        ]
        + [(d.quantity, d.formula) for d in report.derivations],
    )
    unit = "s" if pipe.pass_durations == "analytic" else " pass units"
    pipeline = _kv(
        "Pipeline (measured off the simulated schedule)",
        [
            (
                "bubble",
                f"{pipe.bubble_fraction_of_ideal:.2%} of ideal compute (idle / ideal), "
                f"{pipe.bubble_fraction_of_step:.2%} of the step (idle / total)",
            ),
            (
                "closed form",
                f"{pipe.closed_form_bubble_fraction_of_ideal:.2%} of ideal, "
                f"{pipe.closed_form_bubble_fraction_of_step:.2%} of the step (uniform stages, unit passes"
                + _closed_form_source(schedule_family(report.plan.schedule)),
            ),
            ("durations", pipe.bubble_source),
            ("makespan", f"{pipe.makespan:.4g}{unit} forward + backward"),
            (
                "in flight",
                "peak per stage "
                + ", ".join(str(n) for n in pipe.peak_in_flight_per_stage[:16])
                + (" …" if len(pipe.peak_in_flight_per_stage) > 16 else ""),
            ),
            ("P2P message", f"{pipe.p2p_message_bytes:,} B ({mb(pipe.p2p_message_bytes)})"),
            ("P2P per step", f"{pipe.p2p_messages_per_step:,} messages, {gb(pipe.p2p_bytes_per_step)}"),
        ],
    )
    traffic = _kv(
        "Communication per GPU",
        [
            (
                "tensor parallel",
                f"{gb(comm.tp_bytes_per_microbatch)} per micro-batch over all "
                f"{report.model.num_layers} layers ({comm.tp_collectives_per_layer} "
                "collectives per layer)",
            ),
            (
                "  per stage",
                ", ".join(gb(b) for b in comm.tp_bytes_per_microbatch_per_stage[:8])
                + (" …" if len(comm.tp_bytes_per_microbatch_per_stage) > 8 else ""),
            ),
            ("data parallel", f"{gb(comm.dp_bytes_per_step)} per step (worst stage)" + _dp_split(report)),
        ],
    )
    perf_parts: list[RenderableType] = []
    if report.performance is not None:
        perf = report.performance
        rows = [
            (
                "step",
                f"{perf.step_s:.3f} s = "
                + " + ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in perf.breakdown_s.items()),
            ),
            (
                "interval",
                f"{perf.step_interval_s[0]:.3f}-{perf.step_interval_s[1]:.3f} s "
                f"({perf.tokens_per_s_interval[0]:,.0f}-{perf.tokens_per_s_interval[1]:,.0f} tokens/s): the "
                f"errors of {perf.calibration_band.group} (n = {perf.calibration_band.runs}), "
                + _band_text(perf)
                + (
                    f", widened for {len(perf.extrapolation)} extrapolation"
                    + ("s" if len(perf.extrapolation) > 1 else "")
                    if perf.extrapolated
                    else "; inside the calibrated envelope"
                ),
            ),
            *(("extrapolating", f"{x.axis}: {x.detail}") for x in perf.extrapolation),
            (
                "throughput",
                f"{perf.tokens_per_s:,.0f} tokens/s; {perf.model_tflops_per_gpu:.0f} TFLOP/s per GPU "
                f"(model FLOPs), {perf.hardware_tflops_per_gpu:.0f} (hardware FLOPs)",
            ),
            (
                "utilisation",
                f"MFU {perf.mfu:.1%} (attention over the full s×s scores; {perf.mfu_causal:.1%} counting the causal "
                f"half), HFU {perf.hfu:.1%}, of the BF16 peak"
                + (f"; MFU {perf.mfu_fp8_peak:.1%} of the FP8 peak" if perf.mfu_fp8_peak is not None else ""),
            ),
        ]
        if perf.time_to_train_s is not None and perf.train_tokens is not None:
            rows.append(
                (
                    "time to train",
                    f"{perf.train_tokens:.3g} tokens in {perf.time_to_train_s / 86400:,.1f} days",
                )
            )
        rows.append(("confidence", perf.confidence))
        for sens in perf.sensitivity[:3]:
            rows.append(
                (
                    f"±10 % {sens.input}",
                    f"step {sens.minus_10pct_step_change:+.1%} / {sens.plus_10pct_step_change:+.1%}",
                )
            )
        perf_parts = [_kv("Performance (predicted)", rows), Text()]
    parts: list[RenderableType] = [
        config,
        Text(),
        memory_table(report, all_stages),
        usable_line(report),
        Text(),
        pipeline,
        Text(),
        traffic,
        Text(),
        *(_experts_parts(report.experts) if report.experts is not None else []),
        *perf_parts,
    ]
    verdict = "fits" if mem.fits else "does NOT fit"
    parts.append(
        Text(
            f"Verdict: every stage {verdict} in usable HBM." if mem.fits else f"Verdict: the plan {verdict}.",
            style="bold green" if mem.fits else "bold red",
        )
    )
    parts.append(Text("\nAssumptions", style="bold"))
    parts.extend(Text(f"  • {a}") for a in report.assumptions)
    if report.advice:
        parts.append(Text("\nAdvice", style="bold"))
        parts.extend(Text(f"  • {a}") for a in report.advice)
    return Group(*parts)


def _recompute_text(plan: PlanOut) -> str:
    """The recompute policy in launcher words: `full, block: 2 of 20 layers per chunk`."""
    rc = plan.recompute_policy
    if plan.recompute == "selective":
        return f"selective ({', '.join(rc.modules)})"
    if plan.recompute != "full":
        return plan.recompute
    if rc.method == "block":
        done, layers = sum(rc.recomputed_layers_per_chunk), sum(plan.layers_per_chunk)
        return f"full, block: the first {rc.layers} layers of every chunk ({done} of {layers})"
    if rc.layers:
        return f"full, uniform: checkpoints of {rc.layers} layers"
    return "full"


def _offload_text(plan: PlanOut, per_layer: int, host_bytes: int) -> str:
    """The offload line: modules, bytes offloaded per layer per micro-batch, host bytes per GPU at the peak."""
    return (
        f"{', '.join(plan.offload_modules)} to host memory: {mb(per_layer)} per layer per micro-batch; "
        f"{host_bytes / 1e9:.2f} GB of host memory per GPU at the peak"
    )


def _activations_text(plan: PlanOut, per_layer: int, per_chunk: list[int]) -> str:
    """Per layer per micro-batch; with partial full recompute (block, or uniform groups) what each chunk keeps."""
    rc = plan.recompute_policy
    if rc.method != "block" and not rc.layers:
        return f"{mb(per_layer)} per layer per micro-batch"
    shown = ", ".join(mb(x) for x in sorted(set(per_chunk)))
    return f"{mb(per_layer)} per checkpoint input; per chunk {shown} per micro-batch"


def _shard_text(plan: PlanOut) -> str:
    """The states line's sharding: the shard group and its replicas (hybrid sharding), resharding (ZeRO-3)."""
    out = ""
    if plan.shard_group is not None:
        out += f", shard group {plan.shard_group} GPUs × {plan.shard_replicas} replicas"
    if plan.zero_stage == 3 and not plan.reshard_after_forward:
        out += ", no reshard after forward"
    return out


def _closed_form_source(family: ScheduleFamily) -> str:
    """What the closed-form line adds after "uniform stages, unit passes": where the form comes from when no
    source publishes one for the family."""
    if family.tuned:
        return "; auto has none: ZB-H1's, which it never exceeds at ZB-H1's memory)"
    if family.bubble_derived:
        return "; none is published for this schedule: derived by pplan)"
    return ")"


def _dp_split(report: ExplainReport) -> str:
    """The data-parallel traffic's time on the link, split into what the step waits for (`dp comm` of the step's
    breakdown) and what the backward passes hide; empty without a step time or without traffic."""
    comm, perf = report.communication, report.performance
    if perf is None or comm.dp_sync_s <= 0:
        return ""
    exposed = perf.breakdown_s.get("dp_comm", 0.0)
    hidden = max(0.0, comm.dp_sync_s - exposed)
    text = (
        f"; {comm.dp_sync_s:.3f} s on the link: {exposed:.3f} s exposed (dp comm), {hidden:.3f} s hidden behind "
        "the backward passes"
    )
    if comm.dp_gather_s > 0:
        text += f"; parameter all-gather after the optimizer {comm.dp_gather_s:.3f} s"
    return text


def _band_text(perf: PerformanceOut) -> str:
    """The interval's error band in words: the runs' 10th-90th percentile, and, where the interval's ends differ
    from it (each end no nearer than the estimate itself, e_lo ≤ 0 ≤ e_hi; at least ±15 % on a GPU type with no
    validated run: pplan.cost.uncertainty), the ends it takes, so that this line and the confidence line quote the
    same percentiles."""
    raw = (perf.calibration_band.left_out.low, perf.calibration_band.left_out.high)
    used = perf.calibration_error_band
    text = f"{raw[0]:+.1%} to {raw[1]:+.1%} (10th-90th percentile, each run's set left out of the fits)"
    if all(abs(a - b) < 5e-4 for a, b in zip(raw, used, strict=True)):
        return text
    why = (
        "no end nearer than the estimate itself"
        if raw[0] > 0 or raw[1] < 0
        else "at least ±15 % on a GPU type with no validated run"
    )
    return f"{text}; the interval takes {used[0]:+.1%} to {used[1]:+.1%}, {why}"
