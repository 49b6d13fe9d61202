"""`pplan size` under the inputs, limits and failures of issue 49: every refusal one line naming the flag, exit 2,
before any count is swept; a run that never finishes said in words and null in JSON, on no answer; an unmet
--budget exits 1 as an unmet --days does; the answer printed before the picture; workers that die with their
parent, and a dead worker named in one line."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pplan.cli.app import OutputError
from pplan.cli.cache import cache_root
from pplan.documents.size import SizeDocument
from pplan.errors import ConfigError
from tests.cli_run import run_pplan

BASE = ("size", "--model", "llama3-8b", "--train-tokens", "1e12", "--jobs", "1")


def _no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("swept before refusing the input")

    monkeypatch.setattr("pplan.sizing.sweep.sweep", refuse)


def _one_line(err: str, flag: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"pplan: error: {flag}"), err
    assert "Traceback" not in err
    return lines[0]


def _unwritable_folder(tmp_path: Path) -> Path | None:
    """A folder this user cannot create a file in (root ignores permissions: then a kernel folder)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    for folder in (locked, Path("/sys/kernel"), Path("/proc/self")):
        try:
            (folder / ".probe").touch()
        except OSError:
            return folder
        (folder / ".probe").unlink()
    return None


REFUSED = [
    (("--seq-len", "0"), "--seq-len"),
    (("--jobs", "-1"), "--jobs"),
    (("--jobs", "100000"), "--jobs"),
    (("--gpus", ",".join(str(k) for k in range(1, 16385))), "--gpus"),  # ran 264 s before
    (("--gpus", ",".join(str(8 * k) for k in range(1, 66))), "--gpus"),
    (("--hardware", ",".join(["h100-sxm-80gb"] + [f"x{k}.toml" for k in range(16)])), "--hardware"),
]


@pytest.mark.parametrize(("args", "flag"), REFUSED)
def test_refused_before_the_sweep(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], flag: str
) -> None:
    _no_sweep(monkeypatch)
    base = [*BASE] if "--hardware" in args else [*BASE, "--hardware", "h100-sxm-80gb"]
    res = run_pplan(capsys, *base, *args)
    assert res.code == 2 and res.out == ""
    _one_line(res.err, flag)


