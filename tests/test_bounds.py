"""The makespan lower bounds (pplan.schedules.bounds) against hand derivations and the simulator: never above the
simulated makespan, exact where the docstring says so, and the coefficient form equal to the general one."""

from __future__ import annotations

import random

import pytest

from pplan.schedules import SCHEDULE_NAMES, get_schedule, schedule_family
from pplan.schedules.bounds import makespan_lower_bound, zero_latency_coefficients, zero_latency_makespan
from pplan.schedules.timeline import Durations, simulate


def _free(p: int) -> list[list[float]]:
    return [[0.0] * p for _ in range(p)]


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 16), (8, 8), (8, 32)])
def test_one_f_one_b_uniform_is_exact(p: int, m: int) -> None:
    # Narayanan et al. 2021 §2.2: (m + p − 1)(F + B) with F = 1, B = 2.
    bound = makespan_lower_bound(
        tuple(range(p)), (tuple(range(p)),), m, [1.0] * p, [1.0] * p, [1.0] * p, _free(p), False
    )
    assert bound.makespan_s == pytest.approx((m + p - 1) * 3.0)


@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (4, 3, 8), (4, 4, 16)])
def test_interleaved_uniform_is_exact(p: int, v: int, m: int) -> None:
    # Per chunk F = 1/v, B = 2/v: (m + (p − 1)/v)·3 on the last rank, which the simulator reproduces.
    s = p * v
    f = [1.0 / v] * s
    fam = schedule_family("interleaved-1f1b")
    bound = makespan_lower_bound(fam.stage_ranks(p, v), fam.chains(p, v), m, f, f, f, _free(p), False)
    assert bound.makespan_s == pytest.approx(3.0 * (m + (p - 1) / v))
    sim = simulate(get_schedule("interleaved-1f1b", p, m, v), Durations(f, f, f))
    assert sim.makespan == pytest.approx(bound.makespan_s)


def _cases(seed: int, count: int) -> list[tuple[str, int, int, int]]:
    rng = random.Random(seed)
    out: list[tuple[str, int, int, int]] = []
    while len(out) < count:
        name = rng.choice(SCHEDULE_NAMES)
        fam = schedule_family(name)
        p = rng.choice([1, 2, 3, 4, 6, 8])
        v = rng.choice([2, 3]) if fam.fixed_v is None else fam.default_v
        m = rng.choice([1, 2, p, 2 * p, 3 * p + 1, 4 * p])
        if fam.p_problem(p) or fam.m_problem(p, m):
            continue
        out.append((name, p, v, m))
    return out


@pytest.mark.parametrize(("name", "p", "v", "m"), _cases(3, 80))
def test_bound_never_exceeds_the_simulation(name: str, p: int, v: int, m: int) -> None:
    rng = random.Random(hash((name, p, v, m)) & 0xFFFF)
    fam = schedule_family(name)
    schedule = get_schedule(name, p, m, fam.generator_v(v))
    n = schedule.num_stages
    f, i, w = ([rng.uniform(0.2, 2.0) for _ in range(n)] for _ in range(3))
    lat = [[0.0 if a == b else rng.uniform(0.0, 0.3) for b in range(p)] for a in range(p)]
    sim = simulate(schedule, Durations(f, i, w), lat)
    bound = makespan_lower_bound(
        schedule.placement, schedule.chains, m, f, i, w, lat, schedule.splits_backward
    )
    assert bound.makespan_s <= sim.makespan * (1 + 1e-12)
    for r in range(p):
        if sim.end[r]:
            assert bound.end_per_rank_s[r] <= sim.end[r][-1] * (1 + 1e-12)


