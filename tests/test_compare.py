"""`pplan compare A.json B.json`: two explain reports term by term. The terms are the reports' own numbers (checked
against the documents read independently), the step parts sum to each step, and bad input is one line, exit 2."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from pplan.cli import main
from pplan.compare import compare_terms
from pplan.documents.explain import ExplainReport
from tests.cli_run import run_pplan

COMMON = ("--model", "llama3-70b", "--gpus", "64", "--global-batch", "128")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two explain reports of Llama 3 70B on 64 H100s, t4 p4 and t8 p2, as `pplan explain --json` writes them."""
    folder = tmp_path_factory.mktemp("compare")
    paths = []
    for name, cut in (("a", ("--tp", "4", "--pp", "4")), ("b", ("--tp", "8", "--pp", "2"))):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main(["explain", *COMMON, *cut, "--json"])
        path = folder / f"{name}.json"
        path.write_text(out.getvalue(), encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


def test_terms_are_the_reports_numbers(reports: tuple[Path, Path]) -> None:
    a, b = (ExplainReport.model_validate(json.loads(p.read_text(encoding="utf-8"))) for p in reports)
    terms = {(t.group, t.name): t for t in compare_terms(a, b)}
    assert a.performance is not None and b.performance is not None
    for report, side in ((a, "a"), (b, "b")):
        perf = report.performance
        assert perf is not None
        parts = [getattr(t, side) for (g, n), t in terms.items() if g == "step" and n != "step time"]
        assert sum(parts) == pytest.approx(perf.step_s, rel=1e-9)  # the breakdown sums to the step
        busiest = max(s.total_bytes for s in report.memory.stages)
        assert getattr(terms["memory", "total"], side) == pytest.approx(busiest / 1e9)
    step = terms["step", "step time"]
    assert step.delta == pytest.approx(b.performance.step_s - a.performance.step_s)
    assert step.ratio == pytest.approx(b.performance.step_s / a.performance.step_s)
    assert terms["throughput", "tokens/s"].a == pytest.approx(a.performance.tokens_per_s)


def test_the_cli_prints_both_cuts_and_what_moves(
    reports: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_pplan(capsys, "compare", str(reports[0]), str(reports[1]))
    assert res.code == 0, res.err
    assert "A: t4 p4" in res.out and "B: t8 p2" in res.out and "the parts that move most" in res.out


def test_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reports: tuple[Path, Path]
) -> None:
    missing = run_pplan(capsys, "compare", str(tmp_path / "none.json"), str(reports[1]))
    not_json = tmp_path / "x.json"
    not_json.write_text("{", encoding="utf-8")
    garbled = run_pplan(capsys, "compare", str(reports[0]), str(not_json))
    other = tmp_path / "other.json"
    other.write_text('{"schema": "pplan.recommend/2"}', encoding="utf-8")
    wrong = run_pplan(capsys, "compare", str(reports[0]), str(other))
    for res, field in ((missing, "A"), (garbled, "B"), (wrong, "B")):
        assert res.code == 2 and res.out == ""
        assert res.err.count("\n") == 1 and res.err.startswith(f"pplan: error: {field}")
        assert "pplan explain" in res.err


def test_a_dispatcher_change_is_a_changed_setting_that_moves_the_expert_all_to_all() -> None:
    """Qwen3-30B-A3B on 16 H100 at ep 16, alltoall against HybridEP: the only changed setting is the dispatcher, it
    moves the expert all-to-all and the step (by what the two reports' own numbers differ) and nothing in memory."""
    from pplan.compare import changed_settings

    def report(dispatcher: str) -> ExplainReport:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main([
                "explain", "--model", "qwen3-30b-a3b", "--gpus", "16", "--global-batch", "256", "--tp", "1", "--pp",
                "1", "--ep", "16", "--micro-batch", "1", "--seq-len", "4096", "--moe-dispatcher", dispatcher, "--json",
            ])  # fmt: skip
        return ExplainReport.model_validate(json.loads(out.getvalue()))

    a, b = report("alltoall"), report("hybridep")
    assert changed_settings(a, b) == {"moe_dispatcher": ("alltoall", "hybridep")}
    terms = {(t.group, t.name): t for t in compare_terms(a, b)}
    ep = terms["step", "ep_comm"]
    assert ep.moved_by == ("moe_dispatcher",) and ep.differs
    assert a.performance is not None and b.performance is not None
    assert ep.delta == pytest.approx(
        b.performance.breakdown_s["ep_comm"] - a.performance.breakdown_s["ep_comm"], rel=1e-12
    )
    assert all(not t.moved_by for (g, _), t in terms.items() if g == "memory")
    assert all(v >= 0 for v in a.performance.breakdown_s.values())  # no rounding residue below zero
