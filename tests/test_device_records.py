"""The device runs recorded under benchmarks/device/ (real CUDA measurements, dated), checked against pplan's
model as it is now: a change to the activation model that the recorded layers contradict fails here, without a GPU.

2026-12-04, one H200 (torch 2.11, `benchmarks/bench_components.py --cases readme|llama`, the README cases also at
b = 2 and 4): each whole layer's
tensors autograd saved (each storage once, weights excluded) equal pplan's itemised count (16-bit activations, FP32
log-sum-exp) plus exactly what pplan's convention (Korthikanti et al. 2022's) leaves out or what the harness's
layer keeps beyond a production stack's — the norms' FP32 statistics per token (LayerNorm: mean and 1/σ; RMSNorm:
1/rms), the flash-attention kernel's two int64 RNG words (seed and offset), and, for SwiGLU, the SiLU output the
harness's eager `silu(gate) · up` keeps for the product's backward (a fused SwiGLU kernel recomputes it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pplan.bench.components import Case
from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.validation.published import row_model

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "device" / "2026-12-04-h200"
H200 = load_hardware("h200-sxm-141gb")


def _cases() -> dict[str, Case]:
    sets = {s["name"]: s for s in load_published_runs()["sets"]}
    data = sets["megatron-lm-readme-h100-weak-scaling"]
    cases = {}
    for row in data["rows"]:
        model = row_model(data, row, load_model)
        for b in (1, 2, 4):
            label = f"{row['model']} t{row['tp']}" + (f" b{b}" if b > 1 else "")
            cases[label] = Case("", model, int(row["tp"]), b, 4096)
    cases["gpt3-175b t4 (dgxc)"] = Case("", load_model("gpt3-175b"), 4, 1, 2048)
    for name, tp in (("llama3-8b", 1), ("llama3-70b", 8), ("llama3-405b", 8)):
        cases[f"{name} t{tp}"] = Case("", load_model(name), tp, 1, 8192)
    return cases


def _layers() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in (
        "components-readme.json",
        "components-llama.json",
        "components-readme-b2.json",
        "components-readme-b4.json",
    ):
        out += json.loads((RUN / name).read_text(encoding="utf-8"))["layers"]
    return out


def test_the_run_is_recorded() -> None:
    doc = json.loads((RUN / "components-llama.json").read_text(encoding="utf-8"))
    assert doc["device"] == "NVIDIA H200" and doc["date"].startswith("2026-12-04")
    assert len(_layers()) == 19


@pytest.mark.parametrize("layer", _layers(), ids=lambda layer: str(layer["case"]))
def test_saved_activations_are_pplans_items_plus_the_named_extras(layer: dict[str, Any]) -> None:
    case = _cases()[layer["case"]]
    pred = case.layer(H200)
    shard = pred.model
    tokens = case.micro_batch * case.seq_len
    stats_per_norm = 2 if shard.norm == "layernorm" else 1  # (mean, 1/σ) or 1/rms, FP32 per token
    norm_stats = 2 * stats_per_norm * tokens * 4
    rng_words = 2 * 8  # the flash-attention kernel's philox seed and offset
    eager_silu = 2 * tokens * shard.ffn_hidden_size if shard.mlp == "swiglu" else 0
    assert layer["saved_bytes"] == pred.activation_bytes + norm_stats + rng_words + eager_silu
