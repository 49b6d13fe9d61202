"""Which launcher runs which schedule and plan: the refusals, read off each launcher's declaration.

Pure functions (no I/O). What each launcher runs, and each refusal's text, is its declaration's
(`pplan.launchers.capabilities`: one `LauncherCapabilities` per launcher); this module applies the declarations in
one order and compares no launcher names. `supports` answers for a schedule alone, `unsupported_reason` for a
schedule with whatever of p, v, m, the ZeRO stage and the layer split are known (or for a whole `Plan`),
`request_unsupported_reason` for a search's request before it becomes a plan, `SearchFilter` for the search as it
enumerates (the same rules, split into a cut's and a configuration's), and `check_supported` raises the
ConfigError the writers (`pplan.launchers.megatron`, `pplan.launchers.torchtitan`) raise. `plan_summary` is the
plan line both writers' header comments start with.

Where the declarations' rules come from (each family's record in `pplan.schedules.registry` says which schedules
Megatron-LM and torch run, with the refusal texts):
- Megatron-LM main: 1F1B and interleaved 1F1B only (`megatron/core/pipeline_parallel/schedules.py` at tag
  core_v0.16.1). The zero-bubble schedules (ZB-H1/H2, ZB-V, interleaved ZB; Qi et al. 2024, arXiv:2401.10241)
  live in the sail-sg fork (github.com/sail-sg/zero-bubble-pipeline-parallelism); DualPipe/DualPipeV
  (DeepSeek-V3 technical report, arXiv:2412.19437 §3.2.1) and GPipe are not Megatron-LM schedules. Its
  interleaved schedule takes micro-batches in groups of `microbatch_group_size_per_vp_stage`, by default p, and
  `forward_backward_pipelining_with_interleaving` in that file raises unless the last group is empty or at least
  p, so m must be a multiple of p (Narayanan et al. 2021, arXiv:2104.04473 §2.2; see
  `pplan.schedules.families.interleaved` for what goes wrong otherwise). ZeRO-1 is its distributed optimizer,
  ZeRO-2/3 Megatron-FSDP (`pplan.launchers.megatron`). `validate_args` (megatron/training/arguments.py) asserts
  "Must use --overlap-param-gather with --overlap-grad-reduce": a sharded plan (ZeRO ≥ 1) that overlaps the
  parameter gather but not the gradient reduction cannot be written, and writing both off would not be the plan
  pplan costed (the gather hidden), so it is refused. Hybrid sharding is written for ZeRO-1 only, as
  `--num-distributed-optimizer-instances` (megatron-core 0.16.1 `param_and_grad_buffer.py`: reduce-scatter within
  an instance, all-reduce across instances); Megatron-FSDP plans with a shard group, and ZeRO-3 without resharding
  after the forward (Megatron-FSDP reshards; `--torch-fsdp2-no-reshard-after-forward` is torch FSDP2's), are
  refused.
- torchtitan runs torch.distributed.pipelining's classes: GPipe, 1F1B, Interleaved1F1B, LoopedBFS,
  InterleavedZeroBubble, ZBVZeroBubble and DualPipeV, with torch's rules on m (PyTorch 2.13
  `torch/distributed/pipelining/schedules.py`, the classes' checks on `n_microbatches`): 1F1B needs m ≥ p;
  Interleaved1F1B and InterleavedZeroBubble need m divisible by max(1, m // p); DualPipeV needs m ≥ 2p. torch
  has no ZB-H1/ZB-H2 class (pplan could feed them to torch as a CSV, but a torchtitan config cannot name them)
  and no bidirectional DualPipe. torchtitan's split (torchtitan 0.2.2 and 0.3.0
  `torchtitan/distributed/pipeline_parallel.py`) gives every virtual stage `pipeline_parallel_layers_per_stage`
  layers, less at the two ends only, so a first or last stage with more layers than the others is refused.
  torchtitan builds only the models it ships a configuration for (`pplan.launchers.torchtitan_models`: Llama 3
  8B, 70B, 405B; the routed DeepSeek-V3 16B/671B, Qwen3-30B-A3B and GPT-OSS 20B/120B shapes, as 0.3.x config
  functions and 0.2.x flavours; Qwen3-235B-A22B as a 0.2.x flavour only), so any other model is refused.
  Expert parallelism borrows its ranks from FSDP, CP and TP: torchtitan 0.3.0's `parallelism.expert_parallel_degree`
  (torchtitan/config/configs.py, torchtitan/distributed/parallel_dims.py) builds the sparse mesh
  (pp, dp_replicate, efsdp, ep) with efsdp = dp_shard·cp·tp / ep; 0.2.2's `expert_parallel_degree` and
  `expert_tensor_parallel_degree` build (pp, dp_replicate, efsdp, ep, etp) with efsdp = dp_shard·cp·tp / (etp·ep)
  (`ParallelDims.build_mesh`, torchtitan 0.2.2 torchtitan/distributed/parallel_dims.py), so ep must divide
  dp_shard·cp·tp / etp as torchtitan's degrees are written (`torchtitan_dp_degrees`: a ZeRO-0 plan replicates,
  leaving only cp·tp; `_expert_refusal`). The experts' tensor parallelism (`_expert_tp_refusal`, the one place by
  release): without EP both split every expert over t (etp = t); with EP 0.3.0 has no expert-tensor-parallel field
  (experts whole, etp = 1, `expert_param_placement_dense` in torchtitan/models/common/moe_sharding.py) and 0.2.2
  takes etp ∈ {1, t} (`ParallelDims._validate`). What a release cannot run on a model is the model's record
  (`PerRelease`, read by `_model_plan_refusal`): 0.3.0's GPT-OSS varlen attention and 0.2.2's DeepSeek
  FlexAttention and GPT-OSS refuse cp > 1; 0.2.2's qwen3 and gpt_oss TrainSpecs have no pipelining_fn, so p > 1
  is refused for them. DualPipeV with ep > 1: 0.3.0 registers no function that overlaps the expert all-to-all
  of its paired passes, which pplan costs as hidden, so it is refused (`_cut_refusal`); 0.2.2 does
  (`overlap_callback`, `pipeline_parallel_expert_parallel_overlap`, torchtitan/distributed/dual_pipe_v.py) but
  only without activation checkpointing (`get_dual_pipe_v_flag` raises otherwise), so with recompute it is refused
  per configuration (`_cell_refusal`, told the schedule's flag). FP8 is written only for 0.3.x where the registry has a Float8
  config function of the model (`deepseek_v3_671b_float8`), without FP8 parameter gathers (no such field); 0.2.2
  takes FP8 as model converters whose recipe pplan does not write, so `torchtitan@0.2` refuses FP8. pplan's selective recompute (Korthikanti et al. 2022,
  arXiv:2205.05198: the attention core re-run, everything else kept) is no torchtitan mode: torchtitan 0.3.0's
  selective AC (`SelectiveAC`, torchtitan/distributed/activation_checkpoint.py; 0.2.x's
  `selective_ac_option = "op"`) saves the matmul and attention outputs and recomputes every second matmul and
  the cheap ops, and a layer-frequency option checkpoints whole layers; so `selective` is refused, and `full`
  (`FullAC`: every layer re-run from its input) and `none` map one to one. torchtitan keeps and reduces
  gradients in FP32 (`training.mixed_precision_reduce` takes only float32), so a BF16-gradient plan is refused;
  its FSDP is ZeRO-3 and its replicate axis ZeRO-0, so a search for it skips ZeRO-1/2 (`request_unsupported_reason`;
  a hand-picked ZeRO-1/2 plan is written as FSDP with a note). `torchtitan` is the current release
  (0.3.x), `torchtitan@0.2` the 0.2.x TOML; they refuse the same plans but by the rules above keyed by release. torchtitan has no activation offload:
  its one offload option, `training.enable_cpu_offload` (torchtitan 0.3.0 torchtitan/config/configs.py), offloads
  FSDP's parameters, gradients and optimizer states, and its activation checkpointing
  (torchtitan/distributed/activation_checkpoint.py) has no offload mode; so a plan with `--offload-modules` is
  refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from pplan.errors import ConfigError
from pplan.launchers.capabilities import (
    BY_NAME,
    EXPERT_RANKS,
    EXPERT_RANKS_FIX,
    EXPERT_RANKS_FIX_REPLICATED,
    EXPERT_RANKS_WITH_ETP,
    EXPERT_TP_IS_TP,
    M_GROUPS_OF_P,
    M_TORCH_1F1B,
    M_TORCH_FAMILY,
    MODEL_AXIS,
    MODEL_AXIS_FIXES,
    MODEL_NOT_SHIPPED,
    MODEL_NOT_SHIPPED_FIX,
    MODEL_NOT_SHIPPED_FIX_ROUTED,
    PAIRED_EXPERTS_NEVER,
    PAIRED_EXPERTS_WITHOUT_RECOMPUTE,
    RANKED,
    RELEASES,
    SEVERAL_CHUNKS,
    TORCHTITAN,
    LauncherCapabilities,
    Refusal,
    TorchtitanRelease,
    capabilities_of,
    launcher_name,
    recompute_kind,
)
from pplan.launchers.names import LAUNCHERS, Launcher
from pplan.launchers.torchtitan_models import (
    ShippedModel,
    TorchtitanVersion,
    shipped_model,
    shipped_name,
    unshipped_detail,
)
from pplan.plan.knobs import DEFAULT_RECOMPUTE_MODULES, Recompute, RecomputeModule
from pplan.plan.records import Plan, PlanRequest
from pplan.plan.rules import recompute_label
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import ScheduleFamily, schedule_family
from pplan.schedules.rules import nearest_valid

__all__ = [
    "LAUNCHERS",
    "RUN_CHECKED",
    "SEARCH_TORCHTITAN_ZERO",
    "Launcher",
    "SearchFilter",
    "capabilities_of",
    "check_model",
    "check_supported",
    "launcher_name",
    "model_unsupported_reason",
    "plan_summary",
    "request_unsupported_reason",
    "routed_or_latent",
    "runs_on",
    "supports",
    "torchtitan_dp_degrees",
    "torchtitan_split",
    "torchtitan_version",
    "unsupported_reason",
]

SEARCH_TORCHTITAN_ZERO = TORCHTITAN.searched_zero_reason
"""Why a search for torchtitan skips ZeRO-1/2: the job torchtitan would run is FSDP (pplan.launchers.torchtitan),
not the plan costed. A plan asked for by hand (`explain --format torchtitan --zero-stage 1`) is still written,
with that note."""

_Refusal = Refusal  # the name this module used before the declarations held the texts


def torchtitan_split(chunk_layers: Sequence[int]) -> tuple[int, int, int] | None:
    """(layers per stage k, first-stage shortfall, last-stage shortfall) for torchtitan, or None if the
    first or last chunk has more layers than the chunks between them (torchtitan's split cannot say that)."""
    first, last = chunk_layers[0], chunk_layers[-1]
    inner = chunk_layers[1:-1]
    k = inner[0] if inner else max(first, last)
    if first > k or last > k:
        return None
    return k, k - first, k - last


def torchtitan_version(launcher: str) -> TorchtitanVersion:
    """The release series a torchtitan launcher name asks for (a ConfigError on `--launcher` for other names)."""
    release = capabilities_of(launcher).release
    if release is None:
        names = " or ".join(c.name for c in BY_NAME.values() if c.release is not None)
        raise ConfigError("--launcher", f"{launcher!r} is not a torchtitan launcher", f"use {names}")
    return release.version


def torchtitan_dp_degrees(
    version: TorchtitanVersion,
    dp: int,
    zero_stage: int,
    shard_group: int | None,
    tp: int,
    pp: int,
    cp: int,
) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree) torchtitan is given for pplan's d, ZeRO stage
    and shard group (`pplan.launchers.torchtitan.data_parallel_degrees` says why)."""
    if shard_group is not None:
        return dp * cp // shard_group, shard_group // cp
    if zero_stage == 0 and (RELEASES[version].replicates_beside_parallelism or tp == pp == cp == 1):
        return dp, 1
    return 1, dp


def _expert_refusal(
    release: TorchtitanRelease,
    ep: int,
    etp: int,
    tp: int,
    cp: int,
    dp: int,
    pp: int,
    zero_stage: int,
    shard_group: int | None,
) -> Refusal | None:
    """torchtitan's rules on expert parallelism that need no model (etp > 1 and ep > 1 exist only for routed
    models): the experts' tensor parallelism (`_expert_tp_refusal`), and ep dividing the ranks it borrows.

    Both releases build the sparse mesh (pp, dp_replicate, efsdp, ep[, etp]) from dp_shard·cp·tp: 0.3.0 as
    efsdp = dp_shard·cp·tp / ep (torchtitan/config/configs.py, torchtitan/distributed/parallel_dims.py), 0.2.2 as
    efsdp = dp_shard·cp·tp / (etp·ep) (`ParallelDims.build_mesh`, torchtitan/distributed/parallel_dims.py). With
    etp = 1 (0.3.x always, with ep > 1) ep must divide dp_shard·cp·tp; with 0.2.x's etp = t, dp_shard·cp.
    dp_shard is as torchtitan's degrees are written (`torchtitan_dp_degrees`)."""
    if etp > 1:  # a routed model, whatever the caller knows of it
        split = _expert_tp_refusal(release, ep, etp, tp)
        if split is not None:
            return split
    shard = torchtitan_dp_degrees(release.version, dp, zero_stage, shard_group, tp, pp, cp)[1]
    ranks = shard * cp * tp // etp  # etp is 1, or (0.2.x) t, here
    if ep > 1 and ranks % ep:
        mesh = release.expert_mesh
        if etp > 1:
            return EXPERT_RANKS_WITH_ETP.format(ep=ep, tp=tp, shard=shard, cp=cp, ranks=ranks, mesh=mesh)
        replicated = zero_stage == 0 and shard_group is None
        fix = (EXPERT_RANKS_FIX_REPLICATED if replicated else EXPERT_RANKS_FIX).format(ranks=ranks)
        return EXPERT_RANKS.format(ep=ep, shard=shard, cp=cp, tp=tp, ranks=ranks, mesh=mesh, fix=fix)
    return None


