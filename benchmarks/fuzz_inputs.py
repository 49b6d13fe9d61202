"""Issue 10's input hardening, measured: the regression corpus and a time-boxed random fuzz of the CLI.

(a) Every case of `tests/regression_corpus.py` (the fuzz's minimal failing inputs, plus the heavy probes near
    the size caps that the test suite skips) as a real `python -m pplan` subprocess: exit code, wall time, peak
    RSS (os.wait4), stderr lines and the strict-JSON verdict.
(b) `--minutes N` of random argument lists for `recommend`, `explain`, `schedule` and `bubble`, drawn from a
    grammar of their options with ordinary, extreme, zero, negative, non-finite and malformed values, each run
    with a 10 s timeout. Counted: tracebacks ("Traceback" in stderr, or an exit code other than 0 and 2), hangs
    (over 10 s), exit 0 on detectably invalid input (a zero or negative count, a non-finite or negative duration,
    ...), non-strict JSON, and error output that is not one "pplan: error: " line.

Prints the figures and the first few failing command lines; asserts nothing.

    python benchmarks/fuzz_inputs.py --minutes 10 --seed 1
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cli_grammar import draw, is_json  # noqa: E402
from tests.regression_corpus import CASES, problems  # noqa: E402

TIMEOUT_S = 10.0
RSS_LIMIT_MB = 1024.0


@dataclass
class Run:
    code: int
    out: str
    err: str
    wall_s: float
    rss_mb: float
    hung: bool


SPAWNER = """
import os, sys
pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "pplan", *sys.argv[2:]], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""
"""Runs pplan and reports its exit code and peak RSS. A process's ru_maxrss includes the RSS of whatever it was
forked from (exec keeps the high-water mark), so pplan is spawned from this small interpreter, not from the
benchmark, whose RSS grows with the outputs it reads."""


def run_cli(args: list[str], cwd: Path, timeout_s: float = TIMEOUT_S) -> Run:
    """`python -m pplan *args` in `cwd`, killed after `timeout_s`; peak RSS from os.wait4's rusage."""
    env = {k: v for k, v in os.environ.items() if k != "PPLAN_DEBUG"} | {"PYTHONPATH": str(ROOT)}
    with (
        tempfile.TemporaryFile() as out_f,
        tempfile.TemporaryFile() as err_f,
        tempfile.NamedTemporaryFile("r", suffix=".rusage") as usage_f,
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", SPAWNER, usage_f.name, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out_f,
            stderr=err_f,
            start_new_session=True,  # a timeout kills the spawner and pplan together
        )
        killed = threading.Event()

        def kill() -> None:  # a timer, not wait(timeout), whose polling rounds wall times up to 50 ms
            killed.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        proc.wait()
        timer.cancel()
        hung = killed.is_set()
        wall = time.perf_counter() - start
        report = usage_f.read().split()
        code, rss_kb = (int(report[0]), int(report[1])) if len(report) == 2 else (proc.returncode, 0)
        out_f.seek(0)
        err_f.seek(0)
        out = out_f.read().decode("utf-8", "replace")
        err = err_f.read().decode("utf-8", "replace")
    return Run(code, out, err, wall, rss_kb / 1024, hung)


# --- (a) the regression corpus --------------------------------------------------------------------------------


def corpus() -> int:
    print(f"(a) regression corpus: {len(CASES)} cases as subprocesses ({sum(c.heavy for c in CASES)} heavy)")
    print(f"    {'case':36} {'exit':>4} {'wall s':>7} {'RSS MB':>7} {'err lines':>9}  verdict")
    bad = 0
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            case.write_files(tmp)
            run = run_cli(case.argv(tmp), tmp)
        found = problems(case.json_out, run.code, run.out, run.err, case.expect)
        if run.hung:
            found = [f"hang: over {TIMEOUT_S:g} s"]
        if run.rss_mb > RSS_LIMIT_MB:
            found.append(f"memory: {run.rss_mb:.0f} MB")
        json_verdict = "strict JSON" if case.json_out and run.code == 0 and not found else ""
        verdict = "; ".join(found) if found else ("ok " + json_verdict).strip()
        if case.known:
            verdict += f"  [open finding: {case.known}]"
        bad += bool(found)
        lines = len(run.err.splitlines())
        print(f"    {case.id:36} {run.code:>4} {run.wall_s:>7.2f} {run.rss_mb:>7.0f} {lines:>9}  {verdict}")
    known = sum(bool(c.known) for c in CASES)
    print(f"    => {bad} of {len(CASES)} cases break the contract ({known} of them listed as open findings)")
    return bad


# --- (b) the random fuzz --------------------------------------------------------------------------------------


def fuzz(minutes: float, seed: int, workers: int, show: int) -> Counter[str]:
    rng = random.Random(seed)
    deadline = time.monotonic() + minutes * 60
    counts: Counter[str] = Counter()
    failures: list[tuple[str, str]] = []
    walls: list[float] = []
    rss: list[float] = []
    lock = threading.Lock()

    def one(job: tuple[list[str], bool, Path]) -> None:
        args, invalid, tmp = job
        run = run_cli(args, tmp)
        expect = 2 if invalid else None
        found = problems(is_json(args), run.code, run.out, run.err, expect)
        if run.hung:  # killed: the exit code says SIGKILL, not a traceback
            found = [f"hang: over {TIMEOUT_S:g} s"]
        if run.rss_mb > RSS_LIMIT_MB:
            found.append(f"memory: {run.rss_mb:.0f} MB")
        with lock:
            counts["runs"] += 1
            counts[f"exit {run.code}"] += 1
            walls.append(run.wall_s)
            rss.append(run.rss_mb)
            for problem in found:
                counts[problem.split(":")[0]] += 1
            if found and len(failures) < show:
                failures.append(("pplan " + shlex.join(args), "; ".join(found)))

    with tempfile.TemporaryDirectory() as tmp_name, ThreadPoolExecutor(workers) as pool:
        tmp_root = Path(tmp_name)
        pending: set[object] = set()
        k = 0
        while time.monotonic() < deadline:
            while len(pending) < 2 * workers and time.monotonic() < deadline:
                tmp = tmp_root / str(k)
                tmp.mkdir()
                args, invalid = draw(rng, tmp)
                future = pool.submit(one, (args, invalid, tmp))
                pending.add(future)
                future.add_done_callback(pending.discard)
                k += 1
            time.sleep(0.02)
    walls.sort()
    print(f"\n(b) random fuzz: {minutes:g} min, seed {seed}, {workers} workers")
    print(
        f"    runs {counts['runs']}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k.startswith("exit"))
    )
    if walls:
        print(
            f"    wall s: median {walls[len(walls) // 2]:.2f}, p99 {walls[int(len(walls) * 0.99)]:.2f}, "
            f"max {walls[-1]:.2f}; peak RSS max {max(rss):.0f} MB"
        )
    labels = ["traceback", "hang", "invalid-accepted", "non-strict-json", "error-lines", "non-finite-text"]
    labels += ["empty-output", "memory"]
    print("    " + ", ".join(f"{label} {counts[label]}" for label in labels))
    for command, problem in failures:
        print(f"    FAIL {command}\n         {problem[:300]}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="fuzz time box (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--show", type=int, default=8, help="failing command lines to print")
    parser.add_argument("--skip-corpus", action="store_true")
    opts = parser.parse_args()
    if not opts.skip_corpus:
        corpus()
    if opts.minutes > 0:
        fuzz(opts.minutes, opts.seed, opts.workers, opts.show)


if __name__ == "__main__":
    main()
