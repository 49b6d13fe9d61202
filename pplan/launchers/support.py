"""Which launcher runs which schedule and plan: the launcher names, the refusals and their texts.

Pure functions (no I/O). `supports` answers for a schedule alone, `unsupported_reason` for a schedule with
whatever of p, v, m, the ZeRO stage and the layer split are known (or for a whole `Plan`),
`request_unsupported_reason` for a search's request before it becomes a plan, and `check_supported` raises the
ConfigError the writers (`pplan.launchers.megatron`, `pplan.launchers.torchtitan`) raise. `plan_summary` is the
plan line both writers' header comments start with.

Which schedules each launcher runs (each family's record in `pplan.schedules.registry` says so, with the
refusal texts; the launcher-specific rules on m below are keyed by its fields):
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
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from pplan.errors import ConfigError
from pplan.launchers.torchtitan_models import (
    ShippedModel,
    TorchtitanVersion,
    shipped_model,
    shipped_name,
    unshipped_detail,
)
from pplan.plan.configuration import (
    DEFAULT_RECOMPUTE_MODULES,
    Plan,
    PlanRequest,
    Recompute,
    RecomputeModule,
    recompute_label,
)
from pplan.profiles.specs import ModelSpec
from pplan.schedules import ScheduleFamily, schedule_family
from pplan.schedules.rules import nearest_valid

Launcher = Literal["megatron", "torchtitan", "torchtitan@0.2"]
"""The job launchers pplan writes settings for (`--format`, `--launcher`)."""
LAUNCHERS: tuple[Launcher, ...] = get_args(Launcher)

_ALL_LAUNCHERS = ", ".join(LAUNCHERS)

SEARCH_TORCHTITAN_ZERO = "torchtitan: no ZeRO-1/2 (its FSDP shards the weights too: ZeRO-3)"
"""Why a search for torchtitan skips ZeRO-1/2: the job torchtitan would run is FSDP (pplan.launchers.torchtitan),
not the plan costed. A plan asked for by hand (`explain --format torchtitan --zero-stage 1`) is still written,
with that note."""


@dataclass(frozen=True, slots=True)
class _Refusal:
    reason: str
    """Generic, so a search can count rejections by it (no plan-specific numbers)."""
    detail: str
    fix: str


def launcher_name(name: str) -> str:
    """The launcher's canonical name (one of `LAUNCHERS`); a ConfigError naming `--launcher` otherwise."""
    key = name.strip().lower()
    if key not in LAUNCHERS:
        raise ConfigError("--launcher", f"unknown launcher {name!r}", f"use one of {_ALL_LAUNCHERS}")
    return key


def _schedule_refusal(launcher: str, family: ScheduleFamily) -> _Refusal | None:
    """Whether the launcher runs the family at all, from its record (pplan.schedules.registry)."""
    if launcher == "megatron":
        if family.megatron:
            return None
        elsewhere = ", or --launcher torchtitan" if family.torch_class is not None else ""
        return _Refusal(
            f"megatron cannot run {family.name}",
            family.why_not_megatron,
            f"use --schedule interleaved-1f1b (or 1f1b){elsewhere}",
        )
    if family.torch_class is not None:
        return None
    return _Refusal(f"torchtitan cannot run {family.name}", family.why_not_torch, family.fix_not_torch)


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
    name = launcher_name(launcher)
    if name == "torchtitan":
        return "0.3"
    if name == "torchtitan@0.2":
        return "0.2"
    raise ConfigError(
        "--launcher", f"{launcher!r} is not a torchtitan launcher", "use torchtitan or torchtitan@0.2"
    )


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
    if zero_stage == 0 and (version == "0.3" or tp == pp == cp == 1):
        return dp, 1
    return 1, dp


