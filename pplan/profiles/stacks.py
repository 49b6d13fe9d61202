"""Software-stack profiles: what each training stack overlaps and how far its figures are calibrated, as data.

The same plan runs at different speeds under different stacks because they overlap different communication with
compute and fuse different kernels. A stack profile records the rules pplan's step-time model applies
(pplan.cost.passtime, pplan.cost.steptime) and which public runs, if any, its figures were fitted to. The GEMM,
attention and HBM efficiencies in a hardware profile are fitted with `megatron-core` (`pplan validate --fit`) and,
for Blackwell, with `megatron-bridge` (pplan.validation.recent.RECENT_FITS); a stack with `calibrated = False`
reuses them. Whether a plan on a stack is calibrated is decided from the validated runs made with it on the
plan's hardware, routing and precision (pplan.cost.uncertainty), not from this flag.

Rules:
- `fused_bias_dropout_add`, `p2p_scatter_gather`, `overlaps_grad_reduce`, `p2p_blocking`,
  `p2p_blocking_without_overlap`, `tp_comm_overlap`, `weight_copy_bytes`: see the fields.
- `tp_backward_overlap`: the backward pass of a column-parallel linear layer (QKV, the MLP's first GEMM) launches its
  tensor-parallel collectives asynchronously and overlaps them with its own GEMMs: under sequence parallelism the
  re-gather of the layer's input with the input-gradient GEMM and the reduce-scatter of the input gradient with the
  weight-gradient GEMM; without it the input gradient's all-reduce with the weight-gradient GEMM (Megatron-LM's
  `LinearWithGradAccumulationAndAsyncCommunication`, megatron/core/tensor_parallel/layers.py; Korthikanti et al.
  2022 §5 name this overlap as why full recompute costs 39 % rather than 33 % of a layer). It needs the weight
  gradient in the same pass, so schedules that split the backward (zero-bubble) do not get it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

StackName = Literal["megatron-core", "megatron-bridge", "torchtitan", "deepspeed"]
AttentionKernel = Literal["flash-attention-2", "cudnn"]
STACK_NAMES: tuple[StackName, ...] = get_args(StackName)


@dataclass(frozen=True, slots=True)
class UserbufferOverlap:
    """How a stack's TP overlap runs each tensor-parallel collective beside its GEMM (`tp_comm_overlap`), after
    Transformer Engine's userbuffers defaults (transformer_engine 1.11, pytorch/module/base.py `initialize_ub`):
    - ring exchange (the all-gathers feeding QKV and the MLP's first GEMM in the forward, and the row-parallel
      layers' output-gradient all-gathers in the backward): the GEMM runs as t chunks, each beside the copy-engine
      send of the next one (one SM): exposed max(0, collective − GEMM), plus t − 1 more GEMM kernels;
    - pipeline (the reduce-scatters after the projection and the MLP's second GEMM): the GEMM runs as
      `pipeline_splits` chunks and each chunk's reduce-scatter, on `comm_sms` SMs taken from the GEMM that runs
      beside it, follows the chunk; the last chunk's reduce-scatter runs alone;
    - bulk (the backward's re-gather of a column-parallel layer's input beside its input-gradient GEMM and the
      input gradient's reduce-scatter beside its weight-gradient GEMM): the collective runs on `comm_sms` SMs
      beside the whole GEMM."""

    comm_sms: int
    """SMs a pipeline or bulk collective runs on (`num_sm`, 16 by default), not set aside from the GEMM
    (`set_sm_margin` off): the GEMM loses them while the collective runs."""
    pipeline_splits: int
    """Chunks of a pipelined GEMM (`num_splits`, 4 by default)."""


TE_USERBUFFERS = UserbufferOverlap(comm_sms=16, pipeline_splits=4)


@dataclass(frozen=True, slots=True)
class Stack:
    name: StackName
    description: str
    tp_backward_overlap: bool
    """Column-parallel backward collectives overlap the layer's own gradient GEMMs (module docstring)."""
    fused_bias_dropout_add: bool
    """Dropout on the hidden state is fused with the bias and residual adds into one kernel (Megatron-LM's
    `--bias-dropout-fusion`, on by default): the dropout moves only its mask, not a tensor read and written."""
    p2p_scatter_gather: bool
    """Without sequence parallelism, the t tensor-parallel ranks each send 1/t of a pipeline message and the receivers
    all-gather it over NVLink (Narayanan et al. 2021 §4.1, Megatron-LM's `--scatter-gather-tensors-in-pipeline`, on
    by default in the releases of the calibration runs; with sequence parallelism the message is split anyway). The
    receiving all-gather runs on NVLink at many times the network's rate and is not counted. megatron-core 0.16
    still does it by default (`--no-scatter-gather-tensors-in-pipeline` turns it off)."""
    overlaps_grad_reduce: bool
    """Gradient reduction can run in buckets behind the last backward passes when the plan asks for it
    (`overlap_grad_reduce`): Megatron's `--overlap-grad-reduce`, FSDP2's reduce-scatter per unit; DeepSpeed's
    pipeline engine reduces after the step's last backward (its `ReduceGrads` instruction)."""
    p2p_blocking: tuple[str, ...]
    """Schedule families whose pipeline sends block the sending rank until they complete (and `"*"`: all): Megatron's
    1F1B batches each send with its receive and waits on both (`batch_p2p_comm`, then `torch.cuda.synchronize()`,
    megatron/core/pipeline_parallel/p2p_communication.py); its interleaved schedule overlaps them with the next
    chunk's passes unless `--no-overlap-p2p-communication` (`overlap_p2p_comm`). DeepSpeed's pipeline engine sends
    and receives with blocking calls. torch.distributed.pipelining posts them asynchronously."""
    p2p_blocking_without_overlap: tuple[str, ...]
    """Schedule families whose sends block only when the plan turns their overlap off (`overlap_p2p_comm`):
    megatron-core's interleaved 1F1B (`--no-overlap-p2p-communication`)."""
    tp_comm_overlap: str | None
    """How the stack overlaps every tensor-parallel collective with the GEMM it feeds or follows, when the plan asks
    for it (`tp_comm_overlap`), or None where it cannot: Transformer Engine's userbuffers in megatron-core
    (`--tp-comm-overlap`), async tensor parallelism under torch.compile in torchtitan."""
    userbuffers: UserbufferOverlap | None
    """How its TP overlap runs (None: every collective hides behind its GEMM wherever it is shorter, as async TP's
    copy-engine micro-pipelining, which takes no SMs: exposed max(0, collective − GEMM))."""
    weight_copy_bytes: int
    """HBM bytes per parameter the optimizer step moves after Adam to refresh the BF16 weights from the FP32 master:
    Megatron-LM's `_copy_main_params_to_model_params` reads the master (4) and writes the BF16 weight (2) in a
    kernel of its own; FSDP2 keeps only the FP32 shard and casts when it gathers (0)."""
    fused_rope: bool
    """The rotary embedding runs as one fused kernel for the query and one for the key (Megatron-Core's
    `--apply-rope-fusion`, on by default: Transformer Engine's fused RoPE), rather than as PyTorch ops (torchtitan's
    eager `apply_rotary_emb`; Megatron-DeepSpeed's `apply_rotary_pos_emb`), pplan.cost.passtime.ROPE_BYTES."""
    main_grad_accumulation: bool
    """Each micro-batch's gradients are added into a main-gradient buffer of the rank's parameters, at the plan's
    gradient dtype: by the weight-gradient GEMMs themselves (gradient-accumulation fusion) or, for a gradient
    computed by its own kernel (the input embedding's), by an add of its own (Megatron-Core's DDP hook
    `param.main_grad.add_(param.grad)`, megatron/core/distributed/distributed_data_parallel.py; DeepSpeed's BF16
    optimizer accumulates into FP32 gradient buffers likewise). FSDP2 reduce-scatters each micro-batch's gradient
    and accumulates the shard, so no add over the whole table runs (pplan.cost.passtime.embedding_pass_times)."""
    attention_kernel: AttentionKernel
    """The attention core's kernel: FlashAttention-2 (priced at its published rate with its tail,
    pplan.cost.attention.attention_tail_s), or cuDNN's fused attention (priced at the hardware profile's measured
    `attention_cudnn` rate and fixed time where it has one, else as FlashAttention-2)."""
    sink_attention_fused_from: str | None
    """For a model with attention sinks (a learned softmax offset per head, GPT-OSS): the release from which the
    stack runs them in a fused kernel, below which its attention core runs unfused over the whole s×s score matrix
    (pplan prices that with `--no-flash-attention`); None where the stack's kernel always takes them."""
    calibrated: bool
    """Its figures were fitted to public runs made with it (`fitted_to`); otherwise pplan extrapolates."""
    fitted_to: tuple[str, ...]
    """The public sets (pplan validate) its efficiencies come from."""
    te_cross_entropy: bool = False
    """The loss runs as Transformer Engine's fused cross-entropy (`parallel_cross_entropy`, Megatron-LM
    `--cross-entropy-loss-fusion --cross-entropy-fusion-impl te`), which writes the logits' gradient over the BF16
    logits in place and saves that for the backward, so a micro-batch keeps 2 bytes per logit rather than the
    FP32 copy megatron-core's unfused `vocab_parallel_cross_entropy` makes and saves (4 bytes;
    pplan.model.activations.output_end). Off in megatron-core 0.16.1's defaults; on in every Megatron-Bridge
    benchmark recipe, 25.09 to 26.08 (bridge-recipes.json: `cross_entropy_loss_fusion` True, impl `te`)."""


STACKS: dict[StackName, Stack] = {
    "megatron-core": Stack(
        name="megatron-core",
        description="Megatron-LM / NeMo on Megatron-Core (Transformer Engine layers, distributed optimizer)",
        tp_backward_overlap=True,
        fused_bias_dropout_add=True,
        p2p_scatter_gather=True,
        overlaps_grad_reduce=True,
        p2p_blocking=("1f1b",),
        p2p_blocking_without_overlap=("interleaved-1f1b",),
        tp_comm_overlap="--tp-comm-overlap (Transformer Engine userbuffers)",
        userbuffers=TE_USERBUFFERS,
        weight_copy_bytes=6,
        fused_rope=True,
        main_grad_accumulation=True,
        # the calibration runs (Megatron-LM's 2021-23 README and papers, NeMo's GPT-3 runs) fit FlashAttention-2's rate
        # better than cuDNN's (pplan's benchmarks/device/2026-12-04-h200/README.md)
        attention_kernel="flash-attention-2",
        # Transformer Engine never gives a non-vanilla softmax to FlashAttention; it takes it in FusedAttention from
        # TE 2.8 (`softmax_type`) when cuDNN has sink support (9.13: "SDPA with sink_token is not supported before
        # 9.13"), else in UnfusedDotProductAttention (transformer_engine/pytorch/attention/dot_product_attention/
        # utils.py and libtransformer_engine's cuDNN checks, TE 2.8-2.12 wheels on PyPI)
        sink_attention_fused_from="Transformer Engine 2.8 with cuDNN 9.13",
        calibrated=True,
        fitted_to=(
            "megatron-sc21-table1",
            "korthikanti-table4-layer-times",
            "megatron-lm-readme-h100-weak-scaling",
            "nvidia-dgxc-gpt3-175b-bf16",
        ),
    ),
    "torchtitan": Stack(
        name="torchtitan",
        description="torchtitan (FSDP2, DTensor tensor parallel, torch.distributed.pipelining), eager, no async TP",
        # DTensor's backward runs its collectives where autograd reaches them, in order, on the compute stream's
        # schedule: nothing overlaps them with the layer's own GEMMs unless async TP (torch.compile) is on.
        tp_backward_overlap=False,
        fused_bias_dropout_add=False,  # its models (Llama, DeepSeek) have no hidden-state dropout
        p2p_scatter_gather=False,
        overlaps_grad_reduce=True,
        p2p_blocking=(),
        p2p_blocking_without_overlap=(),
        tp_comm_overlap="async tensor parallelism (parallelism.enable_async_tensor_parallel, with compile)",
        userbuffers=None,
        weight_copy_bytes=0,
        fused_rope=False,  # eager; torch.compile would fuse it
        main_grad_accumulation=False,
        attention_kernel="flash-attention-2",  # SDPA's flash backend
        sink_attention_fused_from=None,  # GPT-OSS: FlexAttention, sinks as a rescale by the LSE (torchtitan 0.3.0)
        calibrated=False,
        fitted_to=(),
    ),
    "deepspeed": Stack(
        name="deepspeed",
        description="Megatron-DeepSpeed (Megatron-LM layers on DeepSpeed's pipeline engine and ZeRO)",
        # its layers are Megatron-LM's, which overlap the input-gradient all-reduce with the weight-gradient GEMM
        tp_backward_overlap=True,
        fused_bias_dropout_add=True,  # Megatron-LM's fused kernels
        p2p_scatter_gather=False,  # DeepSpeed's pipeline engine sends whole tensors
        overlaps_grad_reduce=False,
        p2p_blocking=("*",),
        p2p_blocking_without_overlap=(),
        tp_comm_overlap=None,
        userbuffers=None,
        weight_copy_bytes=6,  # its BF16 optimizer copies the FP32 partition back to the BF16 weights
        fused_rope=False,
        main_grad_accumulation=True,
        attention_kernel="flash-attention-2",
        sink_attention_fused_from=None,  # no model with sinks runs on it
        calibrated=False,
        fitted_to=(),
    ),
}
STACKS["megatron-bridge"] = replace(
    STACKS["megatron-core"],
    name="megatron-bridge",
    description="Megatron-Bridge / NeMo 2 on Megatron-Core: megatron-core's rules, attention through Transformer "
    "Engine's cuDNN fused attention",
    # Transformer Engine prefers its cuDNN backend (FusedAttention) over FlashAttention on Hopper and later when both
    # support a layer (transformer_engine/pytorch attention backend selection); pplan validate --recent predicts
    # NVIDIA's 2024-26 NeMo and Megatron-Bridge runs with it
    attention_kernel="cudnn",
    te_cross_entropy=True,
    # GB200's BF16 and FP8 and B200's FP8 GEMM efficiencies are fitted to the dense runs of these sets
    calibrated=True,
    fitted_to=(
        "megatron-bridge-performance-summary",
        "dgxc-benchmarking-25.04.01",
        "nemo-docs-performance-summary-25.x-partial",
    ),
)
DEFAULT_STACK: StackName = "megatron-core"
STACK_LAUNCHERS: dict[StackName, str] = {
    "megatron-core": "megatron",
    "megatron-bridge": "megatron",
    "torchtitan": "torchtitan",
}
"""The launcher whose output runs on each stack (deepspeed: none pplan writes): `recommend` ranks only the plans
it runs unless asked for every plan. The one map between stacks and launchers: this layer sits below the
launchers' declarations (`pplan.launchers.capabilities`, whose `stack` and `project` fields tests check against
it), so it names them itself."""
LAUNCHER_STACKS: dict[str, StackName] = {
    launcher: stack for stack, launcher in reversed(STACK_LAUNCHERS.items())
} | {"megatron-bridge": "megatron-bridge"}
"""The stack a launcher's output runs on (the first it runs on above; Megatron-Bridge's recipe overrides on its
own): `--stack` follows `--launcher` unless given."""


def launcher_for_stack(stack: StackName) -> str | None:
    """The launcher that runs plans on `stack` (None where pplan writes none)."""
    return STACK_LAUNCHERS.get(stack)


def stack_for_launcher(launcher: str | None) -> StackName:
    """The stack `--launcher` implies (megatron-core when none is named); a release of a launcher
    (`torchtitan@0.2`) runs on the launcher's stack."""
    return LAUNCHER_STACKS.get((launcher or "").partition("@")[0], DEFAULT_STACK)


def overlaps_tp_backward(stack: StackName, splits_backward: bool) -> bool:
    """Whether a layer's backward hides its column-parallel collectives (`tp_backward_overlap`; not when the
    schedule runs the weight gradient apart)."""
    return STACKS[stack].tp_backward_overlap and not splits_backward


def blocks_p2p(stack: StackName, schedule: str, overlap_p2p_comm: bool) -> bool:
    """Whether the stack's pipeline sends block the sender under `schedule` (`p2p_blocking`; megatron-core's
    interleaved schedule too when `overlap_p2p_comm` is off)."""
    record = STACKS[stack]
    if "*" in record.p2p_blocking or schedule in record.p2p_blocking:
        return True
    return schedule in record.p2p_blocking_without_overlap and not overlap_p2p_comm
