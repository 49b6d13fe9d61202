"""`pplan size` end to end: the pplan.size/1 document (its points are recommend's best, its figures follow from
them by hand), the exit codes of "no count meets the deadline" and "nothing fits", and bad input refused in one
line naming the flag, exit 2."""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

import pytest

from pplan.documents.size import SizeDocument
from tests.cli_run import assert_shown_in_order, run_pplan

SMALL = (
    "size",
    "--model",
    "llama3-8b",
    "--train-tokens",
    "1e12",
    "--hardware",
    "h100-sxm-80gb",
    "--jobs",
    "1",
)


def test_the_document_follows_from_its_points(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *SMALL, "--gpus", "8,16", "--price", "h100-sxm-80gb=2", "--json")
    assert res.code == 0, res.err
    doc = SizeDocument.model_validate(res.json())
    assert [p.gpus for p in doc.points] == [8, 16]
    base = doc.points[0]
    for p in doc.points:
        assert p.fits and p.steps is not None and p.step_s is not None and p.wall_days is not None
        assert p.work_days is not None and p.gpu_hours is not None
        assert p.steps == math.ceil(1e12 / (p.global_batch * 8192))
        assert p.work_days == pytest.approx(p.steps * p.step_s / 86_400)
        assert p.gpu_hours == pytest.approx(p.gpus * p.wall_days * 24)
        assert p.cost_usd == pytest.approx(2 * p.gpu_hours)
        # H100 [power]: 700 W a GPU, 4,600 W the rest of a node, PUE 1
        nodes = p.gpus // 8
        assert p.energy_kwh == pytest.approx(p.wall_days * 24 * (p.gpus * 700 + nodes * 4600) / 1000)
        assert p.goodput is not None and p.wall_days >= p.work_days
        assert p.explain is not None and p.explain.startswith("pplan explain --model llama3-8b")
        assert p.scaling_efficiency == pytest.approx(p.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu)  # type: ignore[operator]
    assert doc.answers.least_gpus_that_fit == {"h100-sxm-80gb": 8}
    assert doc.inputs.prices_usd_per_gpu_hour == {"h100-sxm-80gb": 2.0}
    assert doc.answers.pareto  # two points: at least one is on the front


def test_a_point_reproduces_with_its_explain_line(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *SMALL, "--gpus", "16", "--json")
    point = SizeDocument.model_validate(res.json()).points[0]
    assert point.explain is not None and point.step_s is not None
    args = [*point.explain.split()[1:], "--json"]
    again = run_pplan(capsys, *args)
    assert again.code == 0, again.err
    assert again.json()["performance"]["step_s"] == pytest.approx(point.step_s, rel=1e-12)


def test_a_deadline_nothing_meets_exits_1_with_the_nearest_miss(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *SMALL, "--gpus", "8,16", "--days", "0.5")
    assert res.code == 1
    assert "no count in the sweep trains it within 0.5 days; nearest: h100-sxm-80gb × 16" in res.err
    ok = run_pplan(capsys, *SMALL, "--gpus", "8,16", "--days", "3650")
    shown = " ".join(ok.out.split())
    assert ok.code == 0 and (
        "Fewest GPUs that train it within 3650 days, at the estimate: h100-sxm-80gb 8 (8 at the interval's slow end)"
        in shown
    )