def _refusal(
    launcher: str,
    schedule: str,
    p: int | None,
    v: int | None,
    m: int | None,
    zero_stage: int,
    chunk_layers: Sequence[int] | None,
    overlap: tuple[bool, bool] = (True, True),
    recompute: str = "none",
    grad_dtype: str = "fp32",
    offload: bool = False,
    shard_group: int | None = None,
    cp: int = 1,
    reshard_after_forward: bool = True,
    tp_comm_overlap: bool = False,
    precision: str = "bf16",
    fp8_swiglu_input: bool = False,
    moment_dtype: str = "fp32",
    experts: tuple[int, int, int, int] = (1, 1, 1, 1),
    fp8_config: bool = False,
    fp8_param_gather: bool = False,
) -> Refusal | None:
    """`overlap`: (overlap_grad_reduce, overlap_param_gather) of the plan or request; `recompute` its policy
    (`pplan.plan.rules.recompute_label`);
    `grad_dtype` its gradient dtype; `offload` whether it offloads activations to host memory; `shard_group` its
    hybrid-sharding group S (None: all d·cp), `cp` its context-parallel size, `reshard_after_forward` ZeRO-3's
    resharding, `tp_comm_overlap` whether its tensor-parallel collectives overlap its GEMMs, `precision` its GEMM
    precision; `experts` (ep, etp, t, d) its expert and tensor parallelism and data-parallel size (None-free:
    1s when unknown); `fp8_config` whether torchtitan ships a Float8 config function of the model (FP8 is then
    written), `fp8_param_gather` whether the plan gathers FP8 weights. The rules on the cut (`_cut_refusal`) are
    checked before those on its sharding, recompute and gradients (`_cell_refusal`)."""
    caps = capabilities_of(launcher)
    kind = schedule_family(schedule)
    return _cut_refusal(
        caps, kind, p, v, m, chunk_layers, offload, cp, tp_comm_overlap, precision, fp8_swiglu_input,
        moment_dtype, experts, fp8_config, fp8_param_gather,
    ) or _cell_refusal(
        caps, p, zero_stage, overlap, recompute, grad_dtype, shard_group, cp, reshard_after_forward, experts,
        kind.overlaps_expert_comm,
    )  # fmt: skip


