"""Hugging Face config.json conversion, on the public config values of one model per supported family."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pplan.errors import ProfileError
from pplan.profiles.catalog import load_model
from pplan.profiles.hf_config import SUPPORTED_MODEL_TYPES, model_spec_from_hf_config

# meta-llama/Meta-Llama-3-8B config.json (abridged: the keys that shape the model, plus a few others).
LLAMA3_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
# mistralai/Mistral-7B-v0.1
MISTRAL_7B: dict[str, Any] = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
}
# Qwen/Qwen2-0.5B: tied embeddings, biases on Q, K and V only.
QWEN2_05B: dict[str, Any] = {
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
    "attention_dropout": 0.0,
}
# openai-community/gpt2: no tie key (ties by default), n_inner null (4h), dropout 0.1.
GPT2: dict[str, Any] = {
    "model_type": "gpt2",
    "activation_function": "gelu_new",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_inner": None,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "embd_pdrop": 0.1,
    "attn_pdrop": 0.1,
    "vocab_size": 50257,
}
# EleutherAI/gpt-neox-20b
NEOX_20B: dict[str, Any] = {
    "model_type": "gpt_neox",
    "hidden_size": 6144,
    "intermediate_size": 24576,
    "num_attention_heads": 64,
    "num_hidden_layers": 44,
    "vocab_size": 50432,
    "max_position_embeddings": 2048,
    "rotary_pct": 0.25,
    "use_parallel_residual": True,
    "tie_word_embeddings": False,
}
# bigscience/bloom-560m: no length key, no tie key (ties by default), ALiBi.
BLOOM_560M: dict[str, Any] = {
    "model_type": "bloom",
    "hidden_size": 1024,
    "n_head": 16,
    "n_inner": None,
    "n_layer": 24,
    "vocab_size": 250880,
    "attention_dropout": 0.0,
    "hidden_dropout": 0.0,
}
# nvidia/Minitron-4B-Base: squared-ReLU MLP, explicit head_dim.
MINITRON_4B: dict[str, Any] = {
    "model_type": "nemotron",
    "hidden_act": "relu2",
    "hidden_size": 3072,
    "head_dim": 128,
    "intermediate_size": 9216,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 256000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}


def test_llama3_8b_matches_the_bundled_profile() -> None:
    spec = model_spec_from_hf_config(LLAMA3_8B, "llama3-8b")
    bundled = load_model("llama3-8b")
    shape = (
        *("num_layers", "hidden_size", "num_attention_heads", "kv_heads", "ffn_hidden_size", "mlp", "norm"),
        *("vocab_size", "tied_embeddings", "seq_len", "position_embedding", "qkv_bias", "linear_bias"),
    )
    assert {k: getattr(spec, k) for k in shape} == {k: getattr(bundled, k) for k in shape}
    assert (spec.num_layers, spec.hidden_size, spec.kv_heads, spec.ffn_hidden_size) == (32, 4096, 8, 14336)
    assert spec.dropout is False
    assert "Hugging Face" in spec.source and "max_position_embeddings" in spec.source


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            MISTRAL_7B,
            dict(num_layers=32, hidden_size=4096, kv_heads=8, ffn_hidden_size=14336, vocab_size=32000,
                 seq_len=32768, mlp="swiglu", norm="rmsnorm", tied_embeddings=False, position_embedding="rope",
                 qkv_bias=False, linear_bias=False, dropout=False),
        ),
        (
            QWEN2_05B,
            dict(num_layers=24, hidden_size=896, num_attention_heads=14, kv_heads=2, head_size=64,
                 ffn_hidden_size=4864, vocab_size=151936, seq_len=32768, mlp="swiglu", norm="rmsnorm",
                 tied_embeddings=True, qkv_bias=True, linear_bias=False, dropout=False),
        ),
        (
            GPT2,
            dict(num_layers=12, hidden_size=768, num_attention_heads=12, kv_heads=12, ffn_hidden_size=3072,
                 vocab_size=50257, seq_len=1024, position_rows=1024, mlp="gelu", norm="layernorm",
                 tied_embeddings=True, position_embedding="learned", qkv_bias=True, linear_bias=True,
                 dropout=True),
        ),
        (
            NEOX_20B,
            dict(num_layers=44, hidden_size=6144, num_attention_heads=64, ffn_hidden_size=24576,
                 vocab_size=50432, seq_len=2048, mlp="gelu", norm="layernorm", tied_embeddings=False,
                 position_embedding="rope", qkv_bias=True, linear_bias=True, dropout=False),
        ),
        (
            BLOOM_560M,
            dict(num_layers=24, hidden_size=1024, num_attention_heads=16, ffn_hidden_size=4096,
                 vocab_size=250880, seq_len=2048, mlp="gelu", norm="layernorm", tied_embeddings=True,
                 position_embedding="alibi", qkv_bias=True, linear_bias=True, dropout=False),
        ),
        (
            MINITRON_4B,
            dict(num_layers=32, hidden_size=3072, num_attention_heads=24, kv_heads=8, head_size=128,
                 ffn_hidden_size=9216, vocab_size=256000, seq_len=4096, mlp="squared-relu", norm="layernorm",
                 tied_embeddings=False, position_embedding="rope", qkv_bias=False, linear_bias=False),
        ),
    ],
    ids=lambda value: value["model_type"] if isinstance(value, dict) and "model_type" in value else "",
)  # fmt: skip
def test_each_family(config: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = model_spec_from_hf_config(config, "m")
    assert {k: getattr(spec, k) for k in expected} == expected


def test_every_supported_type_is_covered() -> None:
    covered = {
        c["model_type"] for c in (LLAMA3_8B, MISTRAL_7B, QWEN2_05B, GPT2, NEOX_20B, BLOOM_560M, MINITRON_4B)
    }
    assert covered == set(SUPPORTED_MODEL_TYPES)


def test_bloom_176b_uses_the_n_embed_alias_and_records_the_assumed_length() -> None:
    # bigscience/bloom: 70 layers, width 14336 (as `n_embed`), 112 heads.
    config = {"model_type": "bloom", "n_embed": 14336, "n_layer": 70, "num_attention_heads": 112}
    spec = model_spec_from_hf_config(config | {"vocab_size": 250880}, "bloom")
    shape = (spec.num_layers, spec.hidden_size, spec.num_attention_heads, spec.ffn_hidden_size)
    assert shape == (70, 14336, 112, 4 * 14336)
    assert "2048 assumed" in spec.source


def test_long_context_is_kept_uncapped_and_said_so() -> None:
    # meta-llama/Llama-3.1-8B raises max_position_embeddings to 131072.
    spec = model_spec_from_hf_config(LLAMA3_8B | {"max_position_embeddings": 131072}, "llama3.1-8b")
    assert spec.seq_len == 131072
    assert "131072" in spec.source and "not capped" in spec.source


def test_gpt2_dropout_off_only_when_every_probability_is_zero() -> None:
    assert model_spec_from_hf_config(GPT2 | {"resid_pdrop": 0.0}, "g").dropout is True
    off = GPT2 | {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    assert model_spec_from_hf_config(off, "g").dropout is False
    assert model_spec_from_hf_config(LLAMA3_8B | {"attention_dropout": 0.1}, "l").dropout is True


def test_loading_a_config_json_path(tmp_path: Path) -> None:
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA3_8B, indent=2))
    spec = load_model(str(folder / "config.json"))
    assert spec.name == "Meta-Llama-3-8B"
    assert (spec.num_layers, spec.hidden_size, spec.vocab_size) == (32, 4096, 128256)
    assert str(folder / "config.json") in spec.source
    other = tmp_path / "gpt2.json"
    other.write_text(json.dumps(GPT2))
    assert load_model(str(other)).name == "gpt2"


def _error(config: dict[str, Any]) -> str:
    with pytest.raises(ProfileError) as info:
        model_spec_from_hf_config(config, "m")
    text = str(info.value)
    assert "\n" not in text
    return text


def test_missing_or_unknown_model_type_lists_the_supported_ones() -> None:
    no_type = {k: v for k, v in LLAMA3_8B.items() if k != "model_type"}
    for config in (no_type, LLAMA3_8B | {"model_type": "t5"}):
        text = _error(config)
        assert text.startswith("model_type: ")
        assert all(t in text for t in ("llama", "mistral", "qwen2", "gpt2", "gpt_neox", "bloom", "nemotron"))


def test_missing_key_is_named() -> None:
    no_layers = {k: v for k, v in LLAMA3_8B.items() if k != "num_hidden_layers"}
    assert _error(no_layers).startswith("num_hidden_layers: missing")
    no_ffn = {k: v for k, v in LLAMA3_8B.items() if k != "intermediate_size"}
    assert _error(no_ffn).startswith("intermediate_size: missing")
    no_length = {k: v for k, v in LLAMA3_8B.items() if k != "max_position_embeddings"}
    assert _error(no_length).startswith("max_position_embeddings: missing")


@pytest.mark.parametrize("value", [0, -32, "32", 3.5, True])
def test_bad_values_are_named(value: object) -> None:
    assert _error(LLAMA3_8B | {"num_hidden_layers": value}).startswith(
        "num_hidden_layers: must be a positive integer"
    )


def test_inconsistent_heads_and_bad_tie_flag() -> None:
    assert "must divide" in _error(LLAMA3_8B | {"num_key_value_heads": 5})
    assert _error(LLAMA3_8B | {"tie_word_embeddings": "no"}).startswith("tie_word_embeddings: ")


def test_errors_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3_8B | {"model_type": "t5"}))
    with pytest.raises(ProfileError) as info:
        load_model(str(path))
    assert str(info.value).startswith(f"{path}: model_type: unsupported model_type 't5'")


def test_rope_base_and_norm_epsilon_are_read_as_launcher_facts() -> None:
    """meta-llama/Meta-Llama-3-8B's config.json states rope_theta 500000 and rms_norm_eps 1e-5 (the bundled
    profile says the same); a learned-position model has no RoPE base; an absent key stays unstated (None)."""
    spec = model_spec_from_hf_config(LLAMA3_8B, "llama3-8b-hf")
    assert (spec.rope_theta, spec.norm_epsilon) == (500000.0, 1e-5)
    bundled = load_model("llama3-8b")
    assert (bundled.rope_theta, bundled.norm_epsilon) == (spec.rope_theta, spec.norm_epsilon)
    gpt2 = model_spec_from_hf_config({**GPT2, "layer_norm_epsilon": 1e-5, "rope_theta": 10000.0}, "gpt2")
    assert (gpt2.rope_theta, gpt2.norm_epsilon) == (None, 1e-5)
    assert model_spec_from_hf_config(MISTRAL_7B, "mistral").rope_theta is None


@pytest.mark.parametrize("bad", [0, -1.0, "1e-5", True, float("inf")])
def test_a_bad_norm_epsilon_is_refused_naming_the_key(bad: object) -> None:
    with pytest.raises(ProfileError) as caught:
        model_spec_from_hf_config({**LLAMA3_8B, "rms_norm_eps": bad}, "x")
    assert caught.value.field == "rms_norm_eps"
