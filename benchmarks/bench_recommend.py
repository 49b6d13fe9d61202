"""Time `pplan recommend` on the issue's reference question (Llama 3 405B, 16,384 H100s, global batch 2,048 ×
8,192 tokens): the whole command from a fresh process (start-up included), and the search alone with its
configurations evaluated per second. Prints figures; asserts nothing.

    python benchmarks/bench_recommend.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

ARGS = ["recommend", "--model", "llama3-405b", "--gpus", "16384", "--global-batch", "2048"]


def main() -> None:
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pplan", *ARGS], check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
    print(f"pplan {' '.join(ARGS)}: wall {statistics.median(walls):.2f} s (median of 3, start-up included)")

    from pplan.catalog import load_hardware, load_model
    from pplan.search import SearchRequest, search

    model, hw = load_model("llama3-405b"), load_hardware("h100-sxm-80gb")
    t0 = time.perf_counter()
    result = search(model, hw, SearchRequest(gpus=16384, global_batch=2048))
    dt = time.perf_counter() - t0
    print(
        f"search: {result.enumerated:,} configurations enumerated and screened, {result.simulated} simulated, "
        f"{dt:.2f} s: {result.enumerated / dt:,.0f} configurations/s"
    )


if __name__ == "__main__":
    main()
