"""`pplan validate --memory`: pplan's memory model against Korthikanti et al. 2022 (arXiv 2205.05198) Figures 1
and 7, checked by hand derivations from the paper's Table 2 and Table 3, not by copies of pplan's output.

Symbols: s sequence length, b micro-batch, h hidden, a heads, L layers, t tensor parallel, p pipeline stages,
v chunks per rank, V vocabulary. GiB = 2^30 bytes.
"""

from __future__ import annotations

from typing import Any

import pytest

from pplan.documents.validate import ValidateDocument
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import ActivationModel, Recompute
from pplan.profiles.catalog import load_hardware, load_model, load_published_memory
from pplan.validation.memory import (
    GIB,
    NOTE_ABOVE,
    FirstStage,
    MemoryRow,
    MemoryValidation,
    ShareRow,
    first_stage,
    request,
    validate_memory,
)
from tests.cli_run import run_pplan

DATA = load_published_memory()
CONFIGS = {c["label"]: c for c in DATA["configurations"]}
HARDWARE = load_hardware(DATA["hardware"])
S = 2048


def _stage(
    label: str,
    recompute: Recompute = "none",
    sp: bool = False,
    model: ActivationModel = "korthikanti",
    **changes: Any,
) -> FirstStage:
    config = {**CONFIGS[label], **changes}
    spec = load_model(config["model"])
    return first_stage(
        spec, make_plan(spec, request(config, DATA["assumed"], recompute, sp, model)), HARDWARE
    )


def _table2_layer_bytes(b: int, h: int, a: int, t: int) -> int:
    """Korthikanti Table 2, tensor parallel without recompute: sbh(10 + 24/t + 5as/(ht)) bytes per layer."""
    return 10 * S * b * h + 24 * S * b * h // t + 5 * a * S * S * b // t


@pytest.fixture(scope="module")
def result() -> MemoryValidation:
    return validate_memory(DATA, load_model, HARDWARE)


def test_22b_no_recompute_is_table_2_times_48_layers() -> None:
    """22B, t 8 p 1 b 4: 48 layers × 2048·4·6144·(13 + 5·64·2048/(6144·8)) bytes, the whole model on one stage."""
    per_layer = 2048 * 4 * 6144 * 13 + 5 * 64 * 2048 * 2048 * 4 // 8
    assert per_layer == _table2_layer_bytes(4, 6144, 64, 8)
    assert _stage("22B").layers_bytes == 48 * per_layer
    assert _stage("22B", model="itemised").layers_bytes == 48 * per_layer  # the same count for a GPT-3 layer
    assert 48 * per_layer / GIB == pytest.approx(59.25, rel=0.02)  # Figure 1, read to ~2 %


def test_interleaved_first_stage_holds_l_times_1_plus_p_minus_1_over_pv_layers() -> None:
    """175B, t 8 p 8 v 3: the first rank's warm-up is 2(p − 1) + (v − 1)p + 1 = 31 chunks of 96/24 = 4 layers,
    124 = 96·(1 + 7/24) layers' worth (Korthikanti §4.2.3), whatever m beyond the warm-up."""
    per_layer = _table2_layer_bytes(1, 12288, 96, 8)
    chunks = 2 * (8 - 1) + (3 - 1) * 8 + 1
    assert chunks * 4 == 96 + 96 * 7 // 24 == 124
    assert _stage("175B").layers_bytes == 124 * per_layer
    assert _stage("175B", global_batch=128).layers_bytes == 124 * per_layer
    assert _stage("530B").layers_bytes == _stage("530B", global_batch=560).layers_bytes


def test_1f1b_first_stage_holds_p_microbatches_of_l_over_p_layers() -> None:
    """1T, t 8 p 64: 64 micro-batches × 2 layers = all 128 layers' worth; with SP and selective recompute a layer
    keeps 34sbh/t bytes (Table 2)."""
    assert _stage("1T").layers_bytes == 128 * _table2_layer_bytes(1, 25600, 160, 8)
    assert _stage("1T", "selective", True).layers_bytes == 128 * 34 * S * 25600 // 8


