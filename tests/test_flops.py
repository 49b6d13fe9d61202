"""FLOPs per pass against Qi et al. 2024 Table 1, Narayanan et al. 2021 Eq. 3 and Korthikanti et al. Appendix A."""

from __future__ import annotations

import pytest

from pplan.model.flops import hardware_flops_per_step, layer_flops, model_flops_per_step
from pplan.profiles.catalog import load_model

GPT3 = load_model("gpt3-175b")


def test_gpt3_layer_passes_match_qi_table1() -> None:
    s, b, h = 2048, 4, GPT3.hidden_size
    layer = layer_flops(GPT3, s, b)
    assert layer.f.total == s * b * h * (24 * h + 4 * s)
    assert layer.i.total == s * b * h * (24 * h + 8 * s)
    assert layer.w.total == 24 * s * b * h * h


def test_narayanan_eq3_with_full_recompute() -> None:
    s, batch, h, L, V = 2048, 1536, GPT3.hidden_size, GPT3.num_layers, GPT3.vocab_size
    eq3 = 96 * batch * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    assert hardware_flops_per_step(GPT3, s, batch, "full") == pytest.approx(eq3, rel=1e-12)


def test_korthikanti_model_flops() -> None:
    s, batch, h, L, V = 2048, 64, GPT3.hidden_size, GPT3.num_layers, GPT3.vocab_size
    expected = 72 * batch * L * s * h**2 * (1 + s / (6 * h) + V / (12 * h * L))
    assert model_flops_per_step(GPT3, s, batch) == pytest.approx(expected, rel=1e-12)


def test_selective_recompute_adds_the_attention_core_forward() -> None:
    # Recomputing QKᵀ and PV once per layer: 2·(2·b·s²·h) per layer. (Korthikanti et al.'s Appendix A writes
    # 1 + s/(3h) for hardware FLOPs, which adds the core's forward *and* backward; pplan counts what re-runs.)
    s, batch, h, L = 2048, 64, GPT3.hidden_size, GPT3.num_layers
    extra = hardware_flops_per_step(GPT3, s, batch, "selective") - model_flops_per_step(GPT3, s, batch)
    assert extra == pytest.approx(L * 4 * batch * s * s * h, rel=1e-12)


def test_nvidia_gpt3_flops_per_sample() -> None:
    # NVIDIA dgxc-benchmarking, nemo_megatron/README_175b.md (NeMo GPT-3 175B on DGX H100, BF16): 2.20E+15 model
    # FLOPs per 2048-token sample.
    assert model_flops_per_step(GPT3, 2048, 1) == pytest.approx(2.20e15, rel=0.005)
