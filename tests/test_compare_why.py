"""`pplan compare` says why (issue 47): the settings that differ, read off the two reports' plan blocks; for each
differing term only changed settings, and among them the ones the cost model moves it with; the tie read off A's
interval. Also what `size`'s picture says of its batch and how many labels a narrow axis gets."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from pplan.cli import main
from pplan.compare import DRIVERS, changed_settings, compare_terms, tie
from pplan.documents.explain import ExplainReport
from pplan.render.size_chart import LogAxis
from tests.cli_run import run_pplan

COMMON = ["explain", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--tp", "2", "--json"]


def _explain(*extra: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*COMMON, *extra])
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


@pytest.fixture(scope="module")
def pair() -> tuple[ExplainReport, ExplainReport]:
    return ExplainReport.model_validate(_explain("--pp", "2")), ExplainReport.model_validate(
        _explain("--pp", "4")
    )


def test_the_changed_settings_are_the_plans_differences(pair: tuple[ExplainReport, ExplainReport]) -> None:
    a, b = pair
    changed = changed_settings(a, b)
    assert changed["pp"] == ("2", "4")
    assert changed["dp"] == (str(16 // (2 * 2)), str(16 // (2 * 4)))  # d = GPUs / (t · p)
    for name in ("tp", "model", "hardware", "precision", "recompute"):
        assert name not in changed
    assert set(changed) <= {n for n in a.plan.model_dump() if getattr(a.plan, n) != getattr(b.plan, n)} | {
        "model", "hardware"
    }  # fmt: skip


def test_each_differing_term_is_moved_by_changed_settings(pair: tuple[ExplainReport, ExplainReport]) -> None:
    a, b = pair
    changed = changed_settings(a, b)
    terms = {t.name: t for t in compare_terms(a, b)}
    for term in terms.values():
        if not term.differs:
            assert term.moved_by == ()
            continue
        assert set(term.moved_by) <= set(changed), term
        if term.name in DRIVERS:
            assert set(term.moved_by) <= set(DRIVERS[term.name]), term
    assert terms["weights"].differs and "pp" in terms["weights"].moved_by  # half the layers per stage
    assert "num_microbatches" not in terms["weights"].moved_by
    assert terms["weights"].b == pytest.approx(terms["weights"].a / 2, rel=0.2)


@pytest.fixture(scope="module")
def base_report() -> ExplainReport:
    return ExplainReport.model_validate(_explain("--pp", "2"))


@pytest.mark.parametrize(
    "change",
    [
        # longer backward passes: a longer bubble; the last stage becomes the busiest
        ("--recompute", "full"),
        ("--recompute", "selective"),
        ("--zero-stage", "1"),  # one NCCL communicator fewer (the model group): more usable memory
        ("--precision", "fp8"),
        ("--no-sequence-parallel",),  # norms and dropout no longer split over t
        ("--grad-dtype", "bf16"),  # the optimizer step reads BF16 gradients
        ("--schedule", "zb-h1"),
        ("--micro-batch", "2"),
    ],
)
def test_one_changed_setting_is_the_cause_of_every_term_that_moved(
    base_report: ExplainReport, change: tuple[str, ...]
) -> None:
    """Where the plans differ in one setting, nothing else can have moved a term: every term that differs names
    it (a "–", no cause, was printed for the bubble, the usable memory, the memory of a busiest stage that moved)."""
    b = ExplainReport.model_validate(_explain("--pp", "2", *change))
    changed = changed_settings(base_report, b)
    setting = next(iter(changed))
    assert set(changed) <= {setting, "num_microbatches"}, changed  # m follows the micro-batch
    moved = [t for t in compare_terms(base_report, b) if t.differs]
    assert moved and all(setting in t.moved_by for t in moved), [(t.name, t.moved_by) for t in moved]


def test_the_tie_is_read_off_as_interval(pair: tuple[ExplainReport, ExplainReport]) -> None:
    a, b = pair
    got = tie(a, b)
    assert a.performance is not None and b.performance is not None and got is not None
    low, high = a.performance.step_interval_s
    assert got.tied == (low <= b.performance.step_s <= high)
    itself = tie(a, a)
    assert itself is not None and itself.tied  # a plan lies within its own interval


def test_the_table_names_the_settings_and_the_tie(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_explain("--pp", "2")), encoding="utf-8")
    b.write_text(json.dumps(_explain("--pp", "4")), encoding="utf-8")
    res = run_pplan(capsys, "compare", str(a), str(b))
    assert res.code == 0, res.err
    text = " ".join(res.out.split())
    assert "moved by" in text and "Settings that differ: p 2 → 4" in text
    assert ("Tied: B's step" in text) != ("Not tied: B's step" in text)
    usage = run_pplan(capsys, "compare", "--help").out
    assert "Usage: pplan compare [OPTIONS] A.json B.json" in usage


def test_size_picture_states_the_batch_once_and_narrow_axes_are_labelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = run_pplan(capsys, "size", "--model", "llama3-8b", "--train-tokens", "1e12", "--hardware",
                    "h100-sxm-80gb", "--gpus", "8,16", "--jobs", "1", "--json")  # fmt: skip
    from pplan.documents.size import SizeDocument
    from pplan.render.size_chart import size_svg

    svg = size_svg(SizeDocument.model_validate(res.json()))
    assert "batch fixed" not in svg and "fixed global batch: 4,194,304 tokens" in svg
    # a cost from $570k to $2.5M: only $1M and $2M of 1, 2, 3, 5 × 10^k fall inside (two labels before); now at
    # least three
    narrow = LogAxis.around([5.7e5, 2.5e6])
    assert len(narrow._multiples((1, 2, 3, 5))) == 2 and len(narrow.ticks()) >= 3
    assert LogAxis.around([64, 16384]).ticks() == [100.0, 1000.0, 10000.0]  # a wide axis keeps powers of ten