def _expert_refusal(
    launcher: str,
    ep: int,
    etp: int,
    tp: int,
    cp: int,
    dp: int,
    pp: int,
    zero_stage: int,
    shard_group: int | None,
) -> _Refusal | None:
    """torchtitan's rules on expert parallelism that need no model (etp > 1 and ep > 1 exist only for routed
    models): the experts' tensor parallelism (`_expert_tp_refusal`), and ep dividing the ranks it borrows.

    Both releases build the sparse mesh (pp, dp_replicate, efsdp, ep[, etp]) from dp_shard·cp·tp: 0.3.0 as
    efsdp = dp_shard·cp·tp / ep (torchtitan/config/configs.py, torchtitan/distributed/parallel_dims.py), 0.2.2 as
    efsdp = dp_shard·cp·tp / (etp·ep) (`ParallelDims.build_mesh`, torchtitan/distributed/parallel_dims.py). With
    etp = 1 (0.3.x always, with ep > 1) ep must divide dp_shard·cp·tp; with 0.2.x's etp = t, dp_shard·cp.
    dp_shard is as torchtitan's degrees are written (`torchtitan_dp_degrees`)."""
    version = torchtitan_version(launcher)
    if etp > 1:  # a routed model, whatever the caller knows of it
        split = _expert_tp_refusal(version, ep, etp, tp)
        if split is not None:
            return split
    shard = torchtitan_dp_degrees(version, dp, zero_stage, shard_group, tp, pp, cp)[1]
    ranks = shard * cp * tp // etp  # etp is 1, or (0.2.x) t, here
    if ep > 1 and ranks % ep:
        mesh = (
            "torchtitan 0.3.0 borrows the expert-parallel ranks from FSDP and TP (efsdp = dp_shard·cp·tp / ep, "
            "torchtitan/config/configs.py; dp_replicate and pp are outer)"
            if version == "0.3"
            else "torchtitan 0.2.2 borrows the expert-parallel ranks from FSDP, CP and the TP ranks etp leaves "
            "(efsdp = dp_shard·cp·tp / (etp·ep), ParallelDims.build_mesh in torchtitan/distributed/parallel_dims.py)"
        )
        if etp > 1:
            return _Refusal(
                "torchtitan@0.2: ep must divide data_parallel_shard_degree × cp with etp = t",
                f"ep = {ep}, etp = t = {tp}, data_parallel_shard_degree {shard} × cp {cp} = {ranks}: {mesh}",
                f"use --ep dividing {ranks}, or --etp 1 (EP then borrows the t ranks too), or --launcher megatron",
            )
        fix = (
            "use --zero-stage 3 (FSDP shards over d, so the ranks are t·cp·d)"
            if zero_stage == 0 and shard_group is None
            else f"use --ep dividing {ranks}"
        )
        return _Refusal(
            "torchtitan: ep must divide data_parallel_shard_degree × cp × tp",
            f"ep = {ep}, data_parallel_shard_degree {shard} × cp {cp} × t {tp} = {ranks}: {mesh}",
            f"{fix}, or --launcher megatron",
        )
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
) -> _Refusal | None:
    """`overlap`: (overlap_grad_reduce, overlap_param_gather) of the plan or request; `recompute` its policy
    (`pplan.plan.configuration.recompute_label`);
    `grad_dtype` its gradient dtype; `offload` whether it offloads activations to host memory; `shard_group` its
    hybrid-sharding group S (None: all d·cp), `cp` its context-parallel size, `reshard_after_forward` ZeRO-3's
    resharding, `tp_comm_overlap` whether its tensor-parallel collectives overlap its GEMMs, `precision` its GEMM
    precision; `experts` (ep, etp, t, d) its expert and tensor parallelism and data-parallel size (None-free:
    1s when unknown); `fp8_config` whether torchtitan ships a Float8 config function of the model (FP8 is then
    written), `fp8_param_gather` whether the plan gathers FP8 weights. The rules on the cut (`_cut_refusal`) are
    checked before those on its sharding, recompute and gradients (`_cell_refusal`)."""
    launcher = launcher_name(launcher)
    kind = schedule_family(schedule)
    return _cut_refusal(
        launcher, kind, p, v, m, chunk_layers, offload, cp, tp_comm_overlap, precision, fp8_swiglu_input,
        moment_dtype, experts, fp8_config, fp8_param_gather,
    ) or _cell_refusal(
        launcher, p, zero_stage, overlap, recompute, grad_dtype, shard_group, cp, reshard_after_forward, experts,
        kind.overlaps_expert_comm,
    )  # fmt: skip


