"""A decoder-only transformer's shape as a validated model profile (`ModelSpec`, the `[moe]` routed experts of
`MoeSpec` and the `[mla]` latent attention of `MlaSpec`): everything parameter, FLOP and activation counts need,
each field within its physical range (pplan.profiles.fields).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pplan.profiles.fields import (
    MAX_FFN,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_LAYERS,
    MAX_SEQ,
    MAX_VOCAB,
    SPEC_CACHE_LIMIT,
    FreeText,
    FrozenSpec,
    Name,
    SpecRuleError,
)

MlpKind = Literal["gelu", "swiglu", "squared-relu"]
NormKind = Literal["layernorm", "rmsnorm"]
PositionKind = Literal["rope", "learned", "alibi", "none"]


MAX_EXPERTS = 10**5


class MoeSpec(FrozenSpec):
    """A mixture-of-experts MLP (`[moe]`): which layers route their tokens to experts and how.

    Layer i (0-based) has the routed MLP when i ≥ `first_dense_layers` and i % `layer_frequency` == 0
    (DeepSeek-V3's `first_k_dense_replace` and `moe_layer_freq`; Megatron-LM's `--moe-layer-freq N`); the
    other layers keep the model's dense MLP of width `ffn_hidden_size`. Each routed expert is an MLP of the
    model's kind (`mlp`) and width `expert_ffn_hidden_size`; a token goes to `top_k` of the `num_experts`
    routed experts, and to every shared expert (one MLP of total width `shared_expert_ffn_hidden_size`).
    The router is one h × E matrix (plus a bias where `router_bias`)."""

    num_experts: int = Field(gt=0, le=MAX_EXPERTS)
    """Routed experts E (1 to 10^5)."""
    top_k: int = Field(gt=0, le=MAX_EXPERTS)
    """Routed experts per token k (1 to num_experts)."""
    expert_ffn_hidden_size: int = Field(gt=0, le=MAX_FFN)
    """Each routed expert's inner width f_e (1 to 10^7; SwiGLU: each of the gate and up projections)."""
    shared_expert_ffn_hidden_size: int = Field(default=0, ge=0, le=MAX_FFN)
    """Total inner width of the shared experts every token also runs (0: none; DeepSeek-V3: 1 × 2048)."""
    first_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    """Leading layers with the dense MLP (0 to 10^4; DeepSeek-V3: 3)."""
    layer_frequency: int = Field(default=1, gt=0, le=MAX_LAYERS)
    """Every k-th layer from the first is routed (1: every layer past the dense ones; 1 to 10^4)."""
    router_bias: bool = False
    """The router has a trained bias (GPT-OSS); DeepSeek-V3's load-balancing bias is a buffer, not trained."""

    @model_validator(mode="after")
    def _check_top_k(self) -> MoeSpec:
        if self.top_k > self.num_experts:
            raise SpecRuleError(
                "top_k",
                f"top_k={self.top_k} is more than num_experts={self.num_experts}",
                "use at most num_experts",
            )
        return self


class MlaSpec(FrozenSpec):
    """Multi-head latent attention (`[mla]`, DeepSeek-V2/V3, arXiv 2405.04434 §2.1): queries and keys/values
    are projected down to low ranks, normed, and projected up per head; each head's query and key carry
    `qk_nope_head_dim` content dimensions plus `qk_rope_head_dim` rotary ones (the rotary key is one shared
    head, projected with the KV down-projection), and each value `v_head_dim`."""

    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_HIDDEN)
    """Query down-projection rank d_c' (None: queries projected directly from h, as DeepSeek-V2-Lite)."""
    kv_lora_rank: int = Field(gt=0, le=MAX_HIDDEN)
    """Key/value down-projection rank d_c (DeepSeek-V3: 512)."""
    qk_nope_head_dim: int = Field(gt=0, le=MAX_HIDDEN)
    """Per-head query/key content width (DeepSeek-V3: 128)."""
    qk_rope_head_dim: int = Field(gt=0, le=MAX_HIDDEN)
    """Per-head query/key rotary width, shared key head (DeepSeek-V3: 64)."""
    v_head_dim: int = Field(gt=0, le=MAX_HIDDEN)
    """Per-head value width (DeepSeek-V3: 128)."""


