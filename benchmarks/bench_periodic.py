"""Full simulation against pplan.schedules.periodic.summarise, side by side: cold calls as the search makes them, then
growing m.

Run: python benchmarks/bench_periodic.py [cold|growth]. The cold table, per case (schedule, p, v, m) with
F = I = W = 1 on every stage but 1.3 on the last and a latency matrix (0.01 within a node of 8 ranks, 0.05
across):
- cold ms: `summarise` + `in_flight_profile` after clearing every cache (pplan.schedules.periodic's, the registry's
  generated lists, the timeline's compiled ones), best of 3;
- gen ms: of that, generating the lists the call generated (`get_schedule` alone, caches cleared);
- full ms: `simulate(get_schedule(...)).summary()` + `peak_in_flight`, cold;
- route and max rel diff as below.
The growth table, per case (schedule, p, v, m):
- full s: generate the schedule, compile it and simulate it, what `simulate(get_schedule(...)).summary()` costs
  the first time; skipped (and said so) when the time predicted from the previous m of the case passes 20 s;
- cold s: `summarise` after `pplan.schedules.periodic.clear_caches()` (period or block detection, short lists, their
  compilation, one play; the registry's own cache of generated lists is not cleared);
- warm ms: mean over 10 calls, each with new per-stage durations and a new latency matrix;
- route: k copies and cyclicity c of the certificate, "blocks" for the phase-block closed form, "full";
- max rel diff: largest |fast − full| / max(|fast|, |full|, makespan) over every float of the summary (ints are
  compared exactly: a mismatch prints "INT MISMATCH").
"""

from __future__ import annotations

import gc
import sys
import time
from unittest import mock

from pplan.collector import collector_paused
from pplan.schedules import get_schedule, periodic, registry, timeline
from pplan.schedules.periodic import _common
from pplan.schedules.timeline import Durations, RunSummary, peak_in_flight, simulate

COLD_CASES: list[tuple[str, int, int | None, int]] = [
    ("zbv", 32, None, 256),
    ("interleaved-zb", 32, 2, 256),
    ("dualpipe", 64, None, 512),
    ("zb-h1", 64, None, 512),
    ("dualpipev", 32, None, 256),
    ("interleaved-zb", 16, 4, 128),
    ("zbv", 32, None, 1024),
    ("1f1b", 64, None, 1024),
]
COLD_REPEAT = 3

CASES: list[tuple[str, int, int | None]] = [
    ("interleaved-1f1b", 16, 4),
    ("interleaved-zb", 16, 4),
    ("1f1b", 16, None),
    ("zb-h1", 16, None),
    ("zb-h2", 16, None),
    ("zbv", 16, None),
    ("dualpipev", 16, None),
    ("dualpipe", 16, None),
    ("gpipe", 16, None),
    ("looped-bfs", 16, 4),
    ("interleaved-1f1b", 32, 8),
]
MS = (256, 2048, 16384)
WARM = 10
FULL_LIMIT_S = 20.0


def _durations(stages: int, k: int) -> Durations:
    """Uneven stages with a heavier last one, changed on every call so nothing is memoised."""
    f = [1.0 + 0.01 * ((s * 7 + k) % 5) for s in range(stages)]
    f[-1] *= 1.5
    return Durations(f, [x * 1.1 for x in f], [x * 0.6 for x in f])


def _latency(p: int, k: int) -> list[list[float]]:
    return [[0.0 if a == b else 0.02 + 0.001 * ((a + 2 * b + k) % 3) for b in range(p)] for a in range(p)]


def _difference(a: RunSummary, b: RunSummary) -> str:
    ints = (
        a.peak_in_flight_per_rank,
        a.peak_in_flight_per_stage,
        a.p2p_forward_messages,
        a.p2p_backward_messages,
    )
    if ints != (
        b.peak_in_flight_per_rank,
        b.peak_in_flight_per_stage,
        b.p2p_forward_messages,
        b.p2p_backward_messages,
    ):
        return "INT MISMATCH"
    pairs = [(a.makespan, b.makespan), (a.bubble, b.bubble)]
    for x, y in (
        (a.busy_per_rank, b.busy_per_rank),
        (a.first_start_per_rank, b.first_start_per_rank),
        (a.last_end_per_rank, b.last_end_per_rank),
        (a.idle_in_span_per_rank, b.idle_in_span_per_rank),
    ):
        pairs += zip(x, y, strict=True)
    return f"{max(abs(x - y) / max(abs(x), abs(y), b.makespan) for x, y in pairs):.1e}"


