"""Error bars and extrapolation (pplan.cost.uncertainty): the interval is the calibration band, widened by the stated
fraction per named axis off the envelope; the issue's Llama 3 405B plan is marked with its reasons; recommend's
`--max-extrapolation` keeps exactly the plans within the limit; the profiles' `[calibration]` figures are what the
public runs give."""

from __future__ import annotations

import pytest

from pplan.cost.steptime import step_time
from pplan.cost.uncertainty import (
    UNCALIBRATED_BAND,
    WIDENING_PER_REASON,
    extrapolations,
    plan_confidence,
    plan_interval,
    step_interval,
)
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_confidence, load_hardware, load_model, load_published_runs
from pplan.recommend import recommendations
from pplan.search import SearchRequest, brute_force
from pplan.search.rank import distinct
from pplan.search.space import Rejection
from pplan.validation.published import calibration_figures, check_sets
from tests.cli_run import run_pplan

H100 = load_hardware("h100-sxm-80gb")
LLAMA405 = load_model("llama3-405b")
GPT3 = load_model("gpt3-175b")


def _issue_plan() -> PlanRequest:
    # issue 14: "for Llama 3 405B on 8,192 H100s the best plan is t=2 p=32 cp=8" (recommend's top, today ZB-V)
    return PlanRequest(gpus=8192, global_batch=2048, tp=2, pp=32, cp=8, seq_len=8192, schedule="zbv",
                       zero_stage=2, grad_dtype="bf16", first_stage_layers=1, last_stage_layers=1,
                       shard_group=4)  # fmt: skip


def test_the_issue_405b_plan_is_marked_with_its_reasons() -> None:
    plan = make_plan(LLAMA405, _issue_plan())
    axes = [x.axis for x in extrapolations(LLAMA405, H100, plan)]
    # the validated H100 runs (pplan validate and --recent): t ≤ 8, p ≤ 16, cp ≤ 32 (across nodes: NeMo's long
    # sequences), ZeRO ≤ 1, ≤ 6,144 GPUs, 1F1B / interleaved 1F1B; 8k is validated
    env = load_confidence().envelopes["h100-sxm-80gb"]
    assert (env.pp_max, env.cp_max, env.cp_across_nodes, env.zero_max, env.gpus_max) == (
        16,
        32,
        True,
        1,
        6144,
    )
    assert axes == ["p", "ZeRO", "GPUs", "schedule"]


def test_interval_by_hand() -> None:
    # [step / (1 + e_hi) − k·w·step, step / (1 + e_lo) + k·w·step] with k reasons, w the widening per reason
    plan = make_plan(LLAMA405, _issue_plan())
    step = step_time(LLAMA405, H100, plan).step_s
    got = plan_interval(LLAMA405, H100, plan, step)
    conf = got.confidence
    k = len(got.extrapolations)
    assert (conf.error_low, conf.error_high) == (min(0.0, conf.band.low), max(0.0, conf.band.high))
    assert got.low_s == pytest.approx(step / (1 + conf.error_high) - k * WIDENING_PER_REASON * step)
    assert got.high_s == pytest.approx(step / (1 + conf.error_low) + k * WIDENING_PER_REASON * step)
    assert got.low_s < step < got.high_s


def test_a_calibrated_plan_has_no_reasons_and_the_bare_band() -> None:
    # the NVIDIA GPT-3 175B run itself: inside the envelope
    plan = make_plan(GPT3, PlanRequest(gpus=512, global_batch=1024, tp=4, pp=8, vp=12, schedule="interleaved-1f1b",
                                       zero_stage=1, seq_len=2048))  # fmt: skip
    conf = plan_confidence(GPT3, H100, plan)
    assert conf.extrapolations == () and conf.calibrated
    got = step_interval(10.0, conf)
    assert (got.low_s, got.high_s) == pytest.approx((10 / (1 + conf.error_high), 10 / (1 + conf.error_low)))


def test_an_uncalibrated_gpu_says_so() -> None:
    # a100-sxm-40gb borrows the 80 GB part's efficiencies: no run was validated on it
    a40 = load_hardware("a100-sxm-40gb")
    plan = make_plan(GPT3, PlanRequest(gpus=512, global_batch=1024, tp=4, pp=8, seq_len=2048))
    conf = plan_confidence(GPT3, a40, plan)
    assert [x.axis for x in conf.extrapolations] == ["GPU"] and not conf.calibrated
    assert conf.words.startswith("NOT calibrated: a100-sxm-40gb")
    assert conf.error_low <= -UNCALIBRATED_BAND and conf.error_high >= UNCALIBRATED_BAND
    got = step_interval(10.0, conf)
    assert got.low_s == pytest.approx(10 / (1 + conf.error_high) - WIDENING_PER_REASON * 10)