def _precision_refusal(
    caps: LauncherCapabilities, precision: str, fp8_config: bool, fp8_param_gather: bool
) -> Refusal | None:
    """The plan's precision, then (for an FP8 plan the launcher writes) its FP8 parameter gathers."""
    refused = caps.precision.refusal(precision, caps.name)
    if refused is None and not fp8_config and precision in caps.float8_config_precisions:
        refused = caps.float8_config_precisions[precision].format(launcher=caps.name, value=precision)
    if refused is None and precision != "bf16":
        refused = caps.fp8_param_gather.refusal(fp8_param_gather, caps.name)
    return refused


def _m_refusal(caps: LauncherCapabilities, kind: ScheduleFamily, p: int, m: int) -> Refusal | None:
    """The launcher's rule on m for p > 1 ranks (`LauncherCapabilities.m_rule`)."""
    if caps.m_rule == "groups of p":  # the interleaved schedule (the one with a chosen v) takes groups of p
        return M_GROUPS_OF_P.format(m=m, p=p) if kind.fixed_v is None and m % p else None
    if kind.torch_class == "Schedule1F1B" and m < p:  # torch's own rule on top of the family's
        return M_TORCH_1F1B.format(m=m, p=p)
    if kind.m_problem(p, m) is not None:  # torch's class has the family's own rule on m
        near = nearest_valid(m, lambda c: kind.m_problem(p, c) is None, m + 8 * p + 1)
        return M_TORCH_FAMILY.format(
            torch_name=kind.torch_short_name, m_rule=kind.m_rule, m=m, p=p,
            near=" or ".join(str(c) for c in near if c is not None),
        )  # fmt: skip
    return None


