"""`pplan explain --svg`: one picture of the plan (pplan.render.plan_svg) whose numbers are the report's: a memory
bar per stage summing to its total, the usable-memory line, the step-time parts summing to the step, and the
plan's own simulated timeline; written like every other output file (refusals exit 2 with one line)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from pplan.schedules.limits import MAX_STAGE_MICROBATCHES
from tests.cli_run import CliResult, run_pplan

SVG = "{http://www.w3.org/2000/svg}"
PLAN = ("--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--tp", "2", "--pp", "4")


def refused(res: CliResult, *needles: str) -> str:
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith("pplan: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}{tag}") if e.get("class") == cls]


_DRAWN: dict[str, tuple[dict[str, Any], ET.Element, bytes]] = {}


@pytest.fixture
def drawn(
    capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], ET.Element, bytes]:
    """The JSON report and the picture of the small plan, from one run with --json and --svg together (run once
    per test process)."""
    if "plan" not in _DRAWN:
        path = tmp_path_factory.mktemp("svg") / "plan.svg"
        res = run_pplan(capsys, "explain", *PLAN, "--json", "--svg", str(path))
        assert res.code == 0, res.err
        data = path.read_bytes()
        _DRAWN["plan"] = (res.json(), ET.fromstring(data), data)
    return _DRAWN["plan"]


def test_one_memory_bar_per_stage_summing_to_the_reports_totals(
    drawn: tuple[dict[str, Any], ET.Element, bytes],
) -> None:
    report, root, _ = drawn
    assert root.tag == f"{SVG}svg"
    stages = report["memory"]["stages"]
    bars = by_class(root, "g", "stage")
    assert len(bars) == len(stages) == 4
    for bar, stage in zip(bars, stages, strict=True):
        assert int(bar.get("data-stage", "-1")) == stage["stage"]
        assert int(bar.get("data-total-bytes", "-1")) == stage["total_bytes"]
        parts = [r for r in bar if r.get("class") == "memory-part"]
        assert parts and all(int(r.get("data-bytes", "0")) > 0 for r in parts)  # zero parts left out
        assert sum(int(r.get("data-bytes", "0")) for r in parts) == stage["total_bytes"]
        for r in parts:  # each part is the report's own field
            assert stage[r.get("data-part", "")] == int(r.get("data-bytes", "0"))
        # stacked: each part starts where the one below it ends
        for lower, upper in pairwise(parts):
            assert float(upper.get("y", "0")) + float(upper.get("height", "0")) == pytest.approx(
                float(lower.get("y", "0")), abs=0.02
            )


def test_the_usable_line_sits_at_the_reports_usable_bytes(
    drawn: tuple[dict[str, Any], ET.Element, bytes],
) -> None:
    report, root, _ = drawn
    (line,) = by_class(root, "line", "usable")
    usable = report["memory"]["usable_bytes"]
    assert int(line.get("data-bytes", "-1")) == usable
    # on the bars' scale: the bar's pixels per byte put the usable bytes at the line's height
    bar = by_class(root, "g", "stage")[0]
    parts = [r for r in bar if r.get("class") == "memory-part"]
    bottom = float(parts[0].get("y", "0")) + float(parts[0].get("height", "0"))
    top = float(parts[-1].get("y", "0"))
    per_byte = (bottom - top) / int(bar.get("data-total-bytes", "1"))
    assert float(line.get("y1", "0")) == pytest.approx(bottom - usable * per_byte, abs=0.1)
    text = " ".join(e.text or "" for e in root.iter(f"{SVG}text"))
    assert f"usable {usable / 1e9:.1f} GB" in text


def test_the_step_time_parts_sum_to_the_step(drawn: tuple[dict[str, Any], ET.Element, bytes]) -> None:
    report, root, _ = drawn
    perf = report["performance"]
    (group,) = by_class(root, "g", "step-time")
    assert float(group.get("data-step-s", "nan")) == perf["step_s"]
    parts = {r.get("data-part"): float(r.get("data-seconds", "nan")) for r in group}
    assert parts == {k: v for k, v in perf["breakdown_s"].items() if v > 0}
    assert sum(parts.values()) == pytest.approx(perf["step_s"], rel=1e-9)
    text = " ".join(e.text or "" for e in root.iter(f"{SVG}text"))
    compute = perf["breakdown_s"]["compute"]
    assert f"compute {compute:.4g} s ({compute / perf['step_s']:.1%})" in text


def test_the_timeline_is_the_plans_simulated_step(drawn: tuple[dict[str, Any], ET.Element, bytes]) -> None:
    report, root, _ = drawn
    (nested,) = [e for e in root.iter(f"{SVG}svg") if e.get("class") == "timeline"]
    plan = report["plan"]
    actions = by_class(nested, "rect", "action")
    assert len(actions) == 2 * plan["pp"] * plan["num_microbatches"]  # 1F1B: F and B per stage-micro-batch
    text = " ".join(e.text or "" for e in nested.iter(f"{SVG}text"))
    assert f"step {report['pipeline']['makespan']:.4g} s" in text
    title = " ".join(e.text or "" for e in root.iter(f"{SVG}text"))
    assert "llama3-8b on 16 × " in title and "t=2, p=4, d=2" in title


def test_the_picture_is_deterministic_and_works_with_the_tables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, drawn: tuple[dict[str, Any], ET.Element, bytes]
) -> None:
    path = tmp_path / "again.svg"
    res = run_pplan(capsys, "explain", *PLAN, "--svg", str(path))
    assert res.code == 0, res.err
    assert "Memory" in res.out or "memory" in res.out  # the tables are printed as without --svg
    assert path.read_bytes() == drawn[2]


def test_unit_durations_draw_no_step_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "unit.svg"
    res = run_pplan(capsys, "explain", *PLAN, "--pass-durations", "unit", "--svg", str(path))
    assert res.code == 0, res.err
    root = ET.fromstring(path.read_bytes())
    assert not by_class(root, "g", "step-time") and len(by_class(root, "text", "time-note")) == 1
    assert len(by_class(root, "g", "stage")) == 4
    assert [e for e in root.iter(f"{SVG}svg") if e.get("class") == "timeline"]


def test_a_timeline_over_the_cap_is_named_not_drawn(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "big.svg"
    gbs = 8192  # p·m = 8 · 8192 stage-micro-batches
    assert 8 * gbs > MAX_STAGE_MICROBATCHES
    args = ("--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--pp", "8", "--global-batch", str(gbs))
    res = run_pplan(capsys, "explain", *args, "--svg", str(path))
    assert res.code == 0, res.err
    root = ET.fromstring(path.read_bytes())
    assert not [e for e in root.iter(f"{SVG}svg") if e.get("class") == "timeline"]
    (note,) = by_class(root, "text", "timeline-note")
    assert f"{MAX_STAGE_MICROBATCHES:,}" in (note.text or "")
    assert len(by_class(root, "g", "stage")) == 8


def test_a_folder_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    refused(run_pplan(capsys, "explain", *PLAN, "--svg", str(tmp_path)), "--svg", "folder")


def test_a_link_needs_force(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "target.svg"
    target.write_text("old\n")
    link = tmp_path / "link.svg"
    link.symlink_to(target)
    refused(run_pplan(capsys, "explain", *PLAN, "--svg", str(link)), "--svg", "symbolic link", "--force")
    assert target.read_text() == "old\n" and link.is_symlink()
    res = run_pplan(capsys, "explain", *PLAN, "--svg", str(link), "--force")
    assert res.code == 0, res.err
    assert link.is_symlink() and target.read_text().startswith("<svg")


def test_one_file_for_two_outputs_and_a_launcher_format_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    both = tmp_path / "both"
    refused(run_pplan(capsys, "explain", *PLAN, "--csv", str(both), "--svg", str(both)), "--svg", "--csv")
    assert not both.exists()
    picture = tmp_path / "p.svg"
    refused(
        run_pplan(capsys, "explain", *PLAN, "--format", "megatron", "--svg", str(picture)),
        "--svg",
        "--format",
    )
    assert not picture.exists()
