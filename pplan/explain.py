"""One configuration → everything `pplan explain` shows: memory per stage, traffic, bubble, derivations,
assumptions and advice, as an `ExplainReport`. Pure: no files, no terminal.

A plan is bounded before its schedule is built or simulated (`check_explain_size`): at most `MAX_PIPELINE_RANKS`
ranks (`pplan schedule`'s cap) and `MAX_PIPELINE_CHUNKS` model chunks p·v, so every explanation stays within
seconds and a few hundred MB however many layers the model has.
"""

from __future__ import annotations

import dataclasses
import math

from pplan.cost import experts, host, moe_dispatch
from pplan.cost.attention import cudnn_attention
from pplan.cost.comm import (
    data_parallel_bytes_per_step,
    p2p_message_bytes,
    tensor_parallel_traffic,
)
from pplan.cost.memory import (
    RankMemory,
    bytes_per_param,
    fp8_any_layout,
    plan_gathered_fp8_params,
    plan_memory,
    rank_param_items,
)
from pplan.cost.passes import PassTimes
from pplan.cost.passtime import layer_pass_times
from pplan.cost.pipeline import PipelineRun, auto_plan, chunk_activation_bytes, simulate_plan
from pplan.cost.placement import placement
from pplan.cost.sensitivity import sensitivities
from pplan.cost.steptime import rank_syncs, step_time, straggler_factor
from pplan.cost.uncertainty import ASSUMPTION as INTERVAL_ASSUMPTION
from pplan.cost.uncertainty import plan_confidence, plan_interval
from pplan.cost.usable import UsableMemory, usable_memory
from pplan.documents.explain import (
    BandFiguresOut,
    BytesPerParamOut,
    CalibrationBandOut,
    ChunkPassTimes,
    CommunicationOut,
    Derivation,
    ExpertsOut,
    ExplainReport,
    ExtrapolationOut,
    HardwareSummary,
    MemoryOut,
    ModelSummary,
    PerformanceOut,
    PipelineOut,
    PlanOut,
    RecomputeOut,
    SensitivityOut,
    StageMemory,
    UsablePartOut,
)
from pplan.documents.placement import PlacementOut
from pplan.errors import ConfigError
from pplan.model import activations as act
from pplan.model.params import is_expert_item, params_per_layer, total_params
from pplan.plan.configuration import check_precision, make_plan
from pplan.plan.knobs import DurationModel
from pplan.plan.records import Plan, PlanRequest
from pplan.plan.rules import ep_overlap_refusal
from pplan.plan.settings import SETTINGS
from pplan.profiles.fields import GIB
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.releases import dispatcher_missing, release_dispatchers, release_of, releases
from pplan.profiles.stacks import STACKS, blocks_p2p
from pplan.schedules import FAMILIES, closed_forms
from pplan.schedules.limits import MAX_PIPELINE_CHUNKS, MAX_PIPELINE_RANKS

MAX_TRAIN_TOKENS = 1e18
"""Largest token budget `explain` reports a time to train for: a million times Llama 3's 15 T tokens, so the
time to train stays a finite, meaningful number."""

IN_FLIGHT_SOURCE = "measured off the simulated schedule (pplan.schedules + pplan.schedules.timeline)"
BUBBLE_SOURCES = {
    "analytic": "simulated schedule; pass times from the analytic model (pplan.cost.passtime), hops cost their P2P "
    "message time",
    "unit": "simulated schedule; uniform stages, unit passes F = I = W = 1, free hops",
}


def performance(
    model: ModelSpec,
    hardware: HardwareSpec,
    plan: Plan,
    run: PipelineRun,
    train_tokens: float | None = None,
    with_sensitivity: bool = True,
    split_p2p: bool = True,
) -> PerformanceOut:
    st = step_time(model, hardware, plan, run, split_p2p)
    sens = sensitivities(model, hardware, plan, st.step_s, run.lists) if with_sensitivity else []
    interval = plan_interval(model, hardware, plan, st.step_s)
    band = interval.confidence.band
    tokens = plan.global_batch * plan.seq_len
    return PerformanceOut(
        step_s=st.step_s,
        step_interval_s=(interval.low_s, interval.high_s),
        tokens_per_s_interval=(tokens / interval.high_s, tokens / interval.low_s),
        calibration_error_band=(interval.error_low, interval.error_high),
        calibration_band=CalibrationBandOut(
            group=band.group,
            runs=band.runs,
            left_out=BandFiguresOut(low=band.low, high=band.high, mape=band.mape),
            in_sample=BandFiguresOut(
                low=band.in_sample_low, high=band.in_sample_high, mape=band.in_sample_mape
            ),
        ),
        confidence=interval.confidence.words,
        extrapolated=interval.extrapolated,
        extrapolation=[ExtrapolationOut(axis=x.axis, detail=x.detail) for x in interval.extrapolations],
        tokens_per_s=st.tokens_per_s,
        model_tflops_per_gpu=st.model_tflops_per_gpu,
        model_tflops_per_gpu_causal=st.model_tflops_per_gpu_causal,
        hardware_tflops_per_gpu=st.hardware_tflops_per_gpu,
        mfu=st.mfu,
        mfu_causal=st.mfu_causal,
        hfu=st.hfu,
        mfu_fp8_peak=(
            st.model_tflops_per_gpu * 1e12 / (hardware.gpu.peak_fp8_tflops * 1e12)
            if plan.precision != "bf16" and hardware.gpu.peak_fp8_tflops
            else None
        ),
        breakdown_s=st.breakdown_s,
        calibrated=interval.confidence.calibrated,
        train_tokens=train_tokens,
        time_to_train_s=train_tokens / st.tokens_per_s if train_tokens else None,
        sensitivity=[
            SensitivityOut(
                input=x.input, minus_10pct_step_change=x.minus_change, plus_10pct_step_change=x.plus_change
            )
            for x in sens
        ],
    )