@pytest.mark.parametrize(("name", "p", "v", "m"), _cases(5, 40))
def test_coefficient_form_equals_the_general_bound_without_latency(name: str, p: int, v: int, m: int) -> None:
    # Stages of L_s layers, the last one also the output layer: F_s = L_s·F_l + o_s·F_o, and so on.
    rng = random.Random(m * 31 + p)
    fam = schedule_family(name)
    placement, chains = fam.stage_ranks(p, v), fam.chains(p, v)
    n_chunks = p if fam.placement == "dual" else len(placement)
    layers_chunk = [rng.randint(1, 4) for _ in range(n_chunks)]
    layers = [layers_chunk[s % n_chunks] for s in range(len(placement))]
    out = [s % n_chunks == n_chunks - 1 for s in range(len(placement))]
    fl, il, wl, fo, io, wo = (rng.uniform(0.1, 1.0) for _ in range(6))
    f = [x * fl + o * fo for x, o in zip(layers, out, strict=True)]
    i = [x * il + o * io for x, o in zip(layers, out, strict=True)]
    w = [x * wl + o * wo for x, o in zip(layers, out, strict=True)]
    split = fam.splits_backward
    general = makespan_lower_bound(placement, chains, m, f, i, w, _free(p), split).makespan_s
    ranks = zero_latency_coefficients(placement, chains, layers, out)
    fast = zero_latency_makespan(ranks, m, fl, il + wl, fl + il + wl, fo + io + wo, split)
    assert fast == pytest.approx(general, rel=1e-12)


@pytest.mark.parametrize(("name", "p", "v", "m"), _cases(11, 40))
def test_two_kind_coefficient_form_equals_the_general_bound_without_latency(
    name: str, p: int, v: int, m: int
) -> None:
    # Stages of L_s layers of which K_s are of a second kind (a routed model's dense layers), the last stage also
    # the output layer: F_s = (L_s − K_s)·F_l + K_s·F_k + o_s·F_o, and so on.
    rng = random.Random(m * 17 + p * 5 + v)
    fam = schedule_family(name)
    placement, chains = fam.stage_ranks(p, v), fam.chains(p, v)
    n_chunks = p if fam.placement == "dual" else len(placement)
    layers_chunk = [rng.randint(1, 4) for _ in range(n_chunks)]
    other_chunk = [rng.randint(0, n) for n in layers_chunk]
    layers = [layers_chunk[s % n_chunks] for s in range(len(placement))]
    other = [other_chunk[s % n_chunks] for s in range(len(placement))]
    out = [s % n_chunks == n_chunks - 1 for s in range(len(placement))]
    fl, il, wl, fk, ik, wk, fo, io, wo = (rng.uniform(0.1, 1.0) for _ in range(9))

    def per_stage(a: float, k: float, o: float) -> list[float]:
        return [(n - x) * a + x * k + y * o for n, x, y in zip(layers, other, out, strict=True)]

    f, i, w = per_stage(fl, fk, fo), per_stage(il, ik, io), per_stage(wl, wk, wo)
    split = fam.splits_backward
    general = makespan_lower_bound(placement, chains, m, f, i, w, _free(p), split).makespan_s
    ranks = zero_latency_coefficients(placement, chains, layers, out, other)
    fast = zero_latency_makespan(
        ranks, m, min(fl, fk), min(il + wl, ik + wk), fl + il + wl, fo + io + wo, split, fk + ik + wk
    )
    # the head and drain terms take the lesser kind's F and B: the form is a bound, equal when those agree
    assert fast <= general * (1 + 1e-12)
    same = zero_latency_makespan(ranks, m, fl, il + wl, fl + il + wl, fo + io + wo, split, fk + ik + wk)
    if (fk, ik + wk) == (fl, il + wl) or all(x == 0 for x in other):
        assert same == pytest.approx(general, rel=1e-12)
    # busy work counted by kind: with no head or drain (one micro-batch's lead is tiny next to m of them), the
    # bound is m times the busiest rank's work per micro-batch
    busiest = max(
        sum(f[s] + i[s] + w[s] for s, r in enumerate(placement) if r == rank) / len(chains)
        for rank in range(p)
    )
    assert fast >= m * busiest * (1 - 1e-12)
