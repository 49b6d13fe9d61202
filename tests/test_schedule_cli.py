"""`pplan schedule` and `pplan bubble` as a user runs them: pictures, JSON, CSV, durations files, errors."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NoReturn

import pytest

import pplan.cli.schedule as schedule_cli
from pplan.cli.schedule import bubble_work
from pplan.schedules.limits import MAX_BUBBLE_WORK, MAX_PIPELINE_RANKS, MAX_STAGE_MICROBATCHES
from tests.cli_run import CliResult, run_pplan


def test_1f1b_json_matches_the_textbook(capsys: pytest.CaptureFixture[str]) -> None:
    p, m = 4, 8
    doc = run_pplan(capsys, "schedule", "1f1b", "--pp", str(p), "--microbatches", str(m), "--json").json()
    assert doc["schema"] == "pplan.schedule/1"
    assert doc["makespan"] == (m + p - 1) * 3  # F + (I + W) = 3 units per slot
    assert doc["bubble_fraction_of_step"] == pytest.approx((p - 1) / (m + p - 1))  # B10: 3/11
    assert doc["bubble_fraction_of_ideal"] == pytest.approx((p - 1) / m)
    assert doc["peak_in_flight_per_stage"] == [4, 3, 2, 1]
    assert len(doc["actions"]) == p and all(len(row) == 2 * m for row in doc["actions"])
    first = doc["actions"][0][0]
    assert first == {"action": "0F0", "stage": 0, "kind": "F", "microbatch": 0, "start": 0.0, "end": 1.0}


def test_b_and_w_run_as_one_pass_when_not_split(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "schedule", "gpipe", "--pp", "2", "--microbatches", "2", "--f", "1", "--b", "2",
                    "--w", "3", "--json").json()  # fmt: skip
    backward = [a for a in doc["actions"][1] if a["kind"] == "B"]
    assert all(a["end"] - a["start"] == 5 for a in backward)


def test_latency_per_hop(capsys: pytest.CaptureFixture[str]) -> None:
    # GPipe with one micro-batch: 2(p−1) hops each way-and-back, so the step grows by 2(p−1)·c.
    base = run_pplan(capsys, "schedule", "gpipe", "--pp", "4", "--microbatches", "1", "--json").json()
    slow = run_pplan(capsys, "schedule", "gpipe", "--pp", "4", "--microbatches", "1", "--comm", "0.5",
                     "--json").json()  # fmt: skip
    assert slow["makespan"] - base["makespan"] == pytest.approx(2 * 3 * 0.5)


def test_durations_file_and_outputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dfile = tmp_path / "d.toml"
    dfile.write_text("f = [1.0, 1.0, 1.0, 2.0]\nb = 1.0\nw = 1.0\ncomm = 0.0\n")
    svg, csv = tmp_path / "t.svg", tmp_path / "t.csv"
    res = run_pplan(capsys, "schedule", "1f1b", "--pp", "4", "--microbatches", "4", "--durations", str(dfile),
                    "--svg", str(svg), "--csv", str(csv))  # fmt: skip
    assert res.code == 0, res.err
    assert "rank 3" in res.out
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg")
    rows = csv.read_text().strip().splitlines()
    assert len(rows) == 4 and rows[0].split(",")[0] == "0F0"


def test_every_schedule_draws(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev", "dualpipe"):
        res = run_pplan(capsys, "schedule", name, "--pp", "4", "--microbatches", "8")
        assert res.code == 0, (name, res.err)
        assert "rank 0" in res.out


def test_bubble_chart(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    svg = tmp_path / "b.svg"
    res = run_pplan(capsys, "bubble", "--pp", "4", "--microbatches", "8,16", "--svg", str(svg))
    assert res.code == 0, res.err
    assert "18.8%" in res.out  # 1F1B at p = 4, m = 16: 3/16
    assert ET.fromstring(svg.read_text()).tag.endswith("svg")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("schedule", "1f1b", "--f", "-1"), "--f"),
        (("schedule", "nonesuch"), "--schedule"),
        (("schedule", "dualpipev", "--pp", "4", "--microbatches", "4"), "--microbatches"),
        (("schedule", "1f1b", "--durations", "/nonexistent.toml"), "--durations"),
        (("bubble", "--microbatches", "a,b"), "--microbatches"),
    ],
)
def test_schedule_errors(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str) -> None:
    res = run_pplan(capsys, *args)
    assert res.code == 2 and needle in res.err and len(res.err.strip().splitlines()) == 1, res.err


def test_durations_list_of_the_wrong_length(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dfile = tmp_path / "d.json"
    dfile.write_text('{"f": [1, 2]}')
    res = run_pplan(capsys, "schedule", "1f1b", "--pp", "4", "--durations", str(dfile))
    assert res.code == 2 and "4 stages" in res.err


def _one_line(res: CliResult, *needles: str) -> str:
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pplan: error: "), res.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("flag", ["--f", "--b", "--w", "--comm"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "-0.5"])
def test_durations_must_be_finite_and_in_range(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    _one_line(run_pplan(capsys, "schedule", "1f1b", flag, value, "--json"), flag, "finite")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("d.toml", "f = nan\n"),
        ("d.toml", "comm = inf\n"),
        ("d.toml", "w = [1.0, 1.0, -inf, 1.0]\n"),
        ("d.json", '{"b": [1, NaN, 1, 1]}'),
        ("d.json", '{"f": Infinity}'),
        ("d.json", '{"comm": 1e400}'),
        ("d.json", '{"f": 1e300}'),
    ],
)
def test_durations_files_must_be_finite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str
) -> None:
    dfile = tmp_path / name
    dfile.write_text(text)
    _one_line(run_pplan(capsys, "schedule", "1f1b", "--pp", "4", "--durations", str(dfile)), "--durations")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("schedule", "1f1b", "--pp", "4", "--microbatches", "1000000"), "--microbatches"),
        (("schedule", "1f1b", "--pp", "4", "--microbatches", "1000000", "--json"), "--microbatches"),
        (("schedule", "dualpipe", "--pp", "4", "--microbatches", "10000"), "--microbatches"),
        (("schedule", "interleaved-1f1b", "--pp", "4", "--vp", "100000", "--microbatches", "8"), "--vp"),
        (("schedule", "zbv", "--pp", "20000", "--microbatches", "1"), "--pp"),
        (("schedule", "1f1b", "--pp", str(10**30)), "--pp"),
        (("bubble", "--pp", "256"), "--pp"),
        (("bubble", "--pp", "20000"), "--pp"),
        (("bubble", "--pp", "4", "--microbatches", "8,1000000"), "--microbatches"),
        (("bubble", "--pp", "4", "--microbatches", "9" * 5000), "--microbatches"),
    ],
)
def test_problem_size_caps_refuse_at_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], flag: str
) -> None:
    """The caps are checked before any schedule is generated or simulated: the refusal does not wait for work."""
    reached: list[str] = []
    for name in ("get_schedule", "simulate", "bubble_curves"):

        def work(*_: object, _name: str = name, **__: object) -> NoReturn:
            reached.append(_name)
            raise AssertionError(f"{_name} ran before the refusal")

        monkeypatch.setattr(schedule_cli, name, work)
    _one_line(run_pplan(capsys, *args), flag)
    assert reached == []


def test_the_caps_are_stated_in_the_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line(run_pplan(capsys, "schedule", "1f1b", "--pp", "4", "--microbatches", "1000000"))
    assert f"{MAX_STAGE_MICROBATCHES:,}" in line and "--microbatches 12,500 or fewer" in line
    line = _one_line(run_pplan(capsys, "bubble", "--pp", "256"))
    assert f"{MAX_BUBBLE_WORK:,}" in line
    line = _one_line(run_pplan(capsys, "schedule", "1f1b", "--pp", "257"))
    assert f"--pp {MAX_PIPELINE_RANKS} or fewer" in line


@pytest.mark.acceptance  # simulates and prints the largest schedule the caps allow: over a second
def test_the_largest_schedule_allowed_runs(capsys: pytest.CaptureFixture[str]) -> None:
    m = MAX_STAGE_MICROBATCHES // 4
    doc = run_pplan(capsys, "schedule", "1f1b", "--pp", "4", "--microbatches", str(m), "--json").json()
    assert doc["microbatches"] == m and len(doc["actions"][0]) == 2 * m
    assert (
        bubble_work(32, [32 * k for k in (1, 2, 4, 8, 16)]) <= MAX_BUBBLE_WORK
    )  # the default chart to p = 32


def test_auto_schedule_for_the_given_durations(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # per-stage times from a file (the last stage slower: the output layer), built under 1F1B's memory (p)
    p, m = 4, 8
    dfile = tmp_path / "d.toml"
    dfile.write_text("f = [1.0, 1.0, 1.0, 1.5]\nb = 1.0\nw = 0.5\ncomm = 0.05\n")
    csv = tmp_path / "auto.csv"
    args = ("schedule", "auto", "--pp", str(p), "--microbatches", str(m), "--durations", str(dfile))
    doc = run_pplan(capsys, *args, "--memory-limit", str(p), "--csv", str(csv), "--json").json()
    assert doc["schedule"] == "auto" and max(doc["peak_in_flight_per_stage"]) <= p
    kinds = [a["kind"] for row in doc["actions"] for a in row]
    assert kinds.count("F") == kinds.count("I") == kinds.count("W") == p * m
    assert len(csv.read_text().strip().splitlines()) == p
    # never slower than ZB-H1 at the same memory and times
    zb = run_pplan(capsys, "schedule", "zb-h1", "--pp", str(p), "--microbatches", str(m), "--durations", str(dfile),
                   "--json").json()  # fmt: skip
    assert max(zb["peak_in_flight_per_stage"]) == p
    assert doc["makespan"] <= zb["makespan"] * (1 + 1e-12)
    text = run_pplan(capsys, *args)
    assert text.code == 0 and "memory limit 4" in text.out and "lower bound" in text.out