def test_a_gpu_range_nothing_fits_is_one_line_on_gpus_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "size", "--model", "llama3-405b", "--train-tokens", "1e12", "--hardware",
                    "h100-sxm-80gb", "--gpus", "8,16", "--jobs", "1")  # fmt: skip
    lines = [x for x in res.err.splitlines() if x.strip()]
    assert res.code == 2 and len(lines) == 1 and res.out == ""
    assert "--gpus: nothing fits llama3-405b at any count swept" in lines[0]
    assert "h100-sxm-80gb × 16: out of memory" in lines[0] and "give larger counts" in lines[0]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--train-tokens", "-5"), "--train-tokens"),
        (("--train-tokens", "1e12", "--days", "0"), "--days"),
        (("--train-tokens", "1e12", "--price", "a100-sxm-80gb=2"), "--price"),
        (("--train-tokens", "1e12", "--price", "h100-sxm-80gb=free"), "--price"),
        (("--train-tokens", "1e12", "--gpus", "4096..64"), "--gpus"),
        (("--train-tokens", "1e12", "--gpus", "lots"), "--gpus"),
        (("--train-tokens", "1e12", "--pue", "0.8"), "--pue"),
        (("--train-tokens", "1e12", "--budget", "1e6"), "--budget"),
        (("--train-tokens", "1e12", "--global-batch-tokens", "100"), "--global-batch-tokens"),
        (("--train-tokens", "1e12", "--hardware", "h100-sxm-80gb,h100-sxm-80gb"), "--hardware"),
        ((), "--train-tokens"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], flag: str
) -> None:
    """Each refused before any count is swept (the sweep is the command's work: seconds)."""

    def no_sweep(*_: object) -> None:
        raise AssertionError("swept before refusing the input")

    monkeypatch.setattr("pplan.sizing.sweep.sweep", no_sweep)
    base = ["size", "--model", "llama3-8b", "--jobs", "1"]
    if "--hardware" not in args:
        base += ["--hardware", "h100-sxm-80gb"]
    res = run_pplan(capsys, *base, *args)
    assert res.code == 2, (res.code, res.err)
    lines = [x for x in res.err.splitlines() if x.strip()]
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in res.err, res.err


def test_the_svg_is_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "size.svg"
    res = run_pplan(capsys, *SMALL, "--gpus", "8,16", "--svg", str(out))
    assert res.code == 0, res.err
    assert (
        out.read_text(encoding="utf-8").startswith("<svg") or "<svg" in out.read_text(encoding="utf-8")[:200]
    )
    assert "Answers" in res.out and "Assumptions" in res.out


README = Path(__file__).resolve().parents[1] / "docs" / "size.md"
SIZE_BLOCK = re.compile(r"^```\n\$ (pplan size [^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _readme_size_blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in SIZE_BLOCK.finditer(README.read_text(encoding="utf-8"))]


def test_the_size_doc_shows_the_three_questions() -> None:
    commands = [c for c, _ in _readme_size_blocks()]
    assert any("--days 30" in c for c in commands)  # 70B, 15T tokens, 30 days
    assert any("--gpus 1024" in c for c in commands)  # H100 against H200 against B200
    assert any("--gpus 64..4096" in c for c in commands)  # a scaling curve


@pytest.mark.parametrize(
    "which",
    [
        pytest.param("--gpus 1024", id="three-gpus"),
        pytest.param("--gpus 64..4096", id="scaling"),
        pytest.param("--days 30", id="deadline", marks=pytest.mark.acceptance),  # 66 searches: seconds
    ],
)
def test_the_readme_size_output_is_what_the_command_prints(
    capsys: pytest.CaptureFixture[str], which: str
) -> None:
    """Each README block's lines (trailing spaces aside; "..." marks a cut) appear, in order, in what the command
    prints now at 80 columns."""
    command, shown = next((c, s) for c, s in _readme_size_blocks() if which in c)
    res = run_pplan(capsys, *shlex.split(command)[1:])
    assert res.code == 0, res.err
    assert_shown_in_order(shown, res.out)


@pytest.mark.parametrize("which", ["--model", "--hardware"])
def test_the_svg_never_overwrites_an_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, which: str
) -> None:
    """`--svg` naming the model or a hardware file is refused before any work, and the file is left as it was
    (it used to be replaced by the chart)."""
    from pplan.profiles.catalog import profile_source
    from pplan.profiles.kinds import ProfileKind

    bundled: dict[str, tuple[ProfileKind, str]] = {
        "--model": ("models", "llama3-8b"),
        "--hardware": ("hardware", "h100-sxm-80gb"),
    }
    victim = tmp_path / "victim.toml"
    victim.write_text(profile_source(*bundled[which]), encoding="utf-8")
    before = victim.read_bytes()
    args = ["size", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--train-tokens", "1e12"]
    args[args.index(which) + 1] = str(victim) if which == "--model" else f"a100-sxm-80gb,{victim}"
    res = run_pplan(capsys, *args, "--jobs", "1", "--gpus", "8,16", "--svg", str(victim))
    assert res.code == 2, res.err
    assert "--svg" in res.err and "input" in res.err and len(res.err.strip().splitlines()) == 1
    assert victim.read_bytes() == before