def test_a_profile_whose_figures_differ_from_the_validated_ones_is_not_calibrated() -> None:
    edited = H100.with_efficiency(matmul=0.5)
    plan = make_plan(GPT3, PlanRequest(gpus=512, global_batch=1024, tp=4, pp=8, seq_len=2048, zero_stage=1))
    assert plan_confidence(GPT3, H100, plan).calibrated
    conf = plan_confidence(GPT3, edited, plan)
    assert not conf.calibrated and [x.axis for x in conf.extrapolations] == ["GPU"]
    assert "not those its validated runs were predicted with" in conf.words


def test_an_uncalibrated_stack_is_an_extrapolation() -> None:
    plan = make_plan(GPT3, PlanRequest(gpus=512, global_batch=1024, tp=4, pp=8, seq_len=2048, zero_stage=1,
                                       stack="torchtitan"))  # fmt: skip
    assert [x.axis for x in extrapolations(GPT3, H100, plan)] == ["stack"]


def test_explain_json_carries_the_interval_and_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    r = _issue_plan()
    doc = run_pplan(capsys, "explain", "--json", "--model", "llama3-405b", "--gpus", "8192", "--global-batch", "2048",
                    "--tp", "2", "--pp", "32", "--cp", "8", "--seq-len", "8192", "--schedule", "zbv",
                    "--zero-stage", "2", "--grad-dtype", "bf16", "--first-stage-layers", "1",
                    "--last-stage-layers", "1", "--shard-group", str(r.shard_group)).json()  # fmt: skip
    perf = doc["performance"]
    low, high = perf["step_interval_s"]
    assert low < perf["step_s"] < high
    assert perf["extrapolated"] is True
    assert [x["axis"] for x in perf["extrapolation"]] == ["p", "ZeRO", "GPUs", "schedule"]
    tokens = 2048 * 8192
    assert perf["tokens_per_s_interval"] == pytest.approx([tokens / high, tokens / low])


@pytest.mark.parametrize(
    ("gpus", "batch"),
    [(8, 32), pytest.param(64, 128, marks=pytest.mark.acceptance)],  # the 64-GPU brute force takes ~20 s
)
def test_max_extrapolation_keeps_exactly_the_plans_within_the_limit(gpus: int, batch: int) -> None:
    # the search's answer under the filter is the brute force's over the same filtered space, and every shown
    # plan is within the limit
    model = load_model("llama3-8b")
    req = SearchRequest(gpus=gpus, global_batch=batch, seq_len=4096, max_extrapolation=0, top_n=5)
    got = recommendations(model, H100, req)
    assert got.candidates and got.rejected[Rejection.EXTRAPOLATED] > 0
    for c in got.candidates:
        assert c.report.performance is not None and not c.report.performance.extrapolated
    want, _ = distinct(brute_force(model, H100, req), req.top_n)
    assert [c.request for c in got.candidates] == [s.candidate.request(req, 4096) for s in want]


@pytest.mark.acceptance
def test_profiles_carry_the_calibration_the_public_runs_give() -> None:
    sets = load_published_runs()["sets"]
    checks = check_sets(sets, load_model, load_hardware, refit=False)
    for name, figures in calibration_figures(sets, checks, load_model).items():
        cal = load_hardware(name).calibration
        assert cal is not None
        stored = cal.model_dump()
        assert (stored.pop("schedules"), stored.pop("stacks"), stored.pop("precisions")) == (
            tuple(figures.pop("schedules")),
            tuple(figures.pop("stacks")),
            tuple(figures.pop("precisions")),
        ), name
        assert stored.pop("routed") is figures.pop("routed"), name
        assert stored.pop("tp_comm_overlap") is figures.pop("tp_comm_overlap"), name
        assert stored == pytest.approx(figures, abs=0.0015), name


def test_stack_follows_the_launcher_and_shows_in_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "explain", "--json").json()
    assert doc["plan"]["stack"] == "megatron-core"
    doc = run_pplan(capsys, "explain", "--json", "--stack", "torchtitan").json()
    assert doc["plan"]["stack"] == "torchtitan"
    assert [x["axis"] for x in doc["performance"]["extrapolation"]][-1] == "stack"
    bad = run_pplan(capsys, "explain", "--stack", "jax")
    assert bad.code == 2 and "--stack" in bad.err


def test_tp_overlap_is_an_extrapolation_only_where_no_calibration_run_overlapped() -> None:
    # the H100 runs ran with tensor-parallel overlap (the Megatron-LM README states --tp-comm-overlap; NVIDIA's
    # recipes); the A100 sets (2021-22 Megatron-LM) did not
    req = PlanRequest(gpus=64, global_batch=64, tp=8, pp=2, seq_len=2048, tp_comm_overlap=True)
    a100 = load_hardware("a100-sxm-80gb")
    envelopes = load_confidence().envelopes
    assert envelopes["h100-sxm-80gb"].tp_comm_overlap and not envelopes["a100-sxm-80gb"].tp_comm_overlap
    assert "TP overlap" not in [x.axis for x in extrapolations(GPT3, H100, make_plan(GPT3, req))]
    assert "TP overlap" in [x.axis for x in extrapolations(GPT3, a100, make_plan(GPT3, req))]
