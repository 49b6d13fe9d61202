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
import itertools
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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

Gen = Callable[[random.Random], tuple[str, bool]]
"""A value generator: (the argument text, whether the value is detectably invalid)."""

MALFORMED = [
    "",
    "abc",
    "1,2",
    "0x10",
    "1e",
    "--",
    "½",
    "1_000",
    " 3",
    "3 ",
    "١٢",
    "+",
    "1.5.2",
    "None",
    "true",
]
NON_FINITE = ["nan", "NaN", "inf", "-inf", "Infinity", "-Infinity", "1e309", "-1e309"]
HUGE_INTS = [10**k for k in (7, 8, 9, 12, 18, 19, 30, 100, 400)] + [2**31, 2**63, 2**64]


def count(lo: int = 1, typical: tuple[int, ...] = (1, 2, 4, 8, 16, 64), hi: int | None = None) -> Gen:
    """An integer option whose valid values are ≥ `lo` (and ≤ `hi`, where known)."""

    def gen(rng: random.Random) -> tuple[str, bool]:
        kind = rng.random()
        if kind < 0.45:
            value = rng.choice(typical)
        elif kind < 0.6:
            value = rng.choice([0, -1, -4, -(2**31), lo - 1])
        elif kind < 0.75:
            value = rng.choice(HUGE_INTS)
        elif kind < 0.85:
            value = rng.randint(-100, 10**6)
        else:
            text = rng.choice([*MALFORMED, *NON_FINITE, "2.0", "1e3", "-0"])
            return text, False  # a malformed int is a click error (exit 2); nothing to detect beyond that
        invalid = value < lo or (hi is not None and value > hi)
        return str(value), invalid

    return gen


def real(
    lo: float, lo_open: bool, hi: float | None = None, typical: tuple[float, ...] = (0.5, 1.0, 2.0)
) -> Gen:
    """A float option whose valid values are finite and ≥ `lo` (> `lo` when `lo_open`), ≤ `hi` where known."""

    def gen(rng: random.Random) -> tuple[str, bool]:
        kind = rng.random()
        if kind < 0.4:
            value = rng.choice(typical)
        elif kind < 0.55:
            return rng.choice(NON_FINITE), True
        elif kind < 0.7:
            value = rng.choice([0.0, -0.0, -1.0, -1e-300, 5e-324, -1e300])
        elif kind < 0.85:
            value = rng.choice([1e12, 1e13, 1e18, 1e19, 1e300, 1.7976931348623157e308])
        else:
            return rng.choice([*MALFORMED, "1e-400", "0x1p3", "1e5"]), False
        invalid = value < lo or (lo_open and value == lo) or (hi is not None and value > hi)
        return repr(value), invalid

    return gen


def choice(valid: list[str], bad: list[str]) -> Gen:
    def gen(rng: random.Random) -> tuple[str, bool]:
        if rng.random() < 0.8:
            return rng.choice(valid), False
        return rng.choice(bad), False  # unknown names: refused, but not "detectably invalid" by this grammar

    return gen


def count_list(rng: random.Random) -> tuple[str, bool]:
    """bubble's --microbatches: a comma list of micro-batch counts."""
    values = [count()(rng)[0] for _ in range(rng.randint(1, 4))]
    invalid = any(v.lstrip("-").isdigit() and int(v) <= 0 for v in values)
    return ",".join(values), invalid