def explain(
    model: ModelSpec,
    hardware: HardwareSpec,
    request: PlanRequest,
    durations: DurationModel = "analytic",
    train_tokens: float | None = None,
    with_sensitivity: bool = True,
    split_p2p: bool = True,
) -> ExplainReport:
    """Validate `request` and explain it on `hardware`, simulating the schedule with `durations`."""
    return explain_with_run(model, hardware, request, durations, train_tokens, with_sensitivity, split_p2p)[0]


def check_train_tokens(train_tokens: float | None) -> None:
    """Refuse a training-token count that is not finite, not above 0 or above `MAX_TRAIN_TOKENS` (--train-tokens)."""
    if train_tokens is not None and not (
        math.isfinite(train_tokens) and 0 < train_tokens <= MAX_TRAIN_TOKENS
    ):
        raise ConfigError(
            "--train-tokens",
            f"must be a finite number above 0 and at most {MAX_TRAIN_TOKENS:g}, got {train_tokens:g}",
            "e.g. --train-tokens 15e12",
        )


def check_explain_size(plan: Plan) -> None:
    """Refuse, before its schedule is built, a plan over `MAX_PIPELINE_RANKS` ranks or `MAX_PIPELINE_CHUNKS`
    chunks, naming the cap."""
    if plan.pp > MAX_PIPELINE_RANKS:
        raise ConfigError(
            "--pp",
            f"{plan.pp:,} pipeline ranks is over pplan's cap of {MAX_PIPELINE_RANKS} for explaining one plan",
            f"use --pp {MAX_PIPELINE_RANKS} or fewer",
        )
    if plan.pp * plan.vp > MAX_PIPELINE_CHUNKS:
        most = max(1, MAX_PIPELINE_CHUNKS // plan.pp)
        raise ConfigError(
            "--vp",
            f"p·v = {plan.pp}·{plan.vp} = {plan.pp * plan.vp:,} model chunks is over pplan's cap of "
            f"{MAX_PIPELINE_CHUNKS} for explaining one plan",
            f"use --vp {most} or fewer at p = {plan.pp}, or fewer ranks",
        )


def explain_with_run(
    model: ModelSpec,
    hardware: HardwareSpec,
    request: PlanRequest,
    durations: DurationModel = "analytic",
    train_tokens: float | None = None,
    with_sensitivity: bool = True,
    split_p2p: bool = True,
) -> tuple[ExplainReport, Plan, PipelineRun]:
    """`explain`, also returning the validated plan and its simulated run (for callers that refine it)."""
    check_train_tokens(train_tokens)
    check_precision(hardware, request.precision)
    plan = make_plan(model, request)
    check_explain_size(plan)
    run = simulate_plan(model, hardware, plan, durations)
    timeline = run.summary
    usable = usable_memory(hardware, model, plan)
    fraction = hardware.memory.dynamic_fragmentation_fraction
    ranks = plan_memory(model, plan, usable.usable_bytes, run.peaks, fraction, fp8_any_layout(hardware))
    bpp = bytes_per_param(plan)
    layer = act.layer_activations(model, plan)
    offloaded = act.offloaded_layer(model, plan.shape)
    host_bytes = run.peaks.host_bytes or (0,) * plan.pp
    tp = tensor_parallel_traffic(model, plan)
    syncs = rank_syncs(model, hardware, plan)
    dp_per_rank = [
        data_parallel_bytes_per_step(plan, r.params, sum(fp8))
        for r, fp8 in zip(ranks, plan_gathered_fp8_params(model, plan), strict=True)
    ]
    closed_ideal, closed_step = closed_forms.bubble_fractions(
        plan.kind, plan.pp, plan.vp, plan.num_microbatches
    )
    msg = p2p_message_bytes(model, plan)
    n_msg = timeline.p2p_messages
    chunk_times = [
        ChunkPassTimes(chunk=c, f_s=t.f_s, i_s=t.i_s, w_s=t.w_s) for c, t in enumerate(run.chunk_times or ())
    ]
    perf = (
        performance(model, hardware, plan, run, train_tokens, with_sensitivity, split_p2p)
        if durations == "analytic"
        else None
    )
    report = ExplainReport(
        model=ModelSummary(
            name=model.name,
            num_layers=model.num_layers,
            hidden_size=model.hidden_size,
            num_attention_heads=model.num_attention_heads,
            num_kv_heads=model.kv_heads,
            ffn_hidden_size=model.ffn_hidden_size,
            mlp=model.mlp,
            vocab_size=model.vocab_size,
            params_total=total_params(model),
            params_per_layer=params_per_layer(model),
        ),
        hardware=HardwareSummary(
            name=hardware.name,
            gpu=hardware.gpu.name,
            hbm_bytes=hardware.gpu.hbm_bytes,
            usable_bytes=usable.usable_bytes,
            gpus_per_node=hardware.gpus_per_node,
        ),
        plan=_plan_out(plan),
        derivations=_derivations(model, plan, msg)
        + _auto_derivations(model, hardware, plan)
        + _precision_speedup(model, hardware, request, plan, perf),
        memory=MemoryOut(
            usable_bytes=usable.usable_bytes,
            usable_parts=[UsablePartOut(name=p.name, bytes=p.bytes, source=p.source) for p in usable.parts],
            nccl_communicators=[f"{c.name} {c.size}" for c in usable.communicators],
            fragmentation_fraction_of_dynamic=fraction,
            fits=all(r.fits for r in ranks),
            bytes_per_param=BytesPerParamOut(
                weights=bpp.weights,
                grads=bpp.grads,
                optimizer=bpp.optimizer,
                total=bpp.total,
                shards=bpp.shards,
            ),
            activation_bytes_per_layer=layer.total_bytes,
            activation_items_per_layer=dict(layer.items),
            activation_bytes_per_chunk=list(chunk_activation_bytes(model, plan)),
            in_flight_source=IN_FLIGHT_SOURCE,
            stages=[_stage_out(plan, r, host) for r, host in zip(ranks, host_bytes, strict=True)],
            offload_bytes_per_layer=offloaded.total_bytes,
            offload_items_per_layer=dict(offloaded.items),
            host_offload_bytes=max(host_bytes),
        ),
        pipeline=PipelineOut(
            pass_durations=durations,
            bubble_source=BUBBLE_SOURCES[durations],
            bubble_fraction_of_ideal=timeline.bubble_fraction_of_ideal,
            bubble_fraction_of_step=timeline.bubble_fraction_of_step,
            bubble_in_window_fraction_of_ideal=timeline.max_idle_in_span / timeline.busiest,
            closed_form_bubble_fraction_of_ideal=closed_ideal,
            closed_form_bubble_fraction_of_step=closed_step,
            makespan=timeline.makespan,
            peak_in_flight_per_stage=list(timeline.peak_in_flight_per_stage),
            chunk_pass_times=chunk_times,
            p2p_message_bytes=msg,
            p2p_messages_per_step=n_msg,
            p2p_bytes_per_step=msg * n_msg,
        ),
        communication=CommunicationOut(
            tp_bytes_per_microbatch=tp.layers_bytes,
            tp_bytes_per_microbatch_per_stage=list(tp.per_rank_bytes),
            tp_collectives_per_layer=tp.collectives_per_layer,
            dp_bytes_per_step=max(dp_per_rank),
            dp_bytes_per_step_per_stage=dp_per_rank,
            dp_sync_s=max(sync.step_s for sync in syncs),
            dp_gather_s=max(sync.gather_s for sync in syncs),
        ),
        experts=_experts_out(model, hardware, plan) if model.moe is not None else None,
        placement=PlacementOut.model_validate(dataclasses.asdict(placement(hardware, plan))),
        performance=perf,
        assumptions=_assumptions(model, hardware, plan, request, durations, usable),
        advice=_advice(model, plan, ranks, timeline.bubble_fraction_of_ideal),
    )
    return report, plan, run


def _param_part(name: str) -> str:
    """The part of the model an itemised parameter group belongs to (`ExpertsOut.stage_params`)."""
    if name.startswith("mtp/"):
        return "multi-token prediction"
    if is_expert_item(name):
        return "routed experts"
    for prefix, part in (
        ("attention/", "attention"),
        ("moe/", "router and shared experts"),
        ("mlp/", "dense MLP"),
    ):
        if name.startswith(prefix):
            return part
    return "norms" if name == "norms" else "ends"


def _experts_out(model: ModelSpec, hardware: HardwareSpec, plan: Plan) -> ExpertsOut:
    moe = model.moe
    assert moe is not None
    nbytes = experts.dispatch_bytes(model, plan)
    layer = layer_pass_times(model, hardware, plan.shape)
    comm = experts.expert_comm(model, hardware, plan)
    terms = host.host_terms(plan)
    group = experts.ep_group(plan)
    within = group.size * group.stride <= hardware.gpus_per_node
    link = hardware.intra_node.name if within else f"{hardware.intra_node.name} + {hardware.inter_node.name}"
    stage_params = []
    for r in range(plan.pp):
        parts: dict[str, float] = {}
        for name, n in rank_param_items(model, plan, r):
            parts[_param_part(name)] = parts.get(_param_part(name), 0.0) + n
        stage_params.append(parts)
    chunks = plan.layout.chunks
    routed_per_rank = [sum(chunks[c].routed_layers for c in held) for held in plan.layout.rank_chunks]
    dense = model.dense_layers_in(0, model.num_layers)
    return ExpertsOut(
        num_experts=moe.num_experts,
        top_k=moe.top_k,
        ep=plan.ep,
        etp=plan.etp,
        expert_dp=plan.expert_dp,
        experts_per_rank=moe.num_experts // plan.ep,
        routed_layers=model.num_layers - dense,
        dense_layers=dense,
        dispatch_bytes_per_microbatch=nbytes,
        a2a_bytes_per_microbatch_per_stage=[4 * n * nbytes * (plan.ep > 1) for n in routed_per_rank],
        a2a_link=link if plan.ep > 1 else "none (ep = 1)",
        a2a_forward_s=comm.forward_s,
        a2a_exposed_forward_s=dict(layer.f).get("ep-comm", 0.0),
        a2a_exposed_backward_s=dict(layer.i).get("ep-comm", 0.0),
        overlap=EXPERT_OVERLAP[plan.expert_comm_overlap]
        if plan.expert_comm_overlap or not plan.moe_ep_overlap
        else EP_OVERLAP_TEXT,
        stage_params=stage_params,
        dispatcher=plan.moe_dispatcher,
        copies_per_token=moe_dispatch.dispatch_copies(model, plan),
        rows_per_expert=moe_dispatch.rows_per_expert(model, plan),
        grouped_gemm_factor=moe_dispatch.grouped_efficiency(model, plan),
        overload=plan.moe_knobs.overload,
        eager_kernels=list(terms.eager),
        syncs_per_forward=terms.syncs,
        host_exposed_forward_s=dict(layer.f).get("host", 0.0),
    )


EXPERT_OVERLAP = {
    True: "the schedule pairs each forward chunk with another micro-batch's backward chunk (DualPipe): each pass's "
    "all-to-all runs behind the paired pass's compute, exposed only where it outlasts it (assumed for every "
    "pass, the unpaired warm-up ones included)",
    False: "none: the schedule runs one pass at a time, so the all-to-alls are on the critical path",
}
"""How the expert all-to-all is hidden, by whether the schedule pairs passes (`Plan.expert_comm_overlap`)."""
EP_OVERLAP_TEXT = (
    "megatron-core's EP overlap (--overlap-moe-expert-parallel-comm): 37 % of the dispatch and combine runs behind "
    "another micro-batch's compute, which loses the dispatcher's SMs meanwhile (pplan.cost.moe_dispatch)"
)
"""How the expert all-to-all is hidden under `moe_ep_overlap`."""


def _precision_speedup(
    model: ModelSpec, hardware: HardwareSpec, request: PlanRequest, plan: Plan, perf: PerformanceOut | None
) -> list[Derivation]:
    """An FP8 plan's speed-up over the same plan in BF16 (its step in `perf`), with where it comes from
    (analytic durations only)."""
    if plan.precision == "bf16" or perf is None:
        return []
    bf16_plan = make_plan(
        model, dataclasses.replace(request, precision="bf16", fp8_param_gather=False, fp8_swiglu_input=False)
    )
    bf16 = step_time(model, hardware, bf16_plan)
    eff, gpu = hardware.efficiency, hardware.gpu
    fp8_peak = gpu.peak_fp8_tflops or 0.0
    fp8_layer = layer_pass_times(model, hardware, plan.shape)
    bf16_layer = layer_pass_times(model, hardware, bf16_plan.shape)

    def item(times: PassTimes, name: str) -> float:
        return sum(dict(p).get(name, 0.0) for p in (times.f, times.i, times.w))

    ratio = bf16.step_s / perf.step_s
    return [
        Derivation(
            quantity="fp8_speedup",
            formula=(
                f"step(bf16) / step({plan.precision}) = {bf16.step_s:.4g} / {perf.step_s:.4g} s = {ratio:.3f}: the "
                f"Linears' GEMMs at {eff.fp8_matmul_fraction:.3f} × {fp8_peak:g} TFLOP/s against {eff.matmul:.3f} × "
                f"{gpu.peak_bf16_tflops:g} (per layer and micro-batch {item(bf16_layer, 'gemm') * 1e3:.3g} → "
                f"{item(fp8_layer, 'gemm') * 1e3:.3g} ms, F + I + W); the casts add "
                f"{(item(fp8_layer, 'memory-bound') - item(bf16_layer, 'memory-bound')) * 1e3:.3g} ms of memory-bound "
                "work; the attention core, router, output layer, communication and bubble do not speed up"
            ),
            value=ratio,
        )
    ]


_SHOWN = tuple(s.name for s in SETTINGS if s.shown == s.name)
"""The settings the plan block shows under their own names (pplan.plan.settings, `shown`): copied from the plan."""


def _plan_out(plan: Plan) -> PlanOut:
    """The plan block: every setting shown under its own name as the plan holds it (lists for tuples), and what
    `make_plan` derived (d, m, the recompute policy, the layer split, the shard replicas)."""
    copied = {name: list(v) if isinstance(v := getattr(plan, name), tuple) else v for name in _SHOWN}
    return PlanOut(
        **copied,
        dp=plan.dp,
        num_microbatches=plan.num_microbatches,
        recompute_policy=RecomputeOut(
            label=plan.recompute_label,
            method=plan.recompute_method if plan.recompute == "full" else None,
            layers=plan.recompute_layers,
            modules=list(plan.recompute_modules),
            recomputed_layers_per_chunk=[plan.recomputed_layers(c.layers) for c in plan.layout.chunks],
        ),
        layers_per_chunk=[c.layers for c in plan.layout.chunks],
        tokens_per_step=plan.global_batch * plan.seq_len,
        shard_replicas=plan.shard_replicas,
    )


def _stage_out(plan: Plan, r: RankMemory, host_bytes: int = 0) -> StageMemory:
    return StageMemory(
        stage=r.rank,
        layers=r.layers,
        chunks=list(plan.layout.rank_chunks[r.rank]),
        params=r.params,
        weights_bytes=r.weights_bytes,
        grads_bytes=r.grads_bytes,
        optimizer_bytes=r.optimizer_bytes,
        activation_bytes=r.activation_bytes,
        extra_activation_bytes=r.extra_activation_bytes,
        recompute_working_bytes=r.recompute_working_bytes,
        gathered_weights_bytes=r.gathered_weights_bytes,
        offload_buffer_bytes=r.offload_buffer_bytes,
        host_offload_bytes=host_bytes,
        fragmentation_bytes=r.fragmentation_bytes,
        fp8_weight_cache_bytes=r.fp8_weight_cache_bytes,
        in_flight_microbatches=r.in_flight_microbatches,
        in_flight_chunk_microbatches=list(r.in_flight_chunk_microbatches),
        total_bytes=r.total_bytes,
        headroom_bytes=r.headroom_bytes,
        fits=r.fits,
    )


def _derivations(model: ModelSpec, plan: Plan, msg: int) -> list[Derivation]:
    t, p, cp, d, b, m = plan.tp, plan.pp, plan.cp, plan.dp, plan.micro_batch, plan.num_microbatches
    sp = t if plan.sequence_parallel else 1
    return [
        Derivation(
            quantity="d", formula=f"d = GPUs / (t·p·cp) = {plan.gpus} / ({t}·{p}·{cp}) = {d}", value=d
        ),
        Derivation(
            quantity="m",
            formula=f"m = global batch / (micro-batch × d) = {plan.global_batch} / ({b} × {d}) = {m}",
            value=m,
        ),
        Derivation(
            quantity="p2p_message_bytes",
            formula=f"(s/cp)·b·h·2 / {'t' if sp > 1 else '1'} = ({plan.seq_len}/{cp})·{b}·{model.hidden_size}·2 / {sp}"
            f" = {msg}",
            value=msg,
        ),
        *(
            [
                Derivation(
                    quantity="shard_replicas",
                    formula=f"R = d·cp / S = {d}·{cp} / {plan.shards} = {plan.shard_replicas} copies of each "
                    "shard (hybrid sharding)",
                    value=plan.shard_replicas,
                )
            ]
            if plan.shard_group is not None
            else []
        ),
    ]


def _auto_derivations(model: ModelSpec, hardware: HardwareSpec, plan: Plan) -> list[Derivation]:
    """`--schedule auto`: the memory limit per stage and what the scheduler reached against its lower bound."""
    if not plan.kind.tuned:
        return []
    auto = auto_plan(model, hardware, plan)
    res = auto.result
    limits = "/".join(str(k) for k in auto.memory_limits)
    how = (
        f"K_r = the most micro-batches (≤ m = {plan.num_microbatches}) whose activations fit beside rank r's "
        f"static bytes: static_r + (K·a_r + transients_r)·(1 + {hardware.memory.dynamic_fragmentation_fraction:g}) "
        f"≤ usable·(1 − {plan.memory_headroom:g}) (pplan.cost.autoplan)"
        if auto.derived
        else f"K = --memory-limit {plan.memory_limit}, capped at m = {plan.num_microbatches}"
    )
    peaks = "/".join(str(k) for k in res.peak_in_flight)
    return [
        Derivation(
            quantity="auto_memory_limit",
            formula=f"{how}: K per stage {limits}; the lists hold at most {peaks}",
            value=min(auto.memory_limits),
        ),
        Derivation(
            quantity="auto_gap_to_lower_bound",
            formula=f"(makespan − lower bound) / lower bound = ({res.makespan_s:.6g} − {res.lower_bound_s:.6g}) / "
            f"{res.lower_bound_s:.6g} s = {res.gap:.2%} (pipeline only, before the step's other terms; no schedule "
            f"beats the bound: pplan.schedules.bounds); {res.method}",
            value=res.gap,
        ),
    ]


def _tp_overlap_sentence(plan: Plan, hardware: HardwareSpec) -> str:
    """How the stack's TP overlap is costed (pplan.cost.tensor_parallel.TpOverlap)."""
    ub = STACKS[plan.stack].userbuffers
    if ub is None:
        return (
            f"TP overlap ({plan.stack}): each tensor-parallel collective runs beside the GEMM it feeds or follows "
            "on copy engines and is exposed only where it outlasts it"
        )
    sms = hardware.gpu.sms
    taken = (
        f"taking {ub.comm_sms} of the GPU's {sms} SMs from the GEMM beside them"
        if sms
        else f"on {ub.comm_sms} SMs (the profile states no SM count, so what they take from the GEMM is not costed)"
    )
    return (
        f"TP overlap ({plan.stack}, Transformer Engine userbuffers defaults): all-gathers by ring exchange (the GEMM "
        f"in t chunks), reduce-scatters pipelined in {ub.pipeline_splits} splits (the last one exposed), the "
        f"backward's re-gathers and reduce-scatters in bulk beside their GEMMs, pipelined and bulk collectives {taken}"
    )


def _usable_sentence(hardware: HardwareSpec, usable: UsableMemory, offloads: bool = False) -> str:
    mem = hardware.memory
    offload = ", the offload buffer" if offloads else ""
    comms = ", ".join(f"{c.name} {c.size}" for c in usable.communicators) or "none"

    def gb(gib: float) -> str:
        return f"{gib * GIB / 1e9:.2f} GB"

    return (
        f"usable HBM, in GB (10⁹ bytes) as every memory figure here = HBM less named parts (pplan.cost.usable): "
        f"{gb(hardware.gpu.hbm_gib)} (the profile's {hardware.gpu.hbm_gib:g} GiB) − {gb(mem.context_gib)} CUDA "
        f"context and workspaces − {gb(mem.label_gap_gib)} label-to-driver gap − {len(usable.communicators)} NCCL "
        f"communicators ({comms}) × {mem.nccl_per_communicator_mib * 2**20 / 1e9:.3f} GB = "
        f"{usable.usable_bytes / 1e9:.2f} GB (profile {hardware.name}); the caching allocator's fragmentation, "
        f"{mem.dynamic_fragmentation_fraction:.0%} of each stage's dynamic bytes (activations in flight, model-end "
        f"buffers, the recompute transient, ZeRO-3's gathered weights{offload}), is added to the stage's need"
    )


def _release_words(plan: Plan, gpu_name: str, routed: bool) -> list[str]:
    """Which release of the plan's stack is priced: the one named, or none (the stack's rules, fitted across its
    releases' runs) with the releases pplan knows; for a routed plan (`routed`) on a GPU named `gpu_name`, a token
    dispatcher the release does not run there."""
    known = releases(plan.stack)
    if not known:
        return []
    if plan.release is None:
        return [
            f"stack release: none named, so {plan.stack}'s rules without a release's recipe knobs "
            f"(--stack {plan.stack}@RELEASE prices one of {known[0].name} to {known[-1].name})"
        ]
    release = release_of(plan.stack, plan.release)
    assert release is not None
    out = [f"stack release priced: {release.label}"]
    missing = dispatcher_missing(release, gpu_name, plan.moe_dispatcher) if routed else None
    if missing is not None:
        out.append(
            f"token dispatcher {plan.moe_dispatcher} priced as asked, but {release.stack} {release.name} will not "
            f"run it here: {missing}; --moe-dispatcher {' or '.join(release_dispatchers(release, gpu_name))} "
            "prices what it runs"
        )
    return out


def _sink_attention_sentence(model: ModelSpec, hardware: HardwareSpec, plan: Plan, req: PlanRequest) -> str:
    """For a model with attention sinks on a stack that fuses them only from some release
    (`Stack.sink_attention_fused_from`): which core the plan is priced with, and the step of the other."""
    since = STACKS[plan.stack].sink_attention_fused_from
    if not model.attention_sinks or since is None:
        return ""
    other = step_time(
        model, hardware, make_plan(model, dataclasses.replace(req, flash_attention=not req.flash_attention))
    )
    mine = step_time(model, hardware, plan)
    change = other.step_s / mine.step_s - 1
    if plan.flash_attention:
        return (
            f"attention sinks priced fused: {plan.stack} fuses them from {since}; earlier releases run an unfused "
            f"core over the whole s×s scores, a {other.step_s:.4g} s step ({change:+.0%}; --no-flash-attention)"
        )
    return (
        f"attention sinks priced unfused (--no-flash-attention), as {plan.stack} runs them before {since}; fused, "
        f"the step is {other.step_s:.4g} s ({change:+.0%})"
    )


def _assumptions(
    model: ModelSpec,
    hardware: HardwareSpec,
    plan: Plan,
    req: PlanRequest,
    durations: DurationModel,
    usable: UsableMemory,
) -> list[str]:
    out = [
        "BF16 weights and activations; Adam with an FP32 master copy (12 bytes per parameter of optimizer state)",
        f"gradients in {plan.grad_dtype.upper()} ({'--grad-dtype' if req.grad_dtype != 'fp32' else 'default; --grad-dtype bf16 for 16 bytes per parameter'})",
        _usable_sentence(hardware, usable, bool(plan.offload_modules)),
        f"activation model: {plan.activation_model}"
        + (
            " (Korthikanti et al. 2022 GPT-3 coefficients, whatever the architecture)"
            if plan.activation_model == "korthikanti"
            else " (every saved tensor of this architecture; pplan.model.activations)"
        ),
        f"micro-batches in flight: {IN_FLIGHT_SOURCE}",
        f"bubble: {BUBBLE_SOURCES[durations]}",
        "vocabulary not padded; norms and learned position embeddings replicated across tensor-parallel ranks",
        "tensor-parallel collectives as ring algorithms: 2(t−1)/t of the buffer per all-reduce",
    ]
    if req.seq_len is None:
        out.append(f"sequence length {plan.seq_len} from the model profile (pass --seq-len to change it)")
    if req.sequence_parallel and plan.tp == 1:
        out.append("sequence parallelism has no effect at t = 1")
    if plan.flash_attention:
        out.append(
            "flash attention: no attention-score tensors are kept (pass --no-flash-attention to count them); its "
            "backward recomputes QKᵀ, 5 score-sized matmuls against the forward's 2 (Dao et al. 2022)"
        )
    sinks = _sink_attention_sentence(model, hardware, plan, req)
    if sinks:
        out.append(sinks)
    if plan.tp_comm_overlap:
        out.append(_tp_overlap_sentence(plan, hardware))
    if req.moe_ep_overlap and not plan.moe_ep_overlap and model.moe is not None:
        why = ep_overlap_refusal(plan.ep, plan.pp, plan.vp, plan.recompute, plan.moe_dispatcher)
        out.append(
            f"EP overlap asked but not taken: megatron-core's --overlap-moe-expert-parallel-comm {why}"
        )
    if plan.jitter:
        out.append(
            f"straggler allowance (--jitter {plan.jitter:g}): each rank's work per step varies with coefficient of "
            f"variation c = {plan.jitter:g}, so the step waits c·√(2 ln G) = {plan.jitter:g} × "
            f"{straggler_factor(plan.gpus):.2f} of the busiest rank's pass time for the slowest of "
            f"its G = {plan.gpus:,} GPUs (pplan.cost.steptime.jitter_s)"
        )
    else:
        out.append("ranks run in lockstep: no straggler allowance (--jitter c adds c · busy · √(2 ln GPUs))")
    if model.tied_embeddings and plan.pp > 1:
        out.append(
            "tied embeddings: the last stage keeps a copy of the embedding matrix for the output layer"
        )
    if durations == "analytic":
        eff = hardware.efficiency
        conf = plan_confidence(model, hardware, plan)
        state = "validated against published runs" if conf.calibrated else "NOT calibrated for this plan"
        attention = (
            f"{eff.attention_cudnn:.1%} plus {eff.attention_cudnn_fixed_us:g} µs per forward (2.5× backward) for "
            f"attention as cuDNN's fused attention, which {plan.stack} runs"
            if cudnn_attention(hardware, plan.shape) and eff.attention_cudnn is not None
            else f"{eff.attention_fraction:.0%} for attention"
            + (
                f" (FlashAttention-2's rate: {plan.stack} runs cuDNN's, for which {hardware.name} has no measured rate)"
                if STACKS[plan.stack].attention_kernel == "cudnn"
                else ""
            )
        )
        out.append(
            f"pass times: {eff.matmul:.0%} of the BF16 peak for GEMMs, {attention}, "
            f"{eff.hbm:.0%} of HBM bandwidth ({eff.loss_hbm_fraction:.0%} for the loss), "
            f"{eff.kernel_overhead_us:g} µs per kernel ({state}; profile "
            f"{hardware.name}); pass --pass-durations unit for the textbook picture"
        )
        out.append(INTERVAL_ASSUMPTION)
        out.append(f"confidence: {conf.words}")
        if blocks_p2p(plan.stack, plan.kind.name, plan.overlap_p2p_comm):
            out.append(
                f"pipeline sends block the sender ({plan.stack}, {plan.kind.name}): each message's time is part of "
                "the pass that sends it"
                + (" (--overlap-p2p-comm overlaps them)" if plan.kind.name == "interleaved-1f1b" else "")
            )
        stack = STACKS[plan.stack]
        out.append(
            "input embedding: each micro-batch's dense V/t × h weight gradient is zero-filled and "
            + (
                f"added into the {plan.grad_dtype.upper()} main gradient ({stack.name} accumulates one)"
                if stack.main_grad_accumulation
                else f"read once by the gradient's reduce-scatter ({stack.name} accumulates no main gradient)"
            )
            + " (pplan.cost.passtime.embedding_pass_times)"
        )
        out.append(
            f"software stack: {stack.name} ({stack.description}; "
            + (
                f"validated on {hardware.name} at {plan.precision}"
                if conf.calibrated
                else "its figures are not validated for this plan (confidence above)"
            )
            + "; --stack to change it)"
        )
        out += _release_words(plan, hardware.gpu.name, model.moe is not None and plan.ep > 1)
    if plan.zero_stage and plan.shard_group is None:
        out.append(f"ZeRO stage {plan.zero_stage}: sharded over d·cp = {plan.dp * plan.cp} replicas")
    elif plan.zero_stage:
        out.append(
            f"ZeRO stage {plan.zero_stage}, hybrid sharding (HSDP): sharded over shard groups of S = "
            f"{plan.shards} GPUs (stride t), each shard replicated across R = {plan.shard_replicas} groups; the "
            "reduce-scatters and gathers run within the shard group, and once per step the shard's gradients are "
            "all-reduced across the replicas (PyTorch FSDP HYBRID_SHARD; torchtitan data_parallel_replicate_degree "
            "× data_parallel_shard_degree)"
        )
    if plan.zero_stage == 3 and not plan.reshard_after_forward:
        out.append(
            "ZeRO-3 without resharding after the forward: the rank's whole BF16 weights stay gathered while any "
            "micro-batch is between its forward and its backward (under pipelining, the whole step), and the "
            "backward re-gather is skipped (1 all-gather per micro-batch instead of 2)"
        )
    if plan.optimizer_offload_fraction and hardware.host_link is not None:
        f, link = plan.optimizer_offload_fraction, hardware.host_link
        out.append(
            f"optimizer CPU offload (--optimizer-offload-fraction {f:g}): {f:g} of each rank's optimizer states "
            f"live in host memory (the GPU keeps 12 × {1 - f:g} bytes per parameter of its shard) and are updated "
            f"by a CPU Adam; each step their FP32 gradients go out and their FP32 master weights come back over "
            f"{link.name} ({link.bandwidth_gb_per_s:g} GB/s × {link.efficiency:g}, +{link.latency_us:g} µs) on the "
            "compute stream (megatron-core's HybridDeviceOptimizer); the CPU's Adam itself is not costed (no "
            "profile states the host's speed), so the optimizer term is a lower bound by that much"
        )
    if plan.offload_modules and hardware.host_link is not None:
        link = hardware.host_link
        out.append(
            f"activation offload ({'+'.join(plan.offload_modules)}): megatron-core's fine-grained offloading with "
            "the local layer spec's separate norms (with Transformer Engine's fused norm + linear, attn_norm and "
            "mlp_norm offload nothing and qkv_linear also offloads the norm input); each layer's offloaded bytes "
            f"cross {link.name} at {link.bandwidth_gb_per_s:g} GB/s × {link.efficiency:g} per direction "
            f"(+{link.latency_us:g} µs) on a side stream, exposed only where a copy outlasts the layer's pass; on "
            "the GPU, one layer in transit out plus one reloaded ahead"
        )
    return out


def _advice(model: ModelSpec, plan: Plan, ranks: tuple[RankMemory, ...], of_ideal: float) -> list[str]:
    out: list[str] = []
    p, m = plan.pp, plan.num_microbatches
    for r in ranks:
        if not r.fits:
            out.append(
                f"stage {r.rank} needs {r.total_bytes / 1e9:.1f} GB but {r.usable_bytes / 1e9:.1f} GB are usable: "
                "recompute, a deeper pipeline, ZeRO sharding or a smaller micro-batch"
            )
    if p > 1 and of_ideal > 0.1:
        need = -(-(p - 1) * 10 // 1)  # m for a 10 % bubble of ideal under 1F1B
        out.append(
            f"bubble {of_ideal:.1%} of ideal with {plan.schedule} at p={p}, m={m} (1F1B's (p−1)/m = "
            f"{(p - 1) / m:.1%}). Remedies in order: "
            f"more micro-batches (m ≥ {need} for 10 %, free in memory under 1F1B); interleaving "
            f"(÷v for v× the P2P messages: v=2 → {(p - 1) / (2 * m):.1%}, v=4 → {(p - 1) / (4 * m):.1%}); "
            f"zero-bubble ZB-H1 (≈ a third of 1F1B's at 1F1B memory: {closed_forms.bubble_fractions(FAMILIES['zb-h1'], p, 1, m)[0]:.1%})"
        )
    if p > 1 and ranks:
        mid = ranks[len(ranks) // 2]
        first, last = ranks[0], ranks[-1]
        if first.params > mid.params * 1.02 or last.params > mid.params * 1.02:
            out.append(
                f"structural imbalance: stage 0 holds {first.params / mid.params:.2f}× a middle stage's parameters "
                f"(embedding) and the last stage {last.params / mid.params:.2f}× (output layer and loss, the "
                "slowest stage); this looks like a bubble in a summary. Llama 3 removed one layer from each end "
                "(--first-stage-layers / --last-stage-layers)"
            )
    return out
