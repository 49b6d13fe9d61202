"""Which policies the auto scheduler plays (step 2 of pplan.schedules.auto's algorithm): the warm-up rules
(`first_gradient_s` and the counts they give), the seed portfolio (`portfolio`, with ZB-H1's own policy,
`zb_h1_policy`), the neighbours of a policy (`neighbours`) and the bounded local search over them
(`search_policies`), within a candidate budget fixed by p·m (`candidate_budget`)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

from pplan.schedules.auto.greedy import Candidate, Mode, Policy, play
from pplan.schedules.auto.inputs import Problem

WORK_PER_SEARCH = 40_000
"""The search plays about this many ranks × micro-batches in all: its candidate count is this ÷ (p·m), clamped to
[MIN_CANDIDATES, MAX_CANDIDATES]."""
MIN_CANDIDATES = 3
MAX_CANDIDATES = 48


def first_gradient_s(prob: Problem) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per rank r: arrival_r, the earliest start of its first F (the forward chain before it), and g_r, the
    earliest time its first I can be ready (micro-batch 0 down the whole pipeline and back up to r)."""
    p, lat_f, lat_i = prob.p, prob.lat_f_in, prob.lat_i_in
    arrival = [0.0] * p
    for r in range(1, p):
        arrival[r] = arrival[r - 1] + prob.f[r - 1] + lat_f[r]
    ready = [0.0] * p
    ready[p - 1] = arrival[p - 1] + prob.f[p - 1]
    for r in range(p - 2, -1, -1):
        ready[r] = ready[r + 1] + prob.i[r + 1] + lat_i[r]
    return tuple(arrival), tuple(ready)


def _warmup(prob: Problem, rule: str) -> tuple[int, ...]:
    """Per-rank warm-up counts, clamped to [1, min(K_r, m)]. Rules: "1f1b" p − r; "zb-h2" 2(p − r) − 1; "cap"
    min(K_r, m); "fit" the forwards that end by the time the first gradient can arrive (g_r of
    `first_gradient_s`); "fit+1" one more, which may overrun it (Qi et al.'s binary warm-up choice)."""
    p = prob.p
    arrival, ready = first_gradient_s(prob)
    out = []
    for r in range(p):
        cap = prob.cap[r]
        if rule == "1f1b":
            n = p - r
        elif rule == "zb-h2":
            n = 2 * (p - r) - 1
        elif rule == "cap":
            n = cap
        else:
            window = ready[r] - arrival[r]
            fits = cap if prob.f[r] <= 0 else math.floor(window / prob.f[r] + 1e-9)
            n = fits + (rule == "fit+1")
        out.append(max(1, min(cap, n)))
    return tuple(out)


_SEEDS: tuple[tuple[Mode, str, float | None, bool], ...] = (
    ("I-first", "zb-h2", 0.5, False),
    ("F-first", "1f1b", 0.0, True),
    ("I-first", "cap", math.inf, False),
    ("alternate", "zb-h2", 0.5, False),
    ("I-first", "zb-h2", 0.0, True),
    ("I-first", "fit", 0.5, False),
    ("alternate", "fit", 0.0, True),
    ("alternate", "zb-h2", math.inf, False),
    ("I-first", "fit+1", math.inf, False),
    ("F-first", "zb-h2", 0.5, False),
    ("F-first", "zb-h2", 0.0, True),
    ("alternate", "1f1b", 0.0, True),
)
"""The first seeds, as (mode, warm-up rule, W delay, ZB-H1's lag or none), in the order a greedy cover chose
them: on 350 seeded random cases (p from 2 to 32, K at ZB-H1's, ZB-H2's or random memory, equal, Qi et al.
Table 1, heterogeneous and random stage times, latencies up to 0.1 F) each next seed most lowered the summed
gap to the best policy found by a long search."""