def test_a_copy_of_a_profile_by_another_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--hardware h100-sxm-80gb,h/x.toml`, x.toml a copy of the bundled profile: was ZeroDivisionError, exit 3."""
    from pplan.profiles.catalog import profile_source

    _no_sweep(monkeypatch)
    copy = tmp_path / "x.toml"
    copy.write_text(profile_source("hardware", "h100-sxm-80gb"), encoding="utf-8")
    res = run_pplan(capsys, *BASE, "--hardware", f"h100-sxm-80gb,{copy}")
    assert res.code == 2
    line = _one_line(res.err, "--hardware")
    assert str(copy) in line and "'h100-sxm-80gb'" in line


def test_an_unwritable_svg_folder_is_found_before_the_sweep(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _unwritable_folder(tmp_path)
    if folder is None:
        pytest.skip("no folder here refuses a new file")
    _no_sweep(monkeypatch)
    res = run_pplan(
        capsys, *BASE, "--hardware", "h100-sxm-80gb", "--gpus", "8", "--svg", str(folder / "s.svg")
    )
    assert res.code == 2
    assert "cannot write in the folder" in _one_line(res.err, "--svg")
    assert not (folder / "s.svg").exists()


def test_the_answer_comes_before_the_picture(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A picture that cannot be written (a full disk at the last moment) costs only the picture: the table is out."""

    def full(path: Path, *_: object) -> None:
        raise OutputError(str(path), OSError(errno.ENOSPC, "No space left on device"))

    monkeypatch.setattr("pplan.cli.size.write_output", full)
    res = run_pplan(
        capsys, *BASE, "--hardware", "h100-sxm-80gb", "--gpus", "8", "--svg", str(tmp_path / "s.svg")
    )
    assert res.code == 4 and "No space left on device" in res.err
    assert "Answers" in res.out and "Assumptions" in res.out


def test_a_run_that_never_finishes(capsys: pytest.CaptureFixture[str]) -> None:
    """0.1 interruptions per GPU-hour on 64 GPUs: a mean time between interruptions (9.4 min) shorter than the
    time to recover from one. Was `inf days`, `$infM` on the Pareto front, and exit 3 with --json."""
    args = [*BASE, "--hardware", "h100-sxm-80gb", "--gpus", "8,64", "--interruptions-per-gpu-hour", "0.1",
            "--price", "h100-sxm-80gb=2"]  # fmt: skip
    res = run_pplan(capsys, *args, "--format", "json")
    assert res.code == 0, res.err

    def refuse(token: str) -> None:
        raise ValueError(token)

    doc = SizeDocument.model_validate(json.loads(res.out, parse_constant=refuse))
    by_gpus = {p.gpus: p for p in doc.points}
    for p in doc.points:
        g = p.goodput
        assert g is not None
        lost_s = g.restart_s + (g.interval_s + g.checkpoint_write_s) / 2  # the module's first-order model
        assert p.finishes == (lost_s < g.mtbf_s)
        assert g.mtbf_s == pytest.approx(3600 / (0.1 * p.gpus))
    never = by_gpus[64]
    assert not never.finishes and never.fits and never.reason and never.reason.startswith("never finishes")
    assert never.wall_days is None and never.cost_usd is None and never.gpu_hours is None
    assert never.wall_interval_days is None and never.energy_kwh is None
    assert "h100-sxm-80gb × 64" not in doc.answers.pareto and doc.answers.pareto == ["h100-sxm-80gb × 8"]
    table = run_pplan(capsys, *args, "--budget", "1e9")
    assert table.code == 0, table.err
    assert "inf" not in table.out and "never finishes" in table.out
    assert "Fastest within $1,000,000,000: h100-sxm-80gb × 8" in " ".join(table.out.split())


def test_an_unmet_budget_exits_1_as_an_unmet_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *BASE, "--hardware", "h100-sxm-80gb", "--gpus", "8", "--price", "h100-sxm-80gb=2",
                    "--budget", "1000")  # fmt: skip
    assert res.code == 1
    assert "Answers" in res.out  # the answer is printed all the same
    line = res.err.strip()
    assert line.startswith(
        "pplan: nothing in the sweep trains it within $1,000; cheapest: h100-sxm-80gb × 8, $"
    )
    spend = float(line.rsplit("$", 1)[1].replace(",", ""))
    assert spend > 1000


def test_the_json_alias_and_the_format_agree(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*BASE, "--hardware", "h100-sxm-80gb", "--gpus", "8"]
    assert run_pplan(capsys, *args, "--json").out == run_pplan(capsys, *args, "--format", "json").out


def test_the_pool_is_no_larger_than_a_round(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pplan.cli.size as size_cli

    asked: list[int] = []
    real = size_cli._Runner

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, jobs: int, show: bool) -> None:
            asked.append(jobs)
            super().__init__(1, show)

    monkeypatch.setattr(size_cli, "_Runner", Recording)
    res = run_pplan(capsys, "size", "--model", "llama3-8b", "--train-tokens", "1e12", "--hardware",
                    "h100-sxm-80gb", "--gpus", "8,16,32", "--jobs", "200", "--json")  # fmt: skip
    assert res.code == 0, res.err
    assert asked == [2]  # one hardware: rounds of two counts


def test_a_relative_xdg_cache_home_is_ignored() -> None:
    """The XDG Base Directory spec: a relative path in XDG_CACHE_HOME is invalid and ignored."""
    assert cache_root({"XDG_CACHE_HOME": "relative/cache"}) == Path.home() / ".cache" / "pplan"
    assert cache_root({"XDG_CACHE_HOME": "/abs/cache"}) == Path("/abs/cache/pplan")


def _killed(_: object) -> None:
    """A task that dies as the out-of-memory killer ends a process."""
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_dead_worker_is_one_line_naming_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker SIGKILLed as the out-of-memory killer kills: was exit 3 "please report it"."""
    import pplan.cli.size as size_cli
    import pplan.sizing.sweep as sweep

    monkeypatch.setattr(sweep, "evaluate", _killed)  # the forked workers inherit it
    with pytest.raises(ConfigError) as caught, size_cli._Runner(2, False) as run:
        run([object()])  # type: ignore[list-item]
    assert caught.value.field == "--jobs"
    assert "SIGKILL" in caught.value.message and "out-of-memory killer" in caught.value.message


WORKERS_OF_A_KILLED_PARENT = textwrap.dedent(
    """
    import os, signal, sys, time
    import pplan.cli.size as size_cli
    import pplan.sizing.sweep as sweep
    sweep.evaluate = lambda task: time.sleep(60)
    run = size_cli._Runner(2, False).__enter__()
    run.pool.submit(sweep.evaluate, None)
    print(" ".join(str(p) for p in run.pool._processes), flush=True)
    time.sleep(0.3)
    os.kill(os.getpid(), int(sys.argv[1]))
    time.sleep(60)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def assert_workers_die(signum: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKERS_OF_A_KILLED_PARENT, str(int(signum))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PPLAN_CACHE_DIR": "off"},
    )  # fmt: skip
    assert proc.stdout is not None
    workers = [int(x) for x in proc.stdout.readline().split()]
    proc.wait(timeout=60)
    assert proc.returncode == -signum
    assert len(workers) == 2
    deadline = time.monotonic() + 5
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = [w for w in workers if _alive(w)]
    for w in left:  # do not leave them to the next test
        os.kill(w, signal.SIGKILL)
    assert left == []


@pytest.mark.acceptance  # a fresh interpreter each: seconds
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP, signal.SIGQUIT])
def test_workers_die_with_their_parent(signum: int) -> None:
    """The parent killed outright (no handler of its own runs): its workers follow within a second; they lived on
    forever before (4 of 4)."""
    assert_workers_die(signum)


def test_short_reasons_fit_the_plan_column() -> None:
    """A row without an answer says why in one line of the plan column (it wrapped over six at 80 columns)."""
    from pplan.render.size import short_reason

    assert short_reason(None) == "no plan"
    oom = "out of memory: the nearest plan (t=1 p=1 cp=1 b=1) needs at least 141.1 of 83.6 GB"
    assert short_reason(oom) == "out of memory: ≥141.1/83.6 GB"
    assert len(short_reason(oom)) <= 30  # one line in the plan column at 80 columns
    assert "inf" not in short_reason("never finishes: x")


@pytest.mark.parametrize(
    ("module", "args"),
    [
        (
            "pplan.cli.explain",
            ("explain", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--pp", "1", "--json"),
        ),
        ("pplan.cli.schedule", ("schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--json")),
    ],
)
def test_every_picture_comes_after_stdout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module: str,
    args: tuple[str, ...],
) -> None:  # fmt: skip
    """explain and schedule too: a picture that cannot be written leaves the document printed (exit 4)."""

    def full(path: Path, *_: object) -> None:
        raise OutputError(str(path), OSError(errno.ENOSPC, "No space left on device"))

    monkeypatch.setattr(f"{module}.write_output", full)
    res = run_pplan(capsys, *args, "--svg", str(tmp_path / "p.svg"))
    assert res.code == 4 and "No space left on device" in res.err
    assert json.loads(res.out)
