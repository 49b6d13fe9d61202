"""Converts a Hugging Face `config.json` (already parsed into a dict) into a `ModelSpec`; reads no files.

Each supported `model_type` names its fields differently (`num_hidden_layers` / `n_layer`, `hidden_size` /
`n_embd`, ...) and leaves some facts to its config class's defaults (GPT-2 and BLOOM tie their embeddings
unless told otherwise; BLOOM's MLP is always 4h). The architecture facts a config does not carry (MLP and
norm kind, biases, position embedding) are per family, below. Problems are `ProfileError`s naming the config
key: a value out of `ModelSpec`'s stated ranges is named by the key it came from (`num_hidden_layers`, not
`num_layers`).

The mixture-of-experts families (Mixtral, Qwen3-MoE, DeepSeek-V3, GPT-OSS) each have a reader for their routed
MLP, attention kind and sliding window. Shape numbers are required even where the config class has a default
(its defaults are one model's values, not a rule); flags and layer patterns take the config class's default,
each said where it is read. What `ModelSpec` cannot express (Qwen3-MoE's `decoder_sparse_step` > 1, a GPT-OSS
window pattern other than all or alternate layers) is refused, never approximated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from pplan.errors import ProfileError
from pplan.profiles.model_spec import MlpKind, ModelSpec, NormKind, PositionKind, SlidingLayers
from pplan.profiles.problems import spec_problems
from pplan.profiles.text import safe_name

BiasRule = Literal["config", "qkv-only", "all", "none"]

Read = tuple[dict[str, Any], dict[str, str]]
"""What a family's reader found: `ModelSpec` fields, and the config key each came from (dotted field names for
`[moe]` and `[mla]`), to name the key when the value is out of range."""


@dataclass(frozen=True)
class ConfigKey:
    """One config key a model type reads (`pplan.profiles.hf_keys` tabulates them for docs/hf-config-keys.md)."""

    names: tuple[str, ...]
    """The key, and the other names it is read under (the first present wins)."""
    need: str
    """`required`; `present` (a value or null); `optional` (with what its absence means); or when required."""
    what: str
    """What pplan reads it as, and the values it refuses."""


@dataclass(frozen=True)
class _Family:
    """What a model family's config leaves implicit."""

    mlp: MlpKind
    norm: NormKind
    position: PositionKind
    biases: BiasRule
    """`config`: from `attention_bias` / `mlp_bias` (default none); `qkv-only`: Qwen2; `all`: GPT-style (QKV
    from `attention_bias`, default true); `none`: no biases whatever the config says (Mixtral's modeling)."""
    tied_by_default: bool
    """The config class's default for `tie_word_embeddings`."""
    required: tuple[str, ...] = ()
    """Keys read as optional for other families that this one's config class defaults to a value `ModelSpec`
    would not assume (GPT-OSS's `head_dim` 64 is not h / a; Mixtral's `num_key_value_heads` 8 is not a)."""
    qk_norm: bool = False
    """Per-head RMSNorm of queries and keys (Qwen3), whatever the config says: it has no key for it."""
    attention_sinks: bool = False
    """A learned sink logit per head (GPT-OSS)."""
    reader: Callable[[dict[str, Any], int], Read] | None = None
    """Reads the routed MLP, multi-head latent attention and sliding window (config, num_layers)."""
    ffn_defaults_to_4h: bool = False
    """True when the MLP width is 4h unless `n_inner` says otherwise (GPT-2) or always (BLOOM)."""
    always_dropout: bool = False
    """GPT-2: dropout is on unless every `*_pdrop` is explicitly 0."""
    fallback_seq_len: int | None = None
    """A training length to use when the config has no length key at all (BLOOM)."""
    reads: tuple[ConfigKey, ...] = ()
    """The keys `reader` reads (docs/hf-config-keys.md; a test checks each required one is required)."""


