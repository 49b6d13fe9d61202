"""The automatic scheduler (pplan.schedules.auto) against independent checks: every list walked here, pplan's
simulator, the proven lower bound, the hand-made ZB-H1 and ZB-H2 at their own memory, Qi et al.'s zero bubble at
2p memory, and a brute force over every valid list order for tiny pipelines.

Symbols: p ranks (= stages), m micro-batches, K the memory limit (micro-batches in flight per stage, from the
start of F to the end of W; one for every stage or K_s per stage), F, I, W the pass times of one stage, λ the hop
latency (one for every hop or λ[a][b] from rank a to rank b).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pplan.errors import ConfigError
from pplan.schedules.actions import Action, Kind, Schedule, make_schedule
from pplan.schedules.auto import AutoResult, auto_schedule, memory_of
from pplan.schedules.auto.greedy import play
from pplan.schedules.auto.inputs import check_problem
from pplan.schedules.auto.policies import (
    candidate_budget,
    first_gradient_s,
    neighbours,
    portfolio,
    zb_h1_policy,
)
from pplan.schedules.bounds import makespan_lower_bound, memory_limited_ends
from pplan.schedules.bubble import in_window_fraction_of_ideal
from pplan.schedules.families.zero_bubble import zb_h1, zb_h2
from pplan.schedules.timeline import Durations, Timeline, simulate

PerStage = list[float]
Memory = int | list[int]
"""K: one for every stage, or one per stage."""
Latency = float | list[list[float]]
"""λ in seconds: one for every cross-rank hop, or a p×p matrix (row = sending rank, column = receiving rank)."""
Case = tuple[int, int, Memory, PerStage, PerStage, PerStage, Latency]
"""(p, m, K, F per stage, I per stage, W per stage, latency in seconds)."""
KINDS: tuple[Kind, Kind, Kind] = ("F", "I", "W")

# ------------------------------------------------------------------------------------------------ helpers


def _caps(p: int, m: int, k: Memory) -> list[int]:
    """min(K_s, m) per stage."""
    return [min(x, m) for x in ([k] * p if isinstance(k, int) else k)]


def _matrix(p: int, latency_s: Latency) -> list[list[float]]:
    """λ[a][b] from rank a to rank b, 0 on the diagonal (which auto ignores)."""
    if isinstance(latency_s, int | float):
        return [[0.0 if a == b else float(latency_s) for b in range(p)] for a in range(p)]
    return [[0.0 if a == b else x for b, x in enumerate(row)] for a, row in enumerate(latency_s)]


def _walked_peaks(schedule: Schedule) -> list[int]:
    """Per stage, the most micro-batches in flight walking its rank's list: +1 at F, −1 after W."""
    peaks = [0] * schedule.p
    for row in schedule.actions:
        current: dict[int, int] = {}
        for a in row:
            if a.kind == "F":
                current[a.stage] = current.get(a.stage, 0) + 1
                peaks[a.stage] = max(peaks[a.stage], current[a.stage])
            elif a.kind == "W":
                current[a.stage] -= 1
    return peaks


def _assert_complete(schedule: Schedule, p: int, m: int) -> None:
    """Stage s on rank s runs F, I and W of every micro-batch exactly once, in the order F < I < W."""
    assert schedule.p == p and schedule.m == m and schedule.placement == tuple(range(p))
    for rank, row in enumerate(schedule.actions):
        assert all(a.stage == rank for a in row)
        where = {(a.kind, a.microbatch): k for k, a in enumerate(row)}
        assert len(where) == len(row) == 3 * m
        for mb in range(m):
            assert where[("F", mb)] < where[("I", mb)] < where[("W", mb)]


def _bound_s(p: int, m: int, f: PerStage, i: PerStage, w: PerStage, latency_s: Latency) -> float:
    lat = _matrix(p, latency_s)
    return makespan_lower_bound(tuple(range(p)), (tuple(range(p)),), m, f, i, w, lat, True).makespan_s


def _played(schedule: Schedule, f: PerStage, i: PerStage, w: PerStage, latency_s: Latency) -> Timeline:
    return simulate(schedule, Durations(f, i, w), _matrix(schedule.p, latency_s))


