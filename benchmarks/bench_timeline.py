"""Time schedule generation and timeline simulation for large cases.

Run: python benchmarks/bench_timeline.py. For each case it prints the number of actions, the generation time
(uncached), the first simulation (which compiles the schedule) and the mean of later simulations (compiled form
reused, durations and latency changed each time), after one burn-in.
"""

from __future__ import annotations

import time

from pplan.schedules import FAMILIES
from pplan.schedules.timeline import Durations, simulate

CASES = [
    ("interleaved-1f1b", 16, 128, 4),
    ("interleaved-zb", 16, 128, 4),
    ("1f1b", 16, 128, None),
    ("zb-h1", 16, 128, None),
    ("zb-h2", 16, 128, None),
    ("zbv", 16, 128, None),
    ("dualpipev", 16, 128, None),
    ("dualpipe", 16, 128, None),
    ("interleaved-1f1b", 32, 256, 4),
]
REPEATS = 5


def main() -> None:
    print(
        f"{'schedule':<18}{'p':>4}{'v':>3}{'m':>5}{'actions':>9}{'generate s':>12}{'1st sim s':>11}{'sim s':>9}"
    )
    for name, p, m, v in CASES:
        FAMILIES[name].generator(2, 8 if name.startswith("dual") else 4, v)  # burn-in
        t0 = time.perf_counter()
        schedule = FAMILIES[name].generator(p, m, v)
        t1 = time.perf_counter()
        simulate(schedule, Durations(1.0, 1.0, 1.0))
        t2 = time.perf_counter()
        for k in range(REPEATS):
            simulate(schedule, Durations(1.0, 0.9 + 0.01 * k, 0.8), latency=0.01 * k)
        t3 = time.perf_counter()
        print(
            f"{name:<18}{p:>4}{schedule.v:>3}{m:>5}{schedule.num_actions:>9}"
            f"{t1 - t0:>12.3f}{t2 - t1:>11.3f}{(t3 - t2) / REPEATS:>9.4f}"
        )


if __name__ == "__main__":
    main()
