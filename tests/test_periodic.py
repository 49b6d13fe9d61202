"""pplan.schedules.periodic against the full simulation: every family, uneven stages, any latency, m past the period.

Every expected value here is computed independently of pplan.schedules.periodic: by generating the explicit schedule
(`get_schedule`) and playing all of it (`pplan.schedules.timeline.simulate`, `peak_in_flight`). Random inputs are seeded.
Symbols: p ranks, v stages per rank, m micro-batches, Δ the family's period in micro-batches.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

import pplan.schedules.actions as actions
import pplan.schedules.periodic as periodic
from pplan.errors import ConfigError
from pplan.schedules import SCHEDULE_NAMES, Action, Schedule, get_schedule, make_schedule, schedule_family
from pplan.schedules.periodic import (
    direct,
    in_flight_profile,
    period,
    route,
    split,
    structure,
    summarise,
    summarise_with_route,
)
from pplan.schedules.timeline import DeadlockError, Durations, Latency, RunSummary, peak_in_flight, simulate

REL = 1e-9
LOOPED = ("interleaved-1f1b", "interleaved-zb", "looped-bfs")


def _valid(name: str, p: int, m: int, v: int | None) -> bool:
    try:
        get_schedule(name, p, m, v)
    except ConfigError:
        return False
    return True


def _grid() -> Iterator[tuple[str, int, int | None]]:
    for name in SCHEDULE_NAMES:
        for p in (1, 2, 3, 4, 8):
            vs: tuple[int | None, ...] = (2, 3, 4) if name in LOOPED else (None,)
            for v in vs:
                if _valid(name, p, 4 * p + 4, v) or _valid(name, p, 8 * p, v):
                    yield name, p, v


GRID = list(_grid())
# p = 8 is more than half of the grid's time: the acceptance tier runs it, the fast tier p ≤ 4.
GRID_TIERS = [pytest.param(*g, marks=pytest.mark.acceptance) if g[1] >= 8 else g for g in GRID]


def _ms(name: str, p: int, v: int | None) -> list[int]:
    """Small m (the smallest valid and around p and 2p), past the threshold (4p, 8p + Δ, off the short lists'
    grid) and one large m (64p), valid ones only."""
    delta = period(name, p) or 1
    small = [1, 2, p - 1, p, p + 1, 2 * p - 1, 2 * p, 2 * p + 1, 2 * p + 2, 3 * p]
    past = [4 * p, 5 * p + delta, 8 * p + delta, 8 * p + 3 * delta, 13 * p + 2 * delta]
    ms = sorted({m for m in small + past if m >= 1 and _valid(name, p, m, v)})
    smallest = next(m for m in range(1, 64 * p + 1) if _valid(name, p, m, v))
    return sorted({smallest, *ms, 64 * p})


def _inputs(rng: random.Random, stages: int, p: int, case: int) -> tuple[Durations, Latency]:
    """Case 0: random per-stage F, I, W and one latency; 1: a heavy last stage and a random p×p matrix;
    2: equal passes, no latency (the textbook setting, where exact ties abound)."""
    if case == 0:
        d = Durations(
            [rng.uniform(0.5, 2.0) for _ in range(stages)],
            [rng.uniform(0.5, 2.0) for _ in range(stages)],
            [rng.uniform(0.1, 1.5) for _ in range(stages)],
        )
        return d, rng.uniform(0.0, 0.4)
    if case == 1:
        f = [rng.uniform(0.8, 1.2) for _ in range(stages)]
        f[-1] *= 3.0
        d = Durations(f, [x * rng.uniform(0.9, 1.1) for x in f], [x * 0.5 for x in f])
        return d, [[rng.uniform(0.0, 0.3) for _ in range(p)] for _ in range(p)]
    return Durations(1.0, 1.0, 1.0), 0.0


def _close(a: float, b: float, scale: float) -> bool:
    """Equal to 1e-9, relative to the larger value or, for differences such as idle time, to the step."""
    return abs(a - b) <= REL * max(abs(a), abs(b), scale)


def _assert_same(got: RunSummary, want: RunSummary) -> None:
    scale = want.makespan
    floats = [
        (got.makespan, want.makespan),
        (got.bubble, want.bubble),
        (got.busiest, want.busiest),
        (got.max_idle_in_span, want.max_idle_in_span),
    ]
    for g_row, w_row in [
        (got.busy_per_rank, want.busy_per_rank),
        (got.first_start_per_rank, want.first_start_per_rank),
        (got.last_end_per_rank, want.last_end_per_rank),
        (got.span_per_rank, want.span_per_rank),
        (got.idle_in_span_per_rank, want.idle_in_span_per_rank),
        (got.idle_per_rank, want.idle_per_rank),
    ]:
        assert len(g_row) == len(w_row)
        floats += zip(g_row, w_row, strict=True)
    for g, w in floats:
        assert _close(g, w, scale), (g, w)
    assert _close(got.bubble_fraction_of_step, want.bubble_fraction_of_step, 1.0)
    assert _close(got.bubble_fraction_of_ideal, want.bubble_fraction_of_ideal, 1.0)
    assert got.peak_in_flight_per_stage == want.peak_in_flight_per_stage
    assert got.peak_in_flight_per_rank == want.peak_in_flight_per_rank
    assert got.p2p_forward_messages == want.p2p_forward_messages
    assert got.p2p_backward_messages == want.p2p_backward_messages
    assert got.p2p_messages == want.p2p_messages


def _full(name: str, p: int, v: int | None, m: int, d: Durations, lat: Latency) -> RunSummary:
    return simulate(get_schedule(name, p, m, v), d, lat).summary()


@pytest.fixture
def periodic_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the periodic route wherever the structure allows it (by default a list about as short as the lists
    the periodic route reads is simulated in full), so that the grid exercises it."""
    monkeypatch.setattr(periodic, "_FULL_BELOW", 0.0)
    periodic.clear_caches()


