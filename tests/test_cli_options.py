"""The CLI's options are the core's types: each choice is the core's `Literal`, each range check the core request
type's, so the API and the command line refuse the same inputs with the same line; explain's defaults are the
example it states."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import pytest

from pplan.cli.options import DEFAULT_GLOBAL_BATCH, DEFAULT_GPUS, DEFAULT_HARDWARE, DEFAULT_MODEL
from pplan.errors import ConfigError
from pplan.plan.knobs import ActivationModel, GradDtype, Recompute
from pplan.plan.records import PlanRequest
from pplan.search import SearchRequest
from tests.cli_run import run_pplan

EXPLAIN = ("explain", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--pp", "1")
RECOMMEND = ("recommend", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8")


def api_line(make: Callable[[], object]) -> str:
    """The one line the CLI prints for the ConfigError the core raises in `make()`."""
    with pytest.raises(ConfigError) as caught:
        make()
    return f"pplan: error: {caught.value.one_line()}"


def cli_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    res = run_pplan(capsys, *args)
    assert res.code == 2, (res.out, res.err)
    (line,) = res.err.splitlines()
    return line


@pytest.mark.parametrize(
    ("flag", "bad", "make"),
    [
        ("--recompute", "partial", lambda: PlanRequest(8, 8, recompute="partial")),  # type: ignore[arg-type]
        ("--grad-dtype", "fp16", lambda: PlanRequest(8, 8, grad_dtype="fp16")),  # type: ignore[arg-type]
        ("--activation-model", "gpt2", lambda: PlanRequest(8, 8, activation_model="gpt2")),  # type: ignore[arg-type]
        ("--tp", "0", lambda: PlanRequest(8, 8, tp=0)),
        ("--cp", "100000000", lambda: PlanRequest(8, 8, cp=100_000_000)),
        ("--micro-batch", "-3", lambda: PlanRequest(8, 8, micro_batch=-3)),
        ("--zero-stage", "4", lambda: PlanRequest(8, 8, zero_stage=4)),
    ],
)
def test_explain_and_plan_request_refuse_alike(
    capsys: pytest.CaptureFixture[str], flag: str, bad: str, make: Callable[[], object]
) -> None:
    line = cli_line(capsys, *EXPLAIN, flag, bad)
    assert line == api_line(make)
    assert line.startswith(f"pplan: error: {flag}: ")


@pytest.mark.parametrize(
    ("flag", "bad", "make"),
    [
        ("--grad-dtype", "fp16", lambda: SearchRequest(8, 8, grad_dtypes=("fp16",))),  # type: ignore[arg-type]
        ("--recompute", "none,partial", lambda: SearchRequest(8, 8, recompute=("none", "partial"))),  # type: ignore[arg-type]
        ("--top", "0", lambda: SearchRequest(8, 8, top_n=0)),
        ("--headroom", "1.5", lambda: SearchRequest(8, 8, headroom_fraction=1.5)),
        ("--schedule", "1f1b,zb-h9", lambda: SearchRequest(8, 8, schedules=("1f1b", "zb-h9"))),
    ],
)
def test_recommend_and_search_request_refuse_alike(
    capsys: pytest.CaptureFixture[str], flag: str, bad: str, make: Callable[[], object]
) -> None:
    line = cli_line(capsys, *RECOMMEND, flag, bad)
    assert line.startswith(f"pplan: error: {flag}: ")
    if flag not in (
        "--recompute",
        "--schedule",
        "--grad-dtype",
    ):  # a comma list is read by the CLI before the core sees it
        assert line == api_line(make)
    else:
        api_line(make)  # the core refuses it too


def test_choices_are_the_core_literals(capsys: pytest.CaptureFixture[str]) -> None:
    """Every value of each core Literal is accepted by the option, and the refusal lists exactly those values."""
    for flag, kind in (
        ("--recompute", Recompute),
        ("--grad-dtype", GradDtype),
        ("--activation-model", ActivationModel),
    ):
        listed = cli_line(capsys, *EXPLAIN, flag, "nonsense").split(" is not one of ")[1]
        assert listed == ", ".join(repr(c) for c in get_args(kind))


def test_explain_states_the_defaults_it_used(capsys: pytest.CaptureFixture[str]) -> None:
    """Options left out are the shared default example, and explain lists each as an assumption; options given
    are not listed."""
    doc = run_pplan(capsys, "explain", "--tp", "8", "--json").json()
    note = doc["assumptions"][0]
    for shown in (
        f"--model {DEFAULT_MODEL}", f"--hardware {DEFAULT_HARDWARE}", f"--gpus {DEFAULT_GPUS}",
        f"--global-batch {DEFAULT_GLOBAL_BATCH}", "--pp 4", "--micro-batch 1", "--schedule 1f1b",
    ):  # fmt: skip
        assert shown in note
    assert "--tp" not in note
    assert doc["plan"]["gpus"] == DEFAULT_GPUS and doc["plan"]["global_batch"] == DEFAULT_GLOBAL_BATCH
    given = run_pplan(capsys, "explain", "--tp", "8", "--pp", "4", "--model", DEFAULT_MODEL, "--json").json()
    assert "--model" not in given["assumptions"][0] and "--pp" not in given["assumptions"][0]


def test_recommend_defaults_are_the_same_example(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "recommend", "--tp", "8", "--pp", "8", "--top", "1", "--format", "json").json()
    assert doc["inputs"]["gpus"] == DEFAULT_GPUS
    assert doc["inputs"]["global_batch"] == DEFAULT_GLOBAL_BATCH
