"""Real pipelines against pplan's predictions, more cases than CI runs.

Run: python benchmarks/bench_pipeline.py [--full] [--compute]. Needs torch (pip install "pplan[bench]").
Default: the CI matrix (p = 2, m = 4 and p = 4, m = 8; GPipe, 1F1B, Interleaved1F1B v = 2, ZB-V, DualPipeV,
ZB-H1 through pplan's CSV), sleep blocks of 6 ms per pass. --full adds LoopedBFS, InterleavedZeroBubble, ZB-H2
and m = 4p. --compute runs real transformer layers (gpt-1.7b scaled to h = 256, 2 layers per stage) instead of
sleeps. One fork launch per (p, m); prints one Markdown row per case: measured and predicted bubble (fraction of
the step), the error, step times, and whether in-flight counts, message bytes and message counts matched exactly.
"""

from __future__ import annotations

import argparse
import time

from pplan.bench.analysis import analyse
from pplan.bench.config import BenchConfig
from pplan.bench.worker import launch

BASE: list[tuple[str, int | None]] = [
    ("gpipe", None),
    ("1f1b", None),
    ("interleaved-1f1b", 2),
    ("zbv", None),
    ("dualpipev", None),
    ("zb-h1", None),
]
EXTRA: list[tuple[str, int | None]] = [("looped-bfs", 2), ("interleaved-zb", 2), ("zb-h2", None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="more schedules and m = 4p")
    parser.add_argument("--compute", action="store_true", help="real layers instead of sleep blocks")
    args = parser.parse_args()
    schedules = BASE + (EXTRA if args.full else [])
    grid = [(2, 4), (4, 8)] + ([(2, 8), (4, 16)] if args.full else [])
    extra = {"mode": "compute", "hidden": 256, "seq_len": 64, "layers_per_stage": 2} if args.compute else {}
    print(
        "| schedule | runner | p | m | bubble measured | predicted | error | step ms measured / predicted | exact |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    t0 = time.perf_counter()
    for p, m in grid:
        configs = [BenchConfig(name, p, m, vp=v, steps=5, **extra) for name, v in schedules]  # type: ignore[arg-type]
        records = launch(configs)
        assert records is not None
        for config, recs in zip(configs, records, strict=True):
            r = analyse(config, recs)
            checks = r.checks()
            exact = all(v for k, v in checks.items() if k != "bubble_within_tolerance")
            worst = max(worst, abs(r.bubble_error))
            print(
                f"| {config.schedule} | {config.runner} | {p} | {m} | {r.measured.bubble_fraction_of_step:.3f} | "
                f"{r.predicted.bubble_fraction_of_step:.3f} | {r.bubble_error:+.3f} | "
                f"{r.measured.makespan:.0f} / {r.predicted.makespan:.0f} | {'yes' if exact else 'NO'} |"
            )
    print(f"\nlargest |bubble error| {worst:.3f}; wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
