"""Activation memory one micro-batch leaves saved for the backward pass, per transformer layer and at the ends.

Symbols: s sequence length, q = s/cp tokens per context-parallel rank, b micro-batch, h hidden, a query heads,
g key/value heads, d_h head width, f FFN width, V vocabulary, t tensor parallel; "/sp" divides by t only under
sequence parallelism. 16-bit activations (2 bytes), 1-byte dropout masks, FP32 softmax statistics and logits.

Two models:
- `itemised`: every tensor autograd keeps, for the actual architecture. Attention: norm input 2qbh/sp,
  QKV input 2qbh/sp, Q 2qb·a·d_h/t, K and V 2qb·g·d_h/t each, with QK-norm (Qwen3, Megatron-Core's
  `qk_layernorm`) the per-head norms' inputs 2qb·a·d_h/t and 2qb·g·d_h/t, output-projection input 2qb·a·d_h/t,
  dropout mask qbh/sp; the score path (softmax output 2aqsb/t, dropout mask aqsb/t, dropout output 2aqsb/t) unless flash
  attention or selective recompute removes it; flash attention keeps a FP32 log-sum-exp 4aqb/t instead.
  MLP: norm input 2qbh/sp, fc1 input 2qbh/sp, fc1 output 2qbf/t (SwiGLU: gate and up, 4qbf/t, as Megatron's
  fused bias-SwiGLU saves them), activation output 2qbf/t, dropout mask qbh/sp. Norm statistics are ignored, as
  Korthikanti does. For a GPT-3 layer (MHA, 4h GeLU MLP, dropout) this is exactly Korthikanti's count.
- `korthikanti`: Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, for a GPT-3 layer whatever the
  architecture: sbh·(10 + 24/t + 5as/(ht)) with TP, sbh·(34/t + 5as/(ht)) with TP + SP; selective recompute or
  flash attention drops the 5as/h term; full recompute keeps the layer input, 2sbh (÷t with SP).
Full recompute keeps only each checkpoint's input (2qbh/sp) in both models: one per layer, or one per group of N
layers (Megatron-LM's uniform method), or the first N layers of a chunk only (block method: the rest keep
everything; `chunk_layer_bytes`). Selective recompute drops what the re-run modules make (Megatron-LM
`--recompute-modules`, megatron-core 0.16): `core_attn` the score path (flash attention: its FP32 log-sum-exp;
q, k, v are the checkpoint's inputs and the output is the projection's input, both kept), `layernorm` the two norm
outputs (attention/qkv_input, mlp/fc1_input; the norm inputs are kept), `mlp` everything inside a dense layer's
MLP but its input (mlp/fc1_input, fc1_output, activation_output), `moe` everything inside a routed layer's MoE
block but its input, the MLP norm's output (mlp/fc1_input; the router's probabilities, the dispatched rows, the experts' and shared experts' tensors),
`shared_experts` the shared experts' fc1 and activation outputs, `moe_act` the experts' activation output; `mlp`
leaves routed layers alone and the MoE modules dense ones, as megatron-core applies them per layer kind. Ends (Korthikanti §4.3, Eq. after 5):
the first stage keeps the embedding dropout mask qbh/sp (when the model has dropout); the last stage keeps the
final-norm input and the output-layer input (2qbh/sp each) and FP32 logits 4qbV/t (a stack running Transformer
Engine's fused cross-entropy keeps the BF16 logits, overwritten by their gradient, 2qbV/t instead:
pplan.profiles.stacks.Stack.te_cross_entropy).

Activation offload (Megatron-LM `--fine-grained-activation-offloading --offload-modules`, megatron-core 0.16
`pipeline_parallel/fine_grained_activation_offload.py`): every tensor a named module saves for the backward
inside its forward is copied to pinned host memory on a side stream once the module's group commits, and its GPU
copy freed; it is reloaded one group ahead of the backward that needs it. The saved tensors each module offloads
(`OFFLOAD_ITEMS`), for the local layer spec pplan itemises (separate norm modules, `transformer_layer.py`
`input_layernorm` / `pre_mlp_layernorm`): `attn_norm` the attention norm's input (attention/norm_input),
`qkv_linear` the QKV projection's input, the norm's output (attention/qkv_input), `core_attn` the attention
core's q, k, v (`attention.py`: the core's group commit releases query, key and value) and what the core saves
besides (the flash log-sum-exp, or the score path without flash attention), `attn_proj` the output projection's
input (attention/proj_input; megatron-core requires `core_attn` with it), `mlp_norm` the MLP norm's input
(mlp/norm_input). Assumed: with Transformer Engine's fused norm + linear (Megatron-LM's default
`--transformer-impl transformer_engine`), `attn_norm` and `mlp_norm` have no norm module to wrap and offload
nothing, and `qkv_linear` offloads both attention/norm_input and attention/qkv_input; pplan counts the local
spec's split. Tensors under `MIN_OFFLOADED_ELEMENTS` elements stay on the GPU (megatron-core's
`min_offloaded_tensor_size`). An offloaded tensor leaves the per-layer bytes (`itemised_layer`); what is in
transit is `offload_buffer_bytes`.

Layer offload (Megatron-LM `--cpu-offloading-num-layers N`, megatron-core 0.16's `cpu_offloading` through
Transformer Engine's `get_cpu_offload_context`; p = 1 and no recompute, pplan.plan.rules.check_layer_offload):
each of the model's first N layers is one offload group whose saved activations are copied to host memory on a side
stream once its forward ends and reloaded one group ahead of its backward. Assumed: every tensor the layer saves
goes (Transformer Engine marks its modules' saved inputs, megatron-core its fused SwiGLU's input), so the layer
keeps nothing on the GPU (`layer_offload_bytes`); and no transit at the peak: the peak is the end of the forward,
when the last offloaded layer (N − 1 < L − 1) has long been copied out while layers N … L − 1 ran, and in the
backward a reloaded layer replaces freed ones (the copy time, where not hidden, is pplan.cost.passtime's).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

from pplan.model.itemised import Itemised
from pplan.model.precision import FP8_SAVED_INPUTS, FP8_SWIGLU_INPUTS, saved_bytes_per_element
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import STACKS

if TYPE_CHECKING:  # the plan's settings a layer reads; pplan.plan imports this module
    from pplan.plan.shape import LayerSetting

ACT_BYTES = 2
MASK_BYTES = 1
FP32_BYTES = 4


class ActivationItems(Itemised):
    """Named byte counts that sum to `total_bytes`."""

    __slots__ = ()

    @property
    def total_bytes(self) -> int:
        return int(self.total)


def _dims(model: ModelSpec, plan: LayerSetting) -> tuple[int, int, int, int]:
    """(q·b tokens per rank, t, sp divisor, full sequence s)."""
    q = plan.seq_len // plan.cp
    sp = plan.tp if plan.sequence_parallel else 1
    return q * plan.micro_batch, plan.tp, sp, plan.seq_len


def _score_items(model: ModelSpec, plan: LayerSetting) -> list[tuple[str, int]]:
    """The attention-score tensors (a × q × s per sequence), present without flash attention."""
    qb, t, _, s = _dims(model, plan)
    a = model.num_attention_heads
    items = [("attention/softmax_output", ACT_BYTES * a * qb * s // t)]
    if model.dropout:
        items.append(("attention/softmax_dropout_mask", MASK_BYTES * a * qb * s // t))
        items.append(("attention/softmax_dropout_output", ACT_BYTES * a * qb * s // t))
    return items


def itemised_layer(
    model: ModelSpec, plan: LayerSetting, recompute: str | None = None, keep_offloaded: bool = False
) -> ActivationItems:
    """Itemised activation bytes one layer keeps on the GPU for one micro-batch (see the module docstring):
    without what the plan offloads to host memory unless `keep_offloaded`."""
    qb, _, sp, _ = _dims(model, plan)
    recompute = recompute or plan.recompute
    if recompute == "full":
        return ActivationItems((("layer_input", ACT_BYTES * qb * model.hidden_size // sp),))
    items = _kept_items(model, plan, recompute)
    if plan.offload_modules and not keep_offloaded:
        gone = {name for name, _ in _offloaded(plan, items)}
        items = [(n, b) for n, b in items if n not in gone]
    return ActivationItems(tuple(items))


def _kept_items(model: ModelSpec, plan: LayerSetting, recompute: str) -> list[tuple[str, int]]:
    """Every tensor a layer keeps under a recompute policy other than full, offloaded or not."""
    items = _itemised_all(model, plan)
    if recompute == "selective":
        dropped = set(_dropped_by(model, plan))
        items = [(n, b) for n, b in items if n not in dropped]
    return items


OFFLOAD_ITEMS: dict[str, tuple[str, ...]] = {
    "attn_norm": ("attention/norm_input",),
    "qkv_linear": ("attention/qkv_input",),
    "core_attn": (
        "attention/q",
        "attention/k",
        "attention/v",
        "attention/softmax_lse_fp32",
        "attention/softmax_output",
        "attention/softmax_dropout_mask",
        "attention/softmax_dropout_output",
    ),
    "attn_proj": ("attention/proj_input",),
    "mlp_norm": ("mlp/norm_input",),
}
"""The itemised tensors each offloaded module moves to host memory (see the module docstring)."""
MIN_OFFLOADED_ELEMENTS = 1024 * 1024
"""megatron-core 0.16's `min_offloaded_tensor_size` default (`transformer_config.py`): smaller tensors stay."""


