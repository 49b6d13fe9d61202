"""Fuzz `pplan size` and `pplan compare` as `tests/test_cli_fuzz.py`, `tests/test_signals.py` and
`tests/test_fuzz_destinations.py` fuzz `recommend` (issue 49, item 7), on four surfaces:
- inputs: random `size` command lines (valid and detectably invalid values), in-process: exit 0, 1 (a goal
  not met) or 2 with one `pplan: error:` line; strict JSON, no `inf` in a table;
- files: a valid explain report mutated at random (a leaf replaced by NaN, 1e400, a huge integer, a negative
  number, a wrong type, a long list, deep nesting; bytes cut or flipped; the schema changed), handed to
  `compare`: exit 0 or one line naming A or B, exit 2, never a traceback;
- signals: `size --jobs 2` sent SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGKILL at a random moment: interrupted
  cleanly or whole, and no process of the run left alive; `compare` sent SIGINT or SIGTERM: the same;
- limits: `size --jobs 2` under a descriptor limit (in-process fallback with one warning line, or a refusal),
  `compare` of hostile files under a 1 GB address-space limit: never exit 3.
The fast tier runs a seeded sample of each; the acceptance tier the series."""

from __future__ import annotations

import copy
import itertools
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pplan.cli import INTERRUPTED
from tests.cli_run import run_pplan
from tests.processes import signal_group_once_held
from tests.test_signals import _group_left as _alive_in_group

# --- inputs ---------------------------------------------------------------------------------------------------

GOOD_GPUS = ["8", "16", "8,16", "8..16", "16,24"]
BAD_GPUS = [
    "0",
    "-8",
    "16..8",
    "lots",
    "",
    ",",
    "8,,",
    "1e3",
    ",".join(str(k) for k in range(1, 100)),
    "99999",
]


def _size_line(rng: random.Random, tmp: Path) -> tuple[list[str], bool]:
    """A random size command line (cheap: one or two small counts of a small model when valid) and whether it
    holds a detectably invalid value."""
    bad = False

    def pick(good: list[str], wrong: list[str]) -> str:
        nonlocal bad
        if rng.random() < 0.15:
            bad = True
            return rng.choice(wrong)
        return rng.choice(good)

    args = ["size", "--model", pick(["llama3-8b", "gpt-1.7b"], ["nosuch", "/dev/null", "/", "\x1b[2J"])]
    args += ["--hardware", pick(["h100-sxm-80gb", "b200-180gb", "h100-sxm-80gb,b200-180gb"],
                                ["nosuch", "h100-sxm-80gb,h100-sxm-80gb", "", ","])]  # fmt: skip
    args += ["--train-tokens", pick(["1e11", "1e12", "3e12"], ["0", "-1", "nan", "inf", "1e400"])]
    args += ["--gpus", pick(GOOD_GPUS, BAD_GPUS)]
    args += ["--jobs", pick(["1", "1", "2"], ["-1", "257", "1e9"])]
    optional: dict[str, Callable[[], str]] = {
        "--days": lambda: pick(["1", "30", "3650"], ["0", "-3", "nan"]),
        "--budget": lambda: pick(["1e3", "1e9"], ["0", "-1", "inf"]),
        "--price": lambda: pick(
            ["h100-sxm-80gb=2,b200-180gb=5"], ["h100-sxm-80gb=free", "x=1", "h100-sxm-80gb=-1"]
        ),
        "--interruptions-per-gpu-hour": lambda: pick(["2e-5", "0.01", "0.1", "1"], ["0", "-1", "2", "nan"]),
        "--restart-minutes": lambda: pick(["0", "10", "600"], ["-1", "1e9", "nan"]),
        "--seq-len": lambda: pick(["2048", "4096"], ["0", "-1"]),
        "--global-batch-tokens": lambda: pick(["4194304", "1048576"], ["0", "-5"]),
        "--pue": lambda: pick(["1", "1.3"], ["0.5", "11", "nan"]),
        "--format": lambda: pick(["table", "json"], ["yaml", ""]),
    }
    for name in rng.sample(sorted(optional), k=rng.randint(0, 4)):
        args += [name, optional[name]()]
    if rng.random() < 0.2:
        args += ["--svg", str(tmp / "size.svg")]
    if rng.random() < 0.3:
        args.append("--json")
    if "--budget" in args and "--price" not in args:
        bad = True  # a budget needs prices
    return args, bad