def _mixtral(config: dict[str, Any], layers: int) -> Read:
    """Mixtral: every layer routed to `num_local_experts` experts of width `intermediate_size`; a
    `sliding_window` (null in Mixtral's configs, and MixtralConfig's default) windows every layer."""
    moe, keys = _routed(config, "num_local_experts", ("num_experts_per_tok",), "intermediate_size")
    fields = {"moe": moe, "sliding_window": _optional_int(config, "sliding_window")}
    return fields, keys | {"sliding_window": "sliding_window"}


def _mistral(config: dict[str, Any], layers: int) -> Read:
    """Mistral: `sliding_window` windows every layer's attention (4096 in Mistral 7B v0.1's config, null from
    v0.2 on). It must be present: MistralConfig defaults it to 4096, so an absent key is not "no window"."""
    return {"sliding_window": _nullable_int(config, "sliding_window")}, {"sliding_window": "sliding_window"}


def _qwen3_moe(config: dict[str, Any], layers: int) -> Read:
    """Qwen3-MoE: layer i is routed iff i is not in `mlp_only_layers` and (i + 1) % `decoder_sparse_step` == 0
    (Qwen3MoeDecoderLayer); ModelSpec routes i ≥ first_dense_layers with i % layer_frequency == 0, the same
    only for step 1 and no MLP-only layers. No shared experts (Qwen2-MoE's `shared_expert_intermediate_size`
    is not in Qwen3-MoE)."""
    step = _optional_int(config, "decoder_sparse_step") or 1  # Qwen3MoeConfig's default: 1
    if step != 1:
        raise ProfileError(
            "decoder_sparse_step",
            f"{step} routes layers i with (i + 1) % {step} == 0, which pplan's [moe] layer_frequency "
            "(i % frequency == 0) cannot express",
            "only 1 (every layer routed) is read; write a .toml model profile",
        )
    only_mlp = config.get("mlp_only_layers")  # Qwen3MoeConfig's default: none
    if only_mlp is not None and only_mlp != []:
        raise ProfileError(
            "mlp_only_layers",
            f"dense layers {_shown(only_mlp)} among routed ones cannot be expressed by pplan's [moe]",
            "only an empty list is read; write a .toml model profile",
        )
    if _flag(config, "use_sliding_window", False):  # Qwen3MoeConfig's default: false, `sliding_window` unused
        raise ProfileError(
            "use_sliding_window",
            "true is not read: transformers versions window different layers (from max_window_layers, or all)",
            "write a .toml model profile with sliding_window",
        )
    moe, keys = _routed(config, "num_experts", ("num_experts_per_tok",), "moe_intermediate_size")
    return {"moe": moe}, keys


