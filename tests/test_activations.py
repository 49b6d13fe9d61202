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


@pytest.mark.parametrize("name", ["deepseek-v3", "llama3-70b"])
def test_activation_bytes_read_no_field_activation_shape_drops(name: str) -> None:
    """pplan.cost.pipeline.activation_shape sets ep, the all-to-all's overlap, a split backward and tensor-parallel
    overlap to their defaults so that cuts share activation bytes: every activation figure is the same with them
    as without, for every recompute mode, a selective set, offload and FP8 (which does change them: a control)."""
    from dataclasses import replace

    from pplan.cost.pipeline import activation_shape
    from pplan.model.activations import chunk_layer_bytes, embedding_end, layer_activations, offloaded_layer
    from pplan.plan.shape import Shape

    model = load_model(name)
    fp8_changes = False
    for recompute, precision, offload, etp in itertools.product(
        ["none", "selective", "full"], ["bf16", "fp8"], [(), ("attn_norm", "mlp_norm")], [1, 2]
    ):
        base = Shape(2, 2, 4096, 2, True, True, recompute, "itemised", etp=etp, precision=precision)  # type: ignore[arg-type]
        if recompute != "full":
            base = replace(base, offload_modules=offload)  # type: ignore[arg-type]
        for ep, overlap, split, tp_overlap in itertools.product(
            [1, 8], [False, True], [False, True], [False, True]
        ):
            shape = replace(
                base, ep=ep, expert_comm_overlap=overlap, splits_backward=split, tp_comm_overlap=tp_overlap
            )
            plain = activation_shape(shape)
            assert (plain.ep, plain.expert_comm_overlap, plain.splits_backward, plain.tp_comm_overlap) == (
                1, False, False, False,
            )  # fmt: skip
            for mode in (None, "none", "full"):
                assert layer_activations(model, shape, mode) == layer_activations(model, plain, mode)
            assert chunk_layer_bytes(model, shape, 5, 2) == chunk_layer_bytes(model, plain, 5, 2)
            assert embedding_end(model, shape) == embedding_end(model, plain)
            assert output_end(model, shape) == output_end(model, plain)
            assert offloaded_layer(model, shape) == offloaded_layer(model, plain)
        fp8_changes |= layer_activations(model, base) != layer_activations(
            model, replace(base, precision="bf16")
        )
    assert fp8_changes
