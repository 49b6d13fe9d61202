"""`pplan validate --recent`: the bundled 2024–2026 published runs (pplan/validation/recent_runs.json) predicted at
their published cuts. Every row is predicted or refused in one line; each prediction is the plan its source
states; the figures per axis are the means of their rows; the bundled data are the collection's figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pplan.documents.validate import ValidateDocument
from pplan.profiles.catalog import load_hardware, load_model, load_recent_runs
from pplan.validation.recent import (
    AXES,
    RECENT_FITS,
    RecentRow,
    fit_recent,
    group,
    leave_one_set_out,
    nemo_flops_per_token,
    predict_all,
    predict_row,
    rank_published,
)
from tests.cli_run import run_pplan

COLLECTION = Path(__file__).resolve().parents[2] / "shared" / "reference" / "public-runs-2026.json"


@pytest.fixture(scope="module")
def rows() -> tuple[RecentRow, ...]:
    collection = load_recent_runs()
    return leave_one_set_out(
        collection, predict_all(collection, load_model, load_hardware), load_model, load_hardware
    )


@pytest.mark.xdist_group("recent_rows")  # one worker computes the `rows` fixture for all of them
def test_every_row_is_predicted_or_refused_in_one_line(rows: tuple[RecentRow, ...]) -> None:
    data = load_recent_runs()
    assert len(rows) == sum(len(s["rows"]) for s in data["sets"]) == 258
    for row in rows:
        if row.refused is None:
            assert row.published_s is not None and row.published_s > 0, row.id
            assert row.predicted_s is not None and row.predicted_s > 0, row.id
        else:
            assert row.refused and "\n" not in row.refused and row.predicted_s is None, row.id
    predicted = [r for r in rows if r.refused is None]
    assert len(predicted) > 0.75 * len(rows)  # the check is not vacuous: most rows are expressible
    assert any(r.id == "dsv3-report-H800-2048" and r.refused is None for r in rows)  # DualPipe at p = 16
    # DeepSeek-V3's 61 layers over 8 × 4 chunks: 1, 2, …, 2, 0 (the last chunk the output layer and loss alone)
    dsv3 = next(r for r in rows if r.id == "mb-25.09-DGX-H100-DeepSeekV3-FP8-1024")
    assert dsv3.refused is None and "layers 1…0 at the ends" in dsv3.assumed
    # Llama 3.1 405B's 126 layers over 16 × 8 chunks: the embedding and the loss alone at the ends
    assert any(
        r.refused is None and "t4 p16 v8" in r.label and "layers 0…0 at the ends" in r.assumed for r in rows
    )


def _row(row_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    for data in load_recent_runs()["sets"]:
        for row in data["rows"]:
            if row["id"] == row_id:
                return data, row
    raise KeyError(row_id)


@pytest.mark.xdist_group("recent_rows")  # one worker computes the `rows` fixture for all of them
def test_a_prediction_is_the_plan_its_source_states(rows: tuple[RecentRow, ...]) -> None:
    """Each predicted row's plan label carries the published t, p, cp, ep and d = GPUs / (t·p·cp)."""
    data = load_recent_runs()
    by_id = {r["id"]: r for s in data["sets"] for r in s["rows"]}
    for row in rows:
        if row.refused is not None:
            continue
        src = by_id[row.id]
        d = src["gpus"] // (src["tp"] * src["pp"] * src["cp"])
        head = f"t{src['tp']} p{src['pp']} "
        assert row.label.startswith(head), (row.id, row.label)
        assert f" cp{src['cp']} ep{src['ep']} d{d} " in row.label, (row.id, row.label)
        if src["micro_batch"] is not None:
            assert f" b{src['micro_batch']} " in row.label, (row.id, row.label)


def test_nemo_flops_per_token_by_hand() -> None:
    """NeMo's README count for Llama 3 8B at s = 8192 (L 32, h 4096, 32 heads, 8 key/value heads, F 14336,
    V 128256): 12·32·4096²·(1 + 8/32 + 8192/4096) + 18·32·14336·4096 + 6·128256·4096."""
    by_hand = 12 * 32 * 4096**2 * (1 + 0.25 + 2) + 18 * 32 * 14336 * 4096 + 6 * 128256 * 4096
    assert nemo_flops_per_token(load_model("llama3-8b"), 8192) == pytest.approx(by_hand, rel=1e-12)