def _assert_dependencies(timeline: Timeline, latency_s: Latency) -> None:
    """Every pass starts after what it needs: F(mb) on rank r after F(mb) on r − 1 ends plus λ[r − 1][r]; I(mb)
    after F(mb) on its rank and after I(mb) on r + 1 ends plus λ[r + 1][r]; W(mb) after I(mb); one pass at a
    time on a rank."""
    p = timeline.schedule.p
    lat = _matrix(p, latency_s)
    start: dict[tuple[int, str, int], float] = {}
    end: dict[tuple[int, str, int], float] = {}
    for r, row in enumerate(timeline.schedule.actions):
        for k, a in enumerate(row):
            start[(r, a.kind, a.microbatch)] = timeline.start[r][k]
            end[(r, a.kind, a.microbatch)] = timeline.end[r][k]
            if k:
                assert timeline.start[r][k] >= timeline.end[r][k - 1] - 1e-12
    tol = 1e-9 * max(1.0, timeline.makespan)
    for (r, kind, mb), t in start.items():
        if kind == "F" and r:
            assert t >= end[(r - 1, "F", mb)] + lat[r - 1][r] - tol
        elif kind == "I":
            assert t >= end[(r, "F", mb)] - tol
            if r < p - 1:
                assert t >= end[(r + 1, "I", mb)] + lat[r + 1][r] - tol
        elif kind == "W":
            assert t >= end[(r, "I", mb)] - tol


def _check_result(
    res: AutoResult, p: int, m: int, k: Memory, f: PerStage, i: PerStage, w: PerStage, latency_s: Latency
) -> None:
    """Every invariant a result must satisfy, each computed here independently of the scheduler."""
    _assert_complete(res.schedule, p, m)
    timeline = _played(res.schedule, f, i, w, latency_s)  # raises DeadlockError if the lists cannot run
    _assert_dependencies(timeline, latency_s)
    peaks = _walked_peaks(res.schedule)
    assert all(peak <= cap for peak, cap in zip(peaks, _caps(p, m, k), strict=True))
    assert tuple(peaks) == res.peak_in_flight
    assert timeline.makespan == pytest.approx(res.makespan_s, rel=1e-12)
    free = _bound_s(p, m, f, i, w, latency_s)
    # with the memory limits: the window and cycle bounds (pplan.schedules.bounds), which every valid list
    # within the limits must respect (this property test checks they do)
    bound = max(free, *memory_limited_ends(m, _caps(p, m, k), f, i, w, _matrix(p, latency_s)))
    assert res.lower_bound_s == pytest.approx(bound, rel=1e-12)
    assert res.makespan_s >= bound * (1 - 1e-9)
    assert res.gap == pytest.approx(max(0.0, (res.makespan_s - bound) / bound), abs=1e-12)


# ------------------------------------------------------------------------------------------------ 1. properties


@st.composite
def _inputs(draw: st.DrawFn) -> Case:
    p = draw(st.integers(1, 8))
    m = draw(st.integers(1, 24))
    k = draw(st.integers(1, 2 * p + 1))
    times = st.floats(0.01, 10.0, allow_nan=False)
    f = draw(st.lists(times, min_size=p, max_size=p))
    i = draw(st.lists(times, min_size=p, max_size=p))
    w = draw(st.lists(times, min_size=p, max_size=p))
    latency_s = draw(st.one_of(st.just(0.0), st.floats(0.0, 2.0, allow_nan=False)))
    return p, m, k, f, i, w, latency_s


@settings(max_examples=50, deadline=None, derandomize=True)
@given(case=_inputs())
def test_random_inputs_give_valid_schedules_within_memory_and_above_the_bound(
    case: Case,
) -> None:
    p, m, k, f, i, w, latency_s = case
    res = auto_schedule(p, m, k, f, i, w, latency_s)
    _check_result(res, p, m, k, f, i, w, latency_s)
    assert res.schedule.name == "auto" and res.schedule.splits_backward
    assert 1 <= res.candidates_tried <= candidate_budget(p, m) + 2


@pytest.mark.acceptance
@settings(max_examples=600, deadline=None, derandomize=True)
@given(case=_inputs())
def test_many_random_inputs(case: Case) -> None:
    p, m, k, f, i, w, latency_s = case
    _check_result(auto_schedule(p, m, k, f, i, w, latency_s), p, m, k, f, i, w, latency_s)