@pytest.mark.parametrize(("name", "p", "v"), GRID_TIERS)
def test_summary_equals_full_simulation(name: str, p: int, v: int | None, periodic_route: None) -> None:
    """...and the fast path answers: always for the phase-block families (gpipe, looped-bfs), for most of these
    calls past 8p + Δ for the others."""
    rng = random.Random(f"{name}-{p}-{v}")
    delta = period(name, p)
    routes = []
    for m in _ms(name, p, v):
        stages = get_schedule(name, p, m, v).num_stages
        cases = (0, 1, 2) if m < 64 * p else (rng.choice((0, 1)),)
        for case in cases:
            d, lat = _inputs(rng, stages, p, case)
            got, how = summarise_with_route(name, p, v, m, d, lat)
            _assert_same(got, _full(name, p, v, m, d, lat))
            if delta is None:
                # auto's lists (tuned to the times) are played in full
                assert schedule_family(name).tuned or (how.fast and how.why == "phase blocks")
            elif m >= 8 * p + delta:
                routes.append(how.fast)
    if delta is not None:
        assert sum(routes) >= 0.75 * len(routes) > 0, routes


@pytest.mark.parametrize(("name", "p", "v"), GRID_TIERS)
def test_in_flight_profile_equals_peak_in_flight(
    name: str, p: int, v: int | None, periodic_route: None
) -> None:
    rng = random.Random(f"flight-{name}-{p}-{v}")
    for m in _ms(name, p, v)[-4:]:
        schedule = get_schedule(name, p, m, v)
        profile = in_flight_profile(name, p, v, m)
        assert profile.peak_per_stage == simulate(schedule).peak_in_flight_per_stage
        for trial in range(4):
            weights = [rng.uniform(0.0, 3.0) if trial else rng.choice((0.0, 1.0)) for _ in schedule.placement]
            want = peak_in_flight(schedule, weights)[1]
            got = profile.peak_per_rank(weights)
            assert all(_close(g, w, max(want)) for g, w in zip(got, want, strict=True)), (got, want)


