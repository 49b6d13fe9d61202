"""The models torchtitan ships a configuration for, and which of them (if any) is a pplan model profile.

Pure data and one lookup (no I/O). torchtitan builds a model only from a configuration it ships: in 0.3.x a
config function of a model module's registry (`--module llama3 --config llama3_70b`,
`torchtitan/models/llama3/config_registry.py`), in 0.2.x a `[model]` name and flavor
(`torchtitan/models/llama3/__init__.py`, `llama3_args`). pplan writes settings for a plan only when its model
has exactly the shape of one of them; the shapes below are those files' of torchtitan 0.3.0 (`_8b`, `_70b`,
`_405b`) and 0.2.2 (`"8B"`, `"70B"`, `"405B"`), which agree: FFN width is torchtitan's
`compute_ffn_hidden_dim` of the dim, `multiple_of` and `ffn_dim_multiplier` there, the vocabulary Llama 3's
tokenizer's. GPT-3 and pplan's other GPT shapes (learned positions, LayerNorm, GELU, biases, tied embeddings)
are no torchtitan model.
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.profiles.specs import ModelSpec

TORCHTITAN_RELEASE = "torchtitan 0.3.0"
"""The release whose names the default `torchtitan` output uses (PyPI, github.com/pytorch/torchtitan)."""
TORCHTITAN_02_RELEASE = "torchtitan 0.2.2"
"""The 0.2.x release the `torchtitan@0.2` TOML was checked against."""


@dataclass(frozen=True, slots=True)
class ShippedModel:
    """One model torchtitan ships a configuration for: where it lives and the shape it builds."""

    module: str
    """0.3.x `--module` (and 0.2.x `[model] name`)."""
    config: str
    """0.3.x `--config`: the config function in `torchtitan/models/<module>/config_registry.py`."""
    flavor: str
    """0.2.x `[model] flavor` (and the 0.3.x model_registry flavor the config function builds)."""
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    vocab_size: int
    rope_theta: int
    """RoPE base (`theta` / `rope_theta`); a profile that states one must agree (it changes no cost)."""
    norm_epsilon: float = 1e-5
    """RMSNorm ε (`eps` / `norm_eps`); a profile that states one must agree."""
    config_notes: tuple[str, ...] = ()
    """What the 0.3.x config function sets beyond the shape that pplan does not plan (said in the output)."""

    def matches(self, model: ModelSpec) -> bool:
        """Whether `model` is this shape: a Llama 3 layer (RoPE, GQA, SwiGLU, RMSNorm, no biases, untied)."""
        return (
            model.num_layers == self.num_layers
            and model.hidden_size == self.hidden_size
            and model.num_attention_heads == self.num_attention_heads
            and model.kv_heads == self.num_kv_heads
            and model.head_size == self.hidden_size // self.num_attention_heads
            and model.ffn_hidden_size == self.ffn_hidden_size
            and model.vocab_size == self.vocab_size
            and model.mlp == "swiglu"
            and model.norm == "rmsnorm"
            and model.position_embedding == "rope"
            and not model.tied_embeddings
            and not model.qkv_bias
            and not model.linear_bias
            and not model.dropout
            and model.rope_theta in (None, self.rope_theta)
            and model.norm_epsilon in (None, self.norm_epsilon)
        )


SHIPPED_MODELS: tuple[ShippedModel, ...] = (
    ShippedModel("llama3", "llama3_8b", "8B", 32, 4096, 32, 8, 14336, 128256, 500000),
    ShippedModel("llama3", "llama3_70b", "70B", 80, 8192, 64, 8, 28672, 128256, 500000),
    ShippedModel(
        "llama3",
        "llama3_405b",
        "405B",
        126,
        16384,
        128,
        8,
        53248,
        128256,
        500000,
        config_notes=(
            "llama3_405b also converts the linear layers to Float8 (Float8LinearConverter, lm_head excepted) and "
            "compiles the model with async tensor parallelism; that is the config function's model_spec, which "
            "no command-line option changes. pplan costed BF16 matmuls with exposed tensor-parallel "
            "communication, so expect a faster step than predicted",
        ),
    ),
)


def shipped_model(model: ModelSpec) -> ShippedModel | None:
    """The torchtitan configuration that builds exactly `model`'s shape, or None."""
    return next((s for s in SHIPPED_MODELS if s.matches(model)), None)


def unshipped_detail(model: ModelSpec) -> str:
    """Why no torchtitan configuration builds `model`: the one-line detail of the refusal."""
    shipped = ", ".join(f"{s.config} ({s.num_layers} layers, h {s.hidden_size})" for s in SHIPPED_MODELS)
    if model.position_embedding != "rope" or model.mlp != "swiglu" or model.norm != "rmsnorm":
        kind = f"{model.position_embedding} positions, {model.mlp} MLP, {model.norm}"
        return f"{model.name} is not a Llama-style model ({kind}); torchtitan's dense llama3 configs are {shipped}"
    return f"{model.name}'s shape is none of torchtitan's dense llama3 configs: {shipped}"
