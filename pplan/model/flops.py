"""Floating-point operations per pass: forward F, input-gradient backward I and weight-gradient backward W.

Symbols: s sequence length, q = s/cp tokens per context-parallel rank, b micro-batch, h hidden, a query heads,
g key/value heads, d_h head width, f FFN width, V vocabulary. A GEMM of (M×K)·(K×N) costs 2·M·K·N.
Per layer forward (whole layer, before tensor parallelism):
  attention/qkv 2·qb·h·(a+2g)·d_h; attention/scores (QKᵀ) 2·b·q·s·a·d_h; attention/context (PV) the same;
  attention/proj 2·qb·a·d_h·h; mlp 2·qb·h·f per matrix (GeLU / squared-ReLU: 2 matrices, SwiGLU: 3).
Backward (Qi et al. 2024, Table 1): I costs the same GEMMs again for the activation gradients plus twice the
attention-core work (dQ, dK, dV, dP); W costs the weight GEMMs once more and no attention-core work.
For a GPT-3 layer this gives F = sbh(24h + 4s), I = sbh(24h + 8s), W = 24sbh² (Qi et al. Table 1), and with one
recomputed forward per layer Narayanan et al. 2021 Eq. 3: 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)).
Logits: 2·qb·h·V per pass (forward, input gradient, weight gradient). Causal masking is not discounted in the
pass costs: the conventional model-FLOPs count (Narayanan, Korthikanti, PaLM's MFU) counts the full s² score
matrix; `model_flops_per_step(causal=True)` gives the causal convention (half the attention core) for MFU only.
Recomputation adds what re-runs: a whole forward (full) or the attention core's forward (selective). Korthikanti
et al.'s Appendix A writes hardware FLOPs with selective recompute as 72BLsh²(1 + s/(3h) + ...), which adds the
core's forward and backward; pplan counts only the re-run forward, 4·b·s²·h per layer.

Multi-head latent attention (symbols as in params.py): the projections' GEMMs are 2·q·b per weight element
(`attention/down` the two down-projections, `attention/qkv` the up-projections, `attention/proj` the output);
the core's QKᵀ runs over d_n + d_r per head and PV over d_v. Routed layers (E experts, k per token, f_e, f_s):
the router 2·qb·h·E, the experts k × one MLP of width f_e per token (`moe/experts`; balanced routing spreads
them evenly, so a rank's share is the layer's / t whatever ep and etp are), the shared experts one MLP of width
f_s. Sliding-window layers (Beltagy et al. 2020) attend to min(w, s) keys per query instead of s
(`attention_keys`); with `alternate` windows, a layer's core is the mean of the two kinds. A multi-token-
prediction module (DeepSeek-V3 §2.2) runs its 2h → h projection, one layer and one more output-layer pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pplan.model.itemised import Itemised
from pplan.profiles.model_spec import ModelSpec

PassFlops = Itemised
"""FLOPs of one pass, itemised as (name, flops) pairs."""


@dataclass(frozen=True, slots=True)
class LayerFlops:
    """Forward, input-gradient and weight-gradient FLOPs of one transformer layer for one micro-batch."""

    f: PassFlops
    i: PassFlops
    w: PassFlops


def attention_keys(model: ModelSpec, seq_len: int, causal: bool = False) -> float:
    """Keys per query a layer's attention core covers, averaged over the model's layer kinds: s (full attention;
    s/2 in the causal convention), min(w, s) in a sliding-window layer (its window is causal already)."""
    full = seq_len / 2 if causal else float(seq_len)
    window = model.sliding_window
    if window is None:
        return full
    windowed = float(min(window, seq_len))
    return windowed if model.sliding_window_layers == "all" else (full + windowed) / 2


def kv_elements_per_token(model: ModelSpec) -> int:
    """Elements of one token's keys and values across a layer's heads, as the attention core reads them (what
    ring attention passes between context-parallel ranks): 2·g·d_h with g key/value heads of width d_h; with MLA
    (keys and values projected up per head before the core, DeepSeek-V2 §2.1) a·(d_nope + d_rope) for the keys,
    the shared rotary part copied to every head, plus a·d_v for the values."""
    mla = model.mla
    if mla is None:
        return 2 * model.kv_heads * model.head_size
    return model.num_attention_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)


@lru_cache(maxsize=4096)
def layer_flops(model: ModelSpec, seq_len: int, micro_batch: int, cp: int = 1) -> LayerFlops:
    """One layer, one micro-batch, on one context-parallel rank (whole layer: divide by t per GPU); a routed
    layer for a routed model (its dense layers: `layer_flops(model.dense_part, ...)`). Remembered: a search
    prices many layer settings that share the model, sequence, micro-batch and context split."""
    h, a = model.hidden_size, model.num_attention_heads
    qb = seq_len // cp * micro_batch
    keys = attention_keys(model, seq_len)
    mlp_matrices = 3 if model.mlp == "swiglu" else 2
    mla = model.mla
    if mla is None:
        g, dh = model.kv_heads, model.head_size
        attention: tuple[tuple[str, float], ...] = (
            ("attention/qkv", 2.0 * qb * h * (a + 2 * g) * dh),
            ("attention/proj", 2.0 * qb * a * dh * h),
        )
        qk_dim = v_dim = dh
    else:
        qk_dim, v_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim
        r_q = mla.q_lora_rank
        down = h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + (h * r_q if r_q else 0)
        up = (r_q or h) * a * qk_dim + mla.kv_lora_rank * a * (mla.qk_nope_head_dim + v_dim)
        attention = (
            ("attention/down", 2.0 * qb * down),
            ("attention/qkv", 2.0 * qb * up),
            ("attention/proj", 2.0 * qb * a * v_dim * h),
        )
    moe = model.moe
    if moe is None:
        mlp: tuple[tuple[str, float], ...] = (("mlp", 2.0 * qb * h * model.ffn_hidden_size * mlp_matrices),)
    else:
        mlp = (
            ("moe/router", 2.0 * qb * h * moe.num_experts),
            ("moe/experts", 2.0 * qb * moe.top_k * h * moe.expert_ffn_hidden_size * mlp_matrices),
        )
        if moe.shared_expert_ffn_hidden_size:
            mlp += (("moe/shared_experts", 2.0 * qb * h * moe.shared_expert_ffn_hidden_size * mlp_matrices),)
    gemms = attention + mlp
    core = (
        ("attention/scores", 2.0 * qb * keys * a * qk_dim),
        ("attention/context", 2.0 * qb * keys * a * v_dim),
    )
    forward = PassFlops(gemms + core)
    input_grad = PassFlops(gemms + tuple((name, 2 * n) for name, n in core))
    weight_grad = PassFlops(gemms)
    return LayerFlops(forward, input_grad, weight_grad)


def logits_flops(model: ModelSpec, seq_len: int, micro_batch: int, cp: int = 1) -> float:
    """One pass (F, I or W) of the output layer for one micro-batch: 2·qb·h·V."""
    return 2.0 * (seq_len // cp) * micro_batch * model.hidden_size * model.vocab_size


def mtp_projection_flops(model: ModelSpec, seq_len: int, micro_batch: int, cp: int = 1) -> float:
    """One pass (F, I or W) of one multi-token-prediction module's 2h → h projection: 2·qb·2h·h."""
    return 4.0 * (seq_len // cp) * micro_batch * model.hidden_size**2


@lru_cache(maxsize=64)
def layer_kinds(model: ModelSpec) -> tuple[tuple[ModelSpec, int], ...]:
    """(layer shape, how many layers) for each kind of the model's L layers: routed and dense, or one kind."""
    dense = model.dense_layers_in(0, model.num_layers)
    if not dense:
        return ((model, model.num_layers),)
    return ((model, model.num_layers - dense), (model.dense_part, dense))


def recompute_flops(
    model: ModelSpec, layer: LayerFlops, recompute: str, modules: tuple[str, ...] = ("core_attn",)
) -> float:
    """Extra forward work the backward pass does per recomputed layer: a whole forward (full), or the forward of
    the re-run modules (selective: the attention core, a dense layer's MLP, a routed layer's MoE block or its shared
    experts; norms are memory-bound, no FLOPs). `model` is the layer's kind (a routed model's dense part for its
    dense layers)."""
    if recompute == "full":
        return layer.f.total
    if recompute == "selective":
        per_module = {
            "core_attn": layer.f.get("attention/scores") + layer.f.get("attention/context"),
            "mlp": layer.f.get("mlp") if model.moe is None else 0.0,
            "moe": sum(n for name, n in layer.f.items if name == "mlp" or name.startswith("moe/"))
            if model.moe is not None
            else 0.0,
            "shared_experts": layer.f.get("moe/shared_experts") if model.moe is not None else 0.0,
            "layernorm": 0.0,
            "moe_act": 0.0,
            "mla_up_proj": layer.f.get("attention/qkv") if model.mla is not None else 0.0,
        }
        return sum(per_module[m] for m in modules)
    return 0.0


ATTENTION_CORE = ("attention/scores", "attention/context")
"""The attention core's items: QKᵀ and PV, each over the s×s score matrix."""


def model_flops_per_step(model: ModelSpec, seq_len: int, global_batch: int, causal: bool = False) -> float:
    """Model FLOPs of one optimizer step (forward + backward, no recomputation): the MFU numerator.

    Two conventions for the attention core (QKᵀ and PV, forward and input gradient): `causal=False` counts the
    full s×s score matrix, as Narayanan et al. 2021 (Eq. 3), Korthikanti et al. 2022 and PaLM's MFU do (pplan's
    `mfu`); `causal=True` counts the half a causal mask keeps, s²/2 (the lower triangle to leading order), as newer
    performance tables do (`mfu_causal`). Per layer the two differ by 6·B·s²·a·d_h."""
    total = 0.0
    kinds = [*layer_kinds(model), (model.mtp_layer, model.mtp_layers)]
    for kind, count in kinds:
        layer = layer_flops(kind, seq_len, global_batch)
        per_layer = layer.f.total + layer.i.total + layer.w.total
        if causal:
            core = sum(p.get(name) for p in (layer.f, layer.i) for name in ATTENTION_CORE)
            per_layer -= core * (
                1 - attention_keys(kind, seq_len, causal=True) / attention_keys(kind, seq_len)
            )
        total += count * per_layer
    ends = logits_flops(model, seq_len, global_batch) + model.mtp_layers * (
        logits_flops(model, seq_len, global_batch) + mtp_projection_flops(model, seq_len, global_batch)
    )
    return total + 3 * ends


def hardware_flops_per_step(
    model: ModelSpec,
    seq_len: int,
    global_batch: int,
    recompute: str,
    recomputed_layers: int | None = None,
    modules: tuple[str, ...] = ("core_attn",),
) -> float:
    """Model FLOPs plus the recomputed forward work: the hardware-FLOPs (HFU) numerator. `recomputed_layers`:
    how many of the L layers re-run (full recompute with the block method; all L when not given)."""
    extra = 0.0
    for kind, count in layer_kinds(model):
        share = count / model.num_layers
        layers = count if recomputed_layers is None else recomputed_layers * share
        extra += layers * recompute_flops(kind, layer_flops(kind, seq_len, global_batch), recompute, modules)
    return model_flops_per_step(model, seq_len, global_batch) + extra
