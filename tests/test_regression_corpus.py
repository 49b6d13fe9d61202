"""Issue 10's regression corpus through the in-process CLI: every minimal failing input of the fuzz (non-finite
and extreme numbers, 5,000-digit integers, 100,000-deep files, unusable paths, problem sizes that hung or ran
out of memory, invalid values once accepted with exit 0, clashing output files, control characters) now either
answers sanely (exit 0, finite numbers, strict JSON) or is refused in one line (exit 2).

The cases live in `tests/regression_corpus.py`, shared with `benchmarks/fuzz_inputs.py`, which also runs the
`heavy` ones (near the size caps, a few seconds each) and times every case as a subprocess, flagging any over
its 10 s limit (wall-clock figures are the benchmark's to print, not the tests' to assert).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_run import run_pplan
from tests.regression_corpus import CASES, REFUSED, Case, json_problem, problems


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.known)] if c.known else [])
        for c in CASES
        if not c.heavy
    ],
)
def test_regression_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = case.write_files(tmp_path)
    res = run_pplan(capsys, *case.argv(tmp_path))
    assert problems(case.json_out, res.code, res.out, res.err, case.expect) == []
    for path, text in inputs.items():  # inputs are never overwritten
        assert path.read_text(encoding="utf-8") == text
    if res.code == REFUSED:  # a refusal writes nothing
        assert sorted(tmp_path.iterdir()) == sorted(inputs)


def test_the_corpus_covers_the_issue() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert sum(c.heavy and not c.known for c in CASES) <= 2  # the rest run here
    for probe in (
        "schedule-f-nan",
        "hw-hbm-inf",
        "hf-json-100000-deep",
        "recommend-gpus-1e9",
        "recommend-tp-0",
    ):
        assert probe in ids


@pytest.mark.parametrize(
    ("text", "strict"),
    [
        ('{"a": [1, 2.5, null]}', True),
        ('{"a": NaN}', False),
        ("[Infinity]", False),
        ("[1e999]", False),
        ("{", False),
    ],
)
def test_the_json_check_is_strict(text: str, strict: bool) -> None:
    assert (json_problem(text) is None) is strict
