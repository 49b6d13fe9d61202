"""Hugging Face config.json conversion, on the public config values of one model per supported family."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pplan.errors import ProfileError
from pplan.model.flops import attention_keys
from pplan.model.params import total_params
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

# mistralai/Mixtral-8x7B-v0.1: 8 experts of width intermediate_size, top-2, every layer routed, no window.
MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.02,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}
# Qwen/Qwen3-30B-A3B: 128 experts of width moe_intermediate_size, top-8, every layer routed, q/k norms.
QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
# deepseek-ai/DeepSeek-V3: MLA, 3 dense layers, then 256 routed experts (top-8) and 1 shared, one MTP module.
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "first_k_dense_replace": 3,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "v_head_dim": 128,
    "vocab_size": 129280,
}
# openai/gpt-oss-120b: 128 biased experts, top-4 (under both names), sinks, a 128-token window on even layers.
GPT_OSS_120B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "rms_norm_eps": 1e-05,
    "rope_theta": 150000,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "vocab_size": 201088,
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
        c["model_type"]
        for c in (LLAMA3_8B, MISTRAL_7B, QWEN2_05B, GPT2, NEOX_20B, BLOOM_560M, MINITRON_4B, *MOE_CONFIGS)
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
        assert all(t in text for t in ("mixtral", "qwen3_moe", "deepseek_v3", "gpt_oss"))


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


# The mixture-of-experts families, each against its bundled profile (written from the same config.json).
MOE_CONFIGS = (MIXTRAL_8X7B, QWEN3_30B_A3B, DEEPSEEK_V3, GPT_OSS_120B)
BUNDLED = {
    "mixtral": "mixtral-8x7b",
    "qwen3_moe": "qwen3-30b-a3b",
    "deepseek_v3": "deepseek-v3",
    "gpt_oss": "gpt-oss-120b",
}
TRAINING_LENGTH = {"qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b"}
"""Bundled profiles whose seq_len is a stated training length, not the config's maximum."""


@pytest.mark.parametrize("config", MOE_CONFIGS, ids=lambda config: str(config["model_type"]))
def test_moe_config_matches_the_bundled_profile(config: dict[str, Any]) -> None:
    bundled = load_model(BUNDLED[config["model_type"]])
    spec = model_spec_from_hf_config(config, bundled.name)
    skipped = {"name", "description", "source"} | ({"seq_len"} if bundled.name in TRAINING_LENGTH else set())
    assert spec.model_dump(exclude=skipped) == bundled.model_dump(exclude=skipped)
    assert total_params(spec) == total_params(bundled)
    assert total_params(spec, mtp=True) == total_params(bundled, mtp=True)
    assert spec.seq_len == config["max_position_embeddings"]  # the config's maximum, uncapped


def test_moe_fields_of_each_family() -> None:
    mixtral = model_spec_from_hf_config(MIXTRAL_8X7B, "m")
    assert mixtral.moe is not None and (mixtral.moe.num_experts, mixtral.moe.top_k) == (8, 2)
    assert mixtral.sliding_window is None and "8 experts (top 2)" in mixtral.description
    qwen = model_spec_from_hf_config(QWEN3_30B_A3B, "q")
    assert qwen.qk_norm and qwen.head_size == 128 and qwen.moe is not None
    assert (qwen.moe.expert_ffn_hidden_size, qwen.moe.shared_expert_ffn_hidden_size) == (768, 0)
    deepseek = model_spec_from_hf_config(DEEPSEEK_V3, "d")
    assert deepseek.mla is not None and deepseek.mla.q_lora_rank == 1536
    assert (deepseek.num_kv_heads, deepseek.head_dim, deepseek.mtp_layers) == (None, None, 1)
    assert deepseek.moe is not None and not deepseek.moe.router_bias
    assert [deepseek.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]
    oss = model_spec_from_hf_config(GPT_OSS_120B, "g")
    assert (oss.sliding_window, oss.sliding_window_layers, oss.attention_sinks) == (128, "alternate", True)
    assert (oss.qkv_bias, oss.linear_bias) == (True, True)
    assert oss.moe is not None and oss.moe.router_bias


def test_mixtral_sliding_window_covers_every_layer() -> None:
    spec = model_spec_from_hf_config(MIXTRAL_8X7B | {"sliding_window": 4096}, "m")
    assert (spec.sliding_window, spec.sliding_window_layers) == (4096, "all")