def _deepseek_v3(config: dict[str, Any], layers: int) -> Read:
    """DeepSeek-V3: the first `first_k_dense_replace` layers dense (width `intermediate_size`), then every
    `moe_layer_freq`-th layer routed to `n_routed_experts` experts of width `moe_intermediate_size` plus
    `n_shared_experts` shared ones of that width; multi-head latent attention; `num_nextn_predict_layers`
    multi-token-prediction modules. The router has no trained bias (`e_score_correction_bias` is a buffer)."""
    if _flag(config, "attention_bias", False):  # DeepseekV3Config's default: false
        raise ProfileError(
            "attention_bias",
            "true puts biases on MLA's down-projections, which pplan's [mla] does not count",
            "write a .toml model profile",
        )
    moe, routed_keys = _routed(config, "n_routed_experts", ("num_experts_per_tok",), "moe_intermediate_size")
    shared = _nullable_int(config, "n_shared_experts") or 0  # null: none (DeepSeek's modeling code)
    first_dense = _count(config, "first_k_dense_replace")
    # DeepSeek's DeepseekV3Config defaults moe_layer_freq to 1; transformers' has no such key and routes every
    # layer from first_k_dense_replace on, the same.
    frequency = _optional_int(config, "moe_layer_freq") or 1
    # A config without the key is one written by transformers 4.x's DeepseekV3Config, which had no
    # multi-token prediction (its model loads no MTP weights): 0 modules. DeepSeek's own configs carry the key.
    mtp = _count(config, "num_nextn_predict_layers", default=0)
    moe |= {
        "shared_expert_ffn_hidden_size": shared * moe["expert_ffn_hidden_size"],
        "first_dense_layers": first_dense,
        "layer_frequency": frequency,
    }
    mla = {
        "q_lora_rank": _nullable_int(config, "q_lora_rank"),  # null: queries projected directly from h
        "kv_lora_rank": _required_int(config, ("kv_lora_rank",))[0],
        "qk_nope_head_dim": _required_int(config, ("qk_nope_head_dim",))[0],
        "qk_rope_head_dim": _required_int(config, ("qk_rope_head_dim",))[0],
        "v_head_dim": _required_int(config, ("v_head_dim",))[0],
    }
    # MLA sets the head widths; the config's num_key_value_heads (= num_attention_heads) and head_dim
    # (= qk_rope_head_dim in transformers) do not apply.
    fields = {"num_kv_heads": None, "head_dim": None, "moe": moe, "mla": mla, "mtp_layers": mtp}
    keys = routed_keys | {
        "moe.shared_expert_ffn_hidden_size": "n_shared_experts",
        "moe.first_dense_layers": "first_k_dense_replace",
        "moe.layer_frequency": "moe_layer_freq",
        "mtp_layers": "num_nextn_predict_layers",
        **{f"mla.{key}": key for key in mla},
    }
    return fields, keys


_GPT_OSS_TOP_K = ("num_experts_per_tok", "experts_per_token")
"""GPT-OSS's experts per token; its earliest configs name it `experts_per_token`."""


def _gpt_oss(config: dict[str, Any], layers: int) -> Read:
    """GPT-OSS: every layer routed to `num_local_experts` biased experts of width `intermediate_size` through a
    biased router; attention with sinks, biases from `attention_bias`, and a `sliding_window` on the layers
    `layer_types` names `sliding_attention`."""
    if not _flag(config, "attention_bias", True):  # GptOssConfig's default: true
        raise ProfileError(
            "attention_bias",
            "false leaves the output projection unbiased while the experts keep their biases, which pplan's "
            "linear_bias cannot express",
            "write a .toml model profile",
        )
    moe, keys = _routed(config, "num_local_experts", _GPT_OSS_TOP_K, "intermediate_size")
    top_k = moe["top_k"]
    other = _find_int(config, _GPT_OSS_TOP_K[::-1])
    if other is not None and other[0] != top_k:
        raise ProfileError(
            "experts_per_token",
            f"{other[0]} disagrees with num_experts_per_tok {top_k}",
            "make them equal, or remove experts_per_token",
        )
    layers_windowed = _window_layers(config, layers)
    window = None
    if layers_windowed is not None:
        window = _required_int(config, ("sliding_window",))[0]
    moe["router_bias"] = True
    fields = {"moe": moe, "sliding_window": window, "sliding_window_layers": layers_windowed or "all"}
    return fields, keys | {"sliding_window": "sliding_window"}


def _window_layers(config: dict[str, Any], layers: int) -> SlidingLayers | None:
    """GPT-OSS's `layer_types` as `ModelSpec.sliding_window_layers`: every layer sliding is `all`, sliding on
    layers 0, 2, 4, ... and full between is `alternate`, every layer full is None (no window)."""
    # GptOssConfig's default: sliding_attention on even layers, full_attention on odd ones.
    kinds = config.get("layer_types")
    if kinds is None:
        return "alternate"
    if not isinstance(kinds, list) or not all(k in ("sliding_attention", "full_attention") for k in kinds):
        raise ProfileError(
            "layer_types",
            f"must be a list of sliding_attention and full_attention, got {_shown(kinds)}",
            "fix the config",
        )
    if len(kinds) != layers:
        raise ProfileError(
            "layer_types",
            f"lists {len(kinds)} layers, and the model has {layers}",
            "give one entry per layer",
        )
    sliding = [kind == "sliding_attention" for kind in kinds]
    if all(sliding):
        return "all"
    if not any(sliding):
        return None
    if sliding == [i % 2 == 0 for i in range(layers)]:
        return "alternate"
    raise ProfileError(
        "layer_types",
        "pplan models a window on every layer or on layers 0, 2, 4, ... only; this pattern is neither",
        "write a .toml model profile",
    )