def test_a_tflops_only_row_is_timed_with_nemos_flop_count() -> None:
    data, row = _row("nemolong-B200-Llama-3-8B-FP8-8K")
    got = predict_row(data, row, load_model, load_hardware)
    model = load_model("llama3-8b")
    flops = nemo_flops_per_token(model, 8192) * row["global_batch"] * 8192
    assert got.published_s == pytest.approx(flops / (row["gpus"] * 1671e12))


@pytest.mark.xdist_group("recent_rows")  # one worker computes the `rows` fixture for all of them
def test_missing_profiles_are_named(rows: tuple[RecentRow, ...]) -> None:
    reasons = {r.refused for r in rows if r.refused is not None}
    assert "no hardware profile for the H100 SXM 96GB HBM2e" in reasons


@pytest.mark.xdist_group("recent_rows")  # one worker computes the `rows` fixture for all of them
@pytest.mark.parametrize("axis", list(AXES))
def test_each_axis_figure_is_the_mean_of_its_counted_rows(rows: tuple[RecentRow, ...], axis: str) -> None:
    groups = group(rows, axis)
    assert sum(g.rows for g in groups) == len(rows)
    for g in groups:
        members = [r for r in rows if AXES[axis](r) == g.name]
        errors = [abs(r.error) for r in members if r.error is not None and not r.uncertain]
        assert g.counted == len(errors) and g.refused == sum(r.refused is not None for r in members)
        if errors:
            assert g.mape == pytest.approx(sum(errors) / len(errors))
            assert g.worst == pytest.approx(max(errors))
            assert g.within_15 == sum(e <= 0.15 for e in errors)
        left_out = [
            abs(r.left_out_error) for r in members if r.left_out_error is not None and not r.uncertain
        ]
        assert len(left_out) == len(errors)
        if left_out:
            assert g.left_out_mape == pytest.approx(sum(left_out) / len(left_out))
            assert g.left_out_worst == pytest.approx(max(left_out))
            assert g.left_out_within_15 == sum(e <= 0.15 for e in left_out)


def _touches_a_fit(data: dict[str, Any]) -> bool:
    fitted = {hw for hw, _ in RECENT_FITS}
    return any(r["hardware"] in fitted and not r["moe"] and not r["uncertain"] for r in data["rows"])


@pytest.mark.xdist_group("recent_rows")  # one worker computes the `rows` fixture for all of them
def test_leaving_a_set_out_changes_only_what_its_fits_touch(rows: tuple[RecentRow, ...]) -> None:
    """A set with no counted dense run on a fitted GPU keeps its in-sample figures exactly; a set that has such
    runs moves the fit it takes part in, so its GB200 or B200 rows change while its other GPUs' rows do not."""
    fitted = {hw for hw, _ in RECENT_FITS}
    moved = 0
    for data in load_recent_runs()["sets"]:
        members = [r for r in rows if r.set_name == data["name"]]
        for r in members:
            if not _touches_a_fit(data) or r.hardware not in fitted:
                assert r.left_out_s == r.predicted_s, r.id
            elif r.predicted_s is not None:
                assert r.left_out_s is not None
                moved += r.left_out_s != r.predicted_s
    assert moved > 20  # not vacuous: the Megatron-Bridge and NeMo sets move the Blackwell fits


