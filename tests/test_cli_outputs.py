"""Output files of `schedule`, `bubble` and `bench` (`--svg`, `--csv`, `--report`, `--out`): refused when they would
clobber an input or each other or write through a link (without `--force`), written atomically; and strict JSON.

Every refusal is checked the same way: exit code 2, exactly one stderr line starting "pplan: error: " that names
the flag, and every file involved byte-for-byte as it was.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

import pplan.cli.schedule as schedule_cli
import pplan.render.schedule as schedule_render
from pplan.cli.files import check_outputs, write_output
from pplan.errors import ConfigError
from pplan.render.schedule import timeline_svg
from tests.cli_run import CliResult, run_pplan

OLD = "the old contents, which must survive\n"


def refused(res: CliResult, *needles: str) -> str:
    """The one error line of a refused command (exit 2), which contains every needle."""
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith("pplan: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def strict_json(text: str) -> Any:
    """`text` parsed as RFC 8259 JSON: the NaN / Infinity tokens Python would accept raise instead."""

    def reject(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=reject)


def leftovers(folder: Path) -> list[str]:
    """Temporary files a write left behind in `folder`."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".pplan-"))


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "old.svg"
    path.write_text(OLD)
    return path


# --- outputs that would clobber an input or each other ------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_an_output_naming_the_durations_input_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    durations = tmp_path / f"d{suffix}"
    text = "f = 1.0\n" if suffix == ".toml" else '{"f": 1.0}'
    durations.write_text(text)
    for flag in ("--svg", "--csv"):
        res = run_pplan(capsys, "schedule", "1f1b", "--durations", str(durations), flag, str(durations))
        refused(res, flag, "--durations")
        # the same file by another spelling, and through a link even with --force
        other = tmp_path / "sub" / ".." / durations.name
        (tmp_path / "sub").mkdir(exist_ok=True)
        refused(run_pplan(capsys, "schedule", "1f1b", "--durations", str(durations), flag, str(other)), flag)
        link = tmp_path / f"link-{flag[2:]}"
        link.symlink_to(durations)
        res = run_pplan(capsys, "schedule", "1f1b", "--durations", str(durations), flag, str(link), "--force")
        refused(res, flag, "--durations")
    assert durations.read_text() == text


def test_two_outputs_naming_one_file_are_refused(capsys: pytest.CaptureFixture[str], old_file: Path) -> None:
    res = run_pplan(capsys, "schedule", "1f1b", "--csv", str(old_file), "--svg", str(old_file))
    refused(res, "--svg", "--csv", "its own file")
    assert old_file.read_text() == OLD


def test_a_hard_link_is_the_same_file(capsys: pytest.CaptureFixture[str], old_file: Path) -> None:
    twin = old_file.with_name("twin.svg")
    os.link(old_file, twin)
    refused(run_pplan(capsys, "schedule", "1f1b", "--csv", str(old_file), "--svg", str(twin)), "--svg")
    assert old_file.read_text() == OLD


@pytest.mark.parametrize(
    ("outputs", "flag", "other"),
    [
        (("--report", "X", "--svg", "X"), "--svg", "--report"),
        (("--report", "X", "--svg", "Y"), None, None),  # distinct: passes the check (then needs torch)
    ],
)
def test_bench_outputs_must_differ(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    outputs: tuple[str, ...],
    flag: str | None,
    other: str | None,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # stop before launching anything
    args = [str(tmp_path / a) if a in ("X", "Y") else a for a in outputs]
    (tmp_path / "X").write_text(OLD)
    res = run_pplan(capsys, "bench", *args)
    if flag is None:
        refused(res, "torch")
    else:
        assert other is not None
        refused(res, flag, other)
    assert (tmp_path / "X").read_text() == OLD


def test_calibrating_over_the_hardware_input_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    profile = tmp_path / "gpu.toml"
    text = run_pplan(capsys, "profiles", "hardware", "h100-sxm-80gb", "--source").out
    profile.write_text(text)
    res = run_pplan(capsys, "bench", "--calibrate", "--hardware", str(profile), "--out", str(profile))
    refused(res, "--out", "--hardware")
    assert profile.read_text() == text


# --- links, folders ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("schedule", "1f1b", "--svg"),
        ("schedule", "1f1b", "--csv"),
        ("bubble", "--pp", "2", "--svg"),
        ("bench", "--report"),
        ("bench", "--svg"),
        ("bench", "--calibrate", "--hardware", "h100-sxm-80gb", "--out"),
    ],
)
def test_a_symbolic_link_is_not_followed_without_force(
    capsys: pytest.CaptureFixture[str], old_file: Path, args: tuple[str, ...]
) -> None:
    link = old_file.with_name("link")
    link.symlink_to(old_file)
    refused(run_pplan(capsys, *args, str(link)), args[-1], "symbolic link", "--force")
    assert old_file.read_text() == OLD and link.is_symlink()
    dangling = old_file.with_name("dangling")
    dangling.symlink_to(old_file.with_name("nowhere"))
    refused(run_pplan(capsys, *args, str(dangling)), args[-1], "--force")
    assert not old_file.with_name("nowhere").exists()