def _routed(
    config: dict[str, Any], experts_key: str, top_k_keys: tuple[str, ...], width_key: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The three numbers every routed family states, under its own keys: the `[moe]` fields and, for each, the
    config key it came from (so a range error names the key the user wrote)."""
    experts, experts_from = _required_int(config, (experts_key,))
    top_k, top_k_from = _required_int(config, top_k_keys)
    width, width_from = _required_int(config, (width_key,))
    moe: dict[str, Any] = {"num_experts": experts, "top_k": top_k, "expert_ffn_hidden_size": width}
    keys = {
        "moe.num_experts": experts_from,
        "moe.top_k": top_k_from,
        "moe.expert_ffn_hidden_size": width_from,
    }
    return moe, keys


_KV_HEADS = ("num_key_value_heads",)
"""Required of the MoE families: their config classes default it to one model's value (Mixtral 8, Qwen3-MoE 4,
GPT-OSS 8), not to num_attention_heads as `ModelSpec` would."""

_MIXTRAL_KEYS = (
    ConfigKey(("num_local_experts",), "required", "routed experts E"),
    ConfigKey(("num_experts_per_tok",), "required", "experts per token k"),
    ConfigKey(("intermediate_size",), "required", "each expert's width (every layer is routed)"),
    ConfigKey(("sliding_window",), "optional (none: no window)", "a window on every layer's attention"),
)
_MISTRAL_KEYS = (ConfigKey(("sliding_window",), "present", "a window on every layer (null: none)"),)
_QWEN3_MOE_KEYS = (
    ConfigKey(("num_experts",), "required", "routed experts E"),
    ConfigKey(("num_experts_per_tok",), "required", "experts per token k"),
    ConfigKey(("moe_intermediate_size",), "required", "each expert's width"),
    ConfigKey(("decoder_sparse_step",), "optional (1)", "only 1: every layer routed"),
    ConfigKey(("mlp_only_layers",), "optional ([])", "only an empty list"),
    ConfigKey(("use_sliding_window",), "optional (false)", "only false"),
)
_DEEPSEEK_V3_KEYS = (
    ConfigKey(("n_routed_experts",), "required", "routed experts E"),
    ConfigKey(("num_experts_per_tok",), "required", "experts per token k"),
    ConfigKey(("moe_intermediate_size",), "required", "each routed and shared expert's width"),
    ConfigKey(("n_shared_experts",), "present", "shared experts (null: none)"),
    ConfigKey(("first_k_dense_replace",), "required", "leading dense layers (0 to L)"),
    ConfigKey(("moe_layer_freq",), "optional (1)", "every k-th layer routed after the dense ones"),
    ConfigKey(("num_nextn_predict_layers",), "optional (0)", "multi-token-prediction modules"),
    ConfigKey(("q_lora_rank",), "present", "MLA query compression rank (null: none)"),
    ConfigKey(("kv_lora_rank",), "required", "MLA key/value compression rank"),
    ConfigKey(("qk_nope_head_dim",), "required", "MLA query/key width without RoPE"),
    ConfigKey(("qk_rope_head_dim",), "required", "MLA query/key RoPE width"),
    ConfigKey(("v_head_dim",), "required", "MLA value width"),
    ConfigKey(("attention_bias",), "optional (false)", "only false"),
)
_GPT_OSS_KEYS = (
    ConfigKey(("num_local_experts",), "required", "routed experts E"),
    ConfigKey(_GPT_OSS_TOP_K, "required", "experts per token k (both names must agree)"),
    ConfigKey(("intermediate_size",), "required", "each expert's width (every layer is routed)"),
    ConfigKey(("attention_bias",), "optional (true)", "only true"),
    ConfigKey(("layer_types",), "optional (sliding on even layers)", "all sliding, alternate, or all full"),
    ConfigKey(("sliding_window",), "when a layer is sliding", "the window in tokens"),
)

_FAMILIES: dict[str, _Family] = {
    "llama": _Family("swiglu", "rmsnorm", "rope", "config", tied_by_default=False),
    "mistral": _Family(
        "swiglu", "rmsnorm", "rope", "config", tied_by_default=False, reader=_mistral, reads=_MISTRAL_KEYS
    ),
    "qwen2": _Family("swiglu", "rmsnorm", "rope", "qkv-only", tied_by_default=False),
    "gpt2": _Family(
        "gelu", "layernorm", "learned", "all", True, ffn_defaults_to_4h=True, always_dropout=True
    ),
    "gpt_neox": _Family("gelu", "layernorm", "rope", "all", tied_by_default=False),
    # BLOOM was trained on 2048-token sequences (BigScience, arXiv 2211.05100); its configs carry no length.
    "bloom": _Family(
        "gelu", "layernorm", "alibi", "all", True, ffn_defaults_to_4h=True, fallback_seq_len=2048
    ),
    "nemotron": _Family("squared-relu", "layernorm", "rope", "config", tied_by_default=False),
    # Mixture-of-experts families. Mixtral's attention has no biases whatever the config says.
    "mixtral": _Family(
        "swiglu", "rmsnorm", "rope", "none", False, _KV_HEADS, reader=_mixtral, reads=_MIXTRAL_KEYS
    ),
    # Qwen3-MoE's q/k/v/o biases follow attention_bias (default false), as Llama's; its experts have none.
    "qwen3_moe": _Family(
        "swiglu",
        "rmsnorm",
        "rope",
        "config",
        False,
        _KV_HEADS,
        qk_norm=True,
        reader=_qwen3_moe,
        reads=_QWEN3_MOE_KEYS,
    ),
    "deepseek_v3": _Family(
        "swiglu", "rmsnorm", "rope", "none", False, reader=_deepseek_v3, reads=_DEEPSEEK_V3_KEYS
    ),
    # GPT-OSS: a clamped SwiGLU (the same matrices); biased q/k/v/o projections, experts and router.
    "gpt_oss": _Family(
        "swiglu",
        "rmsnorm",
        "rope",
        "all",
        tied_by_default=False,
        required=(*_KV_HEADS, "head_dim"),
        attention_sinks=True,
        reader=_gpt_oss,
        reads=_GPT_OSS_KEYS,
    ),
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_FAMILIES))

_LAYERS = ("num_hidden_layers", "n_layer")
_HIDDEN = ("hidden_size", "n_embd", "n_embed")
_HEADS = ("num_attention_heads", "n_head")
_SEQ = ("max_position_embeddings", "n_positions", "seq_length")
_NORM_EPS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon")
_GPT2_DROPOUTS = ("resid_pdrop", "embd_pdrop", "attn_pdrop")
_DROPOUTS = ("attention_dropout", "hidden_dropout")


def model_spec_from_hf_config(config: dict[str, Any], name: str) -> ModelSpec:
    """The `ModelSpec` a Hugging Face config describes; `seq_len` is the config's maximum length, uncapped. `name`
    (a folder's name) is made safe to print first (`pplan.profiles.text.safe_name`)."""
    name = safe_name(name)
    model_type = config.get("model_type")
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    if model_type is None:
        raise ProfileError(
            "model_type",
            "missing from the config",
            f"add it; supported types: {supported} (or write a .toml)",
        )
    family = _FAMILIES.get(str(model_type))
    if family is None:
        raise ProfileError(
            "model_type",
            f"unsupported model_type {_shown(model_type)}",
            f"supported types: {supported}; for another model write a .toml model profile",
        )

    layers, layers_key = _required_int(config, _LAYERS)
    hidden, hidden_key = _required_int(config, _HIDDEN)
    heads, heads_key = _required_int(config, _HEADS)
    vocab = _required_int(config, ("vocab_size",))[0]
    for key in family.required:
        _required_int(config, (key,))
    kv_heads = _optional_int(config, "num_key_value_heads")
    head_dim = _optional_int(config, "head_dim")
    # The config key each ModelSpec field comes from, to name it when the value is out of range.
    keys = {
        "num_layers": layers_key,
        "hidden_size": hidden_key,
        "num_attention_heads": heads_key,
        "vocab_size": "vocab_size",
        "num_kv_heads": "num_key_value_heads",
        "head_dim": "head_dim",
    }

    # The routed MLP first: a model whose every layer is routed has no dense MLP width to read.
    read, read_keys = family.reader(config, layers) if family.reader is not None else ({}, {})
    if model_type == "bloom":
        ffn = 4 * hidden  # BloomMLP is always 4h; `n_inner` in its configs is unused
        keys["ffn_hidden_size"] = f"{hidden_key} (the MLP is 4 × {hidden_key})"
    elif family.ffn_defaults_to_4h:
        inner = _optional_int(config, "n_inner")
        ffn = inner or 4 * hidden
        keys["ffn_hidden_size"] = "n_inner" if inner else f"{hidden_key} (the MLP is 4 × {hidden_key})"
    else:
        ffn, keys["ffn_hidden_size"] = _dense_width(config, read.get("moe"))

    found = _find_int(config, _SEQ)
    if found is not None:
        seq_len, seq_key = found
        seq_note = f"seq_len {seq_len} = the config's {seq_key}, not capped"
        keys["seq_len"] = keys["max_position_embeddings"] = seq_key
    elif family.fallback_seq_len is not None:
        seq_len = family.fallback_seq_len
        seq_note = f"seq_len {seq_len} assumed ({model_type} configs carry no length)"
    else:
        seq_len = _required_int(config, _SEQ)[0]  # raises: names the missing key
        seq_note = ""

    tied = _flag(config, "tie_word_embeddings", family.tied_by_default)

    qkv_bias, linear_bias = _biases(config, family.biases)
    fields: dict[str, Any] = {
        "name": name,
        "description": f"{name} ({model_type}): {layers} layers, h {hidden}, {heads} heads",
        "source": f"Hugging Face config (model_type={model_type}); {seq_note}",
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "ffn_hidden_size": ffn,
        "mlp": family.mlp,
        "norm": family.norm,
        "vocab_size": vocab,
        "tied_embeddings": tied,
        "seq_len": seq_len,
        "position_embedding": family.position,
        "max_position_embeddings": seq_len if family.position == "learned" else None,
        "qkv_bias": qkv_bias,
        "linear_bias": linear_bias,
        "dropout": _dropout(config, family.always_dropout),
        "rope_theta": _optional_number(config, ("rope_theta",)) if family.position == "rope" else None,
        "norm_epsilon": _optional_number(config, _NORM_EPS),
        "qk_norm": family.qk_norm,
        "attention_sinks": family.attention_sinks,
    }
    if keys["ffn_hidden_size"].startswith(NO_DENSE_LAYER):
        fields["source"] += f"; {NO_DENSE_LAYER}, so no intermediate_size is needed"
    fields.update(read)
    keys.update(read_keys)
    moe = read.get("moe")
    if moe is not None:
        fields["description"] += f", {moe['num_experts']} experts (top {moe['top_k']})"
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as err:
        first = spec_problems(ModelSpec, err, where="the config")[0]
        field = keys.get(first.field, first.field) or "config"
        raise ProfileError(field, first.message, f"{first.fix}, or write a .toml model profile") from err


NO_DENSE_LAYER = "no dense layer: every layer is routed"
"""Where a model routes every layer: why `intermediate_size` is not required (`_dense_width`)."""


def _every_layer_routed(moe: dict[str, Any] | None) -> bool:
    """A reader's `[moe]` fields route every layer: none dense first, every layer from there on."""
    return moe is not None and moe.get("first_dense_layers", 0) == 0 and moe.get("layer_frequency", 1) == 1


def _dense_width(config: dict[str, Any], moe: dict[str, Any] | None) -> tuple[int, str]:
    """The dense MLP width from `intermediate_size`, and the key it came from. A model that routes every layer
    (Qwen3-MoE; DeepSeek-V3 with `first_k_dense_replace` 0) has no dense MLP, so the key may be absent: the width
    then stands at the expert width, which no layer uses (the parameters, FLOPs and memory pplan counts do not
    depend on it)."""
    found = _find_int(config, ("intermediate_size",))
    if found is not None or not _every_layer_routed(moe):
        return found or _required_int(config, ("intermediate_size",))
    assert moe is not None
    return int(moe["expert_ffn_hidden_size"]), f"{NO_DENSE_LAYER} (the expert width stands in, unused)"


def _find_int(config: dict[str, Any], keys: tuple[str, ...]) -> tuple[int, str] | None:
    """The first of `keys` present (not null) in `config`, checked to be a positive integer, and that key."""
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ProfileError(
                key, f"must be a positive integer, got {_shown(value)}", "fix the value in the config"
            )
        return value, key
    return None


def _required_int(config: dict[str, Any], keys: tuple[str, ...]) -> tuple[int, str]:
    found = _find_int(config, keys)
    if found is None:
        others = f" (or {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise ProfileError(
            keys[0], f"missing from the config{others}", "add it, or check that this is a model's config.json"
        )
    return found


