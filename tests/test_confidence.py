"""One confidence story (issue 46, item 4): the bands and envelope shipped in pplan/validation/confidence_bands.json
are what the validated runs give (recomputed in the acceptance tier; on a small sample and from the shipped runs
in the fast tier), and the four contradictions the issue names are gone: a MoE plan carries the MoE band, 8k
dense is inside the envelope, megatron-bridge is calibrated where its runs are and README says what the tool
says, and `size` answers a deadline at the estimate and at the interval's slow end, naming uncalibrated
hardware."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pplan.cost.uncertainty import MIN_CELL_RUNS, plan_confidence
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import (
    load_confidence,
    load_hardware,
    load_model,
    load_published_runs,
    load_recent_runs,
)
from pplan.profiles.confidence import MIN_RUNS
from pplan.sizing import answers
from pplan.sizing.sweep import SizePoint
from pplan.validation.bands import (
    band_table,
    confidence_data,
    fit_confidence,
    published_runs,
    readme_calibrated,
    readme_table,
)
from pplan.validation.published import check_sets
from tests.cli_run import run_pplan

README = Path(__file__).resolve().parents[1] / "README.md"
H100 = load_hardware("h100-sxm-80gb")


def shipped() -> dict[str, Any]:
    text = (resources.files("pplan.validation") / "confidence_bands.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def pct(errors: list[float]) -> tuple[float, float]:
    return float(np.percentile(errors, 10)), float(np.percentile(errors, 90))


@pytest.mark.acceptance
def test_the_shipped_bands_are_what_the_validated_runs_give_now() -> None:
    sets = load_published_runs()["sets"]
    got = fit_confidence(sets, load_recent_runs(), load_model, load_hardware)
    assert json.loads(json.dumps(got, ensure_ascii=False)) == shipped()


def test_bands_of_a_small_sample_by_hand() -> None:
    # one published set (NVIDIA's GPT-3 175B on 128-2,048 H100s, 5 runs) scored and reduced: the band is numpy's
    # percentiles of its errors, in sample and left out
    sets = [s for s in load_published_runs()["sets"] if s["name"] == "nvidia-dgxc-gpt3-175b-bf16"]
    check = check_sets(sets, load_model, load_hardware, False)
    runs = published_runs(sets, check, load_model)
    assert len(runs) == 5 == MIN_RUNS
    table = {(b["routing"], b["axis"], b["value"]): b for b in band_table(runs)}
    inside = [r.error for r in check[0].in_sample.rows]
    left = [r.error for r in check[0].left_out.rows]
    band = table["dense", "hardware", "h100-sxm-80gb"]
    assert (band["in_sample"]["low"], band["in_sample"]["high"]) == pytest.approx(pct(inside), abs=1e-4)
    assert (band["left_out"]["low"], band["left_out"]["high"]) == pytest.approx(pct(left), abs=1e-4)
    assert band["left_out"]["mape"] == pytest.approx(np.mean(np.abs(left)), abs=1e-4)
    data = confidence_data(runs, load_hardware)
    env = data["envelopes"]["h100-sxm-80gb"]
    assert (env["tp_max"], env["pp_max"], env["gpus_max"], env["runs"]) == (4, 8, 2048, 5)
    assert not any(b["routing"] == "MoE" for b in data["bands"])  # no MoE run: no MoE band


def test_every_shipped_band_is_the_percentiles_of_its_shipped_runs() -> None:
    data = shipped()
    for band in data["bands"]:
        members = [
            r for r in data["runs"]
            if r["routing"] == band["routing"] and (band["axis"] == "all" or r[band["axis"]] == band["value"])
        ]  # fmt: skip
        assert len(members) == band["runs"] >= MIN_RUNS
        for key, field in (("in_sample", "error"), ("left_out", "left_out_error")):
            errors = [r[field] for r in members]
            assert (band[key]["low"], band[key]["high"]) == pytest.approx(pct(errors), abs=2e-4), band


def _moe_request(stack: str = "megatron-core") -> PlanRequest:
    return PlanRequest(gpus=64, global_batch=512, tp=1, pp=1, ep=8, seq_len=4096, stack=stack)  # type: ignore[arg-type]


def _runs(**axes: str) -> list[dict[str, Any]]:
    return [r for r in shipped()["runs"] if all(r[k] == v for k, v in axes.items())]


@pytest.mark.parametrize("stack", ["megatron-core", "megatron-bridge"])
def test_a_moe_plan_carries_the_moe_band(stack: str) -> None:
    # contradiction 1: Mixtral 8x7B on 64 H100s was "Calibrated" with the dense band (-5.4 … +4.9 %)
    model = load_model("mixtral-8x7b")
    conf = plan_confidence(model, H100, make_plan(model, _moe_request(stack)))
    cell = _runs(routing="MoE", hardware="h100-sxm-80gb", sequence="≤ 4k", precision="bf16")
    if len([r for r in cell if r["stack"] == stack]) >= MIN_RUNS:
        cell = [r for r in cell if r["stack"] == stack]
    assert len(cell) >= MIN_RUNS and conf.band.runs == len(cell)
    assert (conf.band.low, conf.band.high) == pytest.approx(
        pct([r["left_out_error"] for r in cell]), abs=1e-9
    )
    assert conf.band.group.startswith("MoE runs on h100-sxm-80gb")
    dense = pct([r["left_out_error"] for r in _runs(routing="dense", hardware="h100-sxm-80gb")])
    assert conf.error_low < dense[0] - 0.1  # far wider than any dense band
    # calibrated only with the stack the H100 MoE runs used
    assert conf.calibrated is (stack == "megatron-bridge")
    assert conf.words.startswith("Calibrated" if stack == "megatron-bridge" else "NOT calibrated")


def test_explain_prints_the_moe_band_for_a_moe_plan(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", "mixtral-8x7b", "--gpus", "64", "--global-batch", "512", "--tp", "1", "--pp", "1",
            "--ep", "8", "--seq-len", "4096"]  # fmt: skip
    perf = run_pplan(capsys, "explain", "--json", *args).json()["performance"]
    assert perf["calibration_band"]["group"].startswith("MoE runs")
    assert (
        perf["confidence"].startswith("NOT calibrated") and "MoE runs on h100-sxm-80gb" in perf["confidence"]
    )
    text = run_pplan(capsys, "explain", *args).out
    assert "-5.4%" not in text and "MoE runs on h100-sxm-80gb" in text


def test_dense_8k_on_h100_is_inside_the_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    # contradiction 2: explain called 8,192 tokens an extrapolation though 8k runs validate at ~5 %
    assert len(_runs(hardware="h100-sxm-80gb", sequence="8k")) >= MIN_CELL_RUNS
    doc = run_pplan(capsys, "explain", "--json", "--model", "llama3-70b", "--gpus", "512", "--global-batch", "512",
                    "--tp", "4", "--pp", "4", "--seq-len", "8192").json()  # fmt: skip
    perf = doc["performance"]
    assert perf["extrapolation"] == [] and perf["calibrated"]
    band = _runs(routing="dense", hardware="h100-sxm-80gb", sequence="8k", precision="bf16")
    assert perf["calibration_band"]["runs"] == len(band)
    assert perf["calibration_error_band"] == pytest.approx(
        [
            min(0.0, pct([r["left_out_error"] for r in band])[0]),
            max(0.0, pct([r["left_out_error"] for r in band])[1]),
        ]
    )


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_megatron_bridge_is_calibrated_where_its_runs_are(
    capsys: pytest.CaptureFixture[str], precision: str
) -> None:
    # contradiction 3: --stack megatron-bridge printed "NOT calibrated" though its runs are validated
    runs = _runs(routing="dense", hardware="h100-sxm-80gb", stack="megatron-bridge", precision=precision)
    assert len(runs) >= MIN_CELL_RUNS
    doc = run_pplan(capsys, "explain", "--json", "--stack", "megatron-bridge", "--precision", precision,
                    "--model", "llama3-70b", "--gpus", "512", "--global-batch", "512", "--tp", "4", "--pp", "4",
                    "--seq-len", "8192").json()  # fmt: skip
    perf = doc["performance"]
    assert perf["calibrated"] and perf["confidence"].startswith(f"Calibrated: {len(runs)} dense runs")


def test_a_dense_bf16_plan_on_b200_is_not_calibrated_and_says_why() -> None:
    # B200's BF16 GEMM efficiency is assumed: no dense BF16 B200 run is validated
    assert not _runs(routing="dense", hardware="b200-180gb", precision="bf16")
    model = load_model("llama3-8b")
    plan = make_plan(model, PlanRequest(gpus=64, global_batch=512, seq_len=8192, stack="megatron-bridge"))
    conf = plan_confidence(model, load_hardware("b200-180gb"), plan)
    assert not conf.calibrated and "precision" in [x.axis for x in conf.extrapolations]
    fp8 = make_plan(
        model, PlanRequest(gpus=64, global_batch=512, seq_len=8192, stack="megatron-bridge", precision="fp8")
    )
    assert plan_confidence(model, load_hardware("b200-180gb"), fp8).calibrated


def test_readme_shows_the_shipped_bands_and_calibration() -> None:
    text = README.read_text(encoding="utf-8")
    assert readme_table(shipped()) in text
    assert readme_calibrated(shipped()) in text
    assert "B200 and GB200 are fitted" not in text


def _point(gpus: int, wall_days: float, slow_days: float, calibrated: bool = True) -> SizePoint:
    day = 86_400
    return SizePoint(hardware="b200-180gb", gpus=gpus, global_batch=512, request=_moe_request(),
                     wall_s=wall_days * day, wall_interval_s=(0.9 * wall_days * day, slow_days * day),
                     calibrated=calibrated, confidence="NOT calibrated: because" if not calibrated else "Calibrated")  # fmt: skip


def test_a_deadline_is_answered_at_the_estimate_and_at_the_slow_end() -> None:
    # contradiction 4: "fewest GPUs within 90 days" came from the estimate when the interval ran to 100 days
    points = [_point(1024, 85, 100, calibrated=False), _point(2048, 45, 52, calibrated=False)]
    day = 86_400
    assert answers.fewest_meeting(points, 90 * day)["b200-180gb"] is points[0]
    assert answers.fewest_meeting(points, 90 * day, slow_end=True)["b200-180gb"] is points[1]
    assert answers.fewest_meeting(points, 40 * day, slow_end=True)["b200-180gb"] is None
    assert answers.uncalibrated(points) == {"b200-180gb": "NOT calibrated: because"}
    assert not math.isnan(answers.wall(points[0], slow_end=True))


def test_size_names_uncalibrated_hardware_and_both_deadline_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    got = run_pplan(capsys, "size", "--json", "--model", "llama3-8b", "--train-tokens", "1e12", "--gpus", "64,128",
                    "--hardware", "h100-sxm-80gb,b200-180gb", "--days", "30")  # fmt: skip
    doc = got.json()
    a = doc["answers"]
    fits = [p for p in doc["points"] if p["fits"]]
    for hw in ("h100-sxm-80gb", "b200-180gb"):
        mine = [p for p in fits if p["hardware"] == hw]
        at_estimate = next((p["gpus"] for p in mine if p["wall_days"] <= 30), None)
        at_slow_end = next((p["gpus"] for p in mine if p["wall_interval_days"][1] <= 30), None)
        assert a["fewest_gpus_meeting_deadline"][hw] == at_estimate
        assert a["fewest_gpus_meeting_deadline_slow_end"][hw] == at_slow_end
    assert "b200-180gb" in a["uncalibrated"] and "h100-sxm-80gb" not in a["uncalibrated"]
    assert all(not p["calibrated"] for p in fits if p["hardware"] == "b200-180gb")
    text = run_pplan(capsys, "size", "--model", "llama3-8b", "--train-tokens", "1e12", "--gpus", "64,128",
                     "--hardware", "h100-sxm-80gb,b200-180gb", "--days", "30").out  # fmt: skip
    assert "at the interval's slow end" in text and "b200-180gb: NOT calibrated" in " ".join(text.split())


def test_the_loader_validates_the_shipped_file() -> None:
    data = load_confidence()
    assert {r.routing for r in data.runs} == {"dense", "MoE"}
    assert data.percentiles == (0.1, 0.9) and data.min_runs == MIN_RUNS


def test_the_interval_line_quotes_the_confidence_lines_percentiles() -> None:
    """The interval line and the confidence line quote the same 10th-90th percentiles of the same runs; where the
    interval takes other ends (the estimate kept inside: a band of MoE runs on GB200 that lies wholly below zero,
    as GPT-OSS-120B's on 26.04.01 does), it says which ends and why instead of printing them as the percentiles."""
    import pplan
    from pplan.render.explain import _band_text

    report = pplan.explain(
        model="gpt-oss-120b", hardware="gb200-nvl72", gpus=64, global_batch=1280, micro_batch=4, tp=1, pp=1,
        ep=64, stack="megatron-bridge@26.04.01", seq_len=4096,
    )  # fmt: skip
    perf = report.performance
    assert perf is not None
    low, high = perf.calibration_band.left_out.low, perf.calibration_band.left_out.high
    text = _band_text(perf)
    assert text.startswith(f"{low:+.1%} to {high:+.1%} (10th-90th percentile")
    assert f"{low:+.1%} to {high:+.1%}" in perf.confidence.replace(" %", "%")
    used = perf.calibration_error_band
    assert used == (min(0.0, low), max(0.0, high))
    if high < 0:  # the band as measured today: then the interval's own ends are named
        assert f"the interval takes {used[0]:+.1%} to {used[1]:+.1%}" in text
