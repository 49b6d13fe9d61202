"""Megatron's configuration names (the arguments block, Megatron-Core's TransformerConfig as NeMo 2 and
Megatron-Bridge print it, command-line flags) and what they are in pplan's names.

`translate(raw, record)` takes every raw reading `{megatron_name: (value, source)}` and puts pplan's fields on the
record: the model's shape (num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_kv_heads, head_dim,
vocab_size, mlp, norm, tied_embeddings, position_embedding, linear_bias, qkv_bias, num_experts, top_k,
expert_ffn_hidden_size, shared_expert_ffn_hidden_size) and the plan (gpus, global_batch, micro_batch, seq_len, tp,
pp, vp, cp, ep, etp, sequence_parallel, zero_stage, recompute, recompute_method, recompute_layers,
recompute_modules, precision, grad_dtype, overlap_grad_reduce, overlap_param_gather, tp_comm_overlap,
first_stage_layers, last_stage_layers, moe_dispatcher).
"""

from __future__ import annotations

from typing import Any

from pplan.logs.record import LogRecord
from pplan.logs.values import as_bool, as_int

INTS = {
    "num_layers": "num_layers",
    "hidden_size": "hidden_size",
    "ffn_hidden_size": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads",
    "kv_channels": "head_dim",
    "seq_length": "seq_len",
    "encoder_seq_length": "seq_len",
    "micro_batch_size": "micro_batch",
    "global_batch_size": "global_batch",
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "expert_tensor_parallel_size": "etp",
    "num_experts": "num_experts",
    "num_moe_experts": "num_experts",
    "moe_router_topk": "top_k",
    "moe_ffn_hidden_size": "expert_ffn_hidden_size",
    "moe_shared_expert_intermediate_size": "shared_expert_ffn_hidden_size",
    "world_size": "gpus",
    "num_layers_in_first_pipeline_stage": "first_stage_layers",
    "num_layers_in_last_pipeline_stage": "last_stage_layers",
    "decoder_first_pipeline_num_layers": "first_stage_layers",
    "decoder_last_pipeline_num_layers": "last_stage_layers",
    "padded_vocab_size": "vocab_size",
    "data_parallel_size": "data_parallel_size",
    "nproc_per_node": "nproc_per_node",
    "nnodes": "nnodes",
    "zero_stage": "zero_stage",
}
"""Megatron names whose integer value is a pplan field as it is."""

VOCAB_NAMES = ("vocab_size",)
"""Read as the vocabulary only when `padded_vocab_size` is not logged."""


class Readings:
    """Raw readings `{megatron_name: (value, source)}`: `get` the value (None when not read), `src` its source."""

    def __init__(self, raw: dict[str, tuple[Any, str]]) -> None:
        self.raw = raw

    def __call__(self, name: str) -> Any:
        return self.raw[name][0] if name in self.raw else None

    def src(self, name: str) -> str:
        return self.raw[name][1] if name in self.raw else "log"

    def has(self, name: str) -> bool:
        return name in self.raw