@st.composite
def _general_inputs(draw: st.DrawFn) -> Case:
    """Per-stage memory limits and asymmetric latency matrices (the diagonal drawn too: auto ignores it)."""
    p = draw(st.integers(1, 8))
    m = draw(st.integers(1, 24))
    k = draw(st.lists(st.integers(1, 2 * p + 1), min_size=p, max_size=p))
    times = st.floats(0.01, 10.0, allow_nan=False)
    f = draw(st.lists(times, min_size=p, max_size=p))
    i = draw(st.lists(times, min_size=p, max_size=p))
    w = draw(st.lists(times, min_size=p, max_size=p))
    hop = st.one_of(st.just(0.0), st.floats(0.0, 3.0, allow_nan=False))
    latency = draw(st.lists(st.lists(hop, min_size=p, max_size=p), min_size=p, max_size=p))
    return p, m, k, f, i, w, latency


def _check_general(case: Case) -> None:
    """`_check_result`, and the makespan by this file's own simulator (`_makespan`, each hop λ[a][b] in its
    direction)."""
    p, m, k, f, i, w, latency = case
    res = auto_schedule(p, m, k, f, i, w, latency)
    _check_result(res, p, m, k, f, i, w, latency)
    rows = [tuple((KINDS.index(a.kind), a.microbatch) for a in row) for row in res.schedule.actions]
    assert _makespan(rows, f, i, w, latency) == pytest.approx(res.makespan_s, rel=1e-12)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=_general_inputs())
def test_per_stage_memory_and_latency_matrices_give_valid_schedules_within_memory_and_above_the_bound(
    case: Case,
) -> None:
    _check_general(case)


@pytest.mark.acceptance
@settings(max_examples=600, deadline=None, derandomize=True)
@given(case=_general_inputs())
def test_many_random_per_stage_memories_and_latency_matrices(case: Case) -> None:
    _check_general(case)


def _random_problems(seed: int, count: int, general: bool = False) -> Iterator[Case]:
    """Seeded small problems, some with zero-time passes (the builder's edge cases); `general`: per-stage K
    (some 1) and asymmetric latency matrices."""
    rng = random.Random(seed)
    for _ in range(count):
        p, m = rng.randint(1, 5), rng.randint(1, 10)
        f = [rng.choice([0.0, rng.uniform(0.2, 2.0)]) for _ in range(p)]
        i = [rng.uniform(0.0, 2.0) for _ in range(p)]
        w = [rng.choice([0.0, rng.uniform(0.1, 2.0)]) for _ in range(p)]
        if general:
            k: Memory = [rng.choice([1, rng.randint(1, 2 * p + 1)]) for _ in range(p)]
            hops = [0.0, 0.05, 0.7, rng.uniform(0.0, 3.0)]
            lat: Latency = [[rng.choice(hops) for _ in range(p)] for _ in range(p)]
            yield p, m, k, f, i, w, lat
        else:
            yield p, m, rng.randint(1, 2 * p + 1), f, i, w, rng.choice([0.0, 0.05, 0.7])