def _cut_refusal(
    launcher: str,
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
) -> _Refusal | None:
    """The rules on what every configuration of one cut shares (schedule, p, v, m, layer split, cp, t, ep, d,
    precision, offload; `launcher` canonical): a search checks them once per cut."""
    if fp8_swiglu_input:
        return _Refusal(
            f"{launcher}: no FP8 SwiGLU-input caching",
            "--fp8-swiglu-input is DeepSeek-V3's own framework's (report §3.3.2); neither Megatron-LM nor torchtitan "
            "has an option for it",
            "drop --fp8-swiglu-input",
        )
    if moment_dtype != "fp32" and launcher != "megatron":
        return _Refusal(
            f"{launcher}: Adam moments in FP32 only",
            f"--moment-dtype {moment_dtype}: pplan writes no torchtitan low-precision optimizer settings",
            "use --moment-dtype fp32, or --launcher megatron (--use-precision-aware-optimizer)",
        )
    if precision == "fp8" and fp8_config and launcher == "torchtitan" and fp8_param_gather:
        return _Refusal(
            "torchtitan: no FP8 parameter gathers",
            "--fp8-param-gather: torchtitan 0.3.0's Float8 converters have no FP8 all-gather field "
            "(torchtitan/components/quantization/float8.py)",
            "drop --fp8-param-gather, or --launcher megatron",
        )
    if (
        precision != "bf16"
        and launcher != "megatron"
        and not (precision == "fp8" and fp8_config and launcher == "torchtitan")
    ):
        why = (
            "pplan writes torchtitan's FP8 only as a Float8 config function the model registry ships (torchtitan "
            "0.3.0: deepseek_v3_671b_float8), none for this model or precision"
            if launcher == "torchtitan"
            else "torchtitan 0.2.2 takes FP8 as model converters (model.converters, [quantize.linear.float8] and, "
            "for routed experts, the prototype [quantize.grouped_mm.float8], torchtitan/config/job_config.py) whose "
            "recipe and filters are not pplan's FP8 plan; pplan writes none"
        )
        return _Refusal(
            f"{launcher}: FP8 not emitted",
            f"--precision {precision}: {why}",
            "use --precision bf16, or --launcher megatron (--fp8-format, --fp8-recipe)",
        )
    if tp_comm_overlap and launcher != "megatron":
        return _Refusal(
            f"{launcher}: async tensor parallelism not emitted",
            "--tp-comm-overlap: pplan writes no torchtitan async-TP and compile settings",
            "drop --tp-comm-overlap, or set parallelism.enable_async_tensor_parallel and compile yourself",
        )
    chunks = kind.fixed_v if kind.fixed_v is not None else v
    if p == 1 and chunks is not None and chunks > 1 and kind.placement != "dual":
        return _Refusal(
            f"{launcher}: several chunks on one pipeline rank",
            f"p = 1 with {chunks} chunks",
            "use --pp 2 or more, or a one-chunk schedule such as 1f1b",
        )
    # without a pipeline (p = 1) no schedule runs: any one-chunk plan is the same job for either launcher
    no_pipeline = p == 1 and kind.placement != "dual"
    refused = None if no_pipeline else _schedule_refusal(launcher, kind)
    if refused is not None:
        return refused
    if launcher == "megatron":
        # Megatron's interleaved schedule (the one with a chosen v) takes micro-batches in groups of p
        if kind.fixed_v is None and p is not None and p > 1 and m is not None and m % p:
            return _Refusal(
                "megatron: interleaved 1F1B needs m a multiple of p",
                f"m = {m}, p = {p}",
                f"use a global batch giving m a multiple of {p}, or --launcher torchtitan",
            )
        return None
    ep = experts[0]
    if ep > 1 and kind.overlaps_expert_comm and launcher == "torchtitan":
        return _Refusal(
            f"torchtitan: {kind.name} without the expert all-to-all overlap",
            f"ep = {ep}: pplan costed {kind.name}'s paired passes hiding the expert all-to-all, but torchtitan 0.3.0 "
            "registers no overlap function, so torch runs the paired forward and backward one after the other "
            "(_PipelineScheduleRuntime, OVERLAP_F_B, PyTorch 2.13 torch/distributed/pipelining/schedules.py)",
            "use another schedule (--schedule zbv or interleaved-1f1b), or --ep 1",
        )
    if offload:
        return _Refusal(
            "torchtitan: no activation offload",
            "torchtitan's only offload option, training.enable_cpu_offload, moves FSDP's parameters, gradients "
            "and optimizer states to the CPU, not saved activations (torchtitan 0.3.0 torchtitan/config/configs.py)",
            "drop --offload-modules, or use --launcher megatron (--fine-grained-activation-offloading)",
        )
    if p is not None and p > 1 and m is not None:
        if kind.torch_class == "Schedule1F1B" and m < p:  # torch's own rule on top of the family's
            return _Refusal(
                "torchtitan: 1F1B needs m ≥ p",
                f"m = {m}, p = {p}",
                f"use a global batch giving m ≥ {p}, or --schedule gpipe",
            )
        if kind.m_problem(p, m) is not None:  # torch's class has the family's own rule on m
            near = nearest_valid(m, lambda c: kind.m_problem(p, c) is None, m + 8 * p + 1)
            return _Refusal(
                f"torchtitan: {kind.torch_short_name} needs {kind.m_rule}",
                f"m = {m}, p = {p}",
                f"use a global batch giving m = {' or '.join(str(c) for c in near if c is not None)}",
            )
    if (
        p is not None
        and p > 1
        and chunk_layers
        and len(chunk_layers) > 1
        and not torchtitan_split(chunk_layers)
    ):
        return _Refusal(
            "torchtitan: first/last stage cannot have more layers than the others",
            f"layers per chunk {chunk_layers[0]}, ..., {chunk_layers[-1]}",
            "give the first and last stages fewer layers (or as many), or --launcher megatron",
        )
    return None