def portfolio(prob: Problem) -> Iterator[Policy]:
    """The seed policies: `_SEEDS`, then ZB-H1's, then every mode × warm-up rule × W delay × lag."""
    rules = ("1f1b", "zb-h2", "cap", "fit", "fit+1")
    w = {rule: _warmup(prob, rule) for rule in rules}
    zb_lag = tuple(range(prob.p))  # ZB-H1's: rank r runs W(k − r) right after I(k)
    for mode, rule, delay, lagged in _SEEDS:
        yield Policy(mode, w[rule], delay, w_lag=zb_lag if lagged else None)
    yield zb_h1_policy(prob)
    for mode in ("F-first", "I-first", "alternate"):
        for rule in rules:
            for delay in (0.0, 0.5, math.inf):
                yield Policy(mode, w[rule], delay)
            for delay_or_none in (0.0, None):
                yield Policy(mode, w[rule], delay_or_none, w_lag=zb_lag)


def zb_h1_policy(prob: Problem) -> Policy:
    """The policy whose lists are exactly ZB-H1's (`families.zero_bubble.zb_h1`; the tests check it): alternate
    I and F after p − r warm-up forwards, W(k − r) right after I(k), no W in idle time."""
    return Policy("alternate", _warmup(prob, "1f1b"), None, w_lag=tuple(range(prob.p)))


def neighbours(prob: Problem, pol: Policy) -> Iterator[Policy]:
    """Policies one step from `pol`: warm-up ±1 on all ranks, on the first or the second half; another W
    delay (or none); W lag ±1, or none, or ZB-H1's; (I-first) another F lookahead; another mode."""
    p, cap = prob.p, prob.cap
    half = (p + 1) // 2
    for lo, hi in ((0, p), (0, half), (half, p)):
        for step in (1, -1):
            warm = tuple(
                max(1, min(cap[r], x + step)) if lo <= r < hi else x for r, x in enumerate(pol.warmup)
            )
            if warm != pol.warmup:
                yield replace(pol, warmup=warm)
    for delay in (0.0, 0.25, 0.5, 1.0, math.inf, None):
        if delay != pol.w_delay:
            yield replace(pol, w_delay=delay)
    if pol.w_lag is None:
        yield replace(pol, w_lag=tuple(range(p)))
    else:
        yield replace(pol, w_lag=None)
        for step in (1, -1):
            lag = tuple(max(0, x + step) for x in pol.w_lag)
            if lag != pol.w_lag:
                yield replace(pol, w_lag=lag)
    if pol.mode == "I-first":
        for look in (0.0, 0.5, 1.0):
            if look != pol.f_lookahead:
                yield replace(pol, f_lookahead=look)
    for mode in ("F-first", "I-first", "alternate"):
        if mode != pol.mode:
            yield replace(pol, mode=mode, f_lookahead=0.0)


def candidate_budget(p: int, m: int) -> int:
    """How many candidate policies `auto_schedule` plays for p ranks and m micro-batches (fixed by p·m)."""
    return max(MIN_CANDIDATES, min(MAX_CANDIDATES, WORK_PER_SEARCH // (p * m)))


def search_policies(prob: Problem, budget: int, bound_s: float) -> tuple[Candidate, set[Policy]]:
    """Play the seed portfolio (half the budget, at least MIN_CANDIDATES), then hill-climb from the best policy
    (first improvement; `Candidate.beats`) until `budget` distinct policies are played, no neighbour improves,
    or a candidate is unbeatable (at the lower bound `bound_s`, no window idle time). Returns the best candidate
    and the policies played."""
    tried: set[Policy] = set()
    best: Candidate | None = None
    best_pol: Policy | None = None

    lean: Candidate | None = None  # the leanest candidate as good as `best`

    def attempt(pol: Policy) -> bool:
        """Play `pol`; True when it beats the best so far."""
        nonlocal best, best_pol, lean
        tried.add(pol)
        got = play(prob, pol)
        if best is None or got.beats(best):
            best, best_pol, lean = got, pol, got
            return True
        if lean is not None and got.leaner(lean):
            lean = got
        return False

    def done() -> bool:
        return len(tried) >= budget or (best is not None and best.unbeatable(bound_s))

    seeds = min(budget, max(MIN_CANDIDATES, budget // 2))
    for pol in portfolio(prob):
        if len(tried) >= seeds or done():
            break
        if pol not in tried:
            attempt(pol)
    improved = True
    while improved and not done():
        improved = False
        assert best_pol is not None
        for pol in neighbours(prob, best_pol):
            if done():
                break
            if pol not in tried and attempt(pol):
                improved = True
                break
    assert best is not None and lean is not None
    return lean, tried