def test_gpt_oss_layer_types() -> None:
    full = model_spec_from_hf_config(GPT_OSS_120B | {"layer_types": ["full_attention"] * 36}, "g")
    assert full.sliding_window is None
    every = model_spec_from_hf_config(GPT_OSS_120B | {"layer_types": ["sliding_attention"] * 36}, "g")
    assert (every.sliding_window, every.sliding_window_layers) == (128, "all")
    # GptOssConfig's default is the alternating pattern, windowed from layer 0.
    default = model_spec_from_hf_config({k: v for k, v in GPT_OSS_120B.items() if k != "layer_types"}, "g")
    assert default.sliding_window_layers == "alternate"
    # The earliest configs name experts per token `experts_per_token` only.
    older = {k: v for k, v in GPT_OSS_120B.items() if k != "num_experts_per_tok"}
    assert model_spec_from_hf_config(older, "g").moe == model_spec_from_hf_config(GPT_OSS_120B, "g").moe


def test_deepseek_without_query_compression_or_mtp() -> None:
    # DeepSeek-V2-Lite's config has "q_lora_rank": null; a config without num_nextn_predict_layers has no MTP.
    config = {k: v for k, v in DEEPSEEK_V3.items() if k != "num_nextn_predict_layers"} | {"q_lora_rank": None}
    spec = model_spec_from_hf_config(config, "d")
    assert spec.mla is not None and spec.mla.q_lora_rank is None
    assert spec.mtp_layers == 0


def _refused(config: dict[str, Any]) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        model_spec_from_hf_config(config, "m")
    assert "\n" not in str(info.value)
    return info.value


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (QWEN3_30B_A3B | {"decoder_sparse_step": 2}, "decoder_sparse_step"),
        (QWEN3_30B_A3B | {"mlp_only_layers": [0, 1]}, "mlp_only_layers"),
        (QWEN3_30B_A3B | {"use_sliding_window": True, "sliding_window": 4096}, "use_sliding_window"),
        (GPT_OSS_120B | {"layer_types": ["full_attention", "sliding_attention"] * 18}, "layer_types"),
        (GPT_OSS_120B | {"layer_types": ["sliding_attention"] * 35}, "layer_types"),
        (GPT_OSS_120B | {"experts_per_token": 2}, "experts_per_token"),
        (GPT_OSS_120B | {"sliding_window": None}, "sliding_window"),
        (GPT_OSS_120B | {"attention_bias": False}, "attention_bias"),
        ({k: v for k, v in GPT_OSS_120B.items() if k != "head_dim"}, "head_dim"),
        ({k: v for k, v in DEEPSEEK_V3.items() if k != "n_routed_experts"}, "n_routed_experts"),
        ({k: v for k, v in DEEPSEEK_V3.items() if k != "q_lora_rank"}, "q_lora_rank"),
        ({k: v for k, v in DEEPSEEK_V3.items() if k != "first_k_dense_replace"}, "first_k_dense_replace"),
        (DEEPSEEK_V3 | {"first_k_dense_replace": 61}, "first_k_dense_replace"),
        (DEEPSEEK_V3 | {"num_nextn_predict_layers": -1}, "num_nextn_predict_layers"),
        (DEEPSEEK_V3 | {"attention_bias": True}, "attention_bias"),
        (DEEPSEEK_V3 | {"num_experts_per_tok": 300}, "num_experts_per_tok"),
        ({k: v for k, v in MIXTRAL_8X7B.items() if k != "num_key_value_heads"}, "num_key_value_heads"),
        ({k: v for k, v in MIXTRAL_8X7B.items() if k != "num_local_experts"}, "num_local_experts"),
    ],
    ids=lambda value: value if isinstance(value, str) else str(value["model_type"]),
)
def test_moe_refusals_name_the_config_key(config: dict[str, Any], field: str) -> None:
    assert _refused(config).field == field


def test_mistral_reads_its_sliding_window() -> None:
    # Mistral 7B v0.1's config windows every layer at 4096 tokens; from v0.2 on it is null (full attention).
    v01 = model_spec_from_hf_config(MISTRAL_7B, "mistral")
    assert v01.sliding_window == 4096 and v01.sliding_window_layers == "all"
    # at s = 8192 a query covers at most the 4096 keys of its window (causal already), against s/2 = 4096 on
    # average for full causal attention and s = 8192 counted non-causally
    assert attention_keys(v01, 8192) == 4096 and attention_keys(v01, 2048) == 2048
    assert model_spec_from_hf_config({**MISTRAL_7B, "sliding_window": None}, "mistral").sliding_window is None
    # absent is not "no window": MistralConfig defaults it to 4096, so pplan refuses to guess
    config = {k: v for k, v in MISTRAL_7B.items() if k != "sliding_window"}
    with pytest.raises(ProfileError) as err:
        model_spec_from_hf_config(config, "mistral")
    assert err.value.field == "sliding_window" and "null" in err.value.fix