PERIODIC = [
    (name, 4, 3 if name in LOOPED else None) for name in SCHEDULE_NAMES if period(name, 4) is not None
]


@pytest.mark.parametrize(("name", "p", "v"), PERIODIC)
def test_cost_does_not_grow_with_m(name: str, p: int, v: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the threshold the fast path answers from short lists only: the same k copies for m = 64p and
    m ≈ 10^5, and no list longer than 64p micro-batches is generated. Busy time at 10^5 is checked against its
    definition: every micro-batch runs F, I and W once on each stage of its chain (half of them per chain in
    DualPipe)."""
    delta = period(name, p) or 1
    m_mid, m_big = 64 * p, 100_000 - 100_000 % (2 * delta)
    schedule = get_schedule(name, p, m_mid, v)
    f = [1.0 + 0.1 * s for s in range(schedule.num_stages)]
    d = Durations(f, 1.0, 0.5)
    assert route(name, p, v, m_mid, d).fast
    seen: list[int] = []

    def spy(name_: str, p_: int, m_: int, v_: int | None = None) -> Schedule:
        seen.append(m_)
        return get_schedule(name_, p_, m_, v_)

    monkeypatch.setattr("pplan.schedules.periodic._common.get_schedule", spy)
    r_mid, r_big = route(name, p, v, m_mid, d), route(name, p, v, m_big, d)
    assert r_mid.fast and r_big.fast and r_mid.k == r_big.k
    assert max(seen, default=0) <= 64 * p
    share = m_big / len(schedule.chains)
    want = [share * sum(f[s] + 1.5 for s in schedule.stages_of(r)) for r in range(p)]
    got = summarise(name, p, v, m_big, d)
    assert all(_close(g, w, 0.0) for g, w in zip(got.busy_per_rank, want, strict=True))
    assert got.makespan >= got.busiest


@pytest.mark.parametrize(
    "name", [n for n in SCHEDULE_NAMES if period(n, 4) is None and not schedule_family(n).tuned]
)
def test_phase_block_families_cost_nothing_in_m(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """GPipe and looped BFS (every F, then every B) answer from the block structure read at m = 3 and 4 only:
    m = 10^5 generates nothing longer, and busy time is m·(F + I + W) summed over each rank's stages."""
    p, v = 4, 2 if name in LOOPED else None
    schedule = get_schedule(name, p, 8, v)
    f = [1.0 + 0.1 * s for s in range(schedule.num_stages)]
    d = Durations(f, 1.0, 0.5)
    seen: list[int] = []

    def spy(name_: str, p_: int, m_: int, v_: int | None = None) -> Schedule:
        seen.append(m_)
        return get_schedule(name_, p_, m_, v_)

    monkeypatch.setattr("pplan.schedules.periodic._common.get_schedule", spy)
    periodic.clear_caches()
    got, how = summarise_with_route(name, p, v, 100_000, d)
    assert how.fast and how.why == "phase blocks"
    assert max(seen) <= 4
    want = [100_000 * sum(f[s] + 1.5 for s in schedule.stages_of(r)) for r in range(p)]
    assert all(_close(g, w, 0.0) for g, w in zip(got.busy_per_rank, want, strict=True))
    assert got.peak_in_flight_per_rank == (100_000 * (v or 1),) * p


def test_interleaved_m_off_the_period_is_simulated() -> None:
    """torch's rounds rule admits m = 6 and 10 at p = 4 (groups of 6 and 5): no period in m, full simulation."""
    d = Durations([1.0, 1.3, 0.7, 1.1, 0.9, 1.2, 1.0, 0.8], 1.0, 0.6)
    for m in (6, 10):
        assert not route("interleaved-1f1b", 4, 2, m, d).fast
        _assert_same(
            summarise("interleaved-1f1b", 4, 2, m, d, 0.05), _full("interleaved-1f1b", 4, 2, m, d, 0.05)
        )


def test_near_tie_without_certificate_falls_back_exactly() -> None:
    """ZB-H1 on 2 ranks with the last stage's forward 1e-7 slower: rank 0's slack shrinks by 1e-7 per period, a
    transient of ~10^7 periods, so no certificate exists below K and the answer is the full simulation's."""
    d = Durations([1.0, 1.0 + 1e-7], 1.0, 1.0)
    r = route("zb-h1", 2, None, 200, d)
    assert not r.fast and r.why == "no certificate below K copies"
    _assert_same(summarise("zb-h1", 2, None, 200, d), _full("zb-h1", 2, None, 200, d, 0.0))


def test_refused_certificates_fall_back_exactly(
    monkeypatch: pytest.MonkeyPatch, periodic_route: None
) -> None:
    """With every certificate refused (negative tolerance) each call must still be exact, via the full list."""
    monkeypatch.setattr("pplan.schedules.periodic.play._TOLERANCE", -1.0)
    rng = random.Random(7)
    for name, p, v in [("1f1b", 4, None), ("interleaved-zb", 2, 3), ("dualpipe", 4, None)]:
        m = 16 * p
        stages = get_schedule(name, p, m, v).num_stages
        d, lat = _inputs(rng, stages, p, 1)
        how = route(name, p, v, m, d, lat)
        assert not how.fast and how.why == "no certificate below K copies"
        _assert_same(summarise(name, p, v, m, d, lat), _full(name, p, v, m, d, lat))


@pytest.mark.parametrize(("name", "p", "v"), PERIODIC)
def test_detected_period_reproduces_the_generator(name: str, p: int, v: int | None) -> None:
    """The measured prefix · period^K · suffix is the generator's list far beyond the lists it was read from."""
    delta = period(name, p)
    assert delta is not None
    struct = structure.structure_cached(name, p, v, 0)
    assert struct is not None
    for copies in (5, 17, 40):
        rows = split.tokens(get_schedule(name, p, struct.dec.m_of(copies), v))[0]
        assert struct.dec.expand(copies) == rows


@pytest.mark.parametrize(
    ("name", "v"),
    [(name, 2 if name in LOOPED else None) for name in SCHEDULE_NAMES if period(name, 4) is not None],
)
@pytest.mark.parametrize("p", [6, 8, pytest.param(16, marks=pytest.mark.acceptance)])
def test_played_lists_are_the_generators_at_larger_p(name: str, p: int, v: int | None) -> None:
    """The lists the periodic route plays are built from the split read at m0..m0 + 3Δ, never generated: at
    larger p too, the split is the generator's list at every number of copies the route plays (2..k, and a
    few beyond)."""
    try:
        get_schedule(name, p, 8 * p, v)
    except ConfigError:
        pytest.skip("p not valid for the family")
    struct = structure.structure_cached(name, p, v, 0)
    assert struct is not None
    for copies in (4, 9, 2 * p + 1):
        rows = split.tokens(get_schedule(name, p, struct.dec.m_of(copies), v))[0]
        assert struct.dec.expand(copies) == rows


@pytest.mark.parametrize(
    "ranks",
    [pytest.param((1, 2, 3, 4), id="p<=4"), pytest.param((8,), id="p8", marks=pytest.mark.acceptance)],
)
def test_full_route_is_bit_identical_to_the_timeline(ranks: tuple[int, ...]) -> None:
    """Route C (the full list simulated directly) returns the timeline's summary float for float: same
    recurrence, same order of operations, busy time summed in list order; with F&B pairs, a latency matrix with
    a non-zero diagonal (same-rank hops cost nothing) and uneven stages. (p = 8 is most of the time: acceptance.)"""
    rng = random.Random(11)
    for name, p, v in [g for g in GRID if g[1] in ranks]:
        for m in _ms(name, p, v)[::3]:
            schedule = get_schedule(name, p, m, v)
            stages = schedule.num_stages
            d = Durations(
                [rng.uniform(0.5, 2.0) for _ in range(stages)],
                [rng.uniform(0.5, 2.0) for _ in range(stages)],
                [rng.uniform(0.0, 1.5) for _ in range(stages)],
            )
            lat = [[rng.uniform(0.0, 0.3) for _ in range(p)] for _ in range(p)]
            got = direct.simulated(direct.lists(schedule), stages, d, lat)
            assert got == simulate(schedule, d, lat).summary(), (name, p, v, m)


def test_full_route_leaves_deadlocks_to_the_timeline() -> None:
    rows = [
        [Action(0, "F", 0), Action(0, "B", 0), Action(0, "F", 1), Action(0, "B", 1)],
        [Action(1, "F", 1), Action(1, "B", 1), Action(1, "F", 0), Action(1, "B", 0)],
    ]
    schedule = make_schedule("hand-made", 2, 1, 2, (0, 1), rows)
    assert direct.simulated(direct.lists(schedule), 2, Durations(), 0.0) is None
    with pytest.raises(DeadlockError):
        simulate(schedule)


def test_short_lists_are_simulated_in_full_when_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold, a list not much longer than the four the periodic route generates is simulated in full (route C),
    which then also answers `in_flight_profile` without generating anything again; a long one takes the
    periodic route, generating only the lists at m0..m0 + 3Δ. Both exact."""
    periodic.clear_caches()
    seen: list[int] = []

    def spy(name_: str, p_: int, m_: int, v_: int | None = None) -> Schedule:
        seen.append(m_)
        return get_schedule(name_, p_, m_, v_)

    monkeypatch.setattr("pplan.schedules.periodic._common.get_schedule", spy)
    d = Durations([1.0] * 15 + [1.3], 1.0, 1.0)
    lat = [[0.0 if a == b else 0.01 if a // 4 == b // 4 else 0.05 for b in range(8)] for a in range(8)]
    short, how = summarise_with_route("zbv", 8, None, 40, d, lat)
    assert not how.fast and how.why == "the list at m is about as short as the lists read off"
    assert seen == [40]
    _assert_same(short, _full("zbv", 8, None, 40, d, lat))
    in_flight_profile("zbv", 8, None, 40)
    assert seen == [40]
    seen.clear()
    long, how = summarise_with_route("zbv", 8, None, 400, d, lat)
    assert how.fast
    m0 = split.first_m0("zbv", 8, 0)
    assert sorted(seen) == [m0, m0 + 1, m0 + 2, m0 + 3]
    _assert_same(long, _full("zbv", 8, None, 400, d, lat))


@pytest.mark.parametrize("m", [200, 201])
def test_cyclicity_two(m: int) -> None:
    """DualPipeV with very uneven passes settles into a two-period cycle (c = 2): the certificate needs
    K ≡ k (mod 2), so k moves with the parity of m; either way the answer is the full simulation's."""
    f = [3.0, 7.0, 7.0, 1.0, 3.0, 1.0, 7.0, 1.0]
    d = Durations(f, [5.0, 5.0, 5.0, 5.0, 1.0, 1.0, 5.0, 5.0], [9.0, 9.0, 9.0, 0.0, 9.0, 2.0, 0.0, 9.0])
    got, how = summarise_with_route("dualpipev", 4, None, m, d, 3.0)
    assert how.fast and how.c == 2 and (m - 8 - how.k) % 2 == 0
    _assert_same(got, _full("dualpipev", 4, None, m, d, 3.0))


def test_timeline_summary_matches_timeline() -> None:
    d = Durations([1.0, 2.0, 0.5, 1.5], [1.0, 1.0, 2.0, 0.5], 0.7)
    t = simulate(get_schedule("zb-h2", 4, 12), d, 0.2)
    s = t.summary()
    assert (s.makespan, s.busy_per_rank, s.bubble, s.busiest) == (
        t.makespan,
        t.busy_per_rank,
        t.bubble,
        t.busiest,
    )
    assert s.bubble_fraction_of_step == t.bubble_fraction_of_step
    assert s.bubble_fraction_of_ideal == t.bubble_fraction_of_ideal
    assert s.span_per_rank == t.span_per_rank
    assert s.idle_in_span_per_rank == t.idle_in_span_per_rank
    assert s.idle_per_rank == t.idle_per_rank
    assert s.max_idle_in_span == t.max_idle_in_span
    assert s.p2p_messages == t.p2p_messages
    assert s.first_start_per_rank == tuple(row[0] for row in t.start)
    assert s.last_end_per_rank == tuple(row[-1] for row in t.end)


@pytest.mark.parametrize(
    ("name", "p", "v", "m"), [("dualpipe", 4, None, 17), ("interleaved-1f1b", 4, 2, 4 * 4 * 9 + 1)]
)
def test_invalid_inputs_raise_like_the_generator(name: str, p: int, v: int | None, m: int) -> None:
    with pytest.raises(ConfigError) as generator:
        get_schedule(name, p, m, v)
    with pytest.raises(ConfigError) as summary:
        summarise(name, p, v, m, Durations())
    assert (summary.value.field, str(summary.value)) == (generator.value.field, str(generator.value))
    assert generator.value.field == "--microbatches" and f"got {m}" in str(generator.value)


def test_per_stage_inputs_must_have_one_value_a_stage() -> None:
    with pytest.raises(ConfigError) as err:
        summarise("1f1b", 4, None, 400, Durations(f=[1.0, 2.0]))
    assert err.value.field == "durations.f" and "2 values for 4 stages" in str(err.value)
    with pytest.raises(ConfigError) as err:
        in_flight_profile("1f1b", 4, None, 400).peak_per_rank([1.0])
    assert err.value.field == "weights" and "for 4 stages" in str(err.value)


def test_fast_check_accepts_exactly_what_the_walk_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make_schedule`'s check (run on every list the periodic route generates) first tries a lighter pass and
    walks action by action only when that fails. On valid lists and on mutated ones (swapped, re-kinded,
    dropped, repeated, moved or renumbered actions) the lighter pass accepts exactly what the walk accepts."""
    rng = random.Random(5)
    bases = [get_schedule(name, p, m, v) for name, p, v in GRID[::3] for m in _ms(name, p, v)[:4]]

    def verdict(schedule: Schedule) -> str | None:
        try:
            actions.check(schedule)
        except Exception as err:  # the walk may raise KeyError on an unknown kind: same for both
            return f"{type(err).__name__}: {err}"
        return None

    for trial in range(3000):
        base = rng.choice(bases)
        rows = [list(row) for row in base.actions]
        for _ in range(rng.randint(0, 2)):
            r = rng.randrange(len(rows))
            if not rows[r]:
                continue
            i, a = rng.randrange(len(rows[r])), rows[r][rng.randrange(len(rows[r]))]
            op = rng.randrange(6)
            if op == 0:
                j = rng.randrange(len(rows[r]))
                rows[r][i], rows[r][j] = rows[r][j], rows[r][i]
            elif op == 1:
                rows[r][i] = Action(a.stage, rng.choice("FIWB"), a.microbatch)  # type: ignore[arg-type]
            elif op == 2:
                del rows[r][i]
            elif op == 3:
                rows[r].insert(i, a)
            elif op == 4:
                rows[r][i] = Action(rng.randrange(-1, base.num_stages + 1), a.kind, a.microbatch)
            else:
                rows[r][i] = Action(a.stage, a.kind, rng.randrange(-1, base.m + 2))
        mutated = Schedule(
            base.name,
            base.p,
            base.v,
            base.m + (trial % 17 == 0),
            base.placement,
            tuple(tuple(row) for row in rows),
            base.chains,
            base.splits_backward,
            base.overlaps if rows == [list(row) for row in base.actions] else (),
        )
        fast = verdict(mutated)
        monkeypatch.setattr(actions, "_passes", lambda schedule: False)
        assert verdict(mutated) == fast
        monkeypatch.undo()