MODELS = ["llama3-8b", "llama3-70b", "gpt-1.7b", "gpt3-175b", "llama3-405b", "gpt-1t"]
BAD_PATHS = [
    "nosuch",
    "~nosuchuser/x.toml",
    "/",
    "/dev/null",
    "/etc",
    "x" * 300 + ".toml",
    "",
    "\x1b[2J.toml",
]
HARDWARE = ["h100-sxm-80gb", "a100-sxm-40gb", "b200-180gb", "h200-sxm-141gb"]
SCHEDULES = ["1f1b", "gpipe", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev", "dualpipe"]
BAD_NAMES = ["", "nosuch", "1F1B ", "zb-h3", "\x07", "ñ", "1f1b,1f1b"]

COMMON = {
    "--model": choice(MODELS, BAD_PATHS),
    "--hardware": choice(HARDWARE, BAD_PATHS),
    "--gpus": count(typical=(8, 16, 64, 512, 2048, 9699690)),
    "--global-batch": count(typical=(1, 8, 64, 1024, 1048576)),
    "--seq-len": count(typical=(512, 2048, 8192, 131072)),
    "--tp": count(),
    "--pp": count(),
    "--cp": count(),
    "--micro-batch": count(),
}
GRAMMAR: dict[str, dict[str, Gen]] = {
    "recommend": {
        **COMMON,
        "--vp": count(),
        "--max-vp": count(),
        "--top": count(typical=(1, 3, 10)),
        "--min-microbatches": count(),
        "--headroom": real(0.0, False, typical=(0.0, 0.1, 0.5)),
        "--schedule": choice([*SCHEDULES, "1f1b,zb-h1", "zbv,dualpipev"], BAD_NAMES),
        "--recompute": choice(["none", "selective", "full", "none,full"], BAD_NAMES),
        "--zero-stage": choice(["0", "1", "0,1", "2,3"], ["4", "-1", "", "0,,1"]),
        "--grad-dtype": choice(["fp32", "bf16"], BAD_NAMES),
        "--launcher": choice(["megatron", "torchtitan"], BAD_NAMES),
        "--format": choice(["table", "json", "json", "megatron", "torchtitan"], BAD_NAMES),
    },
    "explain": {
        **COMMON,
        "--vp": count(),
        "--schedule": choice(SCHEDULES, BAD_NAMES),
        "--recompute": choice(["none", "selective", "full"], BAD_NAMES),
        "--zero-stage": count(lo=0, typical=(0, 1, 2, 3), hi=3),
        "--grad-dtype": choice(["fp32", "bf16"], BAD_NAMES),
        "--activation-model": choice(["itemised", "korthikanti"], BAD_NAMES),
        "--first-stage-layers": count(lo=0, typical=(0, 1, 2, 4)),
        "--last-stage-layers": count(lo=0, typical=(0, 1, 2, 4)),
        "--train-tokens": real(0.0, True, 1e18, typical=(1e9, 15e12)),
        "--pass-durations": choice(["analytic", "unit"], BAD_NAMES),
        "--format": choice(["megatron", "torchtitan"], BAD_NAMES),
    },
    "schedule": {
        "--pp": count(typical=(1, 2, 4, 8, 16)),
        "--microbatches": count(typical=(1, 2, 4, 8, 32)),
        "--vp": count(typical=(1, 2, 3)),
        "--f": real(0.0, False, 1e12),
        "--b": real(0.0, False, 1e12),
        "--w": real(0.0, False, 1e12),
        "--comm": real(0.0, False, 1e12, typical=(0.0, 0.1, 1.0)),
    },
    "bubble": {
        "--pp": count(typical=(1, 2, 4, 8, 16), hi=256),
        "--microbatches": count_list,
        "--measure": choice(["span", "step"], BAD_NAMES),
    },
}
FLAGS = {
    "recommend": ["--allow-cross-node", "--no-allow-cross-node"],
    "explain": [
        "--json",
        "--json",
        "--all-stages",
        "--no-flash-attention",
        "--sequence-parallel",
        "--distributed-optimizer",
    ],
    "schedule": ["--json", "--json"],
    "bubble": [],
}


def draw(rng: random.Random, tmp: Path) -> tuple[list[str], bool]:
    """One random command line and whether it holds a detectably invalid value."""
    command = rng.choice(list(GRAMMAR))
    args = [command]
    if command == "schedule":
        args.append(rng.choice(SCHEDULES) if rng.random() < 0.9 else rng.choice(BAD_NAMES))
    options = GRAMMAR[command]
    invalid = False
    for name in rng.sample(list(options), k=min(len(options), rng.randint(0, 6))):
        value, bad = options[name](rng)
        args += [name, value]
        invalid |= bad
    for flag in FLAGS[command]:
        if rng.random() < 0.2:
            args.append(flag)
    if command in ("schedule", "bubble") and rng.random() < 0.2:
        args += ["--svg", str(tmp / "out.svg")]
    if command == "schedule" and rng.random() < 0.1:
        args += ["--csv", str(tmp / "out.csv")]
    roll = rng.random()
    if roll < 0.03:
        args.append(rng.choice(list(options)))  # an option missing its value
    elif roll < 0.05:
        args += ["--bogus", "1"]
    return args, invalid


def is_json(args: list[str]) -> bool:
    return "--json" in args or any(x == "--format" and y == "json" for x, y in itertools.pairwise(args))


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