def test_force_writes_the_file_a_link_points_to(capsys: pytest.CaptureFixture[str], old_file: Path) -> None:
    link = old_file.with_name("link.svg")
    link.symlink_to(old_file)
    res = run_pplan(capsys, "schedule", "1f1b", "--svg", str(link), "--force")
    assert res.code == 0, res.err
    assert link.is_symlink() and os.readlink(link) == str(old_file)
    assert old_file.read_text().startswith("<svg ")
    assert leftovers(old_file.parent) == []


@pytest.mark.parametrize("where", ["folder", "missing"])
def test_a_folder_or_a_missing_folder_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    target = tmp_path if where == "folder" else tmp_path / "no" / "such.svg"
    line = refused(run_pplan(capsys, "schedule", "1f1b", "--svg", str(target)), "--svg")
    assert ("folder" in line) and not (tmp_path / "no").exists()


def test_a_path_too_long_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    refused(run_pplan(capsys, "schedule", "1f1b", "--svg", str(tmp_path / ("x" * 300))), "--svg")


# --- atomic writes -------------------------------------------------------------------------------------------------


def test_a_renderer_failing_mid_write_leaves_the_old_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, old_file: Path
) -> None:
    """Half the picture reaches the temporary file before the renderer raises: the target never sees it."""

    def half_then_fail(timeline: Any, **kwargs: Any) -> Iterator[str]:
        text = timeline_svg(timeline, **kwargs)
        yield text[: len(text) // 2]
        raise RuntimeError("renderer died")

    monkeypatch.setattr(schedule_render, "timeline_svg", half_then_fail)  # the CLI imports it when it runs
    res = run_pplan(capsys, "schedule", "1f1b", "--svg", str(old_file))
    assert res.code == 3 and "renderer died" in res.err and len(res.err.splitlines()) == 1, res.err
    assert old_file.read_text() == OLD
    assert leftovers(old_file.parent) == []


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_failing_disk_is_one_line_and_leaves_the_old_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, old_file: Path, step: str
) -> None:
    def no_space(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, step, no_space)  # os.fsync / os.replace, as pplan.cli.files calls them
    res = run_pplan(capsys, "schedule", "1f1b", "--svg", str(old_file))
    assert res.code == 4, (res.code, res.err)  # a failed write, not a refused input (pplan.cli)
    assert res.err.splitlines() == [f"pplan: cannot write {old_file}: No space left on device"]
    assert old_file.read_text() == OLD
    assert leftovers(old_file.parent) == []


def test_an_interrupt_mid_write_leaves_the_old_file(old_file: Path) -> None:
    def pieces() -> Iterator[str]:
        yield "<svg partial"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_output(old_file, pieces(), "--svg")
    assert old_file.read_text() == OLD
    assert leftovers(old_file.parent) == []


