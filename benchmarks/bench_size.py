"""`pplan size`'s speed: a 3-hardware × 12-count sweep for Llama 3 70B (H100, H200, B200 at 64…3,072 GPUs, whole
nodes, 15T tokens, sequence 8,192), each point one exact `recommend` search, run in one process and over the
machine's cores, each with the structure cache cold (a fresh `PPLAN_CACHE_DIR`) and warm. Prints the wall times
and their ratios side by side; asserts nothing.

    python benchmarks/bench_size.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

ARGS = [
    "size", "--model", "llama3-70b", "--train-tokens", "15e12", "--seq-len", "8192",
    "--hardware", "h100-sxm-80gb,h200-sxm-141gb,b200-180gb", "--gpus", "64..3072", "--json",
]  # fmt: skip


def _run(jobs: int, cache: str) -> float:
    env = {**os.environ, "PPLAN_CACHE_DIR": cache}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pplan", *ARGS, "--jobs", str(jobs)],
        env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as many:
        serial_cold, parallel_cold = _run(1, one), _run(cores, many)
        serial_warm, parallel_warm = _run(1, one), _run(cores, many)
    print(f"3 hardware × 12 counts (36 searches), Llama 3 70B; {cores} cores")
    print(f"{'':14}{'1 process':>12}{f'{cores} processes':>14}{'ratio':>8}")
    for name, a, b in (
        ("cache cold", serial_cold, parallel_cold),
        ("cache warm", serial_warm, parallel_warm),
    ):
        print(f"{name:14}{a:>11.1f}s{b:>13.1f}s{a / b:>8.2f}")


if __name__ == "__main__":
    main()
