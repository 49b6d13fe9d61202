"""The Python API (pplan.api, docs/python.md): docs/python.md's example runs, and its objects equal the command
line's JSON for the same query; keywords are the flags; bad arguments raise ArgumentError naming the keyword;
`import pplan` loads nothing but the package."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pplan
from pplan.plan.settings import SETTINGS
from tests.cli_run import run_pplan

DOC = Path(__file__).resolve().parent.parent / "docs" / "python.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def _cli_json(capsys: pytest.CaptureFixture[str], line: str) -> Any:
    words = shlex.split(line)
    assert words[0] == "pplan"
    res = run_pplan(capsys, *words[1:])
    assert res.code == 0, res.err
    return res.json()


def test_the_documented_example_runs_and_equals_the_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scope: dict[str, Any] = {}
    for code in _blocks("python"):
        exec(compile(code, str(DOC), "exec"), scope)  # the page's own example
    out = capsys.readouterr().out
    recommend_line, explain_line = _blocks("console")[0].strip().splitlines()
    (size_line,) = _blocks("console")[1].strip().splitlines()
    assert scope["answer"].model_dump(mode="json") == _cli_json(capsys, recommend_line)
    assert scope["report"].model_dump(mode="json") == _cli_json(capsys, explain_line)
    assert explain_line.removesuffix(" --json") == scope["best"].explain_command
    assert scope["sized"].model_dump(mode="json") == _cli_json(capsys, size_line)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(scope["report"].model_dump_json(by_alias=True), encoding="utf-8")
    b.write_text(scope["recomputed"].model_dump_json(by_alias=True), encoding="utf-8")
    compared = _cli_json(capsys, f"pplan compare {a} {b} --format json")
    assert scope["compared"].model_dump(mode="json") == compared and compared["changed"]
    assert f"{scope['busiest_gb']:.1f} GB of" in out and scope["sized"].schema_ == "pplan.size/1"
    fastest = scope["fastest"]
    assert fastest.fits and fastest.tokens_per_s == max(p.tokens_per_s or 0 for p in scope["sized"].points)


def test_recommend_and_explain_equal_the_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    query = {"model": "llama3-8b", "gpus": 16, "global_batch": 64, "seq_len": 4096, "top": 2}
    line = "pplan recommend " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in query.items())
    answer = pplan.recommend(**query)
    assert answer.model_dump(mode="json") == _cli_json(capsys, line + " --format json")
    second = answer.candidates[1]
    report = pplan.explain(second)  # a candidate is a plan for further calls
    assert report.model_dump(mode="json") == _cli_json(capsys, second.explain_command + " --json")
    assert report.performance is not None and second.performance is not None
    assert report.performance.tokens_per_s == second.performance.tokens_per_s
    changed = pplan.explain(second, micro_batch=2 * second.plan.micro_batch)  # a keyword changes one setting
    assert changed.plan.micro_batch == 2 * second.plan.micro_batch and changed.plan.tp == second.plan.tp


def test_keywords_are_the_flags() -> None:
    from pplan.api import keywords

    explain_keywords = set(keywords("explain"))
    assert {s.flag[2:].replace("-", "_") for s in SETTINGS} <= explain_keywords  # every plan setting
    recommend_keywords = set(keywords("recommend"))
    assert {"schedule", "zero_stage", "top", "global_batch", "launcher"} <= recommend_keywords
    assert not {"format", "json", "svg", "csv", "rank"} & (explain_keywords | recommend_keywords)
    assert {s.flag[2:].replace("-", "_") for s in SETTINGS if s.search is not None} <= recommend_keywords


@pytest.mark.parametrize(
    ("call", "kwargs", "argument"),
    [
        ("explain", {"gpuz": 8}, "gpuz"),
        ("explain", {"gpus": "eight"}, "gpus"),
        ("explain", {"model": "llama3-8b", "tp": 3}, "tp"),
        ("explain", {"sequence_parallel": "yes"}, "sequence_parallel"),
        ("recommend", {"schedule": ["1f1b", "nope"]}, "schedule"),
        ("recommend", {"format": "json"}, "format"),
    ],
)
def test_bad_arguments_raise_a_value_error_naming_the_keyword(
    call: str, kwargs: dict[str, Any], argument: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(argument)) as err:
        getattr(pplan, call)(**kwargs)
    assert isinstance(err.value, pplan.ArgumentError) and err.value.argument == argument
    assert "\n" not in str(err.value)


def test_core_modules_of_the_same_name_do_not_hide_the_api() -> None:
    from pplan.compare import compare_terms
    from pplan.explain import explain_with_run  # importing a submodule rebinds no API name

    assert callable(compare_terms) and callable(explain_with_run)
    assert callable(pplan.explain) and callable(pplan.recommend) and callable(pplan.compare)
    assert id(pplan.compare) != id(sys.modules["pplan.compare"]) and pplan.compare.__module__ == "pplan.api"


def test_importing_pplan_loads_only_the_package() -> None:
    code = "import sys, pplan; print(sorted(m for m in sys.modules if m.startswith('pplan')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['pplan']"


def test_compare_is_the_documents_compare_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """`pplan.compare(a, b)` is the `pplan.compare/1` document `pplan compare A.json B.json --format json` prints for
    the same two reports (two golden explain documents)."""
    import json

    from pplan.documents.explain import ExplainReport

    golden = Path(__file__).parent / "golden"
    a, b = golden / "explain-llama3-8b-t8.json", golden / "explain-llama3-70b-interleaved.json"
    got = pplan.compare(
        ExplainReport.model_validate_json(a.read_text()), ExplainReport.model_validate_json(b.read_text())
    )
    res = run_pplan(capsys, "compare", str(a), str(b), "--format", "json")
    assert res.code == 0
    assert got.model_dump(mode="json", by_alias=True) == json.loads(res.out)
    assert got.changed and any(t.moved_by for t in got.terms)  # two different plans: settings moved terms
