"""Parameter counts of the bundled mixture-of-experts profiles against the models' published totals.

Each published figure is checked within its own rounding: "46.7B" is 46.65B to 46.75B, "141B" 140.5B to 141.5B.
Where the published figure and pplan's count disagree beyond that rounding, the test is a strict xfail naming the
arithmetic (an open finding: neither the figure nor the count is adjusted to meet the other).
"""

from __future__ import annotations

import math

import pytest

from pplan.model.params import (
    active_params,
    attention_params,
    embedding_params,
    layer_params,
    params_per_layer,
    total_params,
)
from pplan.profiles.catalog import load_model
from pplan.profiles.model_spec import ModelSpec

B = 1e9


def _within(count: float, published: float, half_unit: float) -> bool:
    """`count` rounds to `published` at the figure's precision (half a unit of its last digit, in billions)."""
    return abs(count / B - published) <= half_unit


def _input_embedding(model: ModelSpec) -> int:
    return sum(item.total for item in embedding_params(model))


# --- Mixtral -------------------------------------------------------------------------------------------------


def test_mixtral_8x7b() -> None:
    # Mistral AI, "Mixtral of experts" (2023-12-11): "46.7B total parameters but only uses 12.9B parameters per
    # token"; Jiang et al. 2024, Mixtral of Experts (arXiv 2401.04088), round them to 47B and 13B.
    model = load_model("mixtral-8x7b")
    assert _within(total_params(model), 46.7, 0.05)
    assert _within(active_params(model), 12.9, 0.05)
    assert _within(total_params(model), 47, 0.5) and _within(active_params(model), 13, 0.5)


def test_mixtral_8x22b() -> None:
    # Mistral AI, "Cheaper, Better, Faster, Stronger" (2024-04-17): "39B active parameters out of 141B".
    model = load_model("mixtral-8x22b")
    assert _within(total_params(model), 141, 0.5)
    assert _within(active_params(model), 39, 0.5)


def test_grok_1() -> None:
    # xAI, grok-1 README (2024-03-17): "314B parameters", "25% of the weights active on a given token"; its
    # output layer shares the input embedding, counted once.
    model = load_model("grok-1")
    assert _within(total_params(model), 314, 2)
    assert 0.25 <= active_params(model) / total_params(model) <= 0.28


# --- DeepSeek-V3 ---------------------------------------------------------------------------------------------

DEEPSEEK = load_model("deepseek-v3")


def test_deepseek_v3_total() -> None:
    # DeepSeek-AI, DeepSeek-V3 Technical Report (arXiv 2412.19437), abstract and §4.2: 671B total parameters
    # (the main model, without the multi-token-prediction module).
    assert _within(total_params(DEEPSEEK), 671, 0.5)


@pytest.mark.xfail(
    strict=True,
    reason="open finding: pplan's active count is 37.55B (both vocabulary ends included: 35.70B of layers + "
    "2 × 0.93B), which rounds to 38B; the report's 37B is met only without the input embedding (36.63B)",
)
def test_deepseek_v3_active() -> None:
    # arXiv 2412.19437, abstract: "671B total parameters with 37B activated for each token".
    assert _within(active_params(DEEPSEEK), 37, 0.5)


def test_deepseek_v3_hugging_face_checkpoint_total() -> None:
    """The Hugging Face checkpoint deepseek-ai/DeepSeek-V3 lists 684,531,386,000 parameters ("685B" on its page;
    DeepSeek's README_WEIGHTS.md: 671B main model + 14B MTP module). It stores the MTP module with its own copies
    of the embedding and output matrices, and also counts tensors that are not trained parameters: one FP8 scale
    per 128 × 128 block of each FP8 matrix (`weight_scale_inv`; config.json weight_block_size [128, 128]) and
    each routed layer's `e_score_correction_bias` buffer (256 values). Reconciled exactly, from the published
    dimensions."""
    h, vocab = 7168, 129280
    routed_layers, dense_layers, experts, mtp_layers = 58, 3, 256, 1

    def blocks(rows: int, cols: int) -> int:
        return math.ceil(rows / 128) * math.ceil(cols / 128)

    # FP8 matrices (out × in) of one layer: MLA's five projections, and the MLP's gate, up and down.
    attention = blocks(1536, h) + blocks(128 * 192, 1536) + blocks(576, h) + blocks(128 * 256, 512)
    attention += blocks(h, 128 * 128)
    expert = 2 * blocks(2048, h) + blocks(h, 2048)  # each routed and the shared expert
    dense_mlp = 2 * blocks(18432, h) + blocks(h, 18432)
    scales = (routed_layers + mtp_layers) * (attention + (experts + 1) * expert)
    scales += dense_layers * (attention + dense_mlp)
    buffers = (routed_layers + mtp_layers) * experts
    assert (scales, buffers) == (41_540_496, 15_104)

    mtp_copies = 2 * vocab * h  # the MTP module's own embedding and output matrices in the checkpoint
    weights = total_params(DEEPSEEK, mtp=True) + mtp_copies
    assert weights + scales + buffers == 684_531_386_000


@pytest.mark.xfail(
    strict=True,
    reason="open finding: the checkpoint's weights are 684.49B (671.03B main + 13.46B MTP with its own "
    "embedding and output copies), which round to 684B and 13B; 685B is reached only with the 0.04B of FP8 "
    "block scales, and 14B is 685B − 671B of rounded figures",
)
def test_deepseek_v3_with_mtp_rounds_to_the_published_figures() -> None:
    # DeepSeek's README_WEIGHTS.md: "685B, which includes 671B of the Main Model weights and 14B of the
    # Multi-Token Prediction (MTP) Module weights".
    mtp = total_params(DEEPSEEK, mtp=True) - total_params(DEEPSEEK) + 2 * DEEPSEEK.vocab_size * 7168
    assert _within(total_params(DEEPSEEK) + mtp, 685, 0.5)
    assert _within(mtp, 14, 0.5)