def test_a_rewrite_keeps_the_file_mode_and_a_new_file_gets_the_umask(tmp_path: Path, old_file: Path) -> None:
    old_file.chmod(0o640)
    write_output(old_file, "new\n", "--svg")
    assert old_file.read_text() == "new\n"
    assert stat.S_IMODE(old_file.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        write_output(tmp_path / "fresh.csv", ["a,", "b\n"], "--csv")
    finally:
        os.umask(umask)
    assert (tmp_path / "fresh.csv").read_text() == "a,b\n"
    assert stat.S_IMODE((tmp_path / "fresh.csv").stat().st_mode) == 0o644
    assert leftovers(tmp_path) == []


def test_check_outputs_names_the_flag(tmp_path: Path) -> None:
    a = tmp_path / "a"
    check_outputs({"--svg": a, "--csv": None}, {"--durations": None})  # nothing to refuse
    with pytest.raises(ConfigError) as err:
        check_outputs({"--csv": a, "--svg": tmp_path / "." / "a"})
    assert err.value.field == "--svg"


# --- strict JSON ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("1f1b",),
        ("1f1b", "--f", "0", "--b", "0", "--w", "0"),
        ("1f1b", "--f", "0", "--b", "0", "--w", "0", "--comm", "1"),
        ("zb-h2", "--f", "1e12", "--b", "1e12", "--w", "1e12", "--comm", "1e12"),
        ("interleaved-1f1b", "--vp", "2", "--f", "1e-300"),
        ("dualpipev", "--microbatches", "8", "--w", "0"),
    ],
)
def test_schedule_json_is_strict(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    res = run_pplan(capsys, "schedule", *args, "--json")
    assert res.code == 0, res.err
    doc = strict_json(res.out)
    assert 0 <= doc["bubble_fraction_of_step"] <= 1
    assert doc["bubble_fraction_of_ideal"] >= 0 and doc["bubble_in_window_fraction_of_ideal"] >= 0


def test_all_zero_durations_mean_no_bubble(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing computes, so nothing is idle for lack of work: every fraction is 0, and the picture still draws."""
    doc = strict_json(run_pplan(capsys, "schedule", "1f1b", "--f", "0", "--b", "0", "--w", "0", "--json").out)
    assert doc["makespan"] == 0
    assert doc["bubble_fraction_of_step"] == doc["bubble_fraction_of_ideal"] == 0
    assert doc["bubble_in_window_fraction_of_ideal"] == 0
    for extra in ((), ("--comm", "1")):
        res = run_pplan(capsys, "schedule", "zb-h2", "--f", "0", "--b", "0", "--w", "0", *extra)
        assert res.code == 0 and "rank 3" in res.out, res.err


def test_a_refused_output_is_refused_before_the_work(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, old_file: Path
) -> None:
    """The output check runs before the schedule is built and simulated: the refusal does not wait for the work."""
    reached: list[str] = []
    for name in ("get_schedule", "simulate"):

        def work(*_: object, _name: str = name, **__: object) -> NoReturn:
            reached.append(_name)
            raise AssertionError(f"{_name} ran before the refusal")

        monkeypatch.setattr(schedule_cli, name, work)
    res = run_pplan(capsys, "schedule", "zb-h2", "--pp", "250", "--microbatches", "200", "--csv", str(old_file),
                    "--svg", str(old_file))  # fmt: skip
    refused(res, "--svg")
    assert reached == []


def test_a_pipe_is_written_in_place_not_replaced(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A FIFO (like /dev/null, a device) has no contents to protect: the text streams into it, and it stays a
    FIFO rather than being replaced by a regular file. Two outputs may name it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    res = run_pplan(capsys, "schedule", "1f1b", "--pp", "2", "--microbatches", "2", "--csv", str(fifo))
    reader.join(timeout=10)
    assert res.code == 0, res.err
    assert got == ["0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    check_outputs({"--csv": fifo, "--svg": fifo})  # not a clobber: nothing to refuse


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("schedule", "1f1b", "--f", "nan", "--svg"), "--f"),
        (("schedule", "1f1b", "--comm", "inf", "--csv"), "--comm"),
        (("schedule", "1f1b", "--pp", "4", "--microbatches", "1000000", "--svg"), "--microbatches"),
        (("schedule", "1f1b", "--durations", "BAD", "--svg"), "--durations"),
        (("bubble", "--pp", "256", "--svg"), "--pp"),
        (("bench", "--pp", "20000", "--report"), "--pp"),
        (("bench", "--timeout", "nan", "--svg"), "--timeout"),
    ],
)
def test_a_refused_command_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, old_file: Path, args: tuple[str, ...], flag: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"f": NaN}')
    argv = [str(bad) if a == "BAD" else a for a in args]
    refused(run_pplan(capsys, *argv, str(old_file)), flag)
    assert old_file.read_text() == OLD
    assert leftovers(tmp_path) == []