def _cut_refusal(
    caps: LauncherCapabilities,
    kind: ScheduleFamily,
    p: int | None,
    v: int | None,
    m: int | None,
    chunk_layers: Sequence[int] | None,
    offload: bool,
    cp: int,
    tp_comm_overlap: bool,
    precision: str,
    fp8_swiglu_input: bool,
    moment_dtype: str,
    experts: tuple[int, int, int, int],
    fp8_config: bool,
    fp8_param_gather: bool,
) -> Refusal | None:
    """The rules on what every configuration of one cut shares (schedule, p, v, m, layer split, cp, t, ep, d,
    precision, offload): a search checks them once per cut."""
    name = caps.name
    refused = (
        caps.fp8_swiglu_input.refusal(fp8_swiglu_input, name)
        or caps.moment_dtype.refusal(moment_dtype, name)
        or _precision_refusal(caps, precision, fp8_config, fp8_param_gather)
        or caps.tp_comm_overlap.refusal(tp_comm_overlap, name)
    )
    if refused is not None:
        return refused
    chunks = kind.fixed_v if kind.fixed_v is not None else v
    if p == 1 and chunks is not None and chunks > 1 and kind.placement != "dual":
        return SEVERAL_CHUNKS.format(launcher=name, chunks=chunks)
    # without a pipeline (p = 1) no schedule runs: any one-chunk plan is the same job for either launcher
    if not (p == 1 and kind.placement != "dual") and kind.name not in caps.schedules:
        return caps.schedule_refusals[kind.name]
    ep = experts[0]
    if ep > 1 and kind.overlaps_expert_comm and caps.paired_expert_overlap == "never":
        return PAIRED_EXPERTS_NEVER.format(schedule=kind.name, ep=ep)
    refused = caps.activation_offload.refusal(offload, name)
    if refused is None and p is not None and p > 1 and m is not None:
        refused = _m_refusal(caps, kind, p, m)
    if refused is not None:
        return refused
    if (
        caps.larger_end_stages is not None
        and p is not None
        and p > 1
        and chunk_layers
        and len(chunk_layers) > 1
        and not torchtitan_split(chunk_layers)
    ):
        return caps.larger_end_stages.format(first=chunk_layers[0], last=chunk_layers[-1])
    return None


