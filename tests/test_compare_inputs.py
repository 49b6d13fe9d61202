"""`pplan compare` under hostile input files: every refusal is one line naming A or B, exit code 2, never a
traceback; reads are bounded whatever the file claims to be (a device, a pipe), and the JSON is checked for
depth, size of numbers, count of values, the exact schema version and values no plan has."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pplan.cli import main
from pplan.cli.reading import MAX_DEPTH, MAX_VALUES, parse_json, read_bounded
from pplan.documents.base import version_of
from pplan.documents.explain import ExplainReport
from pplan.errors import ConfigError
from tests.cli_run import run_pplan


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["explain", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch",
              "64", "--json"])  # fmt: skip
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def _refused(capsys: pytest.CaptureFixture[str], path: Path, good: Path, *, expect: str) -> None:
    res = run_pplan(capsys, "compare", str(path), str(good))
    assert res.code == 2, res.err
    assert res.out == "" and res.err.count("\n") == 1 and res.err.startswith("pplan: error: A: ")
    assert expect in res.err, res.err
    assert "Traceback" not in res.err


def _edited(report: dict[str, Any], edit: Any) -> dict[str, Any]:
    data = copy.deepcopy(report)
    edit(data)
    return data


CASES: dict[str, tuple[Any, str]] = {
    "no stages": (lambda d: d["memory"].update(stages=[]), "memory.stages: no stage"),
    "schema 999": (lambda d: d.update(schema="pplan.explain/999"), "'pplan.explain/999'"),
    "no schema": (lambda d: d.pop("schema"), "is missing"),
    "negative step": (lambda d: d["performance"].update(step_s=-3.0), "performance.step_s: -3.0"),
    "negative part": (lambda d: d["performance"]["breakdown_s"].update(bubble=-1.0), "breakdown_s.bubble"),
    "tp -8": (lambda d: d["plan"].update(tp=-8), "plan.tp: -8"),
    "pp 0": (lambda d: d["plan"].update(pp=0), "plan.pp: 0"),
    "advice of numbers": (lambda d: d.update(advice=[1, 2, 3]), "advice.0"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reports_no_plan_has_are_refused(
    case: str, report: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, expect = CASES[case]
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(report), encoding="utf-8")
    bad.write_text(json.dumps(_edited(report, edit)), encoding="utf-8")
    _refused(capsys, bad, good, expect=expect)


@pytest.mark.parametrize(
    ("token", "expect"), [("NaN", "NaN"), ("Infinity", "Infinity"), ("1e400", "beyond a float's range")]
)
def test_numbers_that_are_not_numbers(
    token: str, expect: str, report: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(report), encoding="utf-8")
    text = json.dumps(_edited(report, lambda d: d["performance"].update(step_s="HERE")))
    bad.write_text(text.replace('"HERE"', token), encoding="utf-8")
    _refused(capsys, bad, good, expect=expect)


def test_the_issue_files(report: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """100,000 nested brackets, a 5,000-digit integer, and a 6 MB report whose advice holds 3 M integers: each
    refused before the parser or the schema builds anything of its size."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report), encoding="utf-8")
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    _refused(capsys, nested, good, expect=f"nests more than {MAX_DEPTH} levels")
    digits = tmp_path / "digits.json"
    digits.write_text('{"schema": "pplan.explain/2", "x": ' + "9" * 5000 + "}", encoding="utf-8")
    _refused(capsys, digits, good, expect="an integer of 5,000 digits")
    big = tmp_path / "advice.json"
    big.write_text(json.dumps(_edited(report, lambda d: d.update(advice=[0] * 3_000_000))), encoding="utf-8")
    assert big.stat().st_size > 6_000_000
    start = time.perf_counter()
    _refused(capsys, big, good, expect=f"more than {MAX_VALUES:,} values")
    assert time.perf_counter() - start < 5  # 16 s before: one pydantic error per element


def test_values_are_counted_before_parsing() -> None:
    """The count is made on the bytes: a list of MAX_VALUES + 1 zeros is refused, one of MAX_VALUES is parsed,
    and commas inside strings do not count."""
    fix = "fix"
    over = ("[" + ",".join("0" * (MAX_VALUES + 1)) + "]").encode()
    with pytest.raises(ConfigError, match="values"):
        parse_json(over, "A", "x", fix)
    at = ("[" + ",".join("0" * 10) + "]").encode()
    assert parse_json(at, "A", "x", fix) == [0] * 10
    commas = json.dumps(["," * (MAX_VALUES + 5)]).encode()
    assert parse_json(commas, "A", "x", fix) == ["," * (MAX_VALUES + 5)]
    brackets = json.dumps(["[" * (MAX_DEPTH + 5)]).encode()
    assert parse_json(brackets, "A", "x", fix) == ["[" * (MAX_DEPTH + 5)]
    deep = ("[" * MAX_DEPTH + "]" * MAX_DEPTH).encode()
    assert parse_json(deep, "A", "x", fix) is not None
    with pytest.raises(ConfigError, match="levels deep"):
        parse_json(("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode(), "A", "x", fix)


def test_reads_are_bounded_without_trusting_the_size() -> None:
    """/dev/zero (size 0 to stat, endless to read) and a pipe fed more than the cap: refused after cap + 1 bytes."""
    cap = 1 << 16
    with pytest.raises(ConfigError, match="larger than"):
        read_bounded(Path("/dev/zero"), cap, "A", "fix")
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with contextlib.suppress(OSError), os.fdopen(write_fd, "wb") as w:
            for _ in range(8):
                w.write(b" " * cap)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        with pytest.raises(ConfigError, match="larger than"):
            read_bounded(Path(f"/proc/self/fd/{read_fd}"), cap, "A", "fix")
    finally:
        os.close(read_fd)
        writer.join(10)
    small_r, small_w = os.pipe()
    os.write(small_w, b'{"a": 1}')
    os.close(small_w)
    try:
        assert read_bounded(Path(f"/proc/self/fd/{small_r}"), cap, "A", "fix") == b'{"a": 1}'
    finally:
        os.close(small_r)


def test_a_report_read_through_a_pipe_compares(
    report: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process substitution (`<(pplan explain ...)`) is a pipe whose size is 0: it is read in full."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report), encoding="utf-8")
    read_fd, write_fd = os.pipe()
    data = json.dumps(report).encode()

    def feed() -> None:
        with os.fdopen(write_fd, "wb") as w:
            w.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        res = run_pplan(capsys, "compare", f"/proc/self/fd/{read_fd}", str(good), "--format", "json")
    finally:
        writer.join(10)
        os.close(read_fd)
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["schema"] == "pplan.compare/1" and doc["changed"] == []
    assert all(not t["moved_by"] and t["delta"] == 0 for t in doc["terms"])
    assert doc["tie"]["tied"] is True  # a plan is tied with itself: its step lies within its own interval


def test_the_schema_read_is_the_one_explain_writes(report: dict[str, Any]) -> None:
    assert report["schema"] == version_of(ExplainReport)


def test_a_missing_argument_names_itself(
    report: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pplan compare a.json` printed `pplan: error: b: ` and nothing more."""
    good = tmp_path / "a.json"
    good.write_text(json.dumps(report), encoding="utf-8")
    res = run_pplan(capsys, "compare", str(good))
    assert res.code == 2 and res.out == ""
    assert res.err.strip() == (
        "pplan: error: B.json: a required argument is missing; `pplan compare --help` shows what it takes"
    )