@pytest.mark.xdist_group("validate")  # shares the fits (tests/conftest.py)
def test_the_cli_emits_the_block_and_it_renders(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from pplan.render.validate import recent_tables

    res = run_pplan(capsys, "validate", "--recent", "--json")
    assert res.code == 0, res.err
    doc = ValidateDocument.model_validate(res.json())
    assert doc.recent is not None and doc.recent.rows == 258 and len(doc.recent.runs) == 258
    assert {g.axis for g in doc.recent.groups} == set(AXES)
    assert doc.recent.fitted == [f"{hw} {name}" for hw, name in RECENT_FITS]
    counted = [r for r in doc.recent.runs if r.error is not None and not r.uncertain]
    assert doc.recent.left_out_mape == pytest.approx(
        sum(abs(r.left_out_error or 0.0) for r in counted) / len(counted)
    )
    console = Console(width=80, record=True)
    console.print(recent_tables(doc.recent))
    text = console.export_text()
    assert "Runs pplan cannot express yet" in text and "The largest misses" in text and "LOSO" in text
    assert "megatron-bridge-" in text  # the group names fold rather than vanish at 80 columns


@pytest.mark.skipif(not COLLECTION.is_file(), reason="the collection lies outside the project")
def test_the_bundled_rows_carry_the_collections_figures() -> None:
    """Against the collection itself: each row's cut, batch and published time (step time as published, else
    derived from tokens/s, else the TFLOP/s)."""
    source = {
        r["id"]: r for s in json.loads(COLLECTION.read_text(encoding="utf-8"))["sets"] for r in s["rows"]
    }
    bundled = [r for s in load_recent_runs()["sets"] for r in s["rows"]]
    assert {r["id"] for r in bundled} == set(source)
    for row in bundled:
        src = source[row["id"]]
        assert (row["gpus"], row["tp"], row["pp"], row["global_batch"], row["seq_len"]) == (
            src["gpus"], src["tp"], src["pp"], src["gbs"], src["seq_len"],
        )  # fmt: skip
        assert row["cp"] == (src["cp"] or 1) and row["ep"] == (src["ep"] or 1) and row["vp"] == src["vp"]
        step = src["step_s"] if src["step_s"] is not None else src["step_s_derived"]
        if step is not None:
            assert row["published_step_s"] == step
        else:
            assert row["published_tflops_per_gpu"] == src["tflops_per_gpu"]
        assert row["uncertain"] == src["uncertain"]


@pytest.mark.acceptance  # three golden-section fits over the Blackwell runs: seconds
def test_blackwell_profiles_carry_the_fits_the_public_runs_give() -> None:
    """GB200's BF16 then FP8 GEMM efficiency (BF16 held at its fit) and B200's FP8 one, refitted from the bundled
    runs, are the figures the profiles state (to the 0.001 the fit is searched to)."""
    collection = load_recent_runs()
    gb200 = load_hardware("gb200-nvl72")
    matmul = fit_recent(collection, load_model, load_hardware, "gb200-nvl72", "matmul")
    assert matmul is not None and matmul[0] == pytest.approx(gb200.efficiency.matmul, abs=0.0015)
    assert fit_recent(collection, load_model, load_hardware, "b200-180gb", "matmul") is None  # no BF16 run
    fp8 = fit_recent(collection, load_model, load_hardware, "gb200-nvl72", "fp8_matmul")
    assert fp8 is not None and fp8[0] == pytest.approx(gb200.efficiency.fp8_matmul_fraction, abs=0.0015)
    b200 = load_hardware("b200-180gb")
    fp8_b200 = fit_recent(collection, load_model, load_hardware, "b200-180gb", "fp8_matmul")
    assert fp8_b200 is not None and fp8_b200[0] == pytest.approx(
        b200.efficiency.fp8_matmul_fraction, abs=0.0015
    )


@pytest.mark.acceptance  # a brute-force grid of predictions: seconds
@pytest.mark.parametrize(("hardware", "field"), [("b200-180gb", "fp8_matmul"), ("gb200-nvl72", "fp8_matmul")])
def test_a_left_out_fit_is_the_grids_best(hardware: str, field: str) -> None:
    """Fitted without the Megatron-Bridge set, the figure is within the search's tolerance of the best of a grid
    (step 0.002) of the mean over the remaining sets of each set's mean absolute error, each row re-predicted
    from scratch; and it differs from the in-sample figure (the set took part in the fit)."""
    collection = load_recent_runs()
    left = "megatron-bridge-performance-summary"
    got = fit_recent(collection, load_model, load_hardware, hardware, field, leave_out=left)
    full = fit_recent(collection, load_model, load_hardware, hardware, field)
    assert got is not None and full is not None and abs(got[0] - full[0]) > 0.002
    precisions = ("fp8", "mxfp8")
    pairs = [
        (data, row)
        for data in collection["sets"]
        if data["name"] != left
        for row in data["rows"]
        if row["hardware"] == hardware and row["precision"] in precisions and not row["moe"]
        and not row["uncertain"]
    ]  # fmt: skip
    base = load_hardware(hardware)

    def cost(x: float) -> float:
        tuned = base.with_efficiency(**{field: x})
        by_set: dict[str, list[float]] = {}
        for data, row in pairs:
            r = predict_row(data, row, load_model, lambda n: tuned if n == hardware else load_hardware(n))
            assert r.error is not None
            by_set.setdefault(data["name"], []).append(abs(r.error))
        return sum(sum(v) / len(v) for v in by_set.values()) / len(by_set)

    grid = [got[0] + 0.002 * k for k in range(-15, 16)]
    best = min(grid, key=cost)
    assert cost(got[0]) <= cost(best) + 1e-3, (got[0], best)


def test_a_published_cut_is_ranked_against_recommends_best() -> None:
    """DGX Cloud 25.02.01's Llama 3.1 8B BF16 run on 8 H100s: the published cut's throughput is what `explain`
    gives for its plan, the best is `recommend`'s top under the same stack, launcher and precision, and the rank
    agrees with the gap's sign (first exactly when nothing the search found is faster)."""
    from pplan.explain import explain

    data, row = _row("dgxc-25.02.01-H100-Llama-3.1-8B-BF16-8")
    got = predict_row(data, row, load_model, load_hardware)
    assert got.request is not None
    model, hw = load_model("llama3-8b"), load_hardware("h100-sxm-80gb")
    ranked = rank_published(model, hw, got.request, "megatron")
    assert ranked is not None
    report = explain(model, hw, got.request, with_sensitivity=False, split_p2p=False)
    assert report.performance is not None
    assert ranked.published_tokens_per_s == pytest.approx(report.performance.tokens_per_s, rel=1e-9)
    assert (ranked.rank == 1) == (ranked.gap <= 0)
    assert ranked.best_tokens_per_s > 0 and ranked.best.startswith("t")


def test_bridge_runs_carry_their_release_recipe_under_setting_names() -> None:
    """scripts/import_bridge_recipes.py matched each Megatron-Bridge run to its release's workload: its cut is the
    run's (at most the micro- or global batch differs, a variant's), and every knob is a pplan setting's name or one
    of the recipe knobs pplan does not price yet; only the priced ones reach the request (`RECIPE_APPLIED`)."""
    import json
    from pathlib import Path

    from pplan.plan.settings import SETTING
    from pplan.validation.recent import RECIPE_APPLIED, applied_recipe

    data = json.loads(
        (Path(__file__).parents[1] / "pplan/validation/recent_runs.json").read_text(encoding="utf-8")
    )
    bridge = next(s for s in data["sets"] if s["name"] == "megatron-bridge-performance-summary")
    with_recipe = [r for r in bridge["rows"] if "recipe" in r]
    assert len(with_recipe) >= 100
    unpriced = {
        "cuda_graph_scope", "cross_entropy_fusion", "manual_gc", "offload_layers", "moe_dispatcher", "moe_ep_overlap",
        "moe_permute_fusion", "moe_router_fusion", "moe_fused_grouped_mlp", "moe_shared_expert_overlap",
        "moe_force_balance", "moe_capacity_factor", "moe_rank_capacity_factor", "moe_paged_stash", "moe_deepep_sms",
        "moe_hybridep_sms",
    }  # fmt: skip
    provenance = {"source", "cut_misses", "megatron_core", "transformer_engine"}
    for row in with_recipe:
        recipe = row["recipe"]
        assert recipe["cut_misses"] <= 2, row["id"]
        assert set(recipe) - provenance <= set(SETTING) | unpriced, row["id"]
        assert set(applied_recipe(row)) <= RECIPE_APPLIED <= set(SETTING)
    assert {r["recipe"].get("moe_dispatcher") for r in with_recipe if r["moe"]} >= {
        "alltoall",
        "hybridep",
        "deepep",
    }
