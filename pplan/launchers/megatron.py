"""Megatron-LM output: one validated `Plan` as `pretrain_gpt.py` arguments, the notes they cannot carry, and the text.

Pure functions (no I/O). Every flag emitted is an option of Megatron-LM's argument parser,
`megatron/training/arguments.py` at tag core_v0.16.1. A model feature pplan does not write a flag for (position-embedding kind, biases, dropout, a squared-ReLU MLP, ...) is
never given an invented flag: it is reported as a `#` comment.

Checked against the released sources (megatron-core 0.16.1, `megatron/core/transformer/transformer_config.py`):
`num_layers_in_first/last_pipeline_stage` count the layers of the whole first/last pipeline rank, over all its
virtual stages; the `pipeline_model_parallel_layout` string lists virtual stages in model order.

Interleaving is written `--num-virtual-stages-per-pipeline-rank v` rather than
`--num-layers-per-virtual-pipeline-stage N`: v is the planner's own variable, so nothing is derived from layer
arithmetic that Megatron might do differently (for example when embedding or loss count as layers). An uneven
first/last stage without interleaving uses `--decoder-first/last-pipeline-num-layers`; with interleaving those
counts would cover a whole pipeline rank rather than pplan's first and last chunk, so that case is written as an
explicit `--pipeline-model-parallel-layout` string (one `|`-separated entry per virtual stage in model order,
`E` embedding, `t` a decoder layer, `L` the loss), which is exclusive with the interleaving flags.
"""

from __future__ import annotations

import shlex

from pplan.launchers.support import check_supported, plan_summary
from pplan.plan.configuration import Plan
from pplan.profiles.specs import ModelSpec


def _uneven(plan: Plan) -> bool:
    return len({c.layers for c in plan.layout.chunks}) > 1


def _layout_string(plan: Plan) -> str:
    stages = []
    for c in plan.layout.chunks:
        stages.append(("E" if c.has_embedding else "") + "t" * c.layers + ("L" if c.has_output else ""))
    return "|".join(stages)


def _megatron_pipeline_args(plan: Plan) -> list[str]:
    if plan.pp == 1:
        return []
    chunks = plan.layout.chunks
    if not _uneven(plan):
        return ["--num-virtual-stages-per-pipeline-rank", str(plan.vp)] if plan.vp > 1 else []
    if plan.vp > 1:
        return ["--pipeline-model-parallel-layout", _layout_string(plan)]
    inner = chunks[1:-1]
    args: list[str] = []
    if not inner or chunks[0].layers != inner[0].layers:
        args += ["--decoder-first-pipeline-num-layers", str(chunks[0].layers)]
    if inner and chunks[-1].layers != inner[0].layers:
        args += ["--decoder-last-pipeline-num-layers", str(chunks[-1].layers)]
    return args


def _position_rows(model: ModelSpec, plan: Plan) -> int:
    if model.position_embedding == "learned":
        return model.position_rows
    return max(model.position_rows, plan.seq_len)


def megatron_args(model: ModelSpec, plan: Plan) -> list[str]:
    """Megatron-LM `pretrain_gpt.py` arguments for `plan`, as an argv list (flags and values as separate items).

    Raises a ConfigError naming `--launcher` when Megatron-LM cannot run the plan.
    """
    check_supported("megatron", plan)
    args = [
        "--tensor-model-parallel-size",
        str(plan.tp),
        "--pipeline-model-parallel-size",
        str(plan.pp),
        *_megatron_pipeline_args(plan),
    ]
    if plan.cp > 1:
        args += ["--context-parallel-size", str(plan.cp)]
    if plan.sequence_parallel:
        args.append("--sequence-parallel")
    args += ["--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch)]
    if plan.recompute == "full":
        args += [
            "--recompute-granularity",
            "full",
            "--recompute-method",
            "uniform",
            "--recompute-num-layers",
            "1",
        ]
    elif plan.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    if plan.zero_stage == 1:
        args.append("--use-distributed-optimizer")
    if plan.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
    if plan.overlap_param_gather and plan.zero_stage == 1:
        args.append("--overlap-param-gather")  # gathers the distributed optimizer's shards: ZeRO-1 only
    args += [
        "--num-layers",
        str(model.num_layers),
        "--hidden-size",
        str(model.hidden_size),
        "--ffn-hidden-size",
        str(model.ffn_hidden_size),
        "--num-attention-heads",
        str(model.num_attention_heads),
    ]
    if model.kv_heads < model.num_attention_heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
    args += ["--seq-length", str(plan.seq_len), "--max-position-embeddings", str(_position_rows(model, plan))]
    if model.mlp == "swiglu":
        args.append("--swiglu")
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if model.norm == "rmsnorm":
        args += ["--normalization", "RMSNorm"]
    args.append("--bf16")
    return args


def megatron_notes(model: ModelSpec, plan: Plan) -> list[str]:
    """What the arguments do not say: model features pplan writes no flag for, and planning assumptions.

    Each line starts with `#`.
    """
    undocumented = "pplan writes no flag for it; set it to match"
    notes = [
        f"# position embedding: {model.position_embedding} ({undocumented})",
        f"# biases: qkv {'yes' if model.qkv_bias else 'no'}, other linear layers "
        f"{'yes' if model.linear_bias else 'no'} ({undocumented})",
        f"# dropout: {'yes' if model.dropout else 'none'} ({undocumented})",
        f"# vocabulary: {model.vocab_size} rows as planned; its size comes from the tokenizer, not from these flags",
    ]
    if model.mlp == "squared-relu":
        notes.append(f"# MLP activation: squared ReLU ({undocumented})")
    if model.head_size * model.num_attention_heads != model.hidden_size:
        notes.append(f"# head width {model.head_size} ≠ hidden size / heads ({undocumented})")
    if model.position_embedding == "learned" and plan.seq_len > model.position_rows:
        notes.append(
            f"# the learned position table has {model.position_rows} rows, fewer than the sequence length "
            f"{plan.seq_len}: --max-position-embeddings must cover it"
        )
    if not plan.flash_attention:
        notes.append("# pplan assumed attention without flash attention (full score matrices kept)")
    if plan.grad_dtype == "bf16":
        notes.append(f"# pplan assumed bf16 gradients ({undocumented})")
    return notes


def megatron_text(model: ModelSpec, plan: Plan) -> str:
    """The arguments as a ready-to-paste shell fragment: comments first, then one flag per line."""
    args = megatron_args(model, plan)
    groups: list[list[str]] = []
    for token in args:
        if token.startswith("--"):
            groups.append([token])
        else:
            groups[-1].append(token)
    lines = [
        f"# Megatron-LM arguments from pplan: {plan_summary(model, plan)}",
        f"# launch on {plan.gpus} GPUs in all (the world size; Megatron derives d = {plan.dp} from it)",
        *megatron_notes(model, plan),
    ]
    flags = ["    " + " ".join(shlex.quote(t) for t in g) for g in groups]
    lines += [f"{f} \\" for f in flags[:-1]] + flags[-1:]
    return "\n".join(lines) + "\n"
