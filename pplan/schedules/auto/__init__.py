"""Automatic split-backward pipeline schedules under a memory limit (ZB-1p / ZB-2p style), one stage per rank.

Owns `auto_schedule`, which builds a `Schedule` named "auto" for p ranks (stage s on rank s, one chain 0..p−1),
m micro-batches, per-stage pass times F_s (forward), I_s (input-gradient backward, Qi et al.'s "B") and W_s
(weight-gradient backward), hop latencies (one λ for every cross-rank hop, or λ[a][b] for a message from rank a
to rank b: an F's activation goes s − 1 → s, an I's gradient s + 1 → s) and a memory limit (one K for every
stage, or K_s per stage); `memory_of`, the peak in-flight count of a hand-made schedule, so "1p" and "2p"
memory mean exactly what ZB-H1 and ZB-H2 use; and auto's rule on m (`auto_m_problem`, the registry's). The parts,
each a module: the checked problem, the list encoding and the memory limit on lists (`inputs`); the list builder
and how candidates compare (`greedy`); the warm-up rules, seeds, neighbours and search over policies
(`policies`); the hand-made lists it compares with (`hand`).

Idea (facts only): Qi et al. 2024, "Zero Bubble Pipeline Parallelism", arXiv 2401.10241, §3 — their automatic
scheduler (ZB-1p at 1F1B's memory, ZB-2p at twice that) is a greedy heuristic: in the warm-up run as many F as the
memory limit allows and as are useful before the first backward arrives; afterwards run I when its gradient has
arrived, else F if memory allows, else W; W passes fill idle time and free memory; they search over warm-up counts.
The code here is pplan's own.

Memory (pplan's definition, `pplan.schedules.timeline`): a micro-batch is in flight on a stage from the start of
its F to the end of its W. K_s bounds that count on stage s at every point of its rank's list (it depends on the
list order only). Any K_s ≥ 1 is feasible (K_s = 1 runs each micro-batch's F, I, W on stage s one after another,
GPipe-like); K_s > m is the same as K_s = m.

Algorithm:
1. `greedy.play`: a deterministic event-driven list scheduler. Time advances event by event; a rank that becomes free
   (or learns, while idle, that its next activation or gradient arrives) picks its next pass by a `Policy`:
   F-first, I-first or alternating I and F (the 1F1B skeleton); a per-rank warm-up (the most F before its first
   I); how W's fill idle time (an idle rank defers its W's and, once the pass it waits for is ready, places
   those that fit into the gap, plus any that delay that pass by at most a set fraction of W); a W lag (more W's
   pending than that forces one, ZB-H1's rule); and, I-first, an F lookahead. F, I and W each run in
   micro-batch order on a rank; an F that would put more than K_s micro-batches in flight waits (a W frees one).
   Every pass starts at the earliest time its list position allows, so the makespan the builder measures is the
   one `pplan.schedules.timeline.simulate` gives for the lists (the tests check it).
2. `policies.search_policies`: a bounded local search. A fixed portfolio of seed policies (modes × warm-up rules,
   among them "as many F as fit before the first gradient can arrive", × W delays × lags) is played first, then
   first-improvement hill climbing over the best policy's neighbours (warm-up ±1 on all ranks or on either half,
   another W delay, lag, or mode). Candidates compare by makespan, then by window idle time (the most idle time
   inside one rank's own first-to-last-pass window, Qi et al.'s bubble); of the candidates that tie with the best
   on both, the result is the one holding the fewest micro-batches at its stages' peaks (less memory for the same
   step; the climb itself follows the first two keys only). The search stops when the candidate
   budget is spent, no neighbour improves, or a candidate is at the lower bound with no window idle time. The
   budget depends on p·m only, never on wall time: results are deterministic.
3. Safeguards (`hand.safeguards`): ZB-H1's lists (exactly `policies.zb_h1_policy`) and ZB-H2's own lists
   (replayed), each when its peak in flight on every stage s fits K_s; so at their memory auto is never slower,
   and where they tie it they are taken when they hold less.
The best candidate is built with `make_schedule`; its makespan is the builder's own timing, which equals what
pplan's simulator gives for the lists (the tests check it on every result).

Optimality: exact search is exponential; the evidence is the lower bound, the larger of
`bounds.makespan_lower_bound` (no memory limit) and `bounds.memory_limited_ends` (what K allows) (the
result's `gap`) and the tests' brute force over every valid list order (`OPTIMAL_FOR`).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pplan.schedules.actions import Action, Schedule, make_schedule
from pplan.schedules.auto.hand import hand_schedule, safeguards
from pplan.schedules.auto.inputs import KIND, check_problem, latency_matrix, peak_per_stage
from pplan.schedules.auto.policies import candidate_budget, search_policies
from pplan.schedules.bounds import makespan_lower_bound, memory_limited_ends
from pplan.schedules.limits import MAX_AUTO_STAGE_MICROBATCHES
from pplan.schedules.timeline import peak_in_flight

AUTO_NAME = "auto"
"""The name its schedules carry, and what `pplan schedule` and `pplan bench` take for it (not a registry family:
it needs the pass times and the memory limit)."""

OPTIMAL_FOR = "p = 2, m ≤ 3 and p ∈ {3, 4}, m = 2 (seeded random times, latencies and every K)"
"""Where the tests find auto's makespan equal to the brute-force optimum over every valid order of every rank's
list (no gap on any tested case)."""


def auto_m_problem(p: int, m: int) -> str | None:
    """auto's rule on m, worded to follow its name (the registry's `m_problem`): p·m ≤
    MAX_AUTO_STAGE_MICROBATCHES."""
    if p * m > MAX_AUTO_STAGE_MICROBATCHES:
        return (
            f"builds lists for at most {MAX_AUTO_STAGE_MICROBATCHES:,} stage-micro-batches p·m, got {p}·{m} = "
            f"{p * m:,}"
        )
    return None


@dataclass(frozen=True, slots=True)
class AutoResult:
    """What `auto_schedule` returns.

    `schedule`: the "auto" `Schedule` (split backward, built with `make_schedule`); `makespan_s`: its makespan, as
    `pplan.schedules.timeline.simulate` gives it; `lower_bound_s`: the larger of `bounds.makespan_lower_bound` and
    `bounds.memory_limited_ends` under the same limits, for the same stages (no schedule within the limits that
    runs its forwards and weight gradients in micro-batch order, as auto's and the hand-made lists do, is faster); `gap` = (makespan − bound) / bound (0 when the bound is 0); `peak_in_flight`: per
    stage s, the most micro-batches in flight (≤ min(K_s, m)); `candidates_tried`: candidate lists played
    (heuristic policies plus hand-made safeguards); `method`: the heuristic, the search and the winning candidate.
    """

    schedule: Schedule
    makespan_s: float
    lower_bound_s: float
    gap: float
    peak_in_flight: tuple[int, ...]
    candidates_tried: int
    method: str


def memory_of(name: str, p: int, m: int) -> int:
    """The peak number of micro-batches in flight (max over stages) of the hand-made schedule `name` ("zb-h1",
    "zb-h2" or "1f1b") for p ranks and m micro-batches, under pplan's definition (from the start of F to the end of
    B, or of W with a split backward). Passing it as `auto_schedule`'s memory_limit compares auto with that schedule
    at exactly the memory it uses: ZB-H1's is "1p" (p once m ≥ p), ZB-H2's "2p" (2p − 1 once m ≥ 2p − 1)."""
    schedule = hand_schedule(name, p, m)
    per_stage, _ = peak_in_flight(schedule, [1.0] * schedule.num_stages)
    return round(max(per_stage))


def auto_schedule(
    p: int,
    m: int,
    memory_limit: int | Sequence[int],
    f: Sequence[float] | float,
    i: Sequence[float] | float,
    w: Sequence[float] | float,
    latency_s: float | Sequence[Sequence[float]] = 0.0,
) -> AutoResult:
    """A split-backward schedule for p ranks (stage s on rank s) and m micro-batches that keeps at most
    min(K_s, m) micro-batches in flight on each stage s and minimises the makespan (module docstring).

    `memory_limit`: K, one integer for every stage or p integers (K_s). `f`, `i`, `w`: seconds per pass of one
    micro-batch through one stage — forward, input-gradient backward, weight-gradient backward — one number for
    every stage or p numbers. `latency_s`: seconds charged on every cross-rank hop, or a p×p matrix whose
    latency_s[a][b] is a message from rank a to rank b (diagonal ignored). Raises `ConfigError` naming the field
    for p, m or a K < 1 (or not an integer), negative or non-finite times or latencies, a sequence of the wrong
    length, or a matrix not p×p. Deterministic: the search plays `candidate_budget(p, m)` policies plus the
    fitting hand-made lists, whatever the machine.
    """
    prob = check_problem(p, m, memory_limit, f, i, w, latency_s)
    lat = latency_matrix(prob)
    free = makespan_lower_bound(
        tuple(range(p)), (tuple(range(p)),), m, prob.f, prob.i, prob.w, lat, split_backward=True
    ).makespan_s
    bound = max(free, *memory_limited_ends(m, prob.cap, prob.f, prob.i, prob.w, lat))
    budget = candidate_budget(p, m)
    best, played = search_policies(prob, budget, bound)
    tried = len(played)
    # at the bound no hand-made list is faster, but one may tie holding less (ZB-H2's 2p − 1 against all m)
    for cand in safeguards(prob, played):
        tried += 1
        if cand.beats(best) or cand.leaner(best):
            best = cand
    schedule = make_schedule(
        AUTO_NAME,
        p,
        1,
        m,
        tuple(range(p)),
        [[Action(r, KIND[code % 3], code // 3) for code in row] for r, row in enumerate(best.rows)],
    )
    method = (
        f"event-driven greedy list scheduler (Qi et al. 2024 ZB-1p/2p-style: warm-up F within memory, then "
        f"I/F by policy, W into gaps, to free memory or past a lag) + bounded local search ({len(played)} "
        f"policies of a fixed budget of {budget}: seed portfolio, then hill climbing on warm-up, lookahead, lag "
        f"and mode) + ZB-H1/ZB-H2 safeguards ({tried - len(played)} played); best: {best.label}; no gap to the "
        f"brute-force optimum on tested cases with {OPTIMAL_FOR}"
    )
    return AutoResult(
        schedule=schedule,
        makespan_s=best.makespan_s,  # the builder times each list as the simulator does (the tests check it)
        lower_bound_s=bound,
        gap=max(0.0, (best.makespan_s - bound) / bound) if bound > 0 else 0.0,
        peak_in_flight=peak_per_stage(best.rows),
        candidates_tried=tried,
        method=method,
    )