def _cell_refusal(
    caps: LauncherCapabilities,
    p: int | None,
    zero_stage: int,
    overlap: tuple[bool, bool],
    recompute: str,
    grad_dtype: str,
    shard_group: int | None,
    cp: int,
    reshard_after_forward: bool,
    experts: tuple[int, int, int, int],
    pairs_hide_experts: bool = False,
) -> Refusal | None:
    """The rules on a configuration's ZeRO stage, sharding, recompute and gradient dtype (with the degrees and
    overlaps they read): what differs between the configurations of one cut. `pairs_hide_experts`: the schedule
    hides the expert all-to-all behind its paired passes (DualPipe(V))."""
    name = caps.name
    gather_alone = caps.param_gather_needs_grad_reduce
    if gather_alone is not None and zero_stage >= 1 and overlap == (False, True):
        return gather_alone.format(zero_stage=zero_stage)
    if shard_group is not None:
        refused = caps.hybrid_sharding.refusal(zero_stage, name)
        if refused is not None:
            return refused
    refused = caps.reshard_after_forward.refusal(reshard_after_forward, name)
    if refused is not None:
        return refused
    ep, etp, tp, dp = experts
    if caps.release is not None:
        refused = _expert_refusal(caps.release, ep, etp, tp, cp, dp, p or 1, zero_stage, shard_group)
        if refused is not None:
            return refused
    if ep > 1 and pairs_hide_experts and recompute != "none" and caps.paired_expert_overlap is not None:
        # with "never" the cut is refused first (`_cut_refusal`)
        return PAIRED_EXPERTS_WITHOUT_RECOMPUTE.format(ep=ep, recompute=recompute)
    if caps.shard_group_of_cp is not None and shard_group is not None and shard_group % cp:
        return caps.shard_group_of_cp.format(shard_group=shard_group, cp=cp)
    return caps.grad_dtype.refusal(grad_dtype, name) or caps.recompute.refusal(
        recompute_kind(recompute), name
    )


def supports(launcher: str, schedule_name: str) -> bool:
    """Whether `launcher` can run the schedule at all (before any rule on p, v or m)."""
    return schedule_family(schedule_name).name in capabilities_of(launcher).schedules


def unsupported_reason(
    launcher: str,
    schedule: str | Plan,
    *,
    p: int | None = None,
    v: int | None = None,
    m: int | None = None,
    zero_stage: int = 0,
    chunk_layers: Sequence[int] | None = None,
    recompute: str = "none",
) -> str | None:
    """Why `launcher` cannot run the schedule or plan, or None when it can.

    Pass a `Plan`, or a schedule name with whatever of p (pipeline ranks), v (chunks per rank), m
    (micro-batches), the ZeRO stage, the layers per chunk (model order) and the recompute mode are known:
    unknown ones are not checked, so a search can filter the schedule axis first and each (p, m) later without
    building a plan.
    The reason is generic (no plan-specific numbers), so it can key a rejection count.
    """
    if isinstance(schedule, Plan):
        refused = _plan_refusal(launcher, schedule)
    else:
        refused = _refusal(launcher, schedule, p, v, m, zero_stage, chunk_layers, recompute=recompute)
    return None if refused is None else refused.reason