def _assert_builder_times_as_simulator(problems: Iterator[Case]) -> None:
    """The search ranks candidates by the builder's own makespan; the module claims it is the simulator's, for
    every policy (the portfolio and one policy's neighbours here), and that each stays within memory."""
    for p, m, k, f, i, w, latency_s in problems:
        prob = check_problem(p, m, k, f, i, w, latency_s)
        policies = list(portfolio(prob))
        policies += list(neighbours(prob, policies[(p * m) % len(policies)]))
        for pol in policies:
            cand = play(prob, pol)
            rows = [[Action(r, KINDS[c % 3], c // 3) for c in row] for r, row in enumerate(cand.rows)]
            schedule = make_schedule("x", p, 1, m, tuple(range(p)), rows)
            assert _played(schedule, f, i, w, latency_s).makespan == pytest.approx(cand.makespan_s, rel=1e-12)
            assert all(x <= cap for x, cap in zip(_walked_peaks(schedule), _caps(p, m, k), strict=True))


def test_the_builder_times_every_policy_as_the_simulator_does() -> None:
    _assert_builder_times_as_simulator(_random_problems(9, 10))


def test_the_builder_times_every_policy_as_the_simulator_does_with_per_stage_memory_and_latencies() -> None:
    _assert_builder_times_as_simulator(_random_problems(11, 10, general=True))


@pytest.mark.acceptance
def test_the_builder_times_every_policy_as_the_simulator_does_on_more_problems() -> None:
    _assert_builder_times_as_simulator(_random_problems(10, 150))
    _assert_builder_times_as_simulator(_random_problems(12, 150, general=True))


def test_the_zb_h1_policy_rebuilds_zb_h1_exactly() -> None:
    for p in range(1, 7):
        for m in range(1, 13):
            prob = check_problem(p, m, p, 1.0, 1.2, 0.8, 0.1)
            rows = play(prob, zb_h1_policy(prob)).rows
            want = tuple(
                tuple(3 * a.microbatch + "FIW".index(a.kind) for a in row) for row in zb_h1(p, m).actions
            )
            assert rows == want, (p, m)


def test_deterministic_and_memory_above_m_is_m() -> None:
    args = ([1.0, 1.1, 0.9, 1.3], [1.2, 1.0, 1.1, 1.4], [0.7, 0.9, 0.8, 1.0], 0.05)
    first = auto_schedule(4, 6, 6, *args)
    assert auto_schedule(4, 6, 6, *args).schedule.actions == first.schedule.actions
    assert auto_schedule(4, 6, 50, *args).schedule.actions == first.schedule.actions


def test_one_in_flight_runs_each_micro_batch_through_in_turn() -> None:
    res = auto_schedule(3, 4, 1, 1.0, 1.0, 1.0, 0.1)
    assert res.peak_in_flight == (1, 1, 1)
    for row in res.schedule.actions:  # with one slot a stage can only run F, I, W of one micro-batch in a row
        assert [a.kind for a in row] == ["F", "I", "W"] * 4


@pytest.mark.parametrize("tight", [0, 2, 3])
def test_a_stage_with_one_slot_runs_each_micro_batch_through_in_turn_among_roomy_stages(tight: int) -> None:
    p, m = 4, 8
    k = [2 * p] * p
    k[tight] = 1
    f, i, w = [1.0, 1.2, 0.9, 1.1], [1.1, 1.0, 1.3, 0.9], [0.8, 0.7, 0.9, 1.0]
    lat = [[0.0, 0.05, 0.2, 0.1], [0.02, 0.0, 0.07, 0.1], [0.3, 0.01, 0.0, 0.04], [0.1, 0.2, 0.06, 0.0]]
    res = auto_schedule(p, m, k, f, i, w, lat)
    _check_result(res, p, m, k, f, i, w, lat)
    assert res.peak_in_flight[tight] == 1
    # stage `tight` can only run F, I, W of one micro-batch back to back, micro-batch after micro-batch
    got = [(a.kind, a.microbatch) for a in res.schedule.actions[tight]]
    assert got == [(kind, mb) for mb in range(m) for kind in KINDS]


@pytest.mark.parametrize(
    ("p", "m", "k", "lat"), [(1, 3, 1, 0.0), (3, 6, 2, 0.1), (4, 8, 4, 0.05), (5, 12, 9, 0.3)]
)
def test_an_equal_matrix_and_an_equal_list_give_exactly_the_scalar_results(
    p: int, m: int, k: int, lat: float
) -> None:
    f = [1.0 + 0.1 * s for s in range(p)]
    i = [1.2 - 0.05 * s for s in range(p)]
    w = [0.8 + 0.03 * s for s in range(p)]
    want = auto_schedule(p, m, k, f, i, w, lat)
    matrix = [[9.0 if a == b else lat for b in range(p)] for a in range(p)]  # the diagonal is ignored
    for memory, latency in (([k] * p, lat), (k, matrix), ([k] * p, matrix)):
        got = auto_schedule(p, m, memory, f, i, w, latency)
        assert got == want  # the same lists, makespan, bound, peaks, candidates and method


def test_an_activation_pays_the_hop_into_its_rank_and_a_gradient_the_hop_back() -> None:
    # One micro-batch through 3 stages of F = I = W = 1 s: F0 F1 F2 I2 I1 I0 W0 in a chain with the hops
    # λ[0][1] = 0.1 and λ[1][2] = 0.4 forward, λ[2][1] = 0.6 and λ[1][0] = 0.3 back: 7 + 1.4 = 8.4 s.
    lat = [[0.0, 0.1, 0.2], [0.3, 0.0, 0.4], [0.5, 0.6, 0.0]]
    prob = check_problem(3, 1, 1, 1.0, 1.0, 1.0, lat)
    assert prob.lat_f_in == (0.0, 0.1, 0.4) and prob.lat_i_in == (0.3, 0.6, 0.0)
    arrival, ready = first_gradient_s(prob)
    assert arrival == pytest.approx((0.0, 1.1, 2.5)) and ready == pytest.approx((6.4, 5.1, 3.5))
    res = auto_schedule(3, 1, 1, 1.0, 1.0, 1.0, lat)
    assert res.makespan_s == pytest.approx(8.4, rel=1e-12)
    _check_result(res, 3, 1, 1, [1.0] * 3, [1.0] * 3, [1.0] * 3, lat)
    far = [[0.0, 0.1, 7.0], [0.3, 0.0, 0.4], [7.0, 0.6, 0.0]]  # rank 0 and rank 2 never talk
    assert auto_schedule(3, 1, 1, 1.0, 1.0, 1.0, far) == res


@pytest.mark.parametrize(("name", "peak"), [("zb-h1", "p"), ("zb-h2", "2p-1"), ("1f1b", "p")])
def test_memory_of_is_qi_et_al_table_2(name: str, peak: str) -> None:
    # Qi et al. Table 2: 1F1B and ZB-H1 hold p micro-batches, ZB-H2 2p − 1 (at most m of them).
    for p in range(1, 9):
        for m in (1, 2, p, 2 * p - 1, 3 * p + 1):
            want = p if peak == "p" else 2 * p - 1
            assert memory_of(name, p, m) == min(want, m)


# ------------------------------------------------------------------------------------------------ 2-3. equal passes

GRID = [(p, m) for p in (2, 4, 8) for m in (2 * p, 4 * p, 8 * p)]


@pytest.mark.parametrize(("p", "m"), GRID)
def test_zero_bubble_at_zb_h2_memory(p: int, m: int) -> None:
    # Qi et al.: with F = I = W and 2p memory the idle time inside each rank's own window can be 0.
    res = auto_schedule(p, m, memory_of("zb-h2", p, m), 1.0, 1.0, 1.0)
    assert in_window_fraction_of_ideal(
        _played(res.schedule, [1.0] * p, [1.0] * p, [1.0] * p, 0.0)
    ) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(("p", "m"), GRID)
def test_no_worse_than_zb_h1_at_its_memory(p: int, m: int) -> None:
    ones = [1.0] * p
    res = auto_schedule(p, m, memory_of("zb-h1", p, m), 1.0, 1.0, 1.0)
    auto = _played(res.schedule, ones, ones, ones, 0.0)
    hand = _played(zb_h1(p, m), ones, ones, ones, 0.0)
    assert in_window_fraction_of_ideal(auto) <= in_window_fraction_of_ideal(hand) + 1e-9
    assert auto.makespan <= hand.makespan * (1 + 1e-12)


# ------------------------------------------------------------------------------------------------ 4. Qi et al. times

HIDDEN, SEQUENCE, MICRO_BATCH = 4096, 2048, 1
"""The stated shape: h = 4096, s = 2048, b = 1."""
LAYERS_PER_STAGE = 4
RATE_FLOP_S = 400e12
"""Achieved FLOP/s that turns Qi et al.'s Table 1 FLOPs into seconds."""
LATENCY_OF_F = 0.02
"""Per-hop latency as a fraction of a stage's F (0.18 ms here: about a 16 MiB activation over 100 GB/s)."""


def _qi_times_s() -> tuple[float, float, float]:
    """One stage's F, I, W from Qi et al. Table 1 per layer: F = sbh(24h + 4s), B = sbh(24h + 8s), W = 24sbh²."""
    s, b, h = SEQUENCE, MICRO_BATCH, HIDDEN
    per_layer = (s * b * h * (24 * h + 4 * s), s * b * h * (24 * h + 8 * s), 24 * s * b * h * h)
    f, i, w = (LAYERS_PER_STAGE * x / RATE_FLOP_S for x in per_layer)
    return f, i, w


def _qi_profile(p: int, heterogeneous: bool) -> tuple[PerStage, PerStage, PerStage, float]:
    """Uniform stages, or the first stage's F +10 % (embedding) and the last stage's F, I, W +25 % (output layer)."""
    f1, i1, w1 = _qi_times_s()
    f, i, w = [f1] * p, [i1] * p, [w1] * p
    if heterogeneous:
        f[0] *= 1.10
        f[-1], i[-1], w[-1] = f[-1] * 1.25, i[-1] * 1.25, w[-1] * 1.25
    return f, i, w, LATENCY_OF_F * f1


def test_qi_table_1_times_are_ordered_as_the_paper_says() -> None:
    f, i, w = _qi_times_s()
    assert w < f < i  # T_W < T_F < T_B
    assert i + w == pytest.approx(2 * f, rel=0.05)  # T_B + T_W ≈ 2 T_F


@pytest.mark.parametrize("heterogeneous", [False, True])
@pytest.mark.parametrize(("p", "m"), [(p, m) for p in (4, 8) for m in (2 * p, 4 * p)])
def test_no_worse_than_zb_h1_and_zb_h2_at_their_memory(p: int, m: int, heterogeneous: bool) -> None:
    f, i, w, lat = _qi_profile(p, heterogeneous)
    for name, hand in (("zb-h1", zb_h1(p, m)), ("zb-h2", zb_h2(p, m))):
        k = memory_of(name, p, m)
        res = auto_schedule(p, m, k, f, i, w, lat)
        _check_result(res, p, m, k, f, i, w, lat)
        assert res.makespan_s <= _played(hand, f, i, w, lat).makespan * (1 + 1e-12), name


def test_strictly_faster_than_zb_h1_on_uneven_stages() -> None:
    # ZB-H1's lists were designed for equal stages. With uneven ones (each pass of each stage within ±20 % of Qi
    # et al.'s times) auto at ZB-H1's memory beat it on 11 of the first 24 cases of this seeded stream when
    # measured (4 of the 8 here) and tied on the others; the assertion asks for a quarter.
    rng = random.Random(7)
    f1, i1, w1 = _qi_times_s()
    wins = 0
    cases = 8
    for _ in range(cases):
        p = rng.choice([4, 8])
        m = rng.choice([2 * p, 4 * p])
        f = [f1 * rng.uniform(0.8, 1.2) for _ in range(p)]
        i = [i1 * rng.uniform(0.8, 1.2) for _ in range(p)]
        w = [w1 * rng.uniform(0.8, 1.2) for _ in range(p)]
        lat = LATENCY_OF_F * f1
        res = auto_schedule(p, m, memory_of("zb-h1", p, m), f, i, w, lat)
        hand = _played(zb_h1(p, m), f, i, w, lat).makespan
        assert res.makespan_s <= hand * (1 + 1e-12)
        wins += res.makespan_s < hand * (1 - 1e-9)
    assert wins >= cases // 4


# ------------------------------------------------------------------------------------------------ 5. bad input


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("p", {"p": 0}),
        ("m", {"m": 0}),
        ("memory_limit", {"memory_limit": 0}),
        ("memory_limit", {"memory_limit": 2.5}),
        ("f", {"f": -1.0}),
        ("i", {"i": [1.0, 2.0, 3.0]}),
        ("w", {"w": [1.0, math.nan]}),
        ("w", {"w": "fast"}),
        ("latency_s", {"latency_s": -0.1}),
        ("latency_s", {"latency_s": math.inf}),
        ("memory_limit", {"memory_limit": [2]}),
        ("memory_limit", {"memory_limit": [2, 2, 2]}),
        ("memory_limit", {"memory_limit": [2, 0]}),
        ("memory_limit", {"memory_limit": [2, -1]}),
        ("memory_limit", {"memory_limit": [2, 1.5]}),
        ("memory_limit", {"memory_limit": [True, 2]}),
        ("memory_limit", {"memory_limit": "22"}),
        ("latency_s", {"latency_s": [[0.0, 0.1]]}),
        ("latency_s", {"latency_s": [[0.0, 0.1], [0.1]]}),
        ("latency_s", {"latency_s": [[0.0, 0.1, 0.1], [0.1, 0.0, 0.1]]}),
        ("latency_s", {"latency_s": [0.1, 0.1]}),
        ("latency_s", {"latency_s": ["ab", "cd"]}),
        ("latency_s", {"latency_s": [[0.0, "fast"], [0.1, 0.0]]}),
        ("latency_s", {"latency_s": [[0.0, -0.1], [0.1, 0.0]]}),
        ("latency_s", {"latency_s": [[0.0, 0.1], [math.inf, 0.0]]}),
        ("latency_s", {"latency_s": [[0.0, math.nan], [0.1, 0.0]]}),
    ],
)
def test_bad_input_names_the_field(field: str, kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {
        "p": 2,
        "m": 4,
        "memory_limit": 2,
        "f": 1.0,
        "i": 1.0,
        "w": 1.0,
        "latency_s": 0.0,
    }
    args.update(kwargs)
    with pytest.raises(ConfigError) as err:
        auto_schedule(**args)  # type: ignore[arg-type]
    assert err.value.field == field
    assert err.value.fix
    assert str(err.value).startswith(f"{field}: ")
    assert "\n" not in str(err.value)


def test_memory_of_refuses_unknown_names() -> None:
    with pytest.raises(ConfigError) as err:
        memory_of("zb-v", 4, 8)
    assert err.value.field == "name"


# ------------------------------------------------------------------------------------------------ 6. brute force

Row = tuple[tuple[int, int], ...]
"""One rank's list as (kind, micro-batch) with kind 0 = F, 1 = I, 2 = W."""


def _orders(m: int, k: int, forwards_in_order: bool) -> list[Row]:
    """Every list of F, I, W for m micro-batches with F < I < W per micro-batch and at most k in flight."""
    out: list[Row] = []

    def extend(prefix: list[tuple[int, int]], state: list[int], in_flight: int) -> None:
        if len(prefix) == 3 * m:
            out.append(tuple(prefix))
            return
        for mb in range(m):
            kind = state[mb]
            if kind == 3 or (kind == 0 and in_flight >= k):
                continue
            if kind == 0 and forwards_in_order and any(state[x] == 0 for x in range(mb)):
                continue
            state[mb] += 1
            prefix.append((kind, mb))
            extend(prefix, state, in_flight + (kind == 0) - (kind == 2))
            prefix.pop()
            state[mb] -= 1

    extend([], [0] * m, 0)
    return out


def _makespan(rows: Sequence[Row], f: PerStage, i: PerStage, w: PerStage, latency_s: Latency) -> float:
    """Each pass as early as its list position allows; rank r holds stage r; an F's activation from r − 1 pays
    λ[r − 1][r], an I's gradient from r + 1 pays λ[r + 1][r]. ∞ when the lists deadlock."""
    p = len(rows)
    lat = _matrix(p, latency_s)
    end: dict[tuple[int, int, int], float] = {}
    pos, free = [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for r in range(p):
            while pos[r] < len(rows[r]):
                kind, mb = rows[r][pos[r]]
                if kind == 0:
                    dep = [] if r == 0 else [(r - 1, 0, mb, lat[r - 1][r])]
                elif kind == 1:
                    dep = [(r, 0, mb, 0.0)] + ([] if r == p - 1 else [(r + 1, 1, mb, lat[r + 1][r])])
                else:
                    dep = [(r, 1, mb, 0.0)]
                if any((s, kd, x) not in end for s, kd, x, _ in dep):
                    break
                start = max([free[r]] + [end[(s, kd, x)] + hop for s, kd, x, hop in dep])
                free[r] = end[(r, kind, mb)] = start + (f, i, w)[kind][r]
                pos[r] += 1
                moved = True
    return max(free) if all(pos[r] == len(rows[r]) for r in range(p)) else math.inf


def _optimum_s(p: int, m: int, k: Memory, f: PerStage, i: PerStage, w: PerStage, latency_s: Latency) -> float:
    """The best makespan over every valid list order. Micro-batches are interchangeable, so renumbering them
    by rank 0's forward order loses nothing: rank 0's forwards are taken in order."""
    caps = _caps(p, m, k)
    first = _orders(m, caps[0], forwards_in_order=True)
    others = [_orders(m, cap, forwards_in_order=False) for cap in caps[1:]]
    return min(
        _makespan((a, *rest), f, i, w, latency_s) for a in first for rest in itertools.product(*others)
    )


def test_the_brute_force_simulator_agrees_with_pplan() -> None:
    rng = random.Random(4)
    for rows in rng.sample(list(itertools.product(_orders(2, 2, False), repeat=2)), 25):
        f, i, w = [1.0, 1.3], [1.1, 0.6], [0.7, 0.9]
        lists = [[Action(r, KINDS[kd], mb) for kd, mb in row] for r, row in enumerate(rows)]
        schedule = make_schedule("x", 2, 1, 2, (0, 1), lists)
        try:
            want = _played(schedule, f, i, w, 0.2).makespan
        except ConfigError:  # the simulator's DeadlockError
            want = math.inf
        assert _makespan(rows, f, i, w, 0.2) == pytest.approx(want, rel=1e-12)


def _tiny_times(rng: random.Random, p: int) -> tuple[list[float], list[float], list[float]]:
    """Seeded random F, I, W per stage for the brute-force cases."""
    f = [rng.uniform(0.5, 1.5) for _ in range(p)]
    i = [rng.uniform(0.5, 1.5) for _ in range(p)]
    w = [rng.uniform(0.3, 1.5) for _ in range(p)]
    return f, i, w


def _tiny_cases(seed: int, shapes: Sequence[tuple[int, int, int]], draws: int) -> list[Case]:
    """`draws` seeded random stage times and latencies for each (p, m, K)."""
    rng = random.Random(seed)
    out: list[Case] = []
    for p, m, k in shapes:
        for _ in range(draws):
            f, i, w = _tiny_times(rng, p)
            out.append((p, m, k, f, i, w, rng.choice([0.0, 0.1, 0.5])))
    return out


FAST_TINY = _tiny_cases(3, [(2, 1, 1), (2, 2, 1), (2, 2, 2), (2, 3, 1)], 2) + _tiny_cases(
    3, [(2, 3, 2), (3, 2, 2)], 1
)
SLOW_TINY = _tiny_cases(5, [(2, 3, 2), (3, 2, 1), (3, 2, 2), (4, 2, 2)], 4) + _tiny_cases(6, [(2, 3, 3)], 2)
"""The shapes of `OPTIMAL_FOR`: a few draws each in the fast tier, more (and p = 2, m = 3, K = 3: 470 000
list pairs) in the acceptance tier."""


def _tiny_general_cases(seed: int, shapes: Sequence[tuple[int, int, list[int]]], draws: int) -> list[Case]:
    """`draws` seeded random stage times and asymmetric latency matrices for each (p, m, K per stage)."""
    rng = random.Random(seed)
    out: list[Case] = []
    for p, m, k in shapes:
        for _ in range(draws):
            f, i, w = _tiny_times(rng, p)
            lat = [[rng.choice([0.0, 0.1, 0.5, rng.uniform(0.0, 1.0)]) for _ in range(p)] for _ in range(p)]
            out.append((p, m, k, f, i, w, lat))
    return out


FAST_TINY_GENERAL = _tiny_general_cases(
    8, [(2, 2, [1, 2]), (2, 2, [2, 1]), (2, 3, [2, 1]), (3, 2, [2, 1, 2])], 1
)
SLOW_TINY_GENERAL = _tiny_general_cases(
    9, [(2, 3, [1, 2]), (2, 3, [3, 2]), (3, 2, [1, 2, 2]), (3, 2, [2, 2, 1]), (4, 2, [2, 1, 2, 2])], 3
)
"""Per-stage K and asymmetric latency matrices on the same shapes (when measured, 150 other seeded draws on
them, each K_s ≤ m, found no gap either)."""


@pytest.mark.parametrize(
    "case",
    [
        *FAST_TINY,
        *FAST_TINY_GENERAL,
        *(pytest.param(c, marks=pytest.mark.acceptance) for c in [*SLOW_TINY, *SLOW_TINY_GENERAL]),
    ],
)
def test_optimal_for_tiny_pipelines(case: Case) -> None:
    # OPTIMAL_FOR claims no gap to the brute-force optimum on these shapes (one K or one per stage; one latency
    # or a matrix)
    p, m, k, f, i, w, lat = case
    best = _optimum_s(p, m, k, f, i, w, lat)
    assert auto_schedule(p, m, k, f, i, w, lat).makespan_s == pytest.approx(best, rel=1e-9)