def translate(raw: dict[str, tuple[Any, str]], record: LogRecord) -> None:
    """Put pplan's fields for every Megatron reading in `raw` on `record` (module docstring)."""
    get = Readings(raw)
    src = get.src
    for name, field in INTS.items():
        got = as_int(get(name))
        if got is not None and got > 0:
            record.put(field, got, src(name))
    if "vocab_size" not in record.fields and as_int(get("vocab_size")):
        record.put("vocab_size", as_int(get("vocab_size")), src("vocab_size"))
    gqa = as_bool(get("group_query_attention"))
    groups = as_int(get("num_query_groups"))
    if groups and gqa is not False:
        record.put("num_kv_heads", groups, src("num_query_groups"))
    vp = as_int(get("virtual_pipeline_model_parallel_size"))
    if vp:
        record.put("vp", vp, src("virtual_pipeline_model_parallel_size"))
    per_chunk = as_int(get("num_layers_per_virtual_pipeline_stage"))
    layers, pp = as_int(get("num_layers")), as_int(get("pipeline_model_parallel_size"))
    if per_chunk and layers and pp and layers % (pp * per_chunk) == 0:
        record.put("vp", layers // (pp * per_chunk), src("num_layers_per_virtual_pipeline_stage"))
    _moe_layers(get, record)
    devices, nodes = as_int(get("devices")), as_int(get("num_nodes"))
    if devices and nodes and devices > 0 and nodes > 0:
        record.put("gpus", devices * nodes, f"{src('devices')} (devices × num_nodes)")
    precision = str(get("precision") or "").lower()
    if "bf16" in precision or precision in ("16", "16-mixed", "fp16"):
        record.put("precision", "bf16", src("precision"))
    _flags(get, src, record)
    _recompute(get, src, record)
    _precision(get, src, record)
    _shape_kinds(get, src, record)
    dispatcher = get("moe_token_dispatcher_type")
    if isinstance(dispatcher, str) and dispatcher.lower() in ("alltoall", "allgather", "flex"):
        backend = str(get("moe_flex_dispatcher_backend") or "deepep").lower()
        chosen = backend if dispatcher.lower() == "flex" else dispatcher.lower()
        record.put("moe_dispatcher", chosen, src("moe_token_dispatcher_type"))
    if as_bool(get("moe_enable_deepep")):
        record.put("moe_dispatcher", "deepep", src("moe_enable_deepep"))


def _moe_layers(get: Readings, record: LogRecord) -> None:
    """`moe_layer_freq`: an int k (every k-th layer routed) or a list of 0/1 per layer (leading zeros: dense)."""
    freq = get("moe_layer_freq")
    if isinstance(freq, str) and freq.startswith("(["):  # Megatron's "([0]*3+[1]*58)" spelling
        import re

        m = re.match(r"\(\[0\]\s*\*\s*(\d+)", freq)
        if m:
            record.put("first_dense_layers", int(m.group(1)), get.src("moe_layer_freq"))
        return
    if isinstance(freq, list) and all(x in (0, 1) for x in freq):
        dense = next((i for i, x in enumerate(freq) if x), len(freq))
        record.put("first_dense_layers", dense, get.src("moe_layer_freq"))
    elif isinstance(freq, int) and not isinstance(freq, bool) and freq > 1:
        record.put("moe_layer_frequency", freq, get.src("moe_layer_freq"))


def _flags(get: Readings, src: Any, record: LogRecord) -> None:
    for name, field in (
        ("sequence_parallel", "sequence_parallel"),
        ("overlap_grad_reduce", "overlap_grad_reduce"),
        ("overlap_param_gather", "overlap_param_gather"),
        ("tp_comm_overlap", "tp_comm_overlap"),
    ):
        got = as_bool(get(name))
        if got is not None:
            record.put(field, got, src(name))
    dist = as_bool(get("use_distributed_optimizer"))
    if dist is not None:
        record.put("zero_stage", 1 if dist else 0, src("use_distributed_optimizer"))
    if as_bool(get("use_torch_fsdp2")) or as_bool(get("use_megatron_fsdp")):
        name = "use_torch_fsdp2" if as_bool(get("use_torch_fsdp2")) else "use_megatron_fsdp"
        record.put("zero_stage", 3, src(name), overwrite=True)
    if as_bool(get("grad_reduce_in_bf16")):
        record.put("grad_dtype", "bf16", src("grad_reduce_in_bf16"))
    elif as_bool(get("grad_reduce_in_fp32")) is not None:  # Megatron-Core's DDP config, as Bridge prints it
        record.put(
            "grad_dtype",
            "fp32" if as_bool(get("grad_reduce_in_fp32")) else "bf16",
            src("grad_reduce_in_fp32"),
        )
    elif as_bool(get("accumulate_allreduce_grads_in_fp32")) is False:
        record.put("grad_dtype", "bf16", src("accumulate_allreduce_grads_in_fp32"))


def _recompute(get: Readings, src: Any, record: LogRecord) -> None:
    granularity = get("recompute_granularity") or get("activations_checkpoint_granularity")
    if granularity is None and get.has("recompute_granularity"):
        record.put("recompute", "none", src("recompute_granularity"))
    if isinstance(granularity, str) and granularity.lower() in ("full", "selective"):
        where = (
            "recompute_granularity"
            if get.has("recompute_granularity")
            else "activations_checkpoint_granularity"
        )
        record.put("recompute", granularity.lower(), src(where))
        layers = as_int(get("recompute_num_layers") or get("activations_checkpoint_num_layers"))
        if granularity.lower() == "full" and layers:
            record.put("recompute_layers", layers, src(where))
        method = get("recompute_method") or get("activations_checkpoint_method")
        if isinstance(method, str) and method.lower() in ("uniform", "block"):
            record.put("recompute_method", method.lower(), src(where))
    elif granularity is None and as_bool(get("recompute_activations")):
        record.put("recompute", "selective", src("recompute_activations"))
    elif granularity is None and as_bool(
        get("checkpoint_activations")
    ):  # Megatron-LM before 2022: full, uniform
        record.put("recompute", "full", src("checkpoint_activations"))


def _precision(get: Readings, src: Any, record: LogRecord) -> None:
    fp8 = get("fp8")
    if isinstance(fp8, str) and fp8.lower() in ("hybrid", "e4m3"):
        recipe = str(get("fp8_recipe") or "delayed").lower()
        record.put("precision", "mxfp8" if recipe == "mxfp8" else "fp8", src("fp8"))
    elif fp8 is True:
        record.put("precision", "fp8", src("fp8"))
    elif as_bool(get("bf16")):
        record.put("precision", "bf16", src("bf16"))
    params_dtype = get("params_dtype")
    if isinstance(params_dtype, str) and "bfloat16" in params_dtype:
        record.put("precision", "bf16", src("params_dtype"))


def _shape_kinds(get: Readings, src: Any, record: LogRecord) -> None:
    swiglu = as_bool(get("swiglu"))
    gated = as_bool(get("gated_linear_unit"))
    activation = str(get("activation_func") or get("activation") or "").lower()
    if swiglu or gated:
        record.put("mlp", "swiglu", src("swiglu" if swiglu else "gated_linear_unit"))
    elif "swiglu" in activation or "fast-swiglu" in activation:
        record.put("mlp", "swiglu", src("activation_func" if get("activation_func") else "activation"))
    elif "squared_relu" in activation:
        record.put("mlp", "squared-relu", src("activation_func"))
    elif swiglu is False or gated is False:
        record.put("mlp", "gelu", src("swiglu" if swiglu is False else "gated_linear_unit"))
    norm = str(get("normalization") or "").lower()
    if "rms" in norm:
        record.put("norm", "rmsnorm", src("normalization"))
    elif "layer" in norm:
        record.put("norm", "layernorm", src("normalization"))
    untie = as_bool(get("untie_embeddings_and_output_weights"))
    if untie is not None:
        record.put("tied_embeddings", not untie, src("untie_embeddings_and_output_weights"))
    share = as_bool(get("share_embeddings_and_output_weights"))
    if share is not None:
        record.put("tied_embeddings", share, src("share_embeddings_and_output_weights"))
    position = str(get("position_embedding_type") or "").lower()
    if position in ("rope", "learned_absolute", "none", "yarn", "mrope"):
        kind = {"learned_absolute": "learned", "yarn": "rope", "mrope": "rope"}.get(position, position)
        record.put("position_embedding", kind, src("position_embedding_type"))
    bias = as_bool(get("add_bias_linear"))
    if bias is not None:
        record.put("linear_bias", bias, src("add_bias_linear"))
    qkv_bias = as_bool(get("add_qkv_bias"))
    if qkv_bias is not None:
        record.put("qkv_bias", qkv_bias if bias is not True else True, src("add_qkv_bias"))
    elif bias is not None:
        record.put("qkv_bias", bias, src("add_bias_linear"))


KNOWN = frozenset(
    {
        *INTS,
        *VOCAB_NAMES,
        "group_query_attention",
        "num_query_groups",
        "virtual_pipeline_model_parallel_size",
        "num_layers_per_virtual_pipeline_stage",
        "moe_token_dispatcher_type",
        "moe_flex_dispatcher_backend",
        "moe_enable_deepep",
        "sequence_parallel",
        "overlap_grad_reduce",
        "overlap_param_gather",
        "tp_comm_overlap",
        "use_distributed_optimizer",
        "use_torch_fsdp2",
        "use_megatron_fsdp",
        "grad_reduce_in_bf16",
        "grad_reduce_in_fp32",
        "accumulate_allreduce_grads_in_fp32",
        "recompute_granularity",
        "recompute_method",
        "recompute_activations",
        "fp8",
        "fp8_recipe",
        "bf16",
        "params_dtype",
        "swiglu",
        "gated_linear_unit",
        "activation_func",
        "normalization",
        "untie_embeddings_and_output_weights",
        "share_embeddings_and_output_weights",
        "position_embedding_type",
        "add_bias_linear",
        "add_qkv_bias",
        "data_parallel_size",
        "activation",
        "moe_layer_freq",
        "devices",
        "num_nodes",
        "precision",
        "activations_checkpoint_granularity",
        "activations_checkpoint_method",
        "recompute_num_layers",
        "activations_checkpoint_num_layers",
        "checkpoint_activations",
    }
)
"""Every Megatron name `translate` reads: what a config dump is scanned for."""
