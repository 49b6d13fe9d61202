"""Time `pplan COMMAND --help` against the bare interpreter and a command that loads the core, side by side.

    python benchmarks/bench_help.py [--repeat 7] [--cpu 0]

Each figure is the median wall time of a fresh `python -m pplan ...` process (pinned to one core with `--cpu`,
where the platform allows), so start-up is what is measured: the interpreter, the command line and whatever the
command imports. `--help` must not load the core (tests/test_cli_startup.py checks the modules; this prints the
time): the goal is at most 0.5 s on a laptop core. The last two rows are for scale: `python -c pass` (the floor)
and `pplan profiles models` (a command that runs, loading the profile catalogue).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = ("recommend", "explain", "size", "schedule", "bubble", "compare", "profiles", "validate", "bench")


def wall_s(args: list[str], repeat: int) -> float:
    """Median wall time of `repeat` runs of `args` (one warm-up run first, not counted)."""
    times = []
    for k in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if k:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cpu", type=int, default=None, help="pin the runs to this core")
    ns = parser.parse_args()
    if ns.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {ns.cpu})  # inherited by the children
    pplan = [sys.executable, "-m", "pplan"]
    rows = [(f"pplan {c} --help", wall_s([*pplan, c, "--help"], ns.repeat)) for c in COMMANDS]
    rows.insert(0, ("pplan --help", wall_s([*pplan, "--help"], ns.repeat)))
    rows.append(("python -c pass", wall_s([sys.executable, "-c", "pass"], ns.repeat)))
    rows.append(("pplan profiles models", wall_s([*pplan, "profiles", "models"], ns.repeat)))
    floor = rows[-2][1]
    print(f"{'command':<28} {'wall s':>7} {'over python':>12}")
    for name, seconds in rows:
        print(f"{name:<28} {seconds:7.3f} {seconds - floor:+12.3f}")


if __name__ == "__main__":
    main()
