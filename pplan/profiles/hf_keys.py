"""The Hugging Face config keys each supported `model_type` reads, as data and as docs/hf-config-keys.md's table.

Built from `pplan.profiles.hf_config`'s own tables (the key names it looks up, each family's rules and its
reader's `reads`), so the page cannot drift from the code: tests/test_hf_keys.py compares the page with
`keys_markdown()` and checks, on one public config per type, that every key marked required is refused when
absent and that a config holding only the required keys is read.
"""

from __future__ import annotations

from pplan.profiles import hf_config as hf
from pplan.profiles.hf_config import ConfigKey

REQUIRED = ("required", "present")
"""Needs a config must meet whatever else it says: the key itself (`present`: a value or null)."""


def _reads(family: hf._Family, name: str) -> bool:
    return any(name in key.names for key in family.reads)


def config_keys(model_type: str) -> tuple[ConfigKey, ...]:
    """Every key `model_spec_from_hf_config` reads for `model_type`, in reading order."""
    family = hf._FAMILIES[model_type]
    mla = _reads(family, "kv_lora_rank")
    keys = [
        ConfigKey(hf._LAYERS, "required", "transformer layers L"),
        ConfigKey(hf._HIDDEN, "required", "model width h"),
        ConfigKey(hf._HEADS, "required", "query heads a"),
        ConfigKey(("vocab_size",), "required", "vocabulary V"),
    ]
    if not mla:
        kv_need = "required" if "num_key_value_heads" in family.required else "optional (a: no grouping)"
        head_need = "required" if "head_dim" in family.required else "optional (h / a)"
        keys += [
            ConfigKey(("num_key_value_heads",), kv_need, "key/value heads (grouped-query attention)"),
            ConfigKey(("head_dim",), head_need, "per-head width"),
        ]
    if model_type == "bloom":
        pass  # the MLP is always 4h
    elif family.ffn_defaults_to_4h:
        keys.append(ConfigKey(("n_inner",), "optional (4h)", "dense MLP width"))
    elif not _reads(family, "intermediate_size"):
        if model_type == "qwen3_moe":
            need = f"optional ({hf.NO_DENSE_LAYER})"
        elif _reads(family, "first_k_dense_replace"):
            need = "required unless every layer is routed (first_k_dense_replace 0, moe_layer_freq 1)"
        else:
            need = "required"
        keys.append(ConfigKey(("intermediate_size",), need, "dense MLP width"))
    seq_need = "required" if family.fallback_seq_len is None else f"optional ({family.fallback_seq_len})"
    keys.append(ConfigKey(hf._SEQ, seq_need, "sequence length (the config's maximum, not capped)"))
    tied = "true" if family.tied_by_default else "false"
    keys.append(ConfigKey(("tie_word_embeddings",), f"optional ({tied})", "tied input and output embeddings"))
    if family.biases == "config":
        keys += [
            ConfigKey(("attention_bias",), "optional (false)", "biases on the q/k/v/o projections"),
            ConfigKey(("mlp_bias",), "optional (false)", "biases on the MLP"),
        ]
    elif family.biases == "all" and not _reads(family, "attention_bias"):
        keys.append(ConfigKey(("attention_bias",), "optional (true)", "biases on the q/k/v projections"))
    if family.position == "rope":
        keys.append(ConfigKey(("rope_theta",), "optional (unstated)", "RoPE base (launcher output)"))
    keys.append(ConfigKey(hf._NORM_EPS, "optional (unstated)", "norm epsilon (launcher output)"))
    if family.always_dropout:
        keys.append(ConfigKey(hf._GPT2_DROPOUTS, "optional (0.1 each)", "dropout on unless every one is 0"))
    else:
        keys.append(ConfigKey(hf._DROPOUTS, "optional (0)", "dropout on if one is above 0"))
    return (*keys, *family.reads)


def keys_markdown() -> str:
    """The table of docs/hf-config-keys.md: one section per model type, one row per key."""
    lines: list[str] = []
    for model_type in hf.SUPPORTED_MODEL_TYPES:
        family = hf._FAMILIES[model_type]
        lines += [
            f"### `{model_type}`",
            "",
            f"MLP {family.mlp}, norm {family.norm}, positions {family.position} (fixed for the type).",
            "",
            "| key | need | read as |",
            "|---|---|---|",
        ]
        for key in config_keys(model_type):
            names = " / ".join(f"`{name}`" for name in key.names)
            lines.append(f"| {names} | {key.need} | {key.what} |")
        lines.append("")
    return "\n".join(lines)
