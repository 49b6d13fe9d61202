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
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.model.itemised import Itemised
from pplan.profiles.specs import ModelSpec

PassFlops = Itemised
"""FLOPs of one pass, itemised as (name, flops) pairs."""


@dataclass(frozen=True, slots=True)
class LayerFlops:
    """Forward, input-gradient and weight-gradient FLOPs of one transformer layer for one micro-batch."""

    f: PassFlops
    i: PassFlops
    w: PassFlops


def layer_flops(model: ModelSpec, seq_len: int, micro_batch: int, cp: int = 1) -> LayerFlops:
    """One layer, one micro-batch, on one context-parallel rank (whole layer: divide by t per GPU)."""
    h, a, g, dh, f = (
        model.hidden_size,
        model.num_attention_heads,
        model.kv_heads,
        model.head_size,
        model.ffn_hidden_size,
    )
    qb = seq_len // cp * micro_batch
    s = seq_len
    mlp_matrices = 3 if model.mlp == "swiglu" else 2
    gemms = (
        ("attention/qkv", 2.0 * qb * h * (a + 2 * g) * dh),
        ("attention/proj", 2.0 * qb * a * dh * h),
        ("mlp", 2.0 * qb * h * f * mlp_matrices),
    )
    core = (
        ("attention/scores", 2.0 * qb * s * a * dh),
        ("attention/context", 2.0 * qb * s * a * dh),
    )
    forward = PassFlops(gemms + core)
    input_grad = PassFlops(gemms + tuple((name, 2 * n) for name, n in core))
    weight_grad = PassFlops(gemms)
    return LayerFlops(forward, input_grad, weight_grad)


def logits_flops(model: ModelSpec, seq_len: int, micro_batch: int, cp: int = 1) -> float:
    """One pass (F, I or W) of the output layer for one micro-batch: 2·qb·h·V."""
    return 2.0 * (seq_len // cp) * micro_batch * model.hidden_size * model.vocab_size


def recompute_flops(
    model: ModelSpec, layer: LayerFlops, recompute: str, modules: tuple[str, ...] = ("core_attn",)
) -> float:
    """Extra forward work the backward pass does per recomputed layer: a whole forward (full), or the forward of
    the re-run modules (selective: the attention core, the MLP; norms are memory-bound, no FLOPs)."""
    if recompute == "full":
        return layer.f.total
    if recompute == "selective":
        per_module = {
            "core_attn": layer.f.get("attention/scores") + layer.f.get("attention/context"),
            "mlp": layer.f.get("mlp"),
            "layernorm": 0.0,
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
    layer = layer_flops(model, seq_len, global_batch)
    per_layer = layer.f.total + layer.i.total + layer.w.total
    if causal:
        per_layer -= sum(p.get(name) for p in (layer.f, layer.i) for name in ATTENTION_CORE) / 2
    return model.num_layers * per_layer + 3 * logits_flops(model, seq_len, global_batch)


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
    layer = layer_flops(model, seq_len, global_batch)
    layers = model.num_layers if recomputed_layers is None else recomputed_layers
    extra = layers * recompute_flops(model, layer, recompute, modules)
    return model_flops_per_step(model, seq_len, global_batch) + extra