def request_unsupported_reason(
    launcher: str, req: PlanRequest, m: int, num_layers: int | None = None, model: ModelSpec | None = None
) -> str | None:
    """`unsupported_reason` for a request before it becomes a plan.

    With `num_layers`, an uneven first/last split is checked too; with `model`, what torchtitan cannot run on the
    model it builds (its experts' tensor parallelism, context parallelism), and FP8 where it ships a Float8
    config function of the model, as `check_supported` does for the plan.
    """
    caps = capabilities_of(launcher)
    shipped = None if model is None else _shipped(caps, model)
    kind = schedule_family(req.schedule)
    v = kind.fixed_v if kind.fixed_v is not None else req.vp
    layers = _chunk_layers(kind, num_layers, req.pp, v, req.first_stage_layers, req.last_stage_layers)
    refused = _cut_refusal(
        caps, kind, req.pp, v, m, layers, bool(req.offload_modules or req.offload_layers), req.cp, req.tp_comm_overlap and req.tp > 1,
        req.precision, req.fp8_swiglu_input, req.moment_dtype,
        (req.ep, req.etp, req.tp, req.gpus // (req.tp * req.pp * req.cp)), _fp8_config(caps, shipped),
        req.fp8_param_gather,
    ) or _cell_refusal(
        caps, req.pp, req.zero_stage, (req.overlap_grad_reduce, req.overlap_param_gather), req.recompute_label,
        req.grad_dtype, req.shard_group, req.cp, req.reshard_after_forward,
        (req.ep, req.etp, req.tp, req.gpus // (req.tp * req.pp * req.cp)), kind.overlaps_expert_comm,
    )  # fmt: skip
    if refused is None and shipped is not None:
        refused = _model_plan_refusal(shipped, caps, req.ep, req.etp, req.tp, req.cp, req.pp)
    if refused is None and req.zero_stage not in caps.searched_zero_stages:
        return caps.searched_zero_reason
    return None if refused is None else refused.reason


def _chunk_layers(
    kind: ScheduleFamily, num_layers: int | None, pp: int, v: int | None, first: int | None, last: int | None
) -> tuple[int, ...] | None:
    """The layers of each chunk (model order) of an uneven first/last split, for the split rule; None when the
    split is even or unknown (no `num_layers`, or a split that does not divide)."""
    if num_layers is None or v is None or (first, last) == (None, None):
        return None
    chunks = pp if kind.placement == "dual" else pp * v
    edges = [x for x in (first, last) if x is not None]
    rest = chunks - len(edges)
    if chunks == 2 and rest == 0:
        return tuple(edges)
    if chunks >= 2 and rest > 0 and (num_layers - sum(edges)) % rest == 0:
        k = (num_layers - sum(edges)) // rest
        return (k if first is None else first, *([k] * (chunks - 2)), k if last is None else last)
    return None


_REQUEST_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(PlanRequest)}
"""What a search's requests leave at PlanRequest's defaults (overlaps, FP8 caching and gathers, moments)."""


class SearchFilter:
    """What a search asks `launcher` of each configuration, split as the search enumerates: `layout_refuses` the
    rules on what all configurations of one cut share but m (once for all its micro-batch sizes), `m_refuses` the
    rule on m, `cell_refuses` those on one configuration's ZeRO stage, sharding, recompute and gradient dtype; a
    configuration is refused when any is, exactly when `request_unsupported_reason` refuses its request (the
    search's requests leave the overlaps, FP8 caching and gathers and the moments at PlanRequest's defaults). The
    answers are remembered per key; what the launcher's declaration and the model fix is read once here."""

    def __init__(
        self,
        launcher: str,
        model: ModelSpec,
        tp_comm_overlap: bool = False,
        recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES,
    ) -> None:
        self.capabilities = capabilities_of(launcher)
        self.launcher = self.capabilities.name
        self.num_layers = model.num_layers
        self.shipped = _shipped(self.capabilities, model)
        self.fp8_config = _fp8_config(self.capabilities, self.shipped)
        self.tp_comm_overlap = tp_comm_overlap
        self.recompute_modules = recompute_modules
        self.searched_zero = self.capabilities.searched_zero_stages
        self.overlap = (_REQUEST_DEFAULTS["overlap_grad_reduce"], _REQUEST_DEFAULTS["overlap_param_gather"])
        self._cuts: dict[tuple[object, ...], bool] = {}
        self._m_rules: dict[tuple[str, int, int], bool] = {}
        self._cells: dict[tuple[object, ...], bool] = {}

    def layout_refuses(
        self,
        family: ScheduleFamily,
        t: int,
        p: int,
        cp: int,
        d: int,
        v: int,
        first: int | None,
        last: int | None,
        offload: bool,
        ep: int,
        etp: int,
        precision: str,
    ) -> bool:
        """The rules on a cut but its rule on m (`m_refuses`), remembered for every m (a search tries each micro-batch
        size of a cut)."""
        key = (family.name, t, p, cp, d, v, first, last, offload, ep, etp, precision)
        got = self._cuts.get(key)
        if got is None:
            chunks = family.fixed_v if family.fixed_v is not None else v
            refused = _cut_refusal(
                self.capabilities, family, p, chunks, None,
                _chunk_layers(family, self.num_layers, p, chunks, first, last), offload, cp,
                self.tp_comm_overlap and t > 1, precision, _REQUEST_DEFAULTS["fp8_swiglu_input"],
                _REQUEST_DEFAULTS["moment_dtype"], (ep, etp, t, d), self.fp8_config,
                _REQUEST_DEFAULTS["fp8_param_gather"],
            )  # fmt: skip
            if refused is None and self.shipped is not None:
                refused = _model_plan_refusal(self.shipped, self.capabilities, ep, etp, t, cp, p)
            got = self._cuts[key] = refused is not None
        return got

    def m_refuses(self, family: ScheduleFamily, p: int, m: int) -> bool:
        """The launcher's rule on a pipeline of p > 1 ranks running m micro-batches."""
        m_key = (family.name, p, m)
        m_refused = self._m_rules.get(m_key)
        if m_refused is None:
            m_refused = self._m_rules[m_key] = _m_refusal(self.capabilities, family, p, m) is not None
        return m_refused

    def cell_refuses(
        self,
        t: int,
        p: int,
        cp: int,
        d: int,
        ep: int,
        etp: int,
        zero: int,
        recompute: Recompute,
        recompute_layers: int | None,
        grad_dtype: str,
        shard_group: int | None,
        reshard: bool,
        pairs_hide_experts: bool = False,
    ) -> bool:
        """`pairs_hide_experts`: the cut's schedule hides the expert all-to-all behind paired passes (its
        family's `overlaps_expert_comm`). Remembered per what `_cell_refusal` reads: without a release's expert
        rules (`_expert_refusal`, torchtitan's) it reads neither t, p, d nor etp, and of ep only whether it is
        above 1, so a search's cuts of every (t, p, d) share their answers."""
        if self.capabilities.release is None:
            key: tuple[object, ...] = (
                cp, ep > 1, zero, recompute, recompute_layers, grad_dtype, shard_group, reshard,
                pairs_hide_experts,
            )  # fmt: skip
        else:
            key = (
                t, p, cp, d, ep, etp, zero, recompute, recompute_layers, grad_dtype, shard_group, reshard,
                pairs_hide_experts,
            )  # fmt: skip
        got = self._cells.get(key)
        if got is None:
            modules = self.recompute_modules if recompute == "selective" else DEFAULT_RECOMPUTE_MODULES
            label = recompute_label(
                recompute, recompute_layers, "block" if recompute_layers else "uniform", modules
            )
            refused = _cell_refusal(
                self.capabilities, p, zero, self.overlap, label, grad_dtype, shard_group, cp, reshard,
                (ep, etp, t, d), pairs_hide_experts,
            )  # fmt: skip
            got = self._cells[key] = refused is not None or zero not in self.searched_zero
        return got


def _plan_refusal(launcher: str, plan: Plan, fp8_config: bool = False) -> Refusal | None:
    return _refusal(
        launcher,
        plan.kind.name,
        plan.pp,
        plan.vp,
        plan.num_microbatches,
        plan.zero_stage,
        tuple(c.layers for c in plan.layout.chunks),
        (plan.overlap_grad_reduce, plan.overlap_param_gather),
        plan.recompute_label,
        plan.grad_dtype,
        bool(plan.offload_modules or plan.offload_layers),
        plan.shard_group,
        plan.cp,
        plan.reshard_after_forward,
        plan.tp_comm_overlap,
        plan.precision,
        plan.fp8_swiglu_input,
        plan.moment_dtype,
        (plan.ep, plan.etp, plan.tp, plan.dp),
        fp8_config,
        plan.fp8_param_gather,
    )


def _expert_tp_refusal(release: TorchtitanRelease, ep: int, etp: int, tp: int) -> Refusal | None:
    """torchtitan's rule on a routed model's expert tensor parallelism etp, by release (the one place it is kept).

    Without expert parallelism (ep = 1) both releases split every expert over the t tensor-parallel ranks, so etp
    must be t: 0.3.0's `expert_param_placement_dense` (torchtitan/models/common/moe_sharding.py), 0.2.2's
    `apply_moe_ep_tp` (TensorParallel on the TP mesh when there is no EP mesh; torchtitan/models/llama4/infra/
    parallelize.py, which deepseek_v3 and qwen3 import, and gpt_oss/infra/parallelize.py). With ep > 1, 0.3.0 has
    no expert_tensor_parallel_degree and keeps every expert whole (etp = 1); 0.2.2's
    `parallelism.expert_tensor_parallel_degree` takes 1 or t (`ParallelDims._validate` asserts ETP = TP or ETP = 1,
    torchtitan/distributed/parallel_dims.py): the release's `expert_tp_beside_ep`."""
    if ep == 1:
        return None if etp == tp else EXPERT_TP_IS_TP.format(etp=etp, tp=tp)
    if etp == 1 or (release.expert_tp_beside_ep and etp == tp):
        return None
    return release.expert_tp_refusal.format(ep=ep, etp=etp, tp=tp)


def _model_plan_refusal(
    shipped: ShippedModel, caps: LauncherCapabilities, ep: int, etp: int, tp: int, cp: int, pp: int
) -> Refusal | None:
    """What torchtitan (`caps`, a torchtitan release) cannot run, with expert parallelism `ep`, expert tensor
    parallelism `etp`, tensor parallelism `tp`, context parallelism `cp` and pipeline parallelism `pp`, on the model
    it builds (`shipped`): the cut's rules that need the model (each release's facts are the record's,
    `PerRelease`)."""
    release = caps.release
    assert release is not None  # only a torchtitan release builds a shipped model
    split = _expert_tp_refusal(release, ep, etp, tp) if shipped.moe is not None else None
    if split is not None:
        return split
    version = release.version
    for axis, degree, why in (
        ("pipeline", pp, shipped.pp_refusal.of(version)),
        ("context", cp, shipped.cp_refusal.of(version)),
    ):
        if why and degree > 1:
            symbol, fix = MODEL_AXIS_FIXES[axis]
            return MODEL_AXIS.format(
                launcher=caps.name, model=shipped_name(shipped, version), axis=axis, symbol=symbol,
                degree=degree, why=why, fix=fix,
            )  # fmt: skip
    return None


def model_unsupported_reason(launcher: str, model: ModelSpec) -> str | None:
    """Why `launcher` cannot build `model` at all (torchtitan: no configuration of its shape in that release), or
    None."""
    release = capabilities_of(launcher).release
    if release is None or shipped_model(model, release.version) is not None:
        return None
    return MODEL_NOT_SHIPPED


def routed_or_latent(model: ModelSpec) -> str:
    """The routed, latent-attention and multi-token-prediction parts of `model` ("" when none): torchtitan builds
    them only as a shipped model of exactly that shape."""
    parts = [
        what
        for what, present in (
            ("routed experts", model.moe is not None),
            ("multi-head latent attention", model.mla is not None),
            ("multi-token prediction", model.mtp_layers > 0),
        )
        if present
    ]
    return " and ".join(parts)


def check_model(launcher: str, model: ModelSpec) -> None:
    """Raise a ConfigError naming `--launcher` when `launcher` cannot build `model` (before any plan)."""
    reason = model_unsupported_reason(launcher, model)
    if reason is None:
        return
    detail = unshipped_detail(model, torchtitan_version(launcher))
    fix = MODEL_NOT_SHIPPED_FIX_ROUTED if routed_or_latent(model) else MODEL_NOT_SHIPPED_FIX
    raise ConfigError("--launcher", f"{reason} ({detail})", fix)


def _shipped(caps: LauncherCapabilities, model: ModelSpec) -> ShippedModel | None:
    """The torchtitan model the launcher builds for `model` (None where it builds any model, or none shipped)."""
    return None if caps.release is None else shipped_model(model, caps.release.version)


def _fp8_config(caps: LauncherCapabilities, shipped: ShippedModel | None) -> bool:
    """Whether pplan writes FP8 for the model where the launcher takes FP8 only as a Float8 config function the
    model registry ships (0.3.x; 0.2.x: none)."""
    return bool(caps.float8_config_precisions) and shipped is not None and shipped.fp8_config is not None


def check_supported(launcher: str, plan: Plan, model: ModelSpec | None = None) -> None:
    """Raise a ConfigError naming `--launcher` when `launcher` cannot run `plan` (or build `model`, if given)."""
    caps = capabilities_of(launcher)
    shipped = None
    if model is not None:
        check_model(launcher, model)
        shipped = _shipped(caps, model)
    refused = _plan_refusal(launcher, plan, _fp8_config(caps, shipped))
    if refused is None and shipped is not None:
        refused = _model_plan_refusal(shipped, caps, plan.ep, plan.etp, plan.tp, plan.cp, plan.pp)
    if refused is not None:
        raise ConfigError("--launcher", f"{refused.reason} ({refused.detail})", refused.fix)


def plan_summary(model: ModelSpec, plan: Plan) -> str:
    """The one-line summary of `plan` that both launchers' outputs start their header comment with."""
    v = f" v={plan.vp}" if plan.vp > 1 else ""
    return (
        f"{model.name} on {plan.gpus} GPUs = t {plan.tp} × p {plan.pp} × cp {plan.cp} × d {plan.dp}; "
        f"{plan.kind.name}{v}, micro-batch {plan.micro_batch} × {plan.num_microbatches} micro-batches, "
        f"global batch {plan.global_batch}, sequence {plan.seq_len}, recompute {plan.recompute}, "
        f"ZeRO-{plan.zero_stage}"
        + (
            f" over shard groups of {plan.shard_group} (× {plan.shard_replicas} replicas)"
            if plan.shard_group
            else ""
        )
        + (", no reshard after forward" if not plan.reshard_after_forward else "")
    )


RUN_CHECKED: tuple[Launcher, ...] = tuple(c.name for c in RANKED)
"""The launchers `runs_on` asks (torchtitan@0.2 writes the same plans as torchtitan, in an older format)."""


def runs_on(model: ModelSpec, req: PlanRequest, m: int) -> tuple[Launcher, ...]:
    """The launchers that run `req` as planned (`RUN_CHECKED`): each builds the model and runs the request's
    schedule, split, sharding, recompute, gradient dtype and precision; torchtitan's data parallelism is FSDP, so a
    ZeRO-1/2 plan is not what it would run (`SEARCH_TORCHTITAN_ZERO`)."""
    return tuple(
        caps.name
        for caps in RANKED
        if req.zero_stage in caps.searched_zero_stages
        and model_unsupported_reason(caps.name, model) is None
        and request_unsupported_reason(caps.name, req, m, model.num_layers, model) is None
    )
