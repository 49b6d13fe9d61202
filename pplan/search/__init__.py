"""`recommend`'s search: the exact top N configurations by predicted throughput, and why the rest are out. Data
only: the ranked configurations with their exact evaluation; `recommend` (pplan.recommend) explains them.

Each step in its own module:
1. enumerate (`space`): every (t, p, d, v, cp, schedule, b, layer split, recompute, ZeRO, gradient dtype, sharding)
   the query allows, as typed `Candidate` records; rule breaks are counted under a `Rejection`. What the query's
   launcher cannot run, or lies too far outside the calibrated envelope, is dropped before it is costed
   (`filters`).
2. bound (`bounds`): proven upper bounds on throughput without simulating, cheapest first — no step is shorter
   than the busiest rank's pass work, m·max_r Σ_{s on r} (F_s + I_s + W_s)·n_s/m — and lower bounds on memory.
3. fit and simulate (`rank`): the exact memory of every stage (the same functions `explain` uses: in-flight peaks
   depend only on the schedule's order, not on durations) and the exact throughput, the simulated step as
   `explain` computes it (pplan.schedules.periodic: a cost independent of m).
4. summarise (`rank`, `result`): the top N in the documented order, folding configurations that differ only in how
   b, cp and d share the batch; rejection counts and the nearest misses on memory.
Steps 2 and 3 run best-first on one priority queue (`engine`), a level at a time, while configurations one step
more sharded or recomputed wait behind the one below and partial recomputes and sharding variants are made on
demand (`lattice`): the answer is the brute-force top N (`brute_force`, tested) while most configurations are
only ever bounded. The schedules' periodic structures are built ahead on a second core (`prefetch`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from pplan.collector import collector_paused
from pplan.errors import PplanError
from pplan.plan.configuration import check_expert_split
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.search.bounds import Query
from pplan.search.engine import Engine
from pplan.search.filters import LauncherFilter, LauncherReason, reason_refuses
from pplan.search.rank import Scored, score
from pplan.search.result import Miss, Ranked, Ranking
from pplan.search.space import Candidate, Rejection, SearchRequest, enumerate_candidates

__all__ = [
    "Candidate",
    "LauncherFilter",
    "LauncherReason",
    "Miss",
    "Query",
    "Ranked",
    "Ranking",
    "Rejection",
    "SearchRequest",
    "brute_force",
    "top_configurations",
]


@collector_paused()
def top_configurations(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    progress: Callable[[int], None] | None = None,
    launcher: LauncherFilter | None = None,
) -> Ranking:
    """The exact top `req.top_n` configurations (as `brute_force` would rank them), and why every other
    enumerated configuration is not among them. `progress(simulated)` is called per simulation. The cyclic
    garbage collector is paused meanwhile (pplan.collector)."""
    if req.ep is not None or req.etp is not None:
        check_expert_split(model, req.ep or 1, req.etp or 1)
    return Engine(model, hw, req, progress, launcher).run()


@collector_paused()
def brute_force(
    model: ModelSpec, hw: HardwareSpec, req: SearchRequest, launcher_reason: LauncherReason | None = None
) -> list[Scored]:
    """Every enumerated configuration that fits, each simulated, in the documented order (no bound used): the
    reference `top_configurations` is tested and benchmarked against. `distinct(result, n)[0]` is the top n."""
    state = Query(model, hw, req)
    scored: list[Scored] = []
    for index, cand in enumerate(enumerate_candidates(model, hw, req, state.seq, Counter())):
        if reason_refuses(req, launcher_reason, cand, state.seq):
            continue
        if state.refusal(cand, None) is not None:
            continue
        try:
            fit = state.fit_exactly(state.fit(cand, index))
        except PplanError:
            continue
        if fit.fits(req.headroom_fraction):
            scored.append(score(model, hw, fit))
    return sorted(scored, key=Scored.key)
