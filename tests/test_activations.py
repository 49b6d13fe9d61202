"""The itemised activation count against Korthikanti et al. 2022 (exact for a GPT-3 layer) and a hand count."""

from __future__ import annotations

import itertools

import pytest

from pplan.model.activations import itemised_layer, korthikanti_layer, output_end
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_model

GPT3 = load_model("gpt3-175b")
LLAMA = load_model("llama3-70b")


@pytest.mark.parametrize(
    ("t", "sp", "recompute"),
    list(itertools.product([1, 2, 8], [True, False], ["none", "selective", "full"])),
)
def test_itemised_equals_korthikanti_for_a_gpt3_layer(t: int, sp: bool, recompute: str) -> None:
    plan = make_plan(
        GPT3,
        PlanRequest(
            gpus=t, global_batch=4, micro_batch=2, tp=t, recompute=recompute,  # type: ignore[arg-type]
            sequence_parallel=sp, flash_attention=False,
        ),
    )  # fmt: skip
    assert itemised_layer(GPT3, plan).total_bytes == korthikanti_layer(GPT3, plan).total_bytes


def test_korthikanti_table2_by_hand() -> None:
    s, b, h, a, t = 2048, 2, 12288, 96, 8
    plan = make_plan(GPT3, PlanRequest(gpus=t, global_batch=2, micro_batch=b, tp=t, sequence_parallel=False,
                                       flash_attention=False))  # fmt: skip
    assert korthikanti_layer(GPT3, plan).total_bytes == s * b * h * (10 + 24 // t) + 5 * a * s * s * b // t


def test_llama_layer_itemised_by_hand() -> None:
    # s = h = 8192, b = 1, t = 8 with SP, flash attention: per s·b·h/t the layer keeps norm input 2, QKV input 2,
    # Q 2, K and V 2·(8/64) each, projection input 2, MLP norm input 2, fc1 input 2, SwiGLU gate+up
    # 2·2·f/h = 14, activation output 2·f/h = 7  -> 33.5; plus the FP32 log-sum-exp 4·a·s·b/t.
    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, tp=8))
    sbh_t = 8192 * 8192 // 8
    assert itemised_layer(LLAMA, plan).total_bytes == int(33.5 * sbh_t) + 4 * 64 * 8192 // 8


def test_llama_is_not_gpt3() -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, tp=8, flash_attention=False))
    assert itemised_layer(LLAMA, plan).total_bytes != korthikanti_layer(LLAMA, plan).total_bytes


def test_full_recompute_keeps_the_layer_input() -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, tp=8, recompute="full"))
    assert itemised_layer(LLAMA, plan).total_bytes == 2 * 8192 * 8192 // 8


def test_logits_on_the_last_stage() -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, tp=8))
    s, h, v, t = 8192, 8192, 128256, 8
    assert output_end(LLAMA, plan).total_bytes == 4 * s * h // t + 4 * s * v // t


def test_context_parallel_divides_the_tokens() -> None:
    one = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=1, tp=8))
    two = make_plan(LLAMA, PlanRequest(gpus=16, global_batch=1, tp=8, cp=2))
    assert itemised_layer(LLAMA, two).total_bytes * 2 == itemised_layer(LLAMA, one).total_bytes


def test_qk_norm_keeps_the_heads_inputs() -> None:
    # Qwen3-30B-A3B (32 query heads and 4 key/value heads of 128; QK-norm): each head's RMSNorm keeps its input,
    # 2·q·b·a·d_h/t and 2·q·b·g·d_h/t bytes beside the post-norm Q and K the attention core keeps
    qwen = load_model("qwen3-30b-a3b")
    plan = make_plan(qwen, PlanRequest(gpus=4, global_batch=1, tp=4, seq_len=4096, ep=1))
    items = dict(itemised_layer(qwen, plan.shape).items)
    assert items["attention/q_layernorm_input"] == 2 * 4096 * 32 * 128 // 4 == items["attention/q"]
    assert items["attention/k_layernorm_input"] == 2 * 4096 * 4 * 128 // 4 == items["attention/k"]
    assert "attention/q_layernorm_input" not in dict(itemised_layer(LLAMA, plan.shape).items)