def _cell_refusal(
    launcher: str,
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
) -> _Refusal | None:
    """The rules on a configuration's ZeRO stage, sharding, recompute and gradient dtype (with the degrees and
    overlaps they read; `launcher` canonical): what differs between the configurations of one cut.
    `pairs_hide_experts`: the schedule hides the expert all-to-all behind its paired passes (DualPipe(V))."""
    if launcher == "megatron":
        if zero_stage >= 1 and overlap == (False, True):
            return _Refusal(
                "megatron: --overlap-param-gather needs --overlap-grad-reduce",
                f"ZeRO-{zero_stage} with --no-overlap-grad-reduce; Megatron asserts "
                "'Must use --overlap-param-gather with --overlap-grad-reduce'",
                "add --no-overlap-param-gather (pplan then costs the parameter gather as exposed), "
                "or drop --no-overlap-grad-reduce",
            )
        if shard_group is not None and zero_stage >= 2:
            return _Refusal(
                "megatron: no hybrid sharding for Megatron-FSDP in pplan's flags",
                f"ZeRO-{zero_stage} with a shard group; pplan writes hybrid sharding only as the distributed "
                "optimizer's --num-distributed-optimizer-instances (ZeRO-1), not Megatron-FSDP's",
                "use --zero-stage 1, or drop --shard-group, or --launcher torchtitan",
            )
        if not reshard_after_forward:
            return _Refusal(
                "megatron: Megatron-FSDP reshards after every forward",
                "megatron-core 0.16.1's only no-reshard flag, --torch-fsdp2-no-reshard-after-forward, applies to "
                "--use-torch-fsdp2, not the Megatron-FSDP pplan writes for ZeRO-3",
                "drop --no-reshard-after-forward, or use --launcher torchtitan (fsdp_reshard_after_forward)",
            )
        return None
    ep, etp, tp, dp = experts
    expert = _expert_refusal(launcher, ep, etp, tp, cp, dp, p or 1, zero_stage, shard_group)
    if expert is not None:
        return expert
    if ep > 1 and pairs_hide_experts and recompute != "none":  # 0.3.x refuses the cut (`_cut_refusal`)
        return _Refusal(
            "torchtitan@0.2: DualPipeV's expert overlap without activation checkpointing only",
            f"ep = {ep}, recompute {recompute}: torchtitan 0.2.2 overlaps DualPipeV's expert all-to-all "
            '(pipeline_parallel_expert_parallel_overlap) only with activation_checkpoint.mode "none"; '
            "get_dual_pipe_v_flag raises NotImplementedError otherwise (torchtitan/distributed/dual_pipe_v.py)",
            "use --recompute none, or another schedule (--schedule zbv or interleaved-1f1b), or --ep 1",
        )
    if shard_group is not None and shard_group % cp:
        return _Refusal(
            "torchtitan: the shard group must be a multiple of cp",
            f"S = {shard_group}, cp = {cp}: torchtitan's FSDP shards over data_parallel_shard_degree × "
            "context_parallel_degree (torchtitan 0.3.0 torchtitan/config/configs.py)",
            f"use --shard-group a multiple of {cp}, or --launcher megatron",
        )
    if grad_dtype == "bf16":
        return _Refusal(
            "torchtitan: gradients reduced in FP32 only",
            "torchtitan keeps and reduces gradients in FP32 (training.mixed_precision_reduce takes only float32, "
            "torchtitan 0.3.0 torchtitan/config/job_config.py), so a BF16-gradient plan is not the job it runs",
            "use --grad-dtype fp32, or --launcher megatron (--grad-reduce-in-bf16)",
        )
    if recompute.startswith("full("):
        return _Refusal(
            "torchtitan: full recompute of every layer only",
            "torchtitan's full AC checkpoints every transformer block on its own, and its layer option "
            "(selective_ac_option = k) every k-th block, not the first N of each chunk nor groups of N "
            "(torchtitan 0.3.0 torchtitan/distributed/activation_checkpoint.py)",
            "use --recompute full without --recompute-layers, or --launcher megatron (--recompute-method)",
        )
    if recompute.startswith("selective"):
        return _Refusal(
            "torchtitan: no attention-core recompute (pplan's selective)",
            "torchtitan's selective AC saves matmul and attention outputs and recomputes every second matmul "
            "(SelectiveAC, torchtitan 0.3.0 torchtitan/distributed/activation_checkpoint.py), not pplan's "
            "attention-core recompute (Korthikanti et al. 2022)",
            "use --recompute full or none, or --launcher megatron",
        )
    return None


