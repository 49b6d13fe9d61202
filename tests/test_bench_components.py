"""The component cases a device run times (pplan/bench/components.py, benchmarks/bench_components.py): their shapes
and pplan's predictions by hand, and a CPU smoke run of the timing script."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from pplan.bench.components import Case
from pplan.errors import ConfigError
from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.validation.published import row_model

H100 = load_hardware("h100-sxm-80gb")
ROOT = Path(__file__).resolve().parents[1]


def _readme_case(name: str) -> Case:
    data = next(
        s for s in load_published_runs()["sets"] if s["name"] == "megatron-lm-readme-h100-weak-scaling"
    )
    row = next(r for r in data["rows"] if r["model"] == name)
    return Case(name, row_model(data, row, load_model), int(row["tp"]), 1, 4096)


def test_gemm_shapes_and_times_by_hand() -> None:
    # README 1.7B (h 2048, 16 heads of 128, 4h GeLU MLP) at t = 1, b = 1, s = 4096: q = 4096 tokens; each GEMM
    # 2·M·K·N FLOPs at 989.4 TFLOP/s × 0.613 plus one 4 µs kernel, its I and W the same seconds
    by_name = {c.name: c for c in _readme_case("gpt-1.7b-readme").components(H100)}
    rate = 989.4e12 * 0.613
    for name, dims in {
        "qkv": (4096, 2048, 6144), "proj": (4096, 2048, 2048), "fc1": (4096, 2048, 8192), "fc2": (4096, 8192, 2048),
    }.items():  # fmt: skip
        m, k, n = dims
        want = 2 * m * k * n / rate + 4e-6
        assert by_name[f"{name} F"].dims == dims
        assert by_name[f"{name} I"].dims == (m, n, k)
        assert by_name[f"{name} W"].dims == (k, m, n)
        for p in "FIW":
            assert by_name[f"{name} {p}"].predicted_s == pytest.approx(want, rel=1e-12)


def test_tensor_parallel_shards_and_the_ends_by_hand() -> None:
    # README 32B at t = 8 (h 7168, 56 heads): QKV's output and the MLP's inner width split over 8, the norms on
    # q/8 rows under sequence parallelism; the loss reads and writes 38 bytes per logit forward and 14 backward
    # (Megatron-Core's vocabulary-parallel cross-entropy) at 3,350 GB/s × 0.65 (the loss's measured fraction), plus
    # 6 and 2 kernels of 4 µs; the
    # logits GEMM at 989.4 TFLOP/s × 0.613 plus one 4 µs kernel
    by_name = {c.name: c for c in _readme_case("gpt-32b-readme").components(H100)}
    assert by_name["qkv F"].dims == (4096, 7168, 3 * 7168 // 8)
    assert by_name["fc2 F"].dims == (4096, 4 * 7168 // 8, 7168)
    assert by_name["attention F"].dims == (1, 7, 7, 4096, 128)
    assert by_name["memory-bound F"].dims == (512, 7168, 4096, 3584)
    logits = 4096 * 131072 / 8
    hbm, loss = 3350e9 * 0.8, 3350e9 * 0.65
    assert by_name["loss F"].predicted_s == pytest.approx(38 * logits / loss + 6 * 4e-6, rel=1e-12)
    assert by_name["loss I"].predicted_s == pytest.approx(14 * logits / loss + 2 * 4e-6, rel=1e-12)
    assert by_name["logits F"].predicted_s == pytest.approx(
        2 * 4096 * 7168 * 131072 / 8 / (989.4e12 * 0.613) + 4e-6
    )
    # the embedding's weight gradient: 12 bytes per element of the 131,072/8 × 7168 table (the dense BF16
    # gradient written and read, the FP32 main gradient read and written) and three tensors of the q rows
    assert by_name["embedding W"].dims == (4096, 7168, 131072 // 8)
    assert by_name["embedding W"].predicted_s == pytest.approx(
        (12 * 131072 / 8 * 7168 + 3 * 4096 * 7168 * 2) / hbm + 3 * 4e-6, rel=1e-12
    )
    assert by_name["launch"].predicted_s == pytest.approx(4e-6)
    assert len(by_name) == 4 * 3 + 2 * 3 + 1 + 2 + 1


def test_whole_layer_is_one_ranks_shard_by_hand() -> None:
    # Llama 3 70B at t = 8: 64/8 query heads, 8/8 KV heads, FFN 28,672/8, h and the head width kept; nothing
    # rotated. Its activations at b = 1, s = 8192 (q = 8192 tokens, 2-byte elements): four q·h tensors (the two
    # norms' inputs, the QKV and fc1 inputs), Q and the attention output (q·8·128 each), K and V (q·128 each), the
    # FP32 log-sum-exp (q·8·4 bytes), fc1's output (q·2·3,584) and the SwiGLU output (q·3,584)
    pred = Case("70b", load_model("llama3-70b"), 8, 1, 8192).layer(H100)
    m = pred.model
    assert (m.num_attention_heads, m.kv_heads, m.ffn_hidden_size, m.head_size) == (8, 1, 3584, 128)
    assert m.position_embedding == "none" and not m.qk_norm and not m.dropout
    q, h = 8192, 8192
    want = 2 * (4 * q * h + 2 * q * 8 * 128 + 2 * q * 128 + q * 2 * 3584 + q * 3584) + 4 * q * 8
    assert pred.activation_bytes == want


def test_routed_models_are_refused() -> None:
    with pytest.raises(ConfigError, match="dense"):
        Case("mixtral", load_model("mixtral-8x7b"), 1, 1, 4096).components(H100)


@pytest.mark.acceptance
def test_the_timing_script_runs_on_a_cpu(tmp_path: Path) -> None:
    # the device check, at the sizes a CPU runs in seconds: every component timed, each with pplan's figure
    pytest.importorskip("torch")
    script = runpy.run_path(str(ROOT / "benchmarks" / "bench_components.py"))
    out = tmp_path / "components.json"
    script["main"](["--device", "cpu", "--cases", "tiny", "--reps", "1", "--warmup", "0", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and len(doc["components"]) == 2 * 22
    assert all(c["measured_s"] > 0 and c["predicted_s"] > 0 for c in doc["components"])
