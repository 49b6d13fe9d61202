"""Converts a Hugging Face `config.json` (already parsed into a dict) into a `ModelSpec`; reads no files.

Each supported `model_type` names its fields differently (`num_hidden_layers` / `n_layer`, `hidden_size` /
`n_embd`, ...) and leaves some facts to its config class's defaults (GPT-2 and BLOOM tie their embeddings
unless told otherwise; BLOOM's MLP is always 4h). The architecture facts a config does not carry (MLP and
norm kind, biases, position embedding) are per family, below. Problems are `ProfileError`s naming the config
key: a value out of `ModelSpec`'s stated ranges is named by the key it came from (`num_hidden_layers`, not
`num_layers`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from pplan.errors import ProfileError
from pplan.profiles.specs import MlpKind, ModelSpec, NormKind, PositionKind, spec_problems

BiasRule = Literal["config", "qkv-only", "all"]


@dataclass(frozen=True)
class _Family:
    """What a model family's config leaves implicit."""

    mlp: MlpKind
    norm: NormKind
    position: PositionKind
    biases: BiasRule
    """`config`: from `attention_bias` / `mlp_bias` (default none); `qkv-only`: Qwen2; `all`: GPT-style."""
    tied_by_default: bool
    """The config class's default for `tie_word_embeddings`."""
    ffn_defaults_to_4h: bool = False
    """True when the MLP width is 4h unless `n_inner` says otherwise (GPT-2) or always (BLOOM)."""
    always_dropout: bool = False
    """GPT-2: dropout is on unless every `*_pdrop` is explicitly 0."""
    fallback_seq_len: int | None = None
    """A training length to use when the config has no length key at all (BLOOM)."""


_FAMILIES: dict[str, _Family] = {
    "llama": _Family("swiglu", "rmsnorm", "rope", "config", tied_by_default=False),
    "mistral": _Family("swiglu", "rmsnorm", "rope", "config", tied_by_default=False),
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
    """The `ModelSpec` a Hugging Face config describes; `seq_len` is the config's maximum length, uncapped."""
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

    if model_type == "bloom":
        ffn = 4 * hidden  # BloomMLP is always 4h; `n_inner` in its configs is unused
        keys["ffn_hidden_size"] = f"{hidden_key} (the MLP is 4 × {hidden_key})"
    elif family.ffn_defaults_to_4h:
        inner = _optional_int(config, "n_inner")
        ffn = inner or 4 * hidden
        keys["ffn_hidden_size"] = "n_inner" if inner else f"{hidden_key} (the MLP is 4 × {hidden_key})"
    else:
        ffn, keys["ffn_hidden_size"] = _required_int(config, ("intermediate_size",))

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
    }
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as err:
        first = spec_problems(ModelSpec, err, where="the config")[0]
        field = keys.get(first.field, first.field) or "config"
        raise ProfileError(field, first.message, f"{first.fix}, or write a .toml model profile") from err


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


def _biases(config: dict[str, Any], rule: BiasRule) -> tuple[bool, bool]:
    """(qkv_bias, linear_bias) for a family's bias rule."""
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