def _element_bytes(name: str) -> int:
    """Bytes per element of an itemised tensor: FP32 statistics, 1-byte masks, 16-bit activations."""
    if name.endswith("_fp32"):
        return FP32_BYTES
    return MASK_BYTES if name.endswith("mask") else ACT_BYTES


def _offloaded(plan: LayerSetting, items: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Of `items`, those the plan's offload modules move to host memory (at least MIN_OFFLOADED_ELEMENTS)."""
    names = {name for module in plan.offload_modules for name in OFFLOAD_ITEMS[module]}
    return [(n, b) for n, b in items if n in names and b // _element_bytes(n) >= MIN_OFFLOADED_ELEMENTS]


def offloaded_layer(model: ModelSpec, plan: LayerSetting) -> ActivationItems:
    """What one layer that keeps its activations (not a full-recompute checkpoint) offloads to host memory for
    one micro-batch, itemised; empty without offload or under the Korthikanti model (no tensors to name)."""
    if not plan.offload_modules or plan.activation_model != "itemised":
        return ActivationItems(())
    recompute = "none" if plan.recompute == "full" else plan.recompute
    return ActivationItems(tuple(_offloaded(plan, _kept_items(model, plan, recompute))))


def layer_offload_bytes(model: ModelSpec, plan: LayerSetting, offloaded: int, dense_layers: int = 0) -> int:
    """What layer offload moves to host memory for one micro-batch: the whole activations of the first
    `offloaded` layers (a routed model's `dense_layers` dense layers come first), without recompute (see the module
    docstring); 0 when `offloaded` is 0."""
    if not offloaded:
        return 0
    dense = min(offloaded, dense_layers)
    routed = layer_activations(model, plan, "none").total_bytes * (offloaded - dense)
    if not dense:
        return routed
    return routed + layer_activations(model.dense_part, plan, "none").total_bytes * dense


def offload_buffer_bytes(model: ModelSpec, plan: LayerSetting) -> int:
    """The offload's transient on the GPU: one layer's offloaded tensors still being copied out in the forward
    plus one layer's reloaded ahead of the backward that needs them (megatron-core reloads the next layer's group
    when a group's backward starts, and keeps the last group of each module on the GPU), 2 × `offloaded_layer`."""
    return 2 * offloaded_layer(model, plan).total_bytes


MODULE_ITEMS: dict[str, tuple[str, ...]] = {
    "core_attn": (
        "attention/softmax_lse_fp32",
        "attention/softmax_output",
        "attention/softmax_dropout_mask",
        "attention/softmax_dropout_output",
    ),
    "layernorm": ("attention/qkv_input", "mlp/fc1_input", "attention/q_up_input", "attention/kv_up_input"),
    "mlp": ("mlp/fc1_input", "mlp/fc1_output", "mlp/activation_output"),
    "moe_act": ("moe/experts/activation_output",),
    "mla_up_proj": ("attention/q", "attention/k", "attention/v"),
    "moe": (
        "moe/router_probs_fp32",
        "moe/experts_input",
        "moe/experts/fc1_output",
        "moe/experts/activation_output",
        "moe/permuted_probs_fp32",
        "moe/shared_experts/fc1_output",
        "moe/shared_experts/activation_output",
    ),
    "shared_experts": ("moe/shared_experts/fc1_output", "moe/shared_experts/activation_output"),
}
"""The itemised tensors each selectively recomputed module no longer keeps (see the module docstring)."""
DENSE_ONLY_MODULES = frozenset({"mlp"})
"""Modules megatron-core re-runs in dense layers only (`mlp`: a dense MLP; a routed layer's is `moe`)."""
ROUTED_ONLY_MODULES = frozenset({"moe", "moe_act", "shared_experts"})
"""Modules that exist in routed layers only."""


def _dropped_by(model: ModelSpec, plan: LayerSetting) -> tuple[str, ...]:
    """The tensors `plan`'s recompute modules drop from a layer of `model` (a routed layer when `model.moe` is set,
    else a dense one: each module acts on its own kind of layer)."""
    skip = DENSE_ONLY_MODULES if model.moe is not None else ROUTED_ONLY_MODULES
    return tuple(
        name for module in plan.recompute_modules if module not in skip for name in MODULE_ITEMS[module]
    )


def _itemised_all(model: ModelSpec, plan: LayerSetting, as_bf16: bool = False) -> list[tuple[str, int]]:
    """Every tensor a layer keeps without module recomputation (the score path unless flash attention); the
    Linears' inputs at their BF16 size with `as_bf16`, else in the plan's precision."""
    qb, t, sp, _ = _dims(model, plan)
    h, a = model.hidden_size, model.num_attention_heads
    mla = model.mla
    items: list[tuple[str, int]] = [
        ("attention/norm_input", ACT_BYTES * qb * h // sp),
        ("attention/qkv_input", ACT_BYTES * qb * h // sp),
    ]
    if mla is None:
        g, dh = model.kv_heads, model.head_size
        items += [
            ("attention/q", ACT_BYTES * qb * a * dh // t),
            ("attention/k", ACT_BYTES * qb * g * dh // t),
            ("attention/v", ACT_BYTES * qb * g * dh // t),
        ]
        if (
            model.qk_norm
        ):  # each head's query and key normed before the rotary embedding: the norms keep inputs
            items += [
                ("attention/q_layernorm_input", ACT_BYTES * qb * a * dh // t),
                ("attention/k_layernorm_input", ACT_BYTES * qb * g * dh // t),
            ]
        v_dim = dh
    else:
        qk, v_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim
        if mla.q_lora_rank is not None:
            items += [
                ("attention/q_norm_input", ACT_BYTES * qb * mla.q_lora_rank // sp),
                ("attention/q_up_input", ACT_BYTES * qb * mla.q_lora_rank // sp),
            ]
        items += [
            ("attention/kv_norm_input", ACT_BYTES * qb * mla.kv_lora_rank // sp),
            ("attention/kv_up_input", ACT_BYTES * qb * mla.kv_lora_rank // sp),
            ("attention/q", ACT_BYTES * qb * a * qk // t),
            ("attention/k", ACT_BYTES * qb * a * qk // t),
            ("attention/v", ACT_BYTES * qb * a * v_dim // t),
        ]
    if plan.flash_attention:
        items.append(("attention/softmax_lse_fp32", FP32_BYTES * a * qb // t))
    else:
        items.extend(_score_items(model, plan))
    items.append(("attention/proj_input", ACT_BYTES * qb * a * v_dim // t))
    if model.dropout:
        items.append(("attention/dropout_mask", MASK_BYTES * qb * h // sp))
    items.append(("mlp/norm_input", ACT_BYTES * qb * h // sp))
    items.append(("mlp/fc1_input", ACT_BYTES * qb * h // sp))
    moe = model.moe
    if moe is None:
        items += _mlp_items(model, "mlp", qb, t, model.ffn_hidden_size)
    else:
        items += _routed_items(model, plan, qb, sp)
    if model.dropout:
        items.append(("mlp/dropout_mask", MASK_BYTES * qb * h // sp))
    if (
        plan.precision != "bf16" and not as_bf16
    ):  # each Linear keeps its quantised input (pplan.model.precision)
        per = saved_bytes_per_element(plan.precision)
        quantised = FP8_SAVED_INPUTS | (FP8_SWIGLU_INPUTS if plan.fp8_swiglu_input else frozenset())
        items = [(n, math.ceil(b / ACT_BYTES * per) if n in quantised else b) for n, b in items]
    return items


def fp8_cast_elements(model: ModelSpec, plan: LayerSetting) -> int:
    """Elements one layer's forward quantises for its FP8 GEMMs: the Linears' inputs (`FP8_SAVED_INPUTS`, counted
    at their BF16 size; 0 under bf16)."""
    if plan.precision == "bf16":
        return 0
    return sum(b // ACT_BYTES for n, b in _itemised_all(model, plan, as_bf16=True) if n in FP8_SAVED_INPUTS)


def _mlp_items(model: ModelSpec, name: str, rows: int, divisor: int, width: int) -> list[tuple[str, int]]:
    """An MLP's fc1 output (SwiGLU: gate and up) and activation output for rows/divisor rows of `width` columns."""
    fc1_width = 2 * width if model.mlp == "swiglu" else width
    return [
        (f"{name}/fc1_output", ACT_BYTES * rows * fc1_width // divisor),
        (f"{name}/activation_output", ACT_BYTES * rows * width // divisor),
    ]


def _routed_items(model: ModelSpec, plan: LayerSetting, qb: int, sp: int) -> list[tuple[str, int]]:
    """A routed MLP's saved tensors on one rank (its input is `mlp/fc1_input`, the router's and the shared
    experts' input; balanced routing): the router's FP32 probabilities (qb/sp × E), the experts' input after
    dispatch (k·qb/t rows arrive per rank, each row a whole h; etp ranks of one expert each see all its rows),
    fc1 and activation outputs (f_e/etp wide), and each dispatched row's FP32 routing probability: megatron-core
    (0.13 on) weights the activation output by it inside the experts (`weighted_bias_swiglu_impl`), so the
    combine keeps no expert outputs and the probabilities' gradient comes from the activation output; shared
    experts as a dense MLP of their width split by t."""
    moe = model.moe
    assert moe is not None
    h, t = model.hidden_size, plan.tp
    rows = qb * moe.top_k * plan.etp  # t × the token copies one rank's experts process
    f_e = moe.expert_ffn_hidden_size // plan.etp
    items = [
        ("moe/router_probs_fp32", FP32_BYTES * qb * moe.num_experts // sp),
        ("moe/experts_input", ACT_BYTES * rows * h // t),
        *_mlp_items(model, "moe/experts", rows, t, f_e),
        ("moe/permuted_probs_fp32", FP32_BYTES * rows // t),
    ]
    if moe.shared_expert_ffn_hidden_size:
        items += _mlp_items(model, "moe/shared_experts", qb, t, moe.shared_expert_ffn_hidden_size)
    return items


def korthikanti_layer(model: ModelSpec, plan: LayerSetting, recompute: str | None = None) -> ActivationItems:
    """Korthikanti et al. 2022 Table 2, bytes per layer per micro-batch (GPT-3 layer coefficients)."""
    qb, t, sp, s = _dims(model, plan)
    recompute = recompute or plan.recompute
    h, a = model.hidden_size, model.num_attention_heads
    if recompute == "full":
        return ActivationItems((("layer_input (2sbh/sp)", 2 * qb * h // sp),))
    if plan.sequence_parallel:
        items = [("34sbh/t", 34 * qb * h // t)]
    else:
        items = [("10sbh", 10 * qb * h), ("24sbh/t", 24 * qb * h // t)]
    if recompute != "selective" and not plan.flash_attention:
        items.append(("5as²b/t", 5 * a * qb * s // t))
    return ActivationItems(tuple(items))


def layer_activations(
    model: ModelSpec, plan: LayerSetting, recompute: str | None = None, keep_offloaded: bool = False
) -> ActivationItems:
    """One layer, one micro-batch, under the plan's activation model (what stays on the GPU)."""
    if plan.activation_model == "korthikanti":
        return korthikanti_layer(model, plan, recompute)
    return itemised_layer(model, plan, recompute, keep_offloaded)


def recompute_working_bytes(model: ModelSpec, plan: LayerSetting, group_layers: int = 1) -> int:
    """Transient bytes while a checkpoint is recomputed in the backward pass.

    Full recompute re-runs one checkpoint's forward (`group_layers` layers: Megatron-LM's uniform method with
    N > 1) and holds their whole activation sets during that checkpoint's backward; selective recompute
    re-materialises what its modules drop, for one layer. Zero without recomputation.
    """
    if plan.recompute == "full":
        return group_layers * layer_activations(model, plan, "none", keep_offloaded=True).total_bytes
    if plan.recompute == "selective":
        kept = dict(_itemised_all(model, plan))  # the tensors themselves, whatever the activation model
        return sum(kept.get(name, 0) for name in set(_dropped_by(model, plan)))
    return 0


def chunk_layer_bytes(
    model: ModelSpec, plan: LayerSetting, layers: int, recomputed: int, group_layers: int = 1
) -> int:
    """Activation bytes one micro-batch leaves on a chunk of `layers` layers, `recomputed` of which re-run their
    forward (full recompute: checkpoints of `group_layers` layers keep only their input; the other layers keep
    everything, as without recompute)."""
    if plan.recompute != "full" or recomputed == 0:
        base = "none" if plan.recompute == "full" else None
        return layers * _layer_bytes(model, plan, base)
    kept = _layer_bytes(model, plan, "full") * math.ceil(recomputed / group_layers)
    return kept + (layers - recomputed) * _layer_bytes(model, plan, "none")


@lru_cache(maxsize=8192)
def _layer_bytes(model: ModelSpec, plan: LayerSetting, recompute: str | None) -> int:
    """`layer_activations(...).total_bytes`, remembered (the search sums chunks of the same few settings)."""
    return layer_activations(model, plan, recompute).total_bytes


def embedding_end(model: ModelSpec, plan: LayerSetting) -> ActivationItems:
    """First stage, per micro-batch: the embedding dropout mask (models with dropout only)."""
    qb, _, sp, _ = _dims(model, plan)
    if not model.dropout:
        return ActivationItems(())
    return ActivationItems((("embedding/dropout_mask", MASK_BYTES * qb * model.hidden_size // sp),))


def output_end(model: ModelSpec, plan: LayerSetting) -> ActivationItems:
    """Last stage, per micro-batch: final-norm input, output-layer input and FP32 logits for the loss."""
    qb, t, sp, _ = _dims(model, plan)
    h = model.hidden_size
    logits = (
        ("loss/logits_grad_bf16", ACT_BYTES * qb * model.vocab_size // t)
        if STACKS[plan.stack].te_cross_entropy
        else ("loss/logits_fp32", FP32_BYTES * qb * model.vocab_size // t)
    )
    ends = (
        ("final_norm/input", ACT_BYTES * qb * h // sp),
        ("output_layer/input", ACT_BYTES * qb * h // sp),
        logits,
    )
    if not model.mtp_layers:
        return ActivationItems(ends)
    # each multi-token-prediction module: the inputs of its two norms and its 2h → h projection, one layer of the
    # last layer's kind, and the output end again (DeepSeek-V3 §2.2)
    module = (
        3 * ACT_BYTES * qb * h // sp
        + ACT_BYTES * qb * 2 * h // sp
        + layer_activations(model.mtp_layer, plan).total_bytes
        + sum(n for _, n in ends)
    )
    return ActivationItems((*ends, ("mtp", model.mtp_layers * module)))
