"""Parameter counts: per transformer layer (itemised), for the embedding and output ends, per rank.

Symbols: h hidden, a query heads, g key/value heads, d_h head width, f FFN width, V vocabulary, t tensor parallel.
A layer is attention (QKV projection h·(a+2g)·d_h, output projection a·d_h·h) + MLP (GeLU / squared-ReLU: two
matrices h·f and f·h; SwiGLU: three, i.e. a gate+up matrix h·2f and f·h) + two norms (LayerNorm 2h each, RMSNorm h).
Tensor-parallel sharding follows Megatron-LM: column-parallel QKV and fc1 (weights and biases split by t),
row-parallel output projection and fc2 (weights split, biases replicated), norms and learned position embeddings
replicated, the vocabulary split by t in the embedding and output layer.

Multi-head latent attention (DeepSeek-V2 §2.1; symbols r_q, r_kv the down-projection ranks, d_n, d_r, d_v the
content, rotary and value head widths): query down h·r_q and its RMSNorm r_q, query up r_q·a·(d_n+d_r) (h·a·(d_n+
d_r) without r_q), key/value down h·(r_kv+d_r) and its RMSNorm r_kv, key/value up r_kv·a·(d_n+d_v), output
a·d_v·h. megatron-core builds the two down-projections `duplicated` (whole on every tensor-parallel rank) and
splits the up-projections by heads (`multi_latent_attention.py`).

Routed layers (`ModelSpec.moe`; E experts, f_e expert width, f_s shared width): the router h·E (+E with a bias),
replicated across tensor-parallel ranks; the E experts, each an MLP of width f_e, held by expert parallelism:
whole experts split over ep ranks and each expert's matrices over etp ranks (`ParamItem.expert`); shared experts
an MLP of width f_s split by t like a dense MLP. A token's active parameters (`active_params`) are everything but
the experts it is not routed to: attention, router, k of E experts, shared experts, norms, both vocabulary ends
(Jiang et al. 2024 count Mixtral 8x7B's 12.9B this way).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pplan.profiles.model_spec import ModelSpec


@dataclass(frozen=True, slots=True)
class ParamItem:
    """One named group of parameters: `sharded` are split by t, `replicated` are held whole by every TP rank."""

    name: str
    sharded: int
    replicated: int = 0
    expert: bool = False
    """Routed experts: `sharded` splits over the expert tensor-parallel ranks (etp) instead of t, and the whole
    item over the expert-parallel ranks (ep)."""

    @property
    def total(self) -> int:
        return self.sharded + self.replicated

    def per_tp_rank(self, t: int) -> float:
        """Parameters one rank holds with t-way tensor parallelism and no expert parallelism."""
        return self.per_rank(t)

    def per_rank(self, t: int, ep: int = 1, etp: int = 1) -> float:
        """Parameters one rank holds: tensor parallel t; routed experts over ep × etp ranks."""
        if self.expert:
            return (self.sharded / etp + self.replicated) / ep
        return self.sharded / t + self.replicated


@lru_cache(maxsize=64)
def layer_params(model: ModelSpec) -> tuple[ParamItem, ...]:
    """Itemised parameters of one transformer layer (whole layer, before tensor parallelism): a routed layer for a
    model with `moe` (its dense layers: `layer_params(model.dense_part)`)."""
    items = list(attention_params(model))
    if model.moe is None:
        items.extend(_mlp_params(model, model.ffn_hidden_size, "mlp"))
    else:
        moe = model.moe
        h, n = model.hidden_size, moe.num_experts
        items.append(ParamItem("moe/router", 0, h * n + (n if moe.router_bias else 0)))
        for item in _mlp_params(model, moe.expert_ffn_hidden_size, "moe/experts"):
            items.append(ParamItem(item.name, n * item.sharded, n * item.replicated, expert=True))
        if moe.shared_expert_ffn_hidden_size:
            items.extend(_mlp_params(model, moe.shared_expert_ffn_hidden_size, "moe/shared_experts"))
    items.append(ParamItem("norms", 0, 2 * norm_params(model)))
    return tuple(items)


def attention_params(model: ModelSpec) -> tuple[ParamItem, ...]:
    """The attention block's parameters: GQA/MHA projections, or MLA's (module docstring); per-head norms and
    sinks where the model has them."""
    h, a = model.hidden_size, model.num_attention_heads
    bias = model.linear_bias
    mla = model.mla
    if mla is None:
        g, dh = model.kv_heads, model.head_size
        qkv_out = (a + 2 * g) * dh
        items = [
            ParamItem("attention/qkv", h * qkv_out + (qkv_out if model.qkv_bias else 0)),
            ParamItem("attention/proj", a * dh * h, h if bias else 0),
        ]
        if model.qk_norm:
            items.append(ParamItem("attention/qk_norm", 0, 2 * dh))
    else:
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank is None:
            items = [ParamItem("attention/q", h * a * qk)]
        else:
            r = mla.q_lora_rank
            items = [ParamItem("attention/q_down", 0, h * r + r), ParamItem("attention/q_up", r * a * qk)]
        r_kv = mla.kv_lora_rank
        items += [
            ParamItem("attention/kv_down", 0, h * (r_kv + mla.qk_rope_head_dim) + r_kv),
            ParamItem("attention/kv_up", r_kv * a * (mla.qk_nope_head_dim + mla.v_head_dim)),
            ParamItem("attention/proj", a * mla.v_head_dim * h, h if bias else 0),
        ]
    if model.attention_sinks:
        items.append(ParamItem("attention/sinks", a))
    return tuple(items)


def _mlp_params(model: ModelSpec, width: int, name: str) -> tuple[ParamItem, ...]:
    """One MLP of inner width `width`: fc1 (gate and up for SwiGLU, column-parallel) and fc2 (row-parallel)."""
    h = model.hidden_size
    fc1_out = 2 * width if model.mlp == "swiglu" else width
    bias = model.linear_bias
    return (
        ParamItem(f"{name}/fc1", h * fc1_out + (fc1_out if bias else 0)),
        ParamItem(f"{name}/fc2", width * h, h if bias else 0),
    )


@lru_cache(maxsize=64)
def mtp_params(model: ModelSpec) -> tuple[ParamItem, ...]:
    """One multi-token-prediction module's own parameters (DeepSeek-V3 §2.2): the norms of the hidden state and
    of the next token's embedding, the 2h → h projection (split by t) and the module's final norm, plus one
    transformer layer of the last layer's kind. The embedding and output layer are the main model's."""
    h = model.hidden_size
    own = (
        ParamItem("mtp/norms", 0, 3 * norm_params(model)),
        ParamItem("mtp/eh_proj", 2 * h * h),
    )
    return own + tuple(
        ParamItem(f"mtp/{i.name}", i.sharded, i.replicated, i.expert) for i in layer_params(model.mtp_layer)
    )


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
    if model.mtp_layers:
        # the modules run after the last layer, on the last stage; with more than one stage it keeps a copy of
        # the embedding for the next tokens' inputs (megatron-core shares it across stages like a tied output layer)
        for item in mtp_params(model):
            items.append(ParamItem(item.name, model.mtp_layers * item.sharded, model.mtp_layers * item.replicated,
                                   item.expert))  # fmt: skip
        if pipeline_parallel:
            items.append(ParamItem("mtp/embedding (copy)", model.vocab_size * model.hidden_size))
    return tuple(items)


def total_params(model: ModelSpec, mtp: bool = False) -> int:
    """Unique parameters of the whole model (a tied output layer counted once); the multi-token-prediction
    modules only with `mtp` (DeepSeek-V3's 671B leaves them out)."""
    dense = model.dense_layers_in(0, model.num_layers)
    layers = (model.num_layers - dense) * params_per_layer(model)
    layers += dense * params_per_layer(model.dense_part)
    ends = sum(item.total for item in embedding_params(model))
    ends += sum(
        item.total
        for item in output_params(model, pipeline_parallel=False)
        if mtp or not item.name.startswith("mtp/")
    )
    return layers + ends


def active_params(model: ModelSpec) -> float:
    """Parameters one token runs through (module docstring): `total_params` less the routed experts it skips,
    k/E of each routed layer's experts kept; no multi-token prediction."""
    moe = model.moe
    if moe is None:
        return float(total_params(model))
    experts = sum(item.total for item in layer_params(model) if item.expert)
    routed = model.num_layers - model.dense_layers_in(0, model.num_layers)
    return total_params(model) - routed * experts * (1 - moe.top_k / moe.num_experts)


def is_expert_item(name: str) -> bool:
    """The itemised name of a routed experts' group (`moe/experts/...`, in a layer or an MTP module)."""
    return "moe/experts/" in name


def params_per_layer(model: ModelSpec) -> int:
    """Parameters of one layer (a routed layer for a routed model)."""
    return sum(item.total for item in layer_params(model))
