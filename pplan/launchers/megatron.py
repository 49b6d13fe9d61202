"""Megatron-LM output: one validated `Plan` as `pretrain_gpt.py` arguments that build the planned model, the
environment the run needs, the notes the flags cannot carry, and the text.

Pure functions (no I/O). Every flag emitted is an option of Megatron-LM's argument parser
(`megatron/training/arguments.py` at tag core_v0.16.1; the option table ships beside this module and
`pplan.launchers.megatron_validate` checks the output against it and against `validate_args`' rules).

What the arguments say:
- parallelism and batch: t, p, the pipeline split (below), cp, sequence parallelism, micro and global batch (d
  and m are Megatron's to derive from the world size, as pplan does).
- the model, from the `ModelSpec`: layers, widths, heads and GQA groups (`--kv-channels` when the head width is
  not h / a), sequence length and position table, position embedding kind, linear/QKV biases, dropout, norm,
  MLP activation, tied embeddings, BF16. Megatron's parser defaults build a GPT-2-style model (learned positions,
  biases, dropout 0.1, LayerNorm, GELU), so every one of these is written out, defaults included.
- memory settings pplan costed: recompute; ZeRO-1 as `--use-distributed-optimizer`; ZeRO-2/3 as Megatron-FSDP
  (`--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads|optim_grads_params`, with the
  `fsdp_dtensor` checkpoint format validate_args requires; megatron-core 0.16.1's `DistributedOptimizer` carries
  the Megatron-FSDP paths, so `--use-distributed-optimizer` stays on); BF16 gradients as `--grad-reduce-in-bf16`
  (otherwise Megatron keeps FP32 main gradients); the two overlaps; activation offload as
  `--fine-grained-activation-offloading --offload-modules ...` (megatron-core 0.16.1 `transformer_config.py`), with
  a note where Transformer Engine's fused norms make it offload other tensors than pplan counted; layer offload as
  `--cpu-offloading-num-layers N`.
What they cannot say is refused (a ConfigError on `--launcher`: ALiBi, biases everywhere but the QKV projection)
or written as a `#` note (the tokenizer, the RoPE base and norm epsilon pplan's profiles do not state, a
position table grown to the sequence (and costed so), vocabulary padding pplan did not cost).

Pipeline split. Interleaving is written `--num-virtual-stages-per-pipeline-rank v`: v is the planner's own
variable. An uneven first/last stage without interleaving uses `--decoder-first/last-pipeline-num-layers`
(megatron-core 0.16.1 `transformer_config.py`: `num_layers_in_first/last_pipeline_stage` count the layers of the
whole first/last pipeline rank); with interleaving those would cover a whole rank rather than pplan's first and
last chunk, so that case is an explicit `--pipeline-model-parallel-layout` string (one `|`-separated entry per
virtual stage in model order, `E` embedding, `t` a decoder layer, `L` the loss), exclusive with the interleaving
flags; so is an end stage of the embedding or the loss alone (no decoder layer), which the layer-count flags do
not express.
"""

from __future__ import annotations

import shlex

from pplan.errors import ConfigError
from pplan.launchers.capabilities import MEGATRON
from pplan.launchers.support import check_supported, plan_summary
from pplan.model.params import position_table_rows
from pplan.plan.records import Plan
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.text import escaped

MAKE_VOCAB_DIVISIBLE_BY = 128
"""Megatron's `--make-vocab-size-divisible-by` default; it pads the vocabulary to a multiple of this × t."""
FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}
"""Megatron-FSDP's `--data-parallel-sharding-strategy` for ZeRO-2 and ZeRO-3."""
_POSITION_TYPE = {"rope": "rope", "learned": "learned_absolute", "none": "none"}


def _uneven(plan: Plan) -> bool:
    return len({c.layers for c in plan.layout.chunks}) > 1