def _optional_number(config: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    """The first of `keys` present (not null), checked to be a finite positive number; None if none is."""
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ProfileError(
                key, f"must be a positive number, got {_shown(value)}", "fix the value in the config"
            )
        return float(value)
    return None


def _optional_int(config: dict[str, Any], key: str) -> int | None:
    found = _find_int(config, (key,))
    return None if found is None else found[0]


def _nullable_int(config: dict[str, Any], key: str) -> int | None:
    """A key that must be present, holding a positive integer or null (None)."""
    if key not in config:
        raise ProfileError(key, "missing from the config", "add it (null where the model has none)")
    return _optional_int(config, key)


def _count(config: dict[str, Any], key: str, default: int | None = None) -> int:
    """A whole number from 0 (a layer count); absent: `default`, or an error naming the key without one."""
    value = config.get(key)
    if value is None:
        if default is None:
            raise ProfileError(
                key, "missing from the config", "add it, or check that this is a model's config.json"
            )
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProfileError(
            key, f"must be a whole number from 0, got {_shown(value)}", "fix the value in the config"
        )
    return value


def _biases(config: dict[str, Any], rule: BiasRule) -> tuple[bool, bool]:
    """(qkv_bias, linear_bias) for a family's bias rule."""
    if rule == "none":
        return False, False
    if rule == "qkv-only":
        return True, False
    if rule == "all":
        # GPT-NeoX may switch off its attention biases; its MLP keeps them.
        return _flag(config, "attention_bias", True), True
    return _flag(config, "attention_bias", False), _flag(config, "mlp_bias", False)


def _flag(config: dict[str, Any], key: str, default: bool) -> bool:
    """A true/false key (absent: `default`); anything else, such as the string "false" or null, is refused."""
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ProfileError(key, f"must be true or false, got {_shown(value)}", "fix the config")
    return value


def _shown(value: object) -> str:
    """A config value for a message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _dropout(config: dict[str, Any], always: bool) -> bool:
    """GPT-2's dropout is on unless every probability is explicitly 0; others only if one is nonzero."""
    if always:
        return any(_positive_number(config.get(key, 0.1)) for key in _GPT2_DROPOUTS)
    return any(_positive_number(config.get(key, 0.0)) for key in _DROPOUTS)


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
