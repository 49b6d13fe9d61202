"""Step time: the simulated pipeline with analytic pass times, plus the data-parallel and optimizer time it does
not hide; then tokens/s, TFLOP/s per GPU (model and hardware FLOPs), MFU, and a breakdown that sums to the step.
Also a proven lower bound on the step from the same parts without simulating the schedule (`step_time_bound`).

Step = max over ranks r of (end_r + exposed DP_r) + max over ranks of (optimizer_r + parameter all-gather_r)
+ the straggler allowance (`jitter_s`, 0 unless the plan asks for one).
- end_r: rank r's last action in the simulated step (pplan.cost.pipeline, analytic durations and hop times).
- DP_r: gradient synchronisation over the d·cp replicas on the DP group's link (pplan.cost.links), each phase
  issued as several collectives that each pay the ring's latency (`sync_calls`: Megatron's buckets for ZeRO-0/1,
  one per layer for ZeRO-2/3): a ring all-reduce
  of the gradients, or with a distributed optimizer (ZeRO-1) one reduce-scatter at the end of the step. ZeRO-2/3
  keep only a shard of the gradients, so they cannot accumulate the m micro-batches' gradients unsharded: they
  reduce-scatter after every micro-batch's backward (Megatron-FSDP's `no_sync` "for grads shard mode there will
  actually always be gradient sync happening", megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py;
  DeepSpeed ZeRO-2 reduces at every backward; Rajbhandari et al. 2020 §5), m reduce-scatters per step; ZeRO-3
  also gathers every layer's weights for each micro-batch's forward and again for its backward (2m all-gathers;
  ZeRO paper §7.2.2: 3Ψ per micro-batch step against DP's 2Ψ). With `overlap_grad_reduce` (Megatron's
  `--overlap-grad-reduce`) the synchronisation runs in buckets behind the rank's passes: the last reduce-scatter
  only behind the last micro-batch's backward through the rank's chunks, and the step's whole DP traffic at most
  behind all of the rank's passes, so exposed = max(0, last − last backward, all − all passes).
  Hybrid sharding (HSDP over a shard group of S of the N = d·cp GPUs, R = N/S replicas; PyTorch FSDP's
  `HYBRID_SHARD`, FSDP2 on a 2-D (replicate, shard) mesh, torchtitan's data_parallel_replicate_degree R ×
  data_parallel_shard_degree S, Megatron-LM's `--num-distributed-optimizer-instances R` whose buckets
  reduce-scatter within an instance and all-reduce across instances, megatron/core/distributed/
  param_and_grad_buffer.py): the reduce-scatters and all-gathers above run within the shard group (S GPUs with
  stride t: on NVLink while S·t fits in a node, pplan.cost.links), and once per step, after the last
  reduce-scatter, the shard's gradients (1/S of them) are all-reduced across the R replicas (stride t·S: the
  inter-node link unless all of d·cp·t fits in a node). ZeRO-3 without resharding after the forward gathers
  once per micro-batch (its backward reuses the forward's weights): m all-gathers, none after the last backward.
- optimizer: the gradient norm for clipping reads the gradient, Adam reads it and reads and writes the FP32 master
  weights and both moments, the stack refreshes the BF16 weights from the master (Megatron: read 4, write 2), and
  the gradient buffer is zeroed for the next step: 24 + copy + 3 × gradient bytes per parameter of the rank's
  shard, at the HBM rate; with a distributed
  optimizer (ZeRO-1/2) the updated BF16 parameters are all-gathered, hidden behind the next step's forward with
  `overlap_param_gather` (ZeRO-3 gathers them in the forward instead, counted in DP_r). With optimizer CPU
  offload of a fraction f (`optimizer_offload_s`) the GPU's Adam and weight refresh cover (1 − f) of the shard,
  and the offloaded part's FP32 gradients go to the host and its FP32 master weights come back over the host link.
Breakdown on the busiest rank (the one that sets the bubble): compute + recompute (the forward work re-run in the
backward, with the collectives it repeats) + exposed TP + bubble + exposed P2P + exposed DP + optimizer (+ jitter)
= step, where exposed P2P = makespan − the makespan with free hops, and the bubble is the rest of that rank's idle
time.
Bound: end_r ≥ head_r + busy_r and makespan ≥ max_r (head_r + busy_r + tail_r) (pplan.schedules.bounds), so
step ≥ max(makespan bound, max_r (head_r + busy_r + exposed DP_r)) + the same optimizer term (the allowance, ≥ 0,
left out).
MFU = model FLOPs per step / (step × GPUs × peak) (Korthikanti et al. 2022 App. A; PaLM); the hardware-FLOPs
figure adds recomputation (HFU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from pplan.cost.chunktimes import chunk_pass_times
from pplan.cost.links import GroupShape, all_gather_s, all_reduce_s, dp_group, message_s
from pplan.cost.memory import (
    GRAD_BYTES,
    MASTER_BYTES,
    MOMENT_BYTES,
    gathered_weight_bytes,
    plan_gathered_fp8_params,
    plan_rank_expert_params,
    plan_rank_params,
)
from pplan.cost.passes import PassTimes
from pplan.cost.pipeline import (
    PipelineRun,
    auto_memory_limits,
    blocking_sends,
    simulate_plan,
    stage_inputs,
    stage_inputs_latency,
)
from pplan.errors import ConfigError
from pplan.model.flops import hardware_flops_per_step, model_flops_per_step
from pplan.plan.layout import Layout
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec, LinkSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS, blocks_p2p
from pplan.schedules.actions import Schedule
from pplan.schedules.bounds import makespan_lower_bound, memory_limited_ends


def adam_bytes_per_param(moment_dtype: str) -> int:
    """Read + write of the FP32 master copy and both Adam moments (24 bytes with FP32 moments, 16 with BF16); the
    BF16 weights are refreshed after it, as the stack does (`weight_copy_bytes`, pplan.profiles.stacks)."""
    return 2 * (MASTER_BYTES + 2 * MOMENT_BYTES[moment_dtype])


ROUNDING_S = 1e-9
"""Seconds below which a step-time term that is a difference of sums is a rounding residue (nanoseconds: far
below any kernel)."""
GRAD_PASSES = 3
"""Times the optimizer step moves each gradient: the gradient-norm reduction for clipping reads it, Adam reads it,
and zeroing the gradient buffer for the next step writes it (Megatron-LM `clip_grad_norm_fp32`, `zero_grad_buffer`;
PyTorch's `clip_grad_norm_` and `zero_grad`)."""


def _no_residue(x_s: float) -> float:
    """A term taken as a difference of sums: a rounding residue below zero (under `ROUNDING_S`) is no time."""
    return 0.0 if -ROUNDING_S < x_s < 0.0 else x_s


@dataclass(frozen=True, slots=True)
class StepTime:
    step_s: float
    breakdown_s: dict[str, float]
    """compute, recompute, tp_comm, ep_comm (routed models: the exposed expert all-to-all), bubble, p2p, dp_comm,
    optimizer: sums to step_s."""
    tokens_per_s: float
    model_tflops_per_gpu: float
    """Model FLOPs, the attention scores counted over the full s×s matrix (the non-causal convention)."""
    model_tflops_per_gpu_causal: float
    """Model FLOPs, the attention scores counted over the causal half (pplan.model.flops.model_flops_per_step)."""
    hardware_tflops_per_gpu: float
    mfu: float
    """Non-causal convention."""
    mfu_causal: float
    hfu: float
    run: PipelineRun


@dataclass(frozen=True, slots=True)
class RankTail:
    """What a pipeline rank adds after its last pipeline pass."""

    dp_exposed_s: float
    """Gradient synchronisation (and ZeRO-3 weight gathers) not hidden behind the rank's passes."""
    after_s: float
    """Optimizer step plus the parameter all-gather when it is not overlapped."""


@dataclass(frozen=True, slots=True)
class RankSync:
    """One rank's data-parallel traffic per step, in seconds on the DP group's link."""

    last_s: float
    """What runs after the last micro-batch's backward through the rank (the last gradient reduction)."""
    step_s: float
    """All of the step's DP traffic (m × per micro-batch for ZeRO-2/3, the same as `last_s` otherwise)."""
    gather_s: float
    """The updated parameters' all-gather after the optimizer (ZeRO-1/2)."""
    per_microbatch_s: float = 0.0
    """Of `step_s`, what each micro-batch adds (ZeRO-2/3; 0 below): `step_s` = m × this + a part m does not touch."""


def rank_sync(
    hw: HardwareSpec,
    plan: Plan,
    params: float,
    units: int = 1,
    experts: float = 0.0,
    fp8: tuple[float, float] = (0.0, 0.0),
) -> RankSync:
    """Data-parallel traffic of one rank holding `params` parameters (after TP), per step; each phase is issued as
    the collectives `sync_calls` counts from the rank's `units` (its layers, plus one for the model ends it holds),
    and each collective pays the ring's latency. `experts` of the parameters (routed experts) synchronise over
    their own expert data-parallel group instead, one phase after the other (`_expert_sync`). `fp8`: the (dense,
    expert) parameters gathered as FP8, 1 byte each instead of 2 (`plan_gathered_fp8_params`). Remembered by
    every plan field it reads (a search prices many plans that share them)."""
    key = (
        hw, plan.dp, plan.cp, plan.tp, plan.zero_stage, plan.grad_dtype, plan.shard_group,
        plan.num_microbatches, plan.reshard_after_forward, plan.ep, plan.etp, params, units, experts, fp8,
    )  # fmt: skip
    got = _SYNCS.get(key)
    if got is None:
        if len(_SYNCS) >= _SYNCS_LIMIT:
            _SYNCS.clear()
        got = _SYNCS[key] = _rank_sync(hw, plan, params, units, experts, fp8)
    return got


_SYNCS: dict[tuple[object, ...], RankSync] = {}
_SYNCS_LIMIT = 65_536


def _rank_sync(
    hw: HardwareSpec, plan: Plan, params: float, units: int, experts: float, fp8: tuple[float, float]
) -> RankSync:
    if experts:
        rest = rank_sync(hw, plan, params - experts, units, fp8=(fp8[0], 0.0))
        own = _expert_sync(hw, plan, experts, units, fp8[1])
        return RankSync(
            rest.last_s + own.last_s, rest.step_s + own.step_s, rest.gather_s + own.gather_s,
            rest.per_microbatch_s + own.per_microbatch_s,
        )  # fmt: skip
    n = plan.dp * plan.cp
    if n == 1:
        return RankSync(0.0, 0.0, 0.0)
    grads = params * GRAD_BYTES[plan.grad_dtype]
    weights = gathered_weight_bytes(params, fp8[0])
    calls = sync_calls(plan, params, units)
    if plan.zero_stage == 0:
        reduce = all_reduce_s(dp_group(plan.tp, plan.cp, plan.dp).link(hw), grads, n, calls)
        return RankSync(reduce, reduce, 0.0)
    s, r = plan.shards, plan.shard_replicas
    link = GroupShape(s, plan.tp).link(hw)  # the shard group: all d·cp GPUs without hybrid sharding
    across = all_reduce_s(
        GroupShape(r, plan.tp * s).link(hw), grads / s, r, calls
    )  # 0 without hybrid sharding
    return _sharded_sync(plan, link, grads, weights, s, calls, across)


def _expert_sync(hw: HardwareSpec, plan: Plan, params: float, units: int, fp8: float = 0.0) -> RankSync:
    """The routed experts' share of `rank_sync`: over the expert data-parallel group, t·cp·d / (ep·etp) ranks
    spaced ep·etp apart (megatron-core's expert rank order), sharded over all of it under ZeRO ≥ 1."""
    n = plan.expert_dp
    if n == 1:
        return RankSync(0.0, 0.0, 0.0)
    grads = params * GRAD_BYTES[plan.grad_dtype]
    link = GroupShape(n, plan.ep * plan.etp).link(hw)
    calls = sync_calls(plan, params, units)
    if plan.zero_stage == 0:
        reduce = all_reduce_s(link, grads, n, calls)
        return RankSync(reduce, reduce, 0.0)
    return _sharded_sync(plan, link, grads, gathered_weight_bytes(params, fp8), n, calls, 0.0)


def _sharded_sync(
    plan: Plan, link: LinkSpec, grads: float, weights: float, s: int, calls: int, across: float
) -> RankSync:
    """ZeRO-1/2/3 traffic over a shard group of `s` ranks on `link` (`across`: the hybrid replicas' all-reduce)."""
    scatter = all_gather_s(link, grads, s, calls)  # reduce-scatter: same volume as an all-gather
    if plan.zero_stage == 1:
        return RankSync(scatter + across, scatter + across, all_gather_s(link, weights, s, calls))
    m = plan.num_microbatches
    if plan.zero_stage == 2:
        return RankSync(
            scatter + across, m * scatter + across, all_gather_s(link, weights, s, calls), scatter
        )
    gather = all_gather_s(link, weights, s, calls)
    if not plan.reshard_after_forward:
        return RankSync(scatter + across, m * (scatter + gather) + across, 0.0, scatter + gather)
    return RankSync(scatter + gather + across, m * (scatter + 2 * gather) + across, 0.0, scatter + 2 * gather)


DDP_BUCKET_PARAMS = 40_000_000
"""Megatron-Core's gradient bucket: max(40M, 1M × data-parallel size) parameters (`DistributedDataParallel`'s
default `bucket_size`, megatron/core/distributed/distributed_data_parallel.py)."""


def sync_calls(plan: Plan, params: float, units: int) -> int:
    """Collectives one data-parallel phase of a rank is issued as: ZeRO-0 and ZeRO-1 reduce in buckets of
    max(40M, 1M × d·cp) parameters (`DDP_BUCKET_PARAMS`); ZeRO-2 and ZeRO-3 shard per unit (FSDP's layer-by-layer
    gathers and reduce-scatters, one per transformer layer and one for the model ends: `units`), and never in fewer
    collectives than those buckets, so that a higher stage never costs less latency than the one below (what the
    search's ZeRO chain relies on)."""
    buckets = max(1, math.ceil(params / max(DDP_BUCKET_PARAMS, 1_000_000 * plan.dp * plan.cp)))
    return max(buckets, units) if plan.zero_stage >= 2 else buckets


def _optimizer_s(hw: HardwareSpec, plan: Plan, params: float, experts: float = 0.0) -> float:
    shard = (params - experts) / plan.shards + experts / plan.expert_dp if plan.zero_stage >= 1 else params
    on_gpu = 1.0 - plan.optimizer_offload_fraction
    per_param = (
        on_gpu * (adam_bytes_per_param(plan.moment_dtype) + STACKS[plan.stack].weight_copy_bytes)
        + GRAD_PASSES * GRAD_BYTES[plan.grad_dtype]
    )
    gpu_s = shard * per_param / (hw.gpu.hbm_bandwidth_gb_per_s * 1e9 * hw.efficiency.hbm)
    return gpu_s + optimizer_offload_s(hw, plan, shard)


OFFLOAD_COPY_BYTES = 4
"""Bytes per offloaded parameter each way over the host link: the CPU optimizer's parameters are FP32 copies, and
megatron-core's hybrid optimizer copies with `non_blocking=True`, so PyTorch converts dtypes on the GPU
(aten/src/ATen/native/cuda/Copy.cu) and FP32 crosses the link: the gradients out, the updated master weights
back."""


def optimizer_offload_s(hw: HardwareSpec, plan: Plan, shard_params: float) -> float:
    """Seconds optimizer CPU offload adds to a rank's optimizer step: f·P_shard gradients device → host, then
    f·P_shard master weights host → device, OFFLOAD_COPY_BYTES each, one message each way over the host link
    (`message_s`: latency + bytes / achievable bandwidth). megatron-core runs both copies on the compute stream
    unless `--overlap-cpu-optimizer-d2h-h2d` (off by default, and pplan does not write it), so they add to the
    GPU's part (megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py `step`). The CPU's Adam update between
    them is not costed: its speed is the host's (cores, DRAM bandwidth), which no hardware profile states, so the
    step is a lower bound by that much. 0 without offload."""
    f = plan.optimizer_offload_fraction
    if not f:
        return 0.0
    if hw.host_link is None:
        raise ConfigError(
            "--optimizer-offload-fraction", f"hardware profile {hw.name} has no [host_link] section (the "
            "GPU-to-host link the offloaded optimizer states cross)",
            "add [host_link] to the profile, or drop --optimizer-offload-fraction",
        )  # fmt: skip
    return 2 * message_s(hw.host_link, f * shard_params * OFFLOAD_COPY_BYTES)


def rank_tails(
    model: ModelSpec, hw: HardwareSpec, plan: Plan, chunk_times: tuple[PassTimes, ...]
) -> tuple[RankTail, ...]:
    """Per pipeline rank: exposed gradient synchronisation and the optimizer step (with the gather if exposed)."""
    n_chunks = len(chunk_times)
    out = []
    optimizer: dict[float, float] = {}
    experts = plan_rank_expert_params(model, plan)
    fp8 = plan_gathered_fp8_params(model, plan)
    units = _sync_units(plan)
    for r, params in enumerate(plan_rank_params(model, plan)):
        sync = rank_sync(hw, plan, params, units[r], experts[r], fp8[r])  # remembered: ranks alike share it
        exposed = sync.step_s
        if plan.overlap_grad_reduce and STACKS[plan.stack].overlaps_grad_reduce:
            last_window = 0.0
            all_window = 0.0
            for s in plan.stages_of(r):
                t = chunk_times[s % n_chunks]
                last_window += t.i_s + t.w_s  # the last micro-batch's backward through this chunk
                all_window += (t.f_s + t.i_s + t.w_s) * plan.microbatches_per_stage
            exposed = max(0.0, sync.last_s - last_window, sync.step_s - all_window)
        if params not in optimizer:
            optimizer[params] = _optimizer_s(hw, plan, params, experts[r])
        after = optimizer[params] + (0.0 if plan.overlap_param_gather else sync.gather_s)
        out.append(RankTail(exposed, after))
    return tuple(out)


def _sync_units(plan: Plan) -> tuple[int, ...]:
    """Per rank, the units `rank_sync` is told: `_units_per_rank` under ZeRO-2/3, else 1 (only sharded units change
    the call count, `sync_calls`)."""
    if plan.zero_stage >= 2:
        return _units_per_rank(plan.layout, plan.kind.rank_stages(plan.pp, plan.vp))
    return (1,) * plan.pp


@lru_cache(maxsize=4096)
def _units_per_rank(layout: Layout, rank_stages: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The units each ZeRO-2/3 rank shards its collectives by: its layers, plus one for the model ends it holds
    (stage s runs chunk s mod the chunks: DualPipe's up stages rerun the down chunks)."""
    chunks = layout.chunks
    out = []
    for stages in rank_stages:
        held = [chunks[s % len(chunks)] for s in stages]
        out.append(sum(c.layers for c in held) + any(c.has_embedding or c.has_output for c in held))
    return tuple(out)


def plan_tails(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> tuple[RankTail, ...]:
    """`rank_tails` of `plan` from its analytic pass times (what `step_time_bound` and `sync_hidden` read)."""
    return rank_tails(model, hw, plan, chunk_pass_times(model, hw, plan))


def rank_syncs(model: ModelSpec, hw: HardwareSpec, plan: Plan) -> tuple[RankSync, ...]:
    """Per pipeline rank: its data-parallel traffic per step in seconds, as `rank_tails` charges it (what explain
    reports beside the exposed part)."""
    experts = plan_rank_expert_params(model, plan)
    fp8 = plan_gathered_fp8_params(model, plan)
    units = _sync_units(plan)
    return tuple(
        rank_sync(hw, plan, params, units[r], experts[r], fp8[r])
        for r, params in enumerate(plan_rank_params(model, plan))
    )


def sync_hidden(plan: Plan, tails: tuple[RankTail, ...]) -> bool:
    """Whether every rank's data-parallel traffic hides behind its backward passes (`tails`: `plan_tails`) and no
    parameter gather runs after the optimizer (overlapped with the next forward, or none: ZeRO-0, ZeRO-3): the step
    is then the pipeline plus the optimizer. Sharding over fewer GPUs (hybrid sharding) or gathering ZeRO-3's
    weights less often cannot shorten such a step: the passes are the same, no traffic is less exposed than none,
    and the optimizer's shard is at least as large (the search skips those variants, pplan.search)."""
    gathers_after = not plan.overlap_param_gather and plan.zero_stage in (1, 2)
    return not gathers_after and all(x.dp_exposed_s == 0.0 for x in tails)


SyncRank = tuple[float, float, int, tuple[float, float]]
"""What a rank's data-parallel traffic and optimizer step read of it: (parameters, routed-expert parameters,
units, FP8-gathered parameters), as `rank_sync` and `_optimizer_s` take them."""


def sync_ranks(model: ModelSpec, plan: Plan) -> frozenset[SyncRank]:
    """The distinct `SyncRank` of `plan`'s ranks (ranks holding the same parameters and units sync alike): what
    `sync_floor_s` maximises over. It reads the plan's cut (t, p, v, layout, schedule family, ep, etp, precision)
    and whether its ZeRO stage shards per unit (≥ 2), nothing else."""
    return frozenset(
        zip(
            plan_rank_params(model, plan),
            plan_rank_expert_params(model, plan),
            _sync_units(plan),
            plan_gathered_fp8_params(model, plan),
            strict=True,
        )
    )


SyncFloor = tuple[tuple[tuple[float, float], ...], float]
"""`sync_floor`: each rank's data-parallel traffic per step as (seconds per micro-batch, the rest), and the
longest optimizer step."""


def sync_floor(
    model: ModelSpec, hw: HardwareSpec, plan: Plan, ranks: frozenset[SyncRank] | None = None
) -> SyncFloor:
    """What bounds the step without any pass time: with m micro-batches, max over ranks of the step's data-parallel
    traffic (`RankSync.step_s` = m × its per-micro-batch part + the rest, `sync_floor_s`) and the longest optimizer
    step. With the traffic overlapped, exposed DP_r ≥ step_s_r − the rank's passes and end_r ≥ its passes
    (pplan.schedules.bounds), so end_r + exposed DP_r ≥ step_s_r; without, exposed DP_r = step_s_r. Hence step ≥
    max(makespan, max_r step_s_r) + max_r optimizer_r, for any makespan bound (the search prices ZeRO-3's
    per-micro-batch gathers with it before costing a plan's passes). Split by m so that a search shares it between
    a cut's micro-batch sizes (nothing else in it reads m). `ranks`: the plan's `sync_ranks`, when at hand (the
    search shares them between the ZeRO stages, gradient dtypes and sharding choices of a cut)."""
    if ranks is None:
        ranks = sync_ranks(model, plan)
    m = plan.num_microbatches
    traffic = []
    for params, experts, units, fp8 in ranks:
        sync = rank_sync(hw, plan, params, units, experts, fp8)
        traffic.append((sync.per_microbatch_s, sync.step_s - m * sync.per_microbatch_s))
    optimizer = max(_optimizer_s(hw, plan, params, experts) for params, experts, _, _ in ranks)
    return tuple(traffic), optimizer


def sync_floor_s(floor: SyncFloor, m: int) -> tuple[float, float]:
    """(max over ranks of the step's data-parallel traffic, the longest optimizer step) at m micro-batches
    (`sync_floor`)."""
    traffic, optimizer = floor
    return max(m * per_microbatch + rest for per_microbatch, rest in traffic), optimizer


def step_time_bound(
    model: ModelSpec, hw: HardwareSpec, plan: Plan, tails: tuple[RankTail, ...] | None = None
) -> float:
    """A lower bound on `step_time(model, hw, plan).step_s`, without simulating the schedule (`tails`: the plan's
    `plan_tails`, when already at hand)."""
    inputs = stage_inputs(model, hw, plan)
    d = inputs.durations
    assert not isinstance(d.f, float) and not isinstance(d.i, float) and not isinstance(d.w, float)
    bound = makespan_lower_bound(
        plan.placement, plan.chains, plan.num_microbatches, d.f, d.i, d.w, inputs.latency,
        plan.kind.splits_backward,
    )  # fmt: skip
    ends = bound.end_per_rank_s
    if plan.kind.tuned:  # auto: its memory limit caps the micro-batches in flight (pplan.schedules.bounds)
        cycle = memory_limited_ends(
            plan.num_microbatches, auto_memory_limits(model, hw, plan), d.f, d.i, d.w, inputs.latency
        )
        ends = tuple(max(a, b) for a, b in zip(ends, cycle, strict=True))
    tails = tails or rank_tails(model, hw, plan, inputs.chunk_times)
    pipeline_end = max(bound.makespan_s, *(e + x.dp_exposed_s for e, x in zip(ends, tails, strict=True)))
    return pipeline_end + max(x.after_s for x in tails)


def straggler_factor(gpus: int) -> float:
    """√(2 ln G): the expected maximum of G independent standard normal variables, to leading order (Cramér 1946,
    §28.6; David & Nagaraja, Order Statistics, 2003, §10.5); 0 for one GPU."""
    return math.sqrt(2 * math.log(gpus)) if gpus > 1 else 0.0


def straggler_s(c: float, busy_s: float, gpus: int) -> float:
    """The straggler allowance: with each rank's work per step varying independently with coefficient of variation
    c, a step that synchronises all G GPUs waits for the slowest, c · busy · `straggler_factor`(G) longer; busy: the
    busiest rank's pass time in the step."""
    return c * busy_s * straggler_factor(gpus)


def jitter_s(plan: Plan, busy_s: float) -> float:
    """`straggler_s` at the plan's own coefficient of variation (`plan.jitter`) and GPU count."""
    return straggler_s(plan.jitter, busy_s, plan.gpus)


def step_time(
    model: ModelSpec,
    hw: HardwareSpec,
    plan: Plan,
    run: PipelineRun | None = None,
    split_p2p: bool = True,
    lists: Schedule | None = None,
) -> StepTime:
    """The step time of `plan`; `split_p2p=False` skips the free-hop re-simulation that separates exposed P2P
    time from the bubble (the step time is the same; the breakdown then counts P2P waits as bubble). `lists`: a
    tuned plan's lists to play instead of building them for `hw` (the sensitivities keep the nominal ones)."""
    run = run or simulate_plan(model, hw, plan, "analytic", lists=lists)
    tl = run.summary
    assert run.chunk_times is not None
    times = run.chunk_times
    n_chunks = len(times)
    tails = rank_tails(model, hw, plan, times)
    pipeline_end = max(e + x.dp_exposed_s for e, x in zip(tl.last_end_per_rank, tails, strict=True))
    dp_s = pipeline_end - tl.makespan
    opt_s = max(x.after_s for x in tails)
    step_s = pipeline_end + opt_s

    busiest = max(range(plan.pp), key=lambda r: tl.busy_per_rank[r])
    tp_s = recompute_s = ep_s = 0.0
    for s in plan.stages_of(busiest):
        t = times[s % n_chunks]
        items = (*t.f, *t.i, *t.w)
        tp_s += sum(x for n, x in items if n == "tp-comm") * plan.microbatches_per_stage
        recompute_s += sum(x for n, x in items if n == "recompute") * plan.microbatches_per_stage
        ep_s += sum(x for n, x in items if n == "ep-comm") * plan.microbatches_per_stage
    sends_s = 0.0  # blocking sends (pplan.cost.pipeline.blocking_sends) are in the busy time: they are P2P
    if blocks_p2p(plan.stack, plan.kind.name, plan.overlap_p2p_comm):
        sends = blocking_sends(plan, stage_inputs_latency(model, hw, plan))
        sends_s = sum(sum(sends[s]) for s in plan.stages_of(busiest)) * plan.microbatches_per_stage
    compute_s = tl.busy_per_rank[busiest] - tp_s - recompute_s - sends_s - ep_s
    p2p_s = sends_s
    if split_p2p:
        free = simulate_plan(model, hw, plan, "analytic", free_hops=True, lists=run.lists)
        p2p_s = tl.makespan - free.summary.makespan
    bubble_s = tl.makespan - (tl.busy_per_rank[busiest] - sends_s) - p2p_s
    # a difference of sums taken in another order: a rounding residue below zero is no time (compare refuses
    # negative times)
    p2p_s, bubble_s = _no_residue(p2p_s), _no_residue(bubble_s)
    jitter = jitter_s(plan, tl.busy_per_rank[busiest])
    step_s += jitter
    tokens = plan.global_batch * plan.seq_len
    model_flops = model_flops_per_step(model, plan.seq_len, plan.global_batch)
    causal_flops = model_flops_per_step(model, plan.seq_len, plan.global_batch, causal=True)
    recomputed = (
        sum(plan.recomputed_layers(c.layers) for c in plan.layout.chunks)
        if plan.recompute == "full"
        else None
    )
    hw_flops = hardware_flops_per_step(
        model, plan.seq_len, plan.global_batch, plan.recompute, recomputed, plan.recompute_modules
    )
    peak = hw.gpu.peak_bf16_tflops * 1e12
    return StepTime(
        step_s=step_s,
        breakdown_s={
            "compute": compute_s,
            "recompute": recompute_s,
            "tp_comm": tp_s,
            **({"ep_comm": ep_s} if model.moe is not None else {}),
            "bubble": bubble_s,
            "p2p": p2p_s,
            "dp_comm": dp_s,
            "optimizer": opt_s,
            **({"jitter": jitter} if plan.jitter else {}),
        },
        tokens_per_s=tokens / step_s,
        model_tflops_per_gpu=model_flops / step_s / plan.gpus / 1e12,
        model_tflops_per_gpu_causal=causal_flops / step_s / plan.gpus / 1e12,
        hardware_tflops_per_gpu=hw_flops / step_s / plan.gpus / 1e12,
        mfu=model_flops / (step_s * plan.gpus * peak),
        mfu_causal=causal_flops / (step_s * plan.gpus * peak),
        hfu=hw_flops / (step_s * plan.gpus * peak),
        run=run,
    )