def test_deepseek_v3_mla_attention_by_hand() -> None:
    """One layer's multi-head latent attention from the report's §4.2 dimensions (h 7168, 128 heads, per-head
    content width d_h 128, rotary width d_h^R 64, KV rank d_c 512, query rank d_c' 1536) and §2.1.1's matrices."""
    h, heads, d_h, d_rope, d_c, d_q = 7168, 128, 128, 64, 512, 1536
    q_down = h * d_q + d_q  # W^DQ and the RMSNorm of the compressed query
    q_up = d_q * heads * (d_h + d_rope)  # W^UQ and W^QR
    kv_down = h * (d_c + d_rope) + d_c  # W^DKV, W^KR (one shared rotary key head) and the latent's RMSNorm
    kv_up = d_c * heads * (d_h + d_h)  # W^UK and W^UV
    out = heads * d_h * h  # W^O
    assert (q_down, q_up, kv_down, kv_up, out) == (11_011_584, 37_748_736, 4_129_280, 16_777_216, 117_440_512)
    items = attention_params(DEEPSEEK)
    assert sum(item.total for item in items) == q_down + q_up + kv_down + kv_up + out == 187_107_328
    # Tensor parallel t = 8: the down-projections whole on every rank, the up- and output projections split.
    assert sum(item.per_rank(8) for item in items) == q_down + kv_down + (q_up + kv_up + out) / 8


def test_deepseek_v3_layers_and_total_by_hand() -> None:
    h, vocab, attention = 7168, 129280, 187_107_328
    expert = 3 * h * 2048  # SwiGLU: gate, up and down of width 2048
    routed = attention + h * 256 + 256 * expert + expert + 2 * h  # router, 256 routed + 1 shared, two norms
    dense = attention + 3 * h * 18432 + 2 * h
    assert params_per_layer(DEEPSEEK) == routed == 11_507_286_016
    assert params_per_layer(DEEPSEEK.dense_part) == dense
    assert total_params(DEEPSEEK) == 58 * routed + 3 * dense + 2 * vocab * h + h == 671_026_404_352


def test_deepseek_v3_expert_sharding() -> None:
    """256 routed experts over ep = 64 ranks: each rank holds 4 whole experts (etp = 1), whatever t is."""
    expert = 3 * 7168 * 2048
    experts = [item for item in layer_params(DEEPSEEK) if item.expert]
    assert sum(item.total for item in experts) == 256 * expert
    for t in (1, 8):
        assert sum(item.per_rank(t, ep=64, etp=1) for item in experts) == 4 * expert
    assert sum(item.per_rank(8, ep=64, etp=2) for item in experts) == 2 * expert


# --- Qwen3 ---------------------------------------------------------------------------------------------------
# Qwen3 Technical Report (arXiv 2505.09388) Table 2 gives the MoE shapes; the model cards (Qwen/Qwen3-30B-A3B,
# Qwen/Qwen3-235B-A22B on Hugging Face) state the counts: 30.5B total, 3.3B activated, 29.9B non-embedding;
# 235B total, 22B activated, 234B non-embedding.


def _non_embedding(model: ModelSpec) -> float:
    return total_params(model) - 2 * model.vocab_size * model.hidden_size  # untied: both vocabulary ends


def test_qwen3_30b_a3b_total() -> None:
    model = load_model("qwen3-30b-a3b")
    assert _within(total_params(model), 30.5, 0.05)
    assert _within(_non_embedding(model), 29.9, 0.05)


@pytest.mark.xfail(
    strict=True,
    reason="open finding: pplan's active count is 3.353B (48 × 56.9M of layers + 2 × 0.311B of vocabulary "
    "ends), which rounds to 3.4B, 0.003B past 3.3B's rounding; without the input embedding it is 3.04B",
)
def test_qwen3_30b_a3b_active() -> None:
    assert _within(active_params(load_model("qwen3-30b-a3b")), 3.3, 0.05)


def test_qwen3_235b_a22b() -> None:
    model = load_model("qwen3-235b-a22b")
    assert _within(total_params(model), 235, 0.5)
    assert _within(active_params(model), 22, 0.5)
    assert _within(_non_embedding(model), 234, 0.5)


# --- gpt-oss-120b --------------------------------------------------------------------------------------------


def test_gpt_oss_120b() -> None:
    # OpenAI, gpt-oss-120b & gpt-oss-20b Model Card (arXiv 2508.10925) Table 1: MLP 114.71B, attention 0.96B,
    # embedding + unembedding 1.16B, 116.83B total, 5.13B active; its active count leaves out the input
    # embedding table (a lookup, not a matrix product).
    model = load_model("gpt-oss-120b")
    assert _within(total_params(model), 116.83, 0.005)
    assert _within(active_params(model) - _input_embedding(model), 5.13, 0.005)
    layer = layer_params(model)
    mlp = sum(item.total for item in layer if item.name.startswith("moe/"))
    attention = sum(item.total for item in layer if item.name.startswith("attention/"))
    assert _within(model.num_layers * mlp, 114.71, 0.005)
    assert _within(model.num_layers * attention, 0.96, 0.005)
    assert _within(2 * model.vocab_size * model.hidden_size, 1.16, 0.005)
