"""Time schedule generation and timeline simulation for large cases.

Run: python benchmarks/bench_timeline.py. For each case it prints the number of actions, the generation time
(uncached), the first simulation (which compiles the schedule) and the mean of later simulations (compiled form
reused, durations and latency changed each time), after one burn-in. Cases with a budget (the wall-clock limits
the test suite used to assert) say whether they met it; then the time to detect a deadlock. Asserts nothing.
"""

from __future__ import annotations

import time

from pplan.schedules import FAMILIES, Action, make_schedule
from pplan.schedules.timeline import DeadlockError, Durations, simulate

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
BUDGETS_S = {("interleaved-1f1b", 16, 128, 4): (1.0, 0.25)}
"""Budgets in seconds: generation + first simulation, and each later simulation."""
DEADLOCK_BUDGET_S = 1.0


def _budget(case: tuple[str, int, int, int | None], first_s: float, later_s: float) -> str:
    if case not in BUDGETS_S:
        return ""
    first, later = BUDGETS_S[case]
    met = first_s < first and later_s < later
    return f"  {'within' if met else 'OVER'} budget ({first:g} s, {later:g} s)"


def deadlock_s() -> float:
    """Seconds to find that two ranks wait on each other (rank 0 wants 0B0 before sending 1F1; rank 1 the reverse)."""
    rows = [
        [Action(0, "F", 0), Action(0, "B", 0), Action(0, "F", 1), Action(0, "B", 1)],
        [Action(1, "F", 1), Action(1, "B", 1), Action(1, "F", 0), Action(1, "B", 0)],
    ]
    schedule = make_schedule("hand-made", 2, 1, 2, (0, 1), rows)
    t0 = time.perf_counter()
    try:
        simulate(schedule, Durations(1.0, 1.0, 1.0))
    except DeadlockError:
        return time.perf_counter() - t0
    raise SystemExit("the hand-made deadlock was simulated to the end")


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
            + _budget((name, p, m, v), t2 - t0, (t3 - t2) / REPEATS)
        )
    took = deadlock_s()
    met = "within" if took < DEADLOCK_BUDGET_S else "OVER"
    print(f"\ndeadlock found in {took * 1e3:.2f} ms  {met} budget ({DEADLOCK_BUDGET_S:g} s)")


if __name__ == "__main__":
    main()