def _strict(text: str) -> Any:
    def refuse(token: str) -> None:
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def check_size_line(capsys: pytest.CaptureFixture[str], seed: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        args, invalid = _size_line(rng, Path(tmp))
        res = run_pplan(capsys, *args)
    assert res.code in (0, 1, 2), (args, res.code, res.err[-500:])
    assert "Traceback" not in res.err and "internal error" not in res.err, (args, res.err)
    if res.code == 2:
        lines = res.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pplan: error: "), (args, res.err)
        return
    assert not invalid, f"accepted a detectably invalid value: {args}"
    if "--json" in args or any(x == "--format" and y == "json" for x, y in itertools.pairwise(args)):
        _strict(res.out)
    else:
        assert "inf " not in res.out and "$inf" not in res.out and "nan" not in res.out.lower().split(), args


@pytest.mark.parametrize("seed", [5, 17])
def test_size_lines_seeded(capsys: pytest.CaptureFixture[str], seed: int) -> None:
    check_size_line(capsys, seed)


@pytest.mark.acceptance
@pytest.mark.parametrize("seed", range(1000, 1040))
def test_size_lines(capsys: pytest.CaptureFixture[str], seed: int) -> None:
    check_size_line(capsys, seed)


# --- files ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import contextlib
    import io

    from pplan.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["explain", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "64",
              "--json"])  # fmt: skip
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a leaf or container in `value`."""
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            out += _paths(v, (*at, k))
    return out


SENTINEL = "@@FUZZ@@"
TOKENS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "9" * 5000, "-3", "-0.5", "0", "true", "null",
          '"x"', "[]", "{}", "[" * 200 + "]" * 200, "[" + ",".join(["0"] * 200_000) + "]", '"' + "\\u0000" * 10 + '"']  # fmt: skip


def _mutated(rng: random.Random, report: dict[str, Any]) -> bytes:
    data = copy.deepcopy(report)
    kind = rng.random()
    if kind < 0.6:  # a value replaced by a hostile token
        path = rng.choice([p for p in _paths(data) if p])
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = SENTINEL
        return json.dumps(data).replace(f'"{SENTINEL}"', rng.choice(TOKENS)).encode()
    if kind < 0.7:  # the schema changed or removed
        if rng.random() < 0.5:
            data.pop("schema")
        else:
            data["schema"] = rng.choice(
                ["pplan.explain/999", "pplan.explain/1", "pplan.recommend/2", 2, None]
            )
        return json.dumps(data).encode()
    raw = bytearray(json.dumps(data).encode())
    if kind < 0.85:  # cut short
        return bytes(raw[: rng.randrange(len(raw))])
    for _ in range(rng.randint(1, 8)):  # bytes flipped
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


def check_compare_file(
    capsys: pytest.CaptureFixture[str], report: dict[str, Any], seed: int, tmp: Path
) -> None:
    rng = random.Random(seed)
    good, bad = tmp / f"good{seed}.json", tmp / f"bad{seed}.json"
    good.write_text(json.dumps(report), encoding="utf-8")
    bad.write_bytes(_mutated(rng, report))
    first = rng.random() < 0.5
    pair = (bad, good) if first else (good, bad)
    res = run_pplan(
        capsys, "compare", str(pair[0]), str(pair[1]), *(["--format", "json"] if rng.random() < 0.5 else [])
    )
    assert res.code in (0, 2), (seed, res.code, res.err[-300:])
    assert "Traceback" not in res.err and "internal error" not in res.err, (seed, res.err)
    if res.code == 2:
        lines = res.err.strip().splitlines()
        side = "A" if first else "B"
        assert len(lines) == 1 and lines[0].startswith(f"pplan: error: {side}: "), (seed, res.err)
    elif res.out.startswith("{"):
        _strict(res.out)


@pytest.mark.parametrize("seed", range(12))
def test_compare_files_seeded(
    capsys: pytest.CaptureFixture[str], report: dict[str, Any], tmp_path: Path, seed: int
) -> None:
    check_compare_file(capsys, report, seed, tmp_path)


@pytest.mark.acceptance
def test_compare_files(capsys: pytest.CaptureFixture[str], report: dict[str, Any], tmp_path: Path) -> None:
    """300 mutated reports; the count held is the count tried (any failure names its seed)."""
    for seed in range(10_000, 10_300):
        check_compare_file(capsys, report, seed, tmp_path)


# --- signals --------------------------------------------------------------------------------------------------

SIZE_RUN = ["size", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb,b200-180gb", "--train-tokens", "1e12",
            "--gpus", "8..128", "--jobs", "2", "--format", "json"]  # fmt: skip
FATAL = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL]


def check_size_signal(seed: int, tmp: Path) -> None:
    rng = random.Random(seed)
    signum = rng.choice(FATAL)
    delay = rng.uniform(0, 3.0)
    stdout = tmp / "stdout"
    with open(stdout, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pplan", *SIZE_RUN], stdout=out, stderr=subprocess.PIPE,
            env={**os.environ, "PPLAN_CACHE_DIR": "off"}, start_new_session=True,
        )  # fmt: skip
    if signum in (signal.SIGINT, signal.SIGTERM):
        signal_group_once_held(proc, signum, delay)  # as Ctrl-C and timeout(1) do: the whole group
    else:
        time.sleep(delay)
        os.kill(proc.pid, signum)  # the parent alone, as a dying terminal or the OOM killer would
    _, err = proc.communicate(timeout=300)
    deadline = time.monotonic() + 5
    while _alive_in_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = _alive_in_group(proc.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], (seed, signum, delay)
    text = err.decode("utf-8", "replace")
    if proc.returncode == 0:
        _strict(stdout.read_text())  # the run ended before the signal: whole
    elif signum in (signal.SIGINT, signal.SIGTERM):
        assert proc.returncode == 128 + signum and text.splitlines() == [INTERRUPTED], (
            seed,
            proc.returncode,
            text,
        )
        assert stdout.read_bytes() == b""
    else:
        assert proc.returncode in (-signum, 128 + signum), (seed, signum, proc.returncode, text)


@pytest.mark.parametrize("seed", [2])
def test_size_signal_seeded(tmp_path: Path, seed: int) -> None:
    check_size_signal(seed, tmp_path)


@pytest.mark.acceptance
@pytest.mark.parametrize("seed", range(200, 215))
def test_size_signals(tmp_path: Path, seed: int) -> None:
    check_size_signal(seed, tmp_path)


def check_compare_signal(seed: int, report: dict[str, Any], tmp: Path) -> None:
    """`compare` sent SIGINT or SIGTERM at a random moment: one line and 128 + the signal with nothing on stdout,
    or the whole document."""
    rng = random.Random(seed)
    signum = rng.choice([signal.SIGINT, signal.SIGTERM])
    a, b = tmp / "a.json", tmp / "b.json"
    a.write_text(json.dumps(report), encoding="utf-8")
    b.write_text(json.dumps(report), encoding="utf-8")
    stdout = tmp / "stdout"
    with open(stdout, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pplan", "compare", str(a), str(b), "--format", "json"], stdout=out,
            stderr=subprocess.PIPE, env={**os.environ, "PPLAN_CACHE_DIR": "off"}, start_new_session=True,
        )  # fmt: skip
    signal_group_once_held(proc, signum, rng.uniform(0, 0.6))
    _, err = proc.communicate(timeout=120)
    text = err.decode("utf-8", "replace")
    if proc.returncode == 0:
        assert _strict(stdout.read_text())["schema"] == "pplan.compare/1" and text == ""
    else:
        assert proc.returncode == 128 + signum and text.splitlines() == [INTERRUPTED], (
            seed,
            proc.returncode,
            text,
        )
        assert stdout.read_bytes() == b""


@pytest.mark.acceptance
@pytest.mark.parametrize("seed", range(250, 260))
def test_compare_signals(seed: int, report: dict[str, Any], tmp_path: Path) -> None:
    check_compare_signal(seed, report, tmp_path)


# --- limits ---------------------------------------------------------------------------------------------------


def _limited(kind: int, value: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(kind, (value, value))

    return apply


def check_size_limit(seed: int) -> None:
    """`size --jobs 2` with few descriptors: the answer (the same bytes as --jobs 1, with at most one warning
    line about the workers) or one refusal line; never exit 3 or a hang."""
    rng = random.Random(seed)
    files = rng.randint(8, 40)
    args = [sys.executable, "-m", "pplan", "size", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb",
            "--train-tokens", "1e12", "--gpus", "8,16", "--format", "json"]  # fmt: skip
    env = {**os.environ, "PPLAN_CACHE_DIR": "off"}
    proc = subprocess.run([*args, "--jobs", "2"], capture_output=True, env=env, timeout=300,
                          preexec_fn=_limited(resource.RLIMIT_NOFILE, files), check=False)  # fmt: skip
    err = proc.stderr.decode("utf-8", "replace").splitlines()
    assert proc.returncode in (0, 2, 4), (files, proc.returncode, err[-3:])
    if proc.returncode == 0:
        assert all(line.startswith("pplan: warning: cannot start 2 worker processes") for line in err), err
        alone = subprocess.run([*args, "--jobs", "1"], capture_output=True, env=env, timeout=300, check=True)
        assert proc.stdout == alone.stdout
    else:
        assert len(err) == 1 and err[0].startswith(("pplan: error: ", "pplan: cannot write")), (files, err)


def check_compare_limit(seed: int, report: dict[str, Any], tmp: Path) -> None:
    """`compare` of a hostile input under a 1 GB address-space limit: one line, exit 2 (was MemoryError, exit 3)."""
    rng = random.Random(seed)
    good = tmp / "good.json"
    good.write_text(json.dumps(report), encoding="utf-8")
    hostile = rng.choice(["/dev/zero", "advice", "nested", "digits"])
    path = Path(hostile) if hostile.startswith("/") else tmp / f"{hostile}.json"
    if hostile == "advice":
        path.write_text(json.dumps({**report, "advice": [0] * 3_000_000}), encoding="utf-8")
    elif hostile == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    elif hostile == "digits":
        path.write_text('{"schema": "pplan.explain/2", "x": ' + "7" * 5000 + "}", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pplan", "compare", str(path), str(good)], capture_output=True, timeout=120,
        env={**os.environ, "PPLAN_CACHE_DIR": "off"}, preexec_fn=_limited(resource.RLIMIT_AS, 1 << 30), check=False,
    )  # fmt: skip
    err = proc.stderr.decode("utf-8", "replace").splitlines()
    assert proc.returncode == 2 and len(err) == 1 and err[0].startswith("pplan: error: A: "), (hostile, err)


@pytest.mark.parametrize("seed", [1])
def test_limits_seeded(seed: int, report: dict[str, Any], tmp_path: Path) -> None:
    check_compare_limit(seed, report, tmp_path)


@pytest.mark.acceptance
@pytest.mark.parametrize("seed", range(300, 312))
def test_size_limits(seed: int) -> None:
    check_size_limit(seed)


@pytest.mark.acceptance
@pytest.mark.parametrize("seed", range(400, 408))
def test_compare_limits(seed: int, report: dict[str, Any], tmp_path: Path) -> None:
    check_compare_limit(seed, report, tmp_path)
