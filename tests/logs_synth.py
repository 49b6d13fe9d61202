"""Megatron-LM logs written for tests: an arguments block, a world line and iteration lines whose step time is
given (the calibration tests set it to pplan's own prediction with known efficiency figures)."""

from __future__ import annotations


def megatron_log(
    *,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    ffn: int,
    vocab: int,
    seq: int,
    gpus: int,
    tp: int,
    pp: int,
    micro: int,
    global_batch: int,
    step_s: float,
    iterations: int = 6,
    warmup_factor: float = 1.5,
) -> str:
    """A log in Megatron-LM's format (core_v0.16.1): rank 0's arguments block and world line, `iterations`
    iteration lines 10 apart, the first `warmup_factor` slower, the rest at `step_s`."""
    args = {
        "bf16": "True",
        "ffn_hidden_size": ffn,
        "global_batch_size": global_batch,
        "group_query_attention": "True",
        "hidden_size": hidden,
        "micro_batch_size": micro,
        "normalization": "RMSNorm",
        "num_attention_heads": heads,
        "num_layers": layers,
        "num_query_groups": kv_heads,
        "padded_vocab_size": vocab,
        "pipeline_model_parallel_size": pp,
        "position_embedding_type": "rope",
        "recompute_granularity": "None",
        "seq_length": seq,
        "sequence_parallel": str(tp > 1),
        "swiglu": "True",
        "tensor_model_parallel_size": tp,
        "untie_embeddings_and_output_weights": "True",
        "use_distributed_optimizer": "True",
        "world_size": gpus,
    }
    dp = gpus // (tp * pp)
    lines = [
        f"using world size: {gpus}, data-parallel size: {dp}, context-parallel size: 1, tensor-model-parallel "
        f"size: {tp}, pipeline-model-parallel size: {pp} ",
        "------------------------ arguments ------------------------",
    ]
    for name in sorted(args, key=str.lower):
        lines.append(f"  {name} {'.' * (48 - len(name) - 3)} {args[name]}")
    lines.append("-------------------- end of arguments ---------------------")
    for i in range(1, iterations + 1):
        ms = step_s * 1000 * (warmup_factor if i == 1 else 1.0)
        lines.append(
            f" [2026-01-01 00:{i:02d}:00] iteration {i * 10:>8}/   10000 | consumed samples: {i * 10 * global_batch:>12}"
            f" | elapsed time per iteration (ms): {ms:.1f} | learning rate: 3.0E-04 | global batch size: "
            f"{global_batch:>5} | lm loss: 2.0E+00 | loss scale: 1.0 | grad norm: 1.0 | number of skipped "
            "iterations:   0 | number of nan iterations:   0 |"
        )
    return "\n".join(lines) + "\n"