def layout_string(plan: Plan, mtp_layers: int = 0) -> str:
    """`--pipeline-model-parallel-layout`: per chunk `E` (embedding), `t` per decoder layer, then on the last
    chunk `m` per multi-token-prediction module (megatron-core 0.16.1 asserts their count equals mtp_num_layers;
    pplan costs them on the output's stage) and `L` (the loss)."""
    stages = []
    for c in plan.layout.chunks:
        end = "m" * mtp_layers + "L" if c.has_output else ""
        stages.append(("E" if c.has_embedding else "") + "t" * c.layers + end)
    return "|".join(stages)


def _megatron_pipeline_args(plan: Plan, mtp_layers: int = 0) -> list[str]:
    if plan.pp == 1:
        return []
    chunks = plan.layout.chunks
    if not _uneven(plan):
        return ["--num-virtual-stages-per-pipeline-rank", str(plan.vp)] if plan.vp > 1 else []
    if plan.vp > 1 or any(c.layers == 0 for c in chunks):
        return ["--pipeline-model-parallel-layout", layout_string(plan, mtp_layers)]
    inner = chunks[1:-1]
    args: list[str] = []
    if not inner or chunks[0].layers != inner[0].layers:
        args += ["--decoder-first-pipeline-num-layers", str(chunks[0].layers)]
    if inner and chunks[-1].layers != inner[0].layers:
        args += ["--decoder-last-pipeline-num-layers", str(chunks[-1].layers)]
    return args


def vocab_divisor(model: ModelSpec, plan: Plan) -> int | None:
    """The `--make-vocab-size-divisible-by` that keeps the planned vocabulary unpadded: the default 128 when
    128·t divides V, else the largest power of two k < 128 with k·t dividing V; None when none does (Megatron's
    vocab-parallel embedding then pads V)."""
    k = MAKE_VOCAB_DIVISIBLE_BY
    while k >= 1:
        if model.vocab_size % (k * plan.tp) == 0:
            return k
        k //= 2
    return None