SlidingLayers = Literal["all", "alternate"]


class ModelSpec(FrozenSpec):
    """A decoder-only transformer's shape: everything parameter, FLOP and activation counts need."""

    name: Name
    """Short name, e.g. `llama3-70b` (`pplan.profiles.text`: letters, digits, spaces and `_.+-/(),:@#`)."""
    description: FreeText = ""
    """One line for `pplan profiles`."""
    source: FreeText = ""
    """Where the shape comes from (paper, model card, config file)."""
    num_layers: int = Field(gt=0, le=MAX_LAYERS)
    """Transformer layers L (1 to 10^4)."""
    hidden_size: int = Field(gt=0, le=MAX_HIDDEN)
    """Model width h (1 to 10^6)."""
    num_attention_heads: int = Field(gt=0, le=MAX_HEADS)
    """Query heads a (1 to 10^5)."""
    num_kv_heads: int | None = Field(default=None, gt=0, le=MAX_HEADS)
    """Key/value heads g (grouped-query attention; 1 to 10^5, dividing a); defaults to the query heads."""
    head_dim: int | None = Field(default=None, gt=0, le=MAX_HIDDEN)
    """Per-head width (1 to 10^6); defaults to hidden_size / num_attention_heads."""
    ffn_hidden_size: int = Field(gt=0, le=MAX_FFN)
    """MLP inner width f (1 to 10^7; for SwiGLU: the width of each of the gate and up projections)."""
    mlp: MlpKind
    """MLP kind: `gelu` (two matrices), `swiglu` (three matrices), `squared-relu` (two matrices)."""
    norm: NormKind
    """`layernorm` (weight and bias) or `rmsnorm` (weight only)."""
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    """Vocabulary V as the run uses it (1 to 10^8; Megatron pads GPT-2's 50257 to 51200; Llama 3 uses 128256)."""
    tied_embeddings: bool
    """True when the output layer reuses the input embedding matrix."""
    seq_len: int = Field(gt=0, le=MAX_SEQ)
    """Default training sequence length s (1 to 10^8)."""
    position_embedding: PositionKind = "rope"
    """`learned` adds a max_position_embeddings × h table on the first stage."""
    max_position_embeddings: int | None = Field(default=None, gt=0, le=MAX_SEQ)
    """Rows of a learned position table (1 to 10^8); defaults to seq_len."""
    qkv_bias: bool = False
    """Bias on the query/key/value projections (GPT, Qwen2)."""
    linear_bias: bool = False
    """Bias on the attention output projection and the MLP matrices (GPT)."""
    dropout: bool = False
    """True when the layer applies dropout (GPT-3 does, Llama does not); adds 1-byte masks to the activations."""
    rope_theta: float | None = Field(default=None, gt=0, le=1e12)
    """RoPE base θ of rotary position embeddings (Hugging Face `rope_theta`; Llama 3: 500000); None when the
    profile does not state it. Launcher settings only: no count depends on it."""
    norm_epsilon: float | None = Field(default=None, gt=0, lt=1)
    """The norm's ε (Hugging Face `rms_norm_eps` / `layer_norm_eps`; Llama 3: 1e-5); None when not stated.
    Launcher settings only."""
    qk_norm: bool = False
    """An RMSNorm over each query and key head (Qwen3, OLMo 2): 2·d_h parameters per layer."""
    attention_sinks: bool = False
    """A learned per-head sink logit in the softmax (GPT-OSS): a parameters per layer."""
    sliding_window: int | None = Field(default=None, gt=0, le=MAX_SEQ)
    """Keys each query sees in a sliding-window attention layer (None: full attention everywhere)."""
    sliding_window_layers: SlidingLayers = "all"
    """Which layers use the window: `all`, or `alternate` (layers 0, 2, 4, ... windowed; GPT-OSS)."""
    moe: MoeSpec | None = None
    """The routed MLP (`[moe]`); None for a dense model."""
    mla: MlaSpec | None = None
    """Multi-head latent attention (`[mla]`); None for (grouped-query) multi-head attention."""
    mtp_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    """Multi-token-prediction modules after the last layer (DeepSeek-V3: 1; 0 to 10^4): each adds two norms, a
    2h × h projection and one transformer layer of the last layer's kind, and shares the output layer (Gloeckle
    et al. 2024; DeepSeek-V3 §2.2)."""

    @model_validator(mode="after")
    def _check_heads(self) -> ModelSpec:
        # What the core assumes: g divides a (grouped-query attention, tensor-parallel splits), and the head
        # width is h / a unless given.
        if self.num_kv_heads is not None and self.num_attention_heads % self.num_kv_heads:
            raise SpecRuleError(
                "num_kv_heads",
                f"num_kv_heads={self.num_kv_heads} must divide num_attention_heads={self.num_attention_heads}",
                "use a divisor of num_attention_heads",
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise SpecRuleError(
                "num_attention_heads",
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}",
                "set head_dim explicitly",
            )
        if self.moe is not None and self.moe.first_dense_layers >= self.num_layers:
            raise SpecRuleError(
                "moe.first_dense_layers",
                f"moe.first_dense_layers={self.moe.first_dense_layers} leaves no routed layer of "
                f"num_layers={self.num_layers}",
                "use fewer than num_layers dense layers, or drop [moe]",
            )
        if self.mla is not None and (self.num_kv_heads or self.head_dim):
            raise SpecRuleError(
                "mla", "[mla] sets the attention's head widths; num_kv_heads and head_dim do not apply",
                "drop num_kv_heads and head_dim",
            )  # fmt: skip
        return self

    def is_moe_layer(self, index: int) -> bool:
        """Layer `index` (0-based; the MTP modules continue the count) routes its tokens to experts."""
        moe = self.moe
        if moe is None:
            return False
        index = min(index, self.num_layers - 1)  # an MTP layer is of the last layer's kind
        return index >= moe.first_dense_layers and index % moe.layer_frequency == 0

    def dense_layers_in(self, start: int, count: int) -> int:
        """Of layers start … start+count−1, how many keep the dense MLP in a routed model (0 for a dense model:
        its layers are all of the one kind `model` describes)."""
        if self.moe is None:
            return 0
        return sum(not self.is_moe_layer(i) for i in range(start, start + count))

    @property
    def dense_part(self) -> ModelSpec:
        """The shape of this model's dense-MLP layers (itself for a dense model): per-layer counts of a routed
        model are of its routed layers; its dense layers are counted on this."""
        if self.moe is None:
            return self
        cached = _DENSE_PARTS.get(id(self))
        if cached is not None and cached[0] is self:
            return cached[1]
        dense = self.model_copy(update={"moe": None})
        if len(_DENSE_PARTS) >= SPEC_CACHE_LIMIT:
            _DENSE_PARTS.clear()
        _DENSE_PARTS[id(self)] = (self, dense)
        return dense

    @property
    def mtp_layer(self) -> ModelSpec:
        """The shape of a multi-token-prediction module's layer: the last layer's kind."""
        return self if self.is_moe_layer(self.num_layers - 1) else self.dense_part

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def position_rows(self) -> int:
        return self.max_position_embeddings or self.seq_len


_DENSE_PARTS: dict[int, tuple[ModelSpec, ModelSpec]] = {}
"""Each routed model's dense-layer shape by id, with the model (kept alive, so its id is not reused)."""
