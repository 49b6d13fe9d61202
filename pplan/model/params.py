"""Parameter counts: per transformer layer (itemised), for the embedding and output ends, per tensor-parallel rank.

Symbols: h hidden, a query heads, g key/value heads, d_h head width, f FFN width, V vocabulary, t tensor parallel.
A layer is attention (QKV projection h·(a+2g)·d_h, output projection a·d_h·h) + MLP (GeLU / squared-ReLU: two
matrices h·f and f·h; SwiGLU: three, i.e. a gate+up matrix h·2f and f·h) + two norms (LayerNorm 2h each, RMSNorm h).
Tensor-parallel sharding follows Megatron-LM: column-parallel QKV and fc1 (weights and biases split by t),
row-parallel output projection and fc2 (weights split, biases replicated), norms and learned position embeddings
replicated, the vocabulary split by t in the embedding and output layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pplan.profiles.specs import ModelSpec


@dataclass(frozen=True, slots=True)
class ParamItem:
    """One named group of parameters: `sharded` are split by t, `replicated` are held whole by every TP rank."""

    name: str
    sharded: int
    replicated: int = 0

    @property
    def total(self) -> int:
        return self.sharded + self.replicated

    def per_tp_rank(self, t: int) -> float:
        return self.sharded / t + self.replicated


@lru_cache(maxsize=64)
def layer_params(model: ModelSpec) -> tuple[ParamItem, ...]:
    """Itemised parameters of one transformer layer (whole layer, before tensor parallelism)."""
    h, a, g, dh, f = (
        model.hidden_size,
        model.num_attention_heads,
        model.kv_heads,
        model.head_size,
        model.ffn_hidden_size,
    )
    qkv_out = (a + 2 * g) * dh
    items = [
        ParamItem("attention/qkv", h * qkv_out + (qkv_out if model.qkv_bias else 0)),
        ParamItem("attention/proj", a * dh * h, h if model.linear_bias else 0),
    ]
    fc1_out = 2 * f if model.mlp == "swiglu" else f
    items.append(ParamItem("mlp/fc1", h * fc1_out + (fc1_out if model.linear_bias else 0)))
    items.append(ParamItem("mlp/fc2", f * h, h if model.linear_bias else 0))
    items.append(ParamItem("norms", 0, 2 * norm_params(model)))
    return tuple(items)


def norm_params(model: ModelSpec) -> int:
    """Parameters of one norm: LayerNorm has a weight and a bias, RMSNorm a weight."""
    return 2 * model.hidden_size if model.norm == "layernorm" else model.hidden_size


def position_table_rows(model: ModelSpec, seq_len: int) -> int:
    """Rows of a learned position table a run at sequence `seq_len` needs: the model's own, grown to the sequence
    when the plan runs longer sequences than the table covers (Megatron-LM asserts max_position_embeddings ≥
    seq_length, `megatron/training/arguments.py` `validate_args`); 0 without a learned table."""
    return max(model.position_rows, seq_len) if model.position_embedding == "learned" else 0


@lru_cache(maxsize=64)
def embedding_params(model: ModelSpec, position_rows: int | None = None) -> tuple[ParamItem, ...]:
    """The first stage's extra parameters: the token embedding (split by t) and a learned position table of
    `position_rows` rows (default: the model's; see `position_table_rows` for a plan's)."""
    items = [ParamItem("embedding/tokens", model.vocab_size * model.hidden_size)]
    if model.position_embedding == "learned":
        rows = model.position_rows if position_rows is None else position_rows
        items.append(ParamItem("embedding/positions", 0, rows * model.hidden_size))
    return tuple(items)


@lru_cache(maxsize=64)
def output_params(model: ModelSpec, pipeline_parallel: bool) -> tuple[ParamItem, ...]:
    """The last stage's extra parameters: the final norm and the output layer.

    With tied embeddings and more than one pipeline stage, Megatron-LM keeps a copy of the embedding matrix on the
    last stage for the output layer (its gradient is all-reduced with the first stage's); with one stage the
    matrix is shared and counted once, on the embedding side.
    """
    items = [ParamItem("final_norm", 0, norm_params(model))]
    if not model.tied_embeddings:
        items.append(ParamItem("output_layer", model.vocab_size * model.hidden_size))
    elif pipeline_parallel:
        items.append(ParamItem("output_layer (tied copy)", model.vocab_size * model.hidden_size))
    return tuple(items)


def total_params(model: ModelSpec) -> int:
    """Unique parameters of the whole model (a tied output layer counted once)."""
    per_layer = sum(item.total for item in layer_params(model))
    ends = sum(item.total for item in embedding_params(model))
    ends += sum(item.total for item in output_params(model, pipeline_parallel=False))
    return model.num_layers * per_layer + ends


def params_per_layer(model: ModelSpec) -> int:
    return sum(item.total for item in layer_params(model))