def test_parameter_bytes_are_18_per_parameter_held_after_tensor_parallelism() -> None:
    """22B at p = 1 holds everything. Split by t (Megatron's column/row-parallel layers): the weight matrices
    12h², the QKV and fc1 biases 3h + 4h per layer and the token embedding Vh; held whole: the two LayerNorms
    (2·2h), the proj and fc2 biases (2h) per layer, the position table sh and the final LayerNorm 2h. FP32
    gradients and no ZeRO: 2 + 4 + 12 = 18 bytes each."""
    h, L, V = 6144, 48, 51200
    per_gpu = (L * (12 * h * h + 7 * h) + V * h) // 8 + L * 6 * h + S * h + 2 * h
    stage = _stage("22B", model="itemised")
    assert stage.params_bytes == 18 * per_gpu
    assert stage.embedding_params_bytes == 18 * (V * h // 8 + S * h)


@pytest.mark.parametrize(
    ("label", "h", "layers"), [("22B", 6144, 48), ("175B", 12288, 12), ("530B", 20480, 3), ("1T", 25600, 2)]
)
def test_figure_1_parameter_bars_are_18_bytes_per_layer_weight(label: str, h: int, layers: int) -> None:
    """The data's own consistency, and the 18 bytes/parameter the plans assume: each bar ÷ (12h² × the first
    stage's layers / t) is 18 bytes to the figure's precision (FP32 gradients, no distributed optimizer)."""
    (bar,) = [r for r in DATA["figure_1"]["rows"] if r["label"] == label]
    assert bar["params_and_optimizer_gib"] * GIB / (12 * h * h * layers / 8) == pytest.approx(18, rel=0.02)
    assert (DATA["assumed"]["grad_dtype"], DATA["assumed"]["zero_stage"]) == ("fp32", 0)


def test_full_recompute_keeps_2sbh_per_layer() -> None:
    """Table 2 without SP: full recompute keeps the layer input, 2sbh; Figure 7's 175B share is 2/(13 + 10)."""
    full, base = _stage("175B", "full"), _stage("175B")
    assert full.layers_bytes == 124 * 2 * S * 12288
    assert 100 * full.layers_bytes / base.layers_bytes == pytest.approx(100 * 2 / 23)
    (bar,) = [r for r in DATA["figure_7"]["rows"] if r["setting"] == "full recompute"]
    assert bar["published_percent"] == pytest.approx(100 * 2 / 23, rel=0.02)


def test_the_first_stage_is_the_peak_stage_everywhere() -> None:
    settings: tuple[tuple[Recompute, bool], ...] = (("none", False), ("selective", True), ("full", False))
    for label in CONFIGS:
        for recompute, sp in settings:
            assert _stage(label, recompute, sp, "itemised").peak_rank == 0


def test_every_bar_is_predicted_with_reasons_above_the_threshold(result: MemoryValidation) -> None:
    assert len(result.figure_1) == 3 * len(CONFIGS) and len(result.figure_7) == 4
    rows: tuple[MemoryRow | ShareRow, ...] = (*result.figure_1, *result.figure_7)
    for row in rows:
        assert (row.reason is not None) == (abs(row.error) > NOTE_ABOVE), row
        assert row.korthikanti_error == pytest.approx(row.error)  # GPT-3 layers: the two models agree
    assert result.figure_1_mape == pytest.approx(sum(abs(r.error) for r in result.figure_1) / 12)
    # Activations without recompute are the layers' Table 2 count plus the model ends: within 3 % above.
    for row in result.figure_1:
        if row.quantity == "act. no recompute":
            assert 0 <= row.error < NOTE_ABOVE
        if row.quantity == "params + optimizer":
            assert row.error > 0  # the embeddings Figure 1 leaves out


@pytest.mark.xdist_group("validate")  # shares the fits (tests/conftest.py)
def test_cli_prints_both_figures_after_the_step_time_sets(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "validate", "--memory")
    assert res.code == 0, res.err
    assert "megatron-sc21-table1" in res.out
    for text in (
        "Figure 1",
        "Figure 7",
        "Mean absolute error",
        "22B t8 p1 b4 m1",
        "1T t8 p64 b1 m512",
        "[1]",
    ):
        assert text in res.out


@pytest.mark.xdist_group("validate")  # shares the fits (tests/conftest.py)
def test_json_document_validates_and_carries_the_memory_block(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(capsys, "validate", "--memory", "--json")
    assert got.code == 0, got.err
    doc = ValidateDocument.model_validate(got.json())
    assert (
        doc.memory is not None
        and len(doc.memory.figure_1) == 12
        and doc.memory.activation_model == "itemised"
    )
    plain = run_pplan(capsys, "validate", "--json").json()
    assert "memory" not in plain and plain["sets"] == got.json()["sets"]


def test_the_layers_alone_agree_with_both_figures_to_0_2_percent(result: MemoryValidation) -> None:
    """What the README states: every gap beyond 0.2 % is something pplan counts besides the layers."""
    for row in result.figure_1:
        if row.quantity != "params + optimizer":
            assert dict(row.parts_gib)["layers"] == pytest.approx(row.published_gib, rel=0.002), row
    base = _stage("175B")
    for bar in DATA["figure_7"]["rows"]:
        stage = _stage("175B", bar["recompute"], bar["sequence_parallel"])
        share = 100 * stage.layers_bytes / base.layers_bytes
        assert share == pytest.approx(bar["published_percent"], rel=0.002), bar