def _row(name: str, p: int, v: int | None, m: int, seconds_per_action: float | None) -> float | None:
    """Print one case; return the full path's seconds per action (None when it was skipped)."""
    probe = get_schedule(name, p, 256, v)
    actions = probe.num_actions * m // 256
    stages = probe.num_stages
    lat0 = _latency(p, 0)
    full: RunSummary | None = None
    full_txt = f"{'> 20 s':>9}"
    if seconds_per_action is None or seconds_per_action * actions <= FULL_LIMIT_S:
        t0 = time.perf_counter()
        schedule = get_schedule(name, p, m, v)
        full = simulate(schedule, _durations(stages, 0), lat0).summary()
        full_s = time.perf_counter() - t0
        full_txt = f"{full_s:9.3f}"
        seconds_per_action = full_s / schedule.num_actions
    periodic.clear_caches()
    t0 = time.perf_counter()
    fast, how = periodic.summarise_with_route(name, p, v, m, _durations(stages, 0), lat0)
    cold_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for k in range(1, WARM + 1):
        periodic.summarise(name, p, v, m, _durations(stages, k), _latency(p, k))
    warm_ms = (time.perf_counter() - t0) / WARM * 1e3
    route = "blocks" if how.why == "phase blocks" else f"k={how.k} c={how.c}" if how.fast else "full"
    diff = _difference(fast, full) if full is not None else "full skipped"
    print(
        f"{name:<17}{p:>3}{probe.v:>3}{m:>7}{actions:>10}{full_txt}{cold_s:>9.3f}{warm_ms:>9.2f}{route:>10}{diff:>14}"
    )
    return seconds_per_action


def _clear() -> None:
    periodic.clear_caches()
    registry._cached.cache_clear()
    timeline._CACHE.clear()
    timeline._DELTAS.clear()
    gc.collect()


def _search_inputs(name: str, p: int, v: int | None, m: int) -> tuple[Durations, list[list[float]]]:
    """Equal passes but a heavier last stage (the output layer); hops 0.01 within a node of 8 ranks, 0.05 across."""
    f = [1.0] * get_schedule(name, p, m, v).num_stages
    f[-1] = 1.3
    lat = [[0.0 if a == b else 0.01 if a // 8 == b // 8 else 0.05 for b in range(p)] for a in range(p)]
    return Durations(f, f, f), lat


def cold() -> None:
    print(
        f"{'schedule':<17}{'p':>3}{'v':>3}{'m':>6}{'cold ms':>9}{'gen ms':>8}{'full ms':>9}"
        f"{'route':>10}{'max rel diff':>14}"
    )
    for name, p, v, m in COLD_CASES:
        d, lat = _search_inputs(name, p, v, m)
        generated: list[int] = []

        def spy(
            name_: str, p_: int, m_: int, v_: int | None = None, generated: list[int] = generated
        ) -> object:
            generated.append(m_)
            return get_schedule(name_, p_, m_, v_)

        best = float("inf")
        for _ in range(COLD_REPEAT):
            _clear()
            generated.clear()
            with mock.patch.object(_common, "get_schedule", spy):
                t0 = time.perf_counter()
                fast, how = periodic.summarise_with_route(name, p, v, m, d, lat)
                periodic.in_flight_profile(name, p, v, m)
                best = min(best, time.perf_counter() - t0)
        gen = float("inf")
        for _ in range(COLD_REPEAT):
            _clear()
            with collector_paused():  # as the route generates them
                t0 = time.perf_counter()
                for mg in generated:
                    get_schedule(name, p, mg, v)
                gen = min(gen, time.perf_counter() - t0)
        full_s = float("inf")
        for _ in range(2):
            _clear()
            t0 = time.perf_counter()
            schedule = get_schedule(name, p, m, v)
            full = simulate(schedule, d, lat).summary()
            peak_in_flight(schedule, [1.0] * schedule.num_stages)
            full_s = min(full_s, time.perf_counter() - t0)
        route = f"k={how.k} c={how.c}" if how.fast else "full"
        print(
            f"{name:<17}{p:>3}{v or get_schedule(name, p, m, v).v:>3}{m:>6}{best * 1e3:>9.1f}{gen * 1e3:>8.1f}"
            f"{full_s * 1e3:>9.1f}{route:>10}{_difference(fast, full):>14}",
            flush=True,
        )


def growth() -> None:
    print(
        f"{'schedule':<17}{'p':>3}{'v':>3}{'m':>7}{'actions':>10}{'full s':>9}{'cold s':>9}{'warm ms':>9}"
        f"{'route':>10}{'max rel diff':>14}"
    )
    for name, p, v in CASES:
        per_action: float | None = None
        for m in MS:
            per_action = _row(name, p, v, m, per_action)


def main() -> None:
    which = sys.argv[1:] or ["cold", "growth"]
    if "cold" in which:
        cold()
    if "growth" in which:
        print()
        growth()


if __name__ == "__main__":
    main()