def padded_vocab(model: ModelSpec, plan: Plan) -> int:
    """Embedding rows Megatron builds for a tokenizer of the planned V tokens with the emitted arguments."""
    multiple = (vocab_divisor(model, plan) or MAKE_VOCAB_DIVISIBLE_BY) * plan.tp
    return -(-model.vocab_size // multiple) * multiple


def megatron_env(plan: Plan) -> dict[str, str]:
    """Environment variables the run needs: `CUDA_DEVICE_MAX_CONNECTIONS=1` with tensor or context parallelism
    (validate_args asserts it before compute capability 10, i.e. on pre-Blackwell GPUs), except under Megatron-FSDP
    (ZeRO-2/3 here), where validate_args asserts it is not 1."""
    if (plan.tp > 1 or plan.cp > 1) and plan.zero_stage < 2:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return {}


def _check_model(model: ModelSpec) -> None:
    unwritten = [
        what
        for what, present in (
            ("attention sinks", model.attention_sinks),
            ("sliding-window attention", model.sliding_window is not None),
            ("a router bias", model.moe is not None and model.moe.router_bias),
        )
        if present
    ]
    if unwritten:
        raise ConfigError(
            "--launcher", f"megatron: pplan does not write {' and '.join(unwritten)} for {model.name} (a launcher "
            "line without them would build a different model)", "drop --launcher / --format: explain and recommend "
            "still plan the model",
        )  # fmt: skip
    if model.position_embedding == "alibi":
        raise ConfigError(
            "--launcher",
            "megatron: no ALiBi (--position-embedding-type takes learned_absolute, rope, mrope, relative, none)",
            "use --launcher torchtitan, or a model profile with rope or learned positions",
        )
    if model.linear_bias and not model.qkv_bias:
        raise ConfigError(
            "--launcher",
            "megatron: biases on every linear layer but the QKV projection cannot be written "
            "(--add-bias-linear covers the QKV projection too)",
            "use a model profile with qkv_bias = true, or --launcher torchtitan",
        )


def _model_args(model: ModelSpec, plan: Plan) -> list[str]:
    args = [
        "--num-layers", str(model.num_layers),
        "--hidden-size", str(model.hidden_size),
        "--ffn-hidden-size", str(model.ffn_hidden_size),
        "--num-attention-heads", str(model.num_attention_heads),
    ]  # fmt: skip
    if model.kv_heads < model.num_attention_heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
    if model.head_size * model.num_attention_heads != model.hidden_size:
        args += ["--kv-channels", str(model.head_size)]
    args += [
        "--seq-length", str(plan.seq_len),
        "--max-position-embeddings", str(position_table_rows(model, plan.seq_len) or plan.seq_len),
        "--position-embedding-type", _POSITION_TYPE[model.position_embedding],
    ]  # fmt: skip
    if model.position_embedding == "rope" and model.rope_theta is not None:
        args += [
            "--rotary-base",
            f"{model.rope_theta:g}" if model.rope_theta % 1 else str(int(model.rope_theta)),
        ]
    if not model.linear_bias:
        args.append("--disable-bias-linear")
        if model.qkv_bias:
            args.append("--add-qkv-bias")
    dropout = "0.1" if model.dropout else "0"
    args += ["--hidden-dropout", dropout, "--attention-dropout", dropout]
    args += ["--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm"]
    if model.norm_epsilon is not None:
        args += ["--norm-epsilon", f"{model.norm_epsilon:g}"]
    if model.mlp == "swiglu":
        args.append("--swiglu")
    elif model.mlp == "squared-relu":
        args.append("--squared-relu")
        if model.linear_bias:  # the GELU bias fusion Megatron would apply refuses squared ReLU
            args.append("--no-bias-gelu-fusion")
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    divisor = vocab_divisor(model, plan)
    if divisor is not None and divisor != MAKE_VOCAB_DIVISIBLE_BY:
        args += ["--make-vocab-size-divisible-by", str(divisor)]
    args += MEGATRON.precision.runs[plan.precision]  # --bf16, and the FP8 recipe of an FP8 plan
    if plan.fp8_param_gather:
        args.append("--fp8-param-gather")
    return args


def _memory_args(plan: Plan) -> list[str]:
    args: list[str] = []
    if plan.recompute == "full":
        args += [
            "--recompute-granularity", "full",
            "--recompute-method", plan.recompute_method,
            "--recompute-num-layers", str(plan.recompute_layers or 1),
        ]  # fmt: skip
    elif plan.recompute == "selective":
        args += ["--recompute-granularity", "selective", "--recompute-modules", *plan.recompute_modules]
    if plan.offload_modules:
        args += ["--fine-grained-activation-offloading", "--offload-modules", *plan.offload_modules]
    if plan.offload_layers:  # megatron-core 0.16.1: Transformer Engine's CPU offload of the first N layers
        args += ["--cpu-offloading-num-layers", str(plan.offload_layers)]
    if plan.zero_stage >= 1:
        args.append("--use-distributed-optimizer")
    if plan.shard_group is not None:  # ZeRO-1 only (pplan.launchers.support): instances = shard replicas
        args += ["--num-distributed-optimizer-instances", str(plan.shard_replicas)]
    if plan.zero_stage >= 2:
        args += [
            "--use-megatron-fsdp",
            "--data-parallel-sharding-strategy", FSDP_STRATEGY[plan.zero_stage],
            "--ckpt-format", "fsdp_dtensor",
            "--no-gradient-accumulation-fusion",
        ]  # fmt: skip
    args += MEGATRON.grad_dtype.runs[plan.grad_dtype]
    args += MEGATRON.moment_dtype.runs[plan.moment_dtype]
    if plan.optimizer_offload_fraction:  # FP32 moments only (PlanRequest), so no second precision-aware flag
        cpu_offload, fraction, precision_aware = MEGATRON.optimizer_offload.runs[True]
        args += [cpu_offload, fraction, f"{plan.optimizer_offload_fraction:g}", precision_aware]
    if plan.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
    args += MEGATRON.tp_comm_overlap.runs[plan.tp_comm_overlap]  # Megatron asserts sequence parallelism
    if plan.kind.name == "interleaved-1f1b" and not plan.overlap_p2p_comm:
        args.append(
            "--no-overlap-p2p-communication"
        )  # megatron-core overlaps the interleaved sends by default
    if plan.overlap_param_gather and plan.zero_stage >= 1:
        args.append("--overlap-param-gather")  # the gather of sharded parameters: ZeRO-1 and above only
    return args


def megatron_args(model: ModelSpec, plan: Plan) -> list[str]:
    """Megatron-LM `pretrain_gpt.py` arguments for `plan`, as an argv list (flags and values as separate items).

    Raises a ConfigError naming `--launcher` when Megatron-LM cannot run the plan or build the model.
    """
    check_supported(MEGATRON.name, plan)
    _check_model(model)
    args = [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        *_megatron_pipeline_args(plan, model.mtp_layers),
    ]  # fmt: skip
    if plan.cp > 1:
        args += ["--context-parallel-size", str(plan.cp)]
    if plan.sequence_parallel:
        args.append("--sequence-parallel")
    args += ["--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch)]
    return args + _memory_args(plan) + _model_args(model, plan) + _expert_args(model, plan)


def _expert_args(model: ModelSpec, plan: Plan) -> list[str]:
    """The routed experts, MLA, multi-token prediction and per-head q/k norms as megatron-core 0.16.1 spells them
    (`--num-experts`, `--moe-router-topk`, `--moe-ffn-hidden-size`, `--moe-shared-expert-intermediate-size`,
    `--moe-layer-freq` as a per-layer list, `--expert-model-parallel-size`, `--expert-tensor-parallel-size` (always
    written: Megatron's default is t, pplan's plan says etp), grouped GEMMs and the all-to-all dispatcher pplan
    costs; `--multi-latent-attention` with its ranks and head widths; `--mtp-num-layers`; `--qk-layernorm`)."""
    args: list[str] = []
    moe = model.moe
    if moe is not None:
        args += [
            "--num-experts", str(moe.num_experts),
            "--moe-router-topk", str(moe.top_k),
            "--moe-ffn-hidden-size", str(moe.expert_ffn_hidden_size),
            "--expert-model-parallel-size", str(plan.ep),
            "--expert-tensor-parallel-size", str(plan.etp),
            "--moe-grouped-gemm",
        ]  # fmt: skip
        args += moe_knob_args(plan)
        if moe.shared_expert_ffn_hidden_size:
            args += ["--moe-shared-expert-intermediate-size", str(moe.shared_expert_ffn_hidden_size)]
        if moe.first_dense_layers or moe.layer_frequency > 1:
            args += ["--moe-layer-freq", moe_layer_pattern(model)]
    mla = model.mla
    if mla is not None:
        args.append("--multi-latent-attention")
        if mla.q_lora_rank is not None:
            args += ["--q-lora-rank", str(mla.q_lora_rank)]
        args += [
            "--kv-lora-rank", str(mla.kv_lora_rank),
            "--qk-head-dim", str(mla.qk_nope_head_dim),
            "--qk-pos-emb-head-dim", str(mla.qk_rope_head_dim),
            "--v-head-dim", str(mla.v_head_dim),
        ]  # fmt: skip
    if model.mtp_layers:
        args += ["--mtp-num-layers", str(model.mtp_layers)]
    if model.qk_norm:
        args.append("--qk-layernorm")
    return args


MOE_DISPATCHER_ARGS: dict[str, tuple[str, ...]] = {
    "alltoall": ("--moe-token-dispatcher-type", "alltoall"),
    "allgather": ("--moe-token-dispatcher-type", "allgather"),
    "deepep": ("--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"),
    "hybridep": ("--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "hybridep"),
}
"""The dispatchers megatron-core 0.16.1 has (`--moe-token-dispatcher-type` {allgather, alltoall, flex},
`--moe-flex-dispatcher-backend` {deepep, hybridep}); NCCL EP is not among them (`moe_knob_refusal`)."""


def moe_knob_refusal(plan: Plan) -> ConfigError | None:
    """The MoE knob of `plan` megatron-core 0.16.1 has no flag for, as the error to raise; None when it has all."""
    if plan.moe_dispatcher not in MOE_DISPATCHER_ARGS:
        return ConfigError(
            "--moe-dispatcher", f"megatron-core 0.16.1 has no {plan.moe_dispatcher} dispatcher "
            "(--moe-flex-dispatcher-backend takes deepep or hybridep)", "use --moe-dispatcher hybridep or alltoall",
        )  # fmt: skip
    if plan.moe_fused_grouped_mlp:
        return ConfigError(
            "--moe-fused-grouped-mlp", "megatron-core 0.16.1 has no fused grouped MLP (Transformer Engine's CuTeDSL "
            "kernels arrive with megatron-core 0.18)", "drop --moe-fused-grouped-mlp",
        )  # fmt: skip
    if "full_iteration" in plan.cuda_graph_scope:
        return ConfigError(
            "--cuda-graph-scope", "megatron-core 0.16.1 cannot capture a whole dropless step in one graph (0.18's "
            "--cuda-graph-impl full_iteration with paged stash)", "use --cuda-graph-scope attn,moe_router,moe_preprocess",
        )  # fmt: skip
    return None


def moe_knob_args(plan: Plan) -> list[str]:
    """The MoE knobs as megatron-core 0.16.1 spells them: the dispatcher, `--overlap-moe-expert-parallel-comm`,
    Transformer Engine CUDA graphs (`--cuda-graph-impl transformer_engine --cuda-graph-scope ...`; `full_layer` is
    the local implementation's whole-layer graph), the fusions, the capacity factor and forced balancing. The
    imbalance factor is pplan's assumption, no flag."""
    refusal = moe_knob_refusal(plan)
    if refusal is not None:
        raise refusal
    args = list(MOE_DISPATCHER_ARGS[plan.moe_dispatcher])
    if plan.moe_ep_overlap:
        args.append("--overlap-moe-expert-parallel-comm")
    scope = plan.cuda_graph_scope
    if "full_layer" in scope:
        args += ["--cuda-graph-impl", "local"]
    elif scope:
        args += ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", *scope]
    if plan.moe_permute_fusion:
        args.append("--moe-permute-fusion")
    if plan.moe_router_fusion:
        args.append("--moe-router-fusion")
    if plan.moe_capacity_factor is not None:
        args += ["--moe-expert-capacity-factor", f"{plan.moe_capacity_factor:g}"]
    if plan.moe_force_balance:
        args.append("--moe-router-force-load-balancing")
    return args


def moe_layer_pattern(model: ModelSpec) -> str:
    """`--moe-layer-freq` as megatron-core's per-layer list expression: `([0]*3+[1]*58)` for DeepSeek-V3 (1: the
    layer is routed), or the whole list where the pattern is not dense-then-routed."""
    flags = [int(model.is_moe_layer(i)) for i in range(model.num_layers)]
    dense = model.dense_layers_in(0, model.num_layers)
    if flags == [0] * dense + [1] * (model.num_layers - dense):
        return f"([0]*{dense}+[1]*{model.num_layers - dense})"
    return "[" + ",".join(str(f) for f in flags) + "]"


def megatron_notes(model: ModelSpec, plan: Plan) -> list[str]:
    """What the arguments do not say: the environment, the tokenizer, model details pplan's profiles do not
    state, and where Megatron's model differs from the one pplan costed. Each line starts with `#`."""
    notes = [f"# environment: export {k}={v}" for k, v in megatron_env(plan).items()]
    if notes:
        notes[-1] += " (tensor/context parallelism on pre-Blackwell GPUs; validate_args asserts it)"
    if plan.zero_stage >= 2:
        notes.append(
            "# environment: leave CUDA_DEVICE_MAX_CONNECTIONS unset or above 1 (Megatron-FSDP asserts it; "
            f"ZeRO-{plan.zero_stage} is written as Megatron-FSDP {FSDP_STRATEGY[plan.zero_stage]})"
        )
    if plan.optimizer_offload_fraction:
        notes.append(
            f"# optimizer: {plan.optimizer_offload_fraction:g} of each rank's optimizer states are updated by the CPU; "
            "pplan's step counts their copies over the host link, not the CPU's Adam (the host's speed)"
        )
    padded = padded_vocab(model, plan)
    divisor = vocab_divisor(model, plan) or MAKE_VOCAB_DIVISIBLE_BY
    vocab = (
        f"# tokenizer: yours (--tokenizer-type/--tokenizer-model and data flags are not written); pplan planned "
        f"a vocabulary of {model.vocab_size}, which Megatron pads to a multiple of "
        f"--make-vocab-size-divisible-by {divisor} × t {plan.tp} = {divisor * plan.tp}: {padded} rows"
    )
    if padded != model.vocab_size:
        extra = (padded - model.vocab_size) * model.hidden_size * (1 if model.tied_embeddings else 2)
        vocab += f", {extra:,} parameters more than pplan costed"
    notes.append(vocab)
    if model.position_embedding == "rope" and model.rope_theta is None:
        notes.append(
            "# RoPE base: not in the model profile (rope_theta); Megatron's --rotary-base default 10000 applies: "
            "add --rotary-base to match the model"
        )
    if model.position_embedding == "learned" and plan.seq_len > model.position_rows:
        grown = (plan.seq_len - model.position_rows) * model.hidden_size
        notes.append(
            f"# position table grown from the model's {model.position_rows} rows to the sequence {plan.seq_len} "
            f"(Megatron asserts max_position_embeddings ≥ seq_length): ({plan.seq_len} − {model.position_rows}) "
            f"× {model.hidden_size} = {grown:,} parameters more on the first stage (pplan's memory counts them)"
        )
    if model.norm_epsilon is None:
        notes.append(
            "# norm epsilon: not in the model profile (norm_epsilon); Megatron's --norm-epsilon default 1e-5 applies"
        )
    if model.mlp == "gelu":
        notes.append("# MLP activation: GELU, Megatron's default (no flag)")
    if model.dropout:
        notes.append(
            "# dropout: on; the profile does not state the rate, 0.1 (Megatron's default) is written"
        )
    if not plan.flash_attention:
        notes.append("# pplan assumed attention without flash attention (full score matrices kept)")
    if model.moe is not None:
        notes.append(
            "# router: pplan's profile does not state the scoring function, load balancing or capacity; Megatron's "
            "defaults apply (softmax scores, auxiliary loss, dropless): add --moe-router-score-function, "
            "--moe-router-load-balancing-type and the like to match the model (pplan costs balanced routing)"
        )
    if plan.offload_modules:
        notes.append(
            "# activation offload: pplan counted the local layer spec's separate norms; under Megatron's default "
            "--transformer-impl transformer_engine the norms are fused into the linears, so attn_norm and mlp_norm "
            "offload nothing and qkv_linear also offloads the norm input (add --transformer-impl local to match)"
        )
    return notes


def megatron_text(model: ModelSpec, plan: Plan) -> str:
    """The arguments as a ready-to-paste shell fragment: one flag per line, continued with `\\` but the last, then
    the comments, so the block pastes whole after the launch command (`torchrun ... pretrain_gpt.py \\`): a comment
    between continued lines would end the command there."""
    args = megatron_args(model, plan)
    groups: list[list[str]] = []
    for token in args:
        if token.startswith("--"):
            groups.append([token])
        else:
            groups[-1].append(token)
    notes = [
        f"# Megatron-LM arguments from pplan: {escaped(plan_summary(model, plan), markup=False)}",
        f"# launch on {plan.gpus} GPUs in all (the world size; Megatron derives d = {plan.dp} from it)",
        *megatron_notes(model, plan),
    ]
    flags = ["    " + " ".join(shlex.quote(t) for t in g) for g in groups]
    return "\n".join([f"{f} \\" for f in flags[:-1]] + flags[-1:] + notes) + "\n"
