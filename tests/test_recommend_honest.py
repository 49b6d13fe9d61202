"""`recommend` says what it knows and no more (issue 36's problems, re-run as written): one row per cut family,
ties within the model's error marked with the safest bet named, the calibration status in words, only plans the
stack's launcher runs unless asked, the launcher settings saying which rank they took, and no dead ends (nothing
fits → exit 1 with the least GPUs that fit; an awkward batch → the nearby batch that runs faster)."""

from __future__ import annotations

from typing import Any

import pytest

from pplan.launchers.support import runs_on
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_model
from pplan.recommend import microbatches
from tests.cli_run import run_pplan

QUERY = ("--model", "llama3-70b", "--gpus", "256", "--global-batch", "512", "--seq-len", "8192")


def _doc(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    res = run_pplan(capsys, "recommend", *args, "--format", "json")
    assert res.code == 0, res.err
    return res.json()


def _request(plan: dict[str, Any], gpus: int, batch: int) -> PlanRequest:
    return PlanRequest(
        gpus=gpus, global_batch=batch, micro_batch=plan["micro_batch"], tp=plan["tp"], pp=plan["pp"],
        vp=plan["vp"] if plan["vp"] > 1 else None, cp=plan["cp"], schedule=plan["schedule"],
        recompute=plan["recompute"], zero_stage=plan["zero_stage"], grad_dtype=plan["grad_dtype"],
    )  # fmt: skip


def test_one_row_per_cut_family_each_run_by_the_stacks_launcher(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys, *QUERY)
    families = [
        (c["plan"]["tp"], c["plan"]["pp"], c["plan"]["cp"], c["plan"]["schedule"]) for c in doc["candidates"]
    ]
    assert len(families) == 10 and len(set(families)) == 10  # not ten v of one cut
    assert doc["inputs"]["launcher"] == "megatron"  # the default stack's launcher
    model = load_model("llama3-70b")
    for c in doc["candidates"]:
        assert "megatron" in c["runs_on"]
        req = _request(c["plan"], 256, 512)
        assert list(runs_on(model, req, microbatches(req))) == c["runs_on"]  # recomputed independently


def test_unrunnable_plans_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    every = _doc(capsys, *QUERY, "--include-unrunnable")
    assert every["inputs"]["launcher"] is None
    assert any(
        c["runs_on"] == [] for c in every["candidates"]
    )  # interleaved zero-bubble: no launcher runs it
    shown = {c["plan"]["schedule"] for c in _doc(capsys, *QUERY)["candidates"]}
    assert not shown & {"interleaved-zb", "zbv", "zb-h2"}


def test_ties_are_marked_and_the_safest_named(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys, *QUERY)
    best = doc["candidates"][0]["performance"]
    floor = best["tokens_per_s_interval"][0]
    tied = [c["rank"] for c in doc["candidates"] if c["performance"]["tokens_per_s"] >= floor]
    assert [c["rank"] for c in doc["candidates"] if c["tied_with_best"]] == tied and len(tied) >= 2
    safest = doc["safest_tied_rank"]
    assert safest in tied

    def risk(c: dict[str, Any]) -> tuple[int, int]:
        return len(c["performance"]["extrapolation"]), -len(c["runs_on"])

    assert risk(doc["candidates"][safest - 1]) == min(risk(doc["candidates"][r - 1]) for r in tied)
    text = run_pplan(capsys, "recommend", *QUERY).out
    assert "≈2" in text and f"the safest bet among them: #{safest}" in " ".join(text.split())
    words = best["confidence"]
    assert words.startswith("Calibrated: ") and " ".join(words.split()) in " ".join(text.split())


def test_show_commands_prints_each_plans_explain_line(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "recommend", *QUERY, "--top", "3", "--show-commands")
    lines = [x.strip() for x in res.out.splitlines() if x.strip().startswith("#") and "pplan explain" in x]
    assert [x.split(":")[0] for x in lines] == ["#1", "#2", "#3"]


def test_the_launcher_format_says_which_rank_it_took(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys, *QUERY)
    out = run_pplan(capsys, "recommend", *QUERY, "--format", "megatron").out
    head = out.splitlines()[-1]  # after the flags: the block pastes whole
    mtok = doc["candidates"][0]["performance"]["tokens_per_s"] / 1e6
    assert head.startswith("# pplan recommend: rank 1 of the plans megatron runs (the best predicted")
    assert f"{mtok:.3f} Mtok/s predicted" in head and doc["candidates"][0]["explain_command"] in head


def test_nothing_fits_exits_1_with_the_least_gpus_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--model", "llama3-70b", "--gpus", "8", "--global-batch", "512", "--seq-len", "8192", "--tp", "8")
    res = run_pplan(capsys, "recommend", *args)
    assert res.code == 1
    doc = run_pplan(capsys, "recommend", *args, "--format", "json")
    assert doc.code == 1
    least = doc.json()["least_gpus_that_fit"]
    assert least is not None and f"it fits from {least:,} GPUs (--gpus {least})" in res.out
    # independently: the same query has a plan at that count and none at half of it
    at = run_pplan(capsys, "recommend", *args, "--gpus", str(least), "--format", "json")
    assert at.code == 0 and at.json()["candidates"]
    if least // 2 > 8:
        assert run_pplan(capsys, "recommend", *args, "--gpus", str(least // 2), "--format", "json").code == 1


def test_an_awkward_batch_names_the_better_one(capsys: pytest.CaptureFixture[str]) -> None:
    awkward = ("--model", "llama3-70b", "--gpus", "256", "--seq-len", "8192")
    odd = _doc(capsys, *awkward, "--global-batch", "511", "--top", "1")
    # the nearest batches that are not awkward on 256 GPUs of 8 per node (multiples of 32): 480 and 512, each
    # asked on its own; the better is the one whose best plan predicts more tokens/s
    rates = {
        batch: _doc(capsys, *awkward, "--global-batch", str(batch), "--top", "1")["candidates"][0][
            "performance"
        ]["tokens_per_s"]
        for batch in (480, 512)
    }
    better = max(rates, key=rates.__getitem__)
    assert odd["better_global_batch"] == better
    even = _doc(capsys, *awkward, "--global-batch", str(better), "--top", "1")
    gain = (
        even["candidates"][0]["performance"]["tokens_per_s"]
        / odd["candidates"][0]["performance"]["tokens_per_s"]
    )
    assert odd["better_global_batch_tokens_per_s"] == pytest.approx(
        even["candidates"][0]["performance"]["tokens_per_s"]
    )
    text = " ".join(
        run_pplan(capsys, "recommend", *awkward, "--global-batch", "511", "--top", "1").out.split()
    )
    assert f"global batch {better} gives {gain - 1:.0%} more tokens/s" in text
    assert even["better_global_batch"] is None


@pytest.mark.parametrize(
    ("flag", "typo", "meant"),
    [
        ("--model", "llama3-70", "llama3-70b"),
        ("--hardware", "h100", "h100-sxm-80gb"),
        ("--model", "qwen3-30b", "qwen3-30b-a3b"),
    ],
)
def test_an_unknown_profile_gets_did_you_mean(
    capsys: pytest.CaptureFixture[str], flag: str, typo: str, meant: str
) -> None:
    res = run_pplan(capsys, "recommend", flag, typo)
    lines = [x for x in res.err.splitlines() if x.strip()]
    assert res.code == 2 and len(lines) == 1
    assert f"did you mean {meant}" in lines[0]
    if flag == "--model":
        assert "Hugging Face config.json" in lines[0]


def test_no_calibrated_answer_says_so_and_names_the_axes(capsys: pytest.CaptureFixture[str]) -> None:
    """`--max-extrapolation 0` at 32k sequences (2 validated H100 runs in that band): nothing is inside the
    envelope; the answer says there is no calibrated answer and names the axes the best plan outside it leaves it
    on (as its own explain does)."""
    query = (*QUERY[:-1], "32768")
    res = run_pplan(capsys, "recommend", *query, "--max-extrapolation", "0")
    assert res.code == 1
    text = " ".join(res.out.split())
    assert "there is no calibrated answer" in text
    best = _doc(capsys, *query, "--top", "1", "--include-unrunnable")["candidates"]
    axes = {
        x["axis"] for x in _doc(capsys, *query, "--top", "1")["candidates"][0]["performance"]["extrapolation"]
    }
    assert best and all(f"{axis}: " in text for axis in axes) and "sequence" in axes