def supports(launcher: str, schedule_name: str) -> bool:
    """Whether `launcher` can run the schedule at all (before any rule on p, v or m)."""
    return _schedule_refusal(launcher_name(launcher), schedule_family(schedule_name)) is None


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
    shipped = None if model is None else _shipped(launcher, model)
    kind = schedule_family(req.schedule)
    v = kind.fixed_v if kind.fixed_v is not None else req.vp
    layers = _chunk_layers(kind, num_layers, req.pp, v, req.first_stage_layers, req.last_stage_layers)
    overlap = (req.overlap_grad_reduce, req.overlap_param_gather)
    refused = _refusal(
        launcher,
        req.schedule,
        req.pp,
        v,
        m,
        req.zero_stage,
        layers,
        overlap,
        req.recompute_label,
        req.grad_dtype,
        bool(req.offload_modules),
        req.shard_group,
        req.cp,
        req.reshard_after_forward,
        req.tp_comm_overlap and req.tp > 1,
        req.precision,
        req.fp8_swiglu_input,
        req.moment_dtype,
        (req.ep, req.etp, req.tp, req.gpus // (req.tp * req.pp * req.cp)),
        _fp8_config(launcher, shipped),
        req.fp8_param_gather,
    )
    if refused is None and shipped is not None:
        refused = _model_plan_refusal(
            shipped, launcher_name(launcher), req.ep, req.etp, req.tp, req.cp, req.pp
        )
    if refused is None and _search_skips_zero(launcher_name(launcher), req.zero_stage):
        return SEARCH_TORCHTITAN_ZERO
    return None if refused is None else refused.reason


def _search_skips_zero(launcher: str, zero_stage: int) -> bool:
    """A search for torchtitan skips ZeRO-1/2 (`SEARCH_TORCHTITAN_ZERO`)."""
    return launcher != "megatron" and zero_stage in (1, 2)


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
    """What a search asks `launcher` of each configuration, split as the search enumerates: `cut_refuses` the rules
    on what all configurations of one cut share (checked once per cut), `cell_refuses` those on one
    configuration's ZeRO stage, sharding, recompute and gradient dtype; a configuration is refused when either is,
    exactly when `request_unsupported_reason` refuses its request (the search's requests leave the overlaps, FP8
    caching and gathers and the moments at PlanRequest's defaults). Both answers are remembered per key."""

    def __init__(
        self,
        launcher: str,
        model: ModelSpec,
        tp_comm_overlap: bool = False,
        recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES,
    ) -> None:
        self.launcher = launcher_name(launcher)
        self.num_layers = model.num_layers
        self.shipped = _shipped(self.launcher, model)
        self.fp8_config = _fp8_config(self.launcher, self.shipped)
        self.tp_comm_overlap = tp_comm_overlap
        self.recompute_modules = recompute_modules
        self._cuts: dict[tuple[object, ...], bool] = {}
        self._cells: dict[tuple[object, ...], bool] = {}

    def cut_refuses(
        self,
        family: ScheduleFamily,
        t: int,
        p: int,
        cp: int,
        d: int,
        v: int,
        m: int,
        first: int | None,
        last: int | None,
        offload: bool,
        ep: int,
        etp: int,
        precision: str,
    ) -> bool:
        key = (family.name, t, p, cp, d, v, m, first, last, offload, ep, etp, precision)
        got = self._cuts.get(key)
        if got is None:
            chunks = family.fixed_v if family.fixed_v is not None else v
            refused = _cut_refusal(
                self.launcher, family, p, chunks, m, _chunk_layers(family, self.num_layers, p, chunks, first, last),
                offload, cp, self.tp_comm_overlap and t > 1, precision, _REQUEST_DEFAULTS["fp8_swiglu_input"],
                _REQUEST_DEFAULTS["moment_dtype"], (ep, etp, t, d), self.fp8_config,
                _REQUEST_DEFAULTS["fp8_param_gather"],
            )  # fmt: skip
            if refused is None and self.shipped is not None:
                refused = _model_plan_refusal(self.shipped, self.launcher, ep, etp, t, cp, p)
            got = self._cuts[key] = refused is not None
        return got

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
        family's `overlaps_expert_comm`)."""
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
            overlap = (_REQUEST_DEFAULTS["overlap_grad_reduce"], _REQUEST_DEFAULTS["overlap_param_gather"])
            refused = _cell_refusal(
                self.launcher, p, zero, overlap, label, grad_dtype, shard_group, cp, reshard,
                (ep, etp, t, d), pairs_hide_experts,
            )  # fmt: skip
            got = self._cells[key] = refused is not None or _search_skips_zero(self.launcher, zero)
        return got


def _plan_refusal(launcher: str, plan: Plan, fp8_config: bool = False) -> _Refusal | None:
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
        bool(plan.offload_modules),
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


def _expert_tp_refusal(version: TorchtitanVersion, ep: int, etp: int, tp: int) -> _Refusal | None:
    """torchtitan's rule on a routed model's expert tensor parallelism etp, by release (the one place it is kept).

    Without expert parallelism (ep = 1) both releases split every expert over the t tensor-parallel ranks, so etp
    must be t: 0.3.0's `expert_param_placement_dense` (torchtitan/models/common/moe_sharding.py), 0.2.2's
    `apply_moe_ep_tp` (TensorParallel on the TP mesh when there is no EP mesh; torchtitan/models/llama4/infra/
    parallelize.py, which deepseek_v3 and qwen3 import, and gpt_oss/infra/parallelize.py). With ep > 1, 0.3.0 has
    no expert_tensor_parallel_degree and keeps every expert whole (etp = 1); 0.2.2's
    `parallelism.expert_tensor_parallel_degree` takes 1 or t (`ParallelDims._validate` asserts ETP = TP or ETP = 1,
    torchtitan/distributed/parallel_dims.py)."""
    if ep == 1:
        if etp == tp:
            return None
        return _Refusal(
            "torchtitan: expert tensor parallelism is the tensor parallelism",
            f"ep = 1, etp = {etp}, t = {tp}: without expert parallelism torchtitan splits every expert over the t "
            "tensor-parallel ranks (0.3.0 expert_param_placement_dense, torchtitan/models/common/moe_sharding.py; "
            "0.2.2 apply_moe_ep_tp, torchtitan/models/llama4/infra/parallelize.py)",
            f"use --etp {tp}, or --ep > 1 without --etp, or --launcher megatron",
        )
    if version == "0.3" and etp > 1:
        return _Refusal(
            "torchtitan: no expert tensor parallelism with expert parallelism",
            f"ep = {ep}, etp = {etp}: torchtitan 0.3.0 has no expert_tensor_parallel_degree; with ep > 1 its experts "
            "are whole on each rank (torchtitan/models/common/moe_sharding.py)",
            "drop --etp (etp = 1), or --format torchtitan@0.2 (etp = t), or --launcher megatron",
        )
    if version == "0.2" and etp not in (1, tp):
        return _Refusal(
            "torchtitan@0.2: expert tensor parallelism is 1 or t with expert parallelism",
            f"ep = {ep}, etp = {etp}, t = {tp}: ParallelDims._validate asserts ETP = TP or ETP = 1 (torchtitan 0.2.2 "
            "torchtitan/distributed/parallel_dims.py)",
            f"use --etp 1 or --etp {tp}, or --launcher megatron",
        )
    return None


def _model_plan_refusal(
    shipped: ShippedModel, launcher: str, ep: int, etp: int, tp: int, cp: int, pp: int
) -> _Refusal | None:
    """What torchtitan (`launcher`, canonical) cannot run, with expert parallelism `ep`, expert tensor parallelism
    `etp`, tensor parallelism `tp`, context parallelism `cp` and pipeline parallelism `pp`, on the model it builds
    (`shipped`): the cut's rules that need the model (each release's facts are the record's, `PerRelease`)."""
    version = torchtitan_version(launcher)
    split = _expert_tp_refusal(version, ep, etp, tp) if shipped.moe is not None else None
    if split is not None:
        return split
    name = shipped_name(shipped, version)
    for axis, symbol, degree, why, fix in (
        (
            "pipeline",
            "p",
            pp,
            shipped.pp_refusal.of(version),
            "use --pp 1, or --format torchtitan (0.3.x), or ",
        ),
        ("context", "cp", cp, shipped.cp_refusal.of(version), "use --cp 1, or "),
    ):
        if why and degree > 1:
            return _Refusal(
                f"{launcher}: {name} cannot run {axis} parallelism",
                f"{symbol} = {degree}: {why}",
                f"{fix}--launcher megatron",
            )
    return None


def model_unsupported_reason(launcher: str, model: ModelSpec) -> str | None:
    """Why `launcher` cannot build `model` at all (torchtitan: no configuration of its shape in that release), or
    None."""
    name = launcher_name(launcher)
    if name == "megatron" or shipped_model(model, torchtitan_version(name)) is not None:
        return None
    return "torchtitan ships no configuration for this model"


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
    detail = unshipped_detail(model, torchtitan_version(launcher_name(launcher)))
    if routed_or_latent(model):
        raise ConfigError(
            "--launcher", f"{reason} ({detail})",
            "use --launcher megatron, or a model profile of a shape torchtitan ships",
        )  # fmt: skip
    raise ConfigError(
        "--launcher",
        f"{reason} ({detail})",
        "use --launcher megatron, or a Llama 3 8B/70B/405B profile",
    )


def _shipped(launcher: str, model: ModelSpec) -> ShippedModel | None:
    """The torchtitan model `launcher` builds for `model` (None for megatron, or none shipped)."""
    name = launcher_name(launcher)
    return None if name == "megatron" else shipped_model(model, torchtitan_version(name))


def _fp8_config(launcher: str, shipped: ShippedModel | None) -> bool:
    """Whether pplan writes FP8 for the model: a 0.3.x Float8 config function of it (0.2.x: none)."""
    return launcher_name(launcher) == "torchtitan" and shipped is not None and shipped.fp8_config is not None


def check_supported(launcher: str, plan: Plan, model: ModelSpec | None = None) -> None:
    """Raise a ConfigError naming `--launcher` when `launcher` cannot run `plan` (or build `model`, if given)."""
    shipped = None
    if model is not None:
        check_model(launcher, model)
        shipped = _shipped(launcher, model)
    refused = _plan_refusal(launcher, plan, _fp8_config(launcher, shipped))
    if refused is None and shipped is not None:
        refused = _model_plan_refusal(
            shipped, launcher_name(launcher), plan.ep, plan.etp, plan.tp, plan.cp, plan.pp
        )
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


RUN_CHECKED: tuple[Launcher, ...] = ("megatron", "torchtitan")
"""The launchers `runs_on` asks (torchtitan@0.2 writes the same plans as torchtitan, in an older format)."""


def runs_on(model: ModelSpec, req: PlanRequest, m: int) -> tuple[Launcher, ...]:
    """The launchers that run `req` as planned (`RUN_CHECKED`): each builds the model and runs the request's
    schedule, split, sharding, recompute, gradient dtype and precision; torchtitan's data parallelism is FSDP, so a
    ZeRO-1/2 plan is not what it would run (`SEARCH_TORCHTITAN_ZERO`)."""
    out = []
    for launcher in RUN_CHECKED:
        if (
            launcher == "torchtitan"
            and req.zero_stage in (1, 2)
            and req.gpus // (req.tp * req.pp * req.cp) > 1
        ):
            continue
        if model_unsupported_reason(launcher, model) is not None:
            continue
        if request_unsupported_reason(launcher, req, m, model.num_layers, model) is None:
            out.append(launcher)
    return tuple(out)
