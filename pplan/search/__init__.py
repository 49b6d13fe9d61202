"""`recommend`'s engine: the exact top N configurations by predicted throughput, and why the rest are out.

Four steps, each in its own module:
1. enumerate (pplan.search.space): every (t, p, d, v, cp, schedule, b, layer split, recompute, ZeRO, gradient
   dtype) the query
   allows, as typed `Candidate` records; rule breaks are counted under a `Rejection`.
2. bound (pplan.search.rank, pplan.cost.steptime.step_time_bound): exact memory of every stage (the same functions
   `explain` uses: in-flight peaks depend only on the schedule's order, not on durations) and a proven upper
   bound on throughput, without simulating. A cheaper bound comes first: no step is shorter than the busiest
   rank's pass work, m·max_r Σ_{s on r} (F_s + I_s + W_s)·n_s/m.
3. simulate: the exact throughput, the simulated step as `explain` computes it (pplan.schedules.periodic: a cost
   independent of m).
4. summarise: the top N in the documented order (pplan.search.rank), folding configurations that differ only
   in how b, cp and d share the batch; rejection counts and the nearest misses on memory.
Steps 2 and 3 run best-first on one priority queue ordered by each configuration's best-known figure: the cheap
bound, then the proven bound, then the exact value. A configuration is final when its exact value comes to the
front, since every other configuration's exact value is at most its own figure; the search stops when N
distinct configurations are final, so the answer is the brute-force top N (`brute_force`, tested) while most
configurations are only ever bounded. At equal figures a bound is refined before an exact value is finalised.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from pplan.cost.passtime import layer_pass_times, output_pass_times
from pplan.documents.explain import ExplainReport
from pplan.errors import PplanError
from pplan.explain import explain_with_run, performance
from pplan.plan.configuration import PlanRequest, Recompute, Shape, make_plan
from pplan.plan.layout import make_layout
from pplan.profiles.specs import HardwareSpec, ModelSpec
from pplan.schedules import ScheduleFamily
from pplan.schedules.bounds import RankCoefficients, zero_latency_coefficients, zero_latency_makespan
from pplan.search.knobs import knob_notes
from pplan.search.rank import Fitted, Scored, distinct, fitted, score, throughput_bound
from pplan.search.space import (
    Candidate,
    Rejection,
    SearchRequest,
    enumerate_candidates,
)

__all__ = [
    "Candidate",
    "Miss",
    "Query",
    "Recommendation",
    "Rejection",
    "SearchRequest",
    "SearchResult",
    "brute_force",
    "search",
]

LauncherReason = Callable[[str, PlanRequest, int], str | None]
"""(launcher, request, m) → why the launcher cannot run the plan, or None."""


@dataclass(frozen=True, slots=True)
class Miss:
    """A configuration rejected for memory, with how far over it was."""

    summary: str
    need_bytes: float
    """Memory the most loaded stage needs (plus any requested headroom): exact, or at least this much."""
    usable_bytes: float
    exact: bool = True
    """False when `need_bytes` is the proven lower bound the search rejected it with."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A configuration in the answer, with the full `explain` of it."""

    candidate: Candidate
    request: PlanRequest
    report: ExplainReport
    knobs: tuple[str, ...] = ()
    """What its ZeRO-2/3 or BF16 gradients buy in memory (pplan.search.knobs), one line each."""


@dataclass
class SearchResult:
    candidates: list[Recommendation]
    rejected: Counter[Rejection] = field(default_factory=Counter)
    closest_misses: list[Miss] = field(default_factory=list)
    enumerated: int = 0
    bounded: int = 0
    """Configurations whose memory and proven throughput bound were computed."""
    simulated: int = 0
    """Configurations whose schedule was simulated for the exact throughput."""


_CHEAP, _BOUND, _EXACT = 0, 1, 2
BOUND_SLACK = 1e-9
"""Bounds are raised by this fraction so that floating-point rounding cannot put a bound a hair below the exact
value it bounds (where the bound is tight, e.g. 1F1B with uniform stages, both are the same sum in another order)."""


class Query:
    """One query's state: the model, hardware, request and the caches of its cheap bound."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, req: SearchRequest) -> None:
        self.model, self.hw, self.req = model, hw, req
        self.seq = req.seq_len or model.seq_len
        self.tokens = req.global_batch * self.seq
        self._last_cut: tuple[object, ...] = ()
        self._last_bound = 0.0

    def cheap_bound(self, c: Candidate) -> float:
        """tokens / the free-hop makespan bound (pplan.schedules.bounds.zero_latency_makespan): no step is shorter.
        It counts passes only, so it is the same for every ZeRO stage and gradient dtype of a cut (the enumeration
        yields those twins in a row: the last one is kept)."""
        cut = (c.family, c.t, c.p, c.cp, c.v, c.b, c.m, c.first_layers, c.last_layers, c.recompute)
        if cut != self._last_cut:
            f, b, layer, out = self._layer_times(c.t, c.cp, c.b, c.recompute)
            ranks = self._geometry(c.family, c.p, c.v, c.first_layers, c.last_layers)
            makespan = zero_latency_makespan(ranks, c.m, f, b, layer, out, c.family.splits_backward)
            self._last_cut, self._last_bound = cut, self.tokens / makespan
        return self._last_bound

    @lru_cache(maxsize=1024)  # noqa: B019  (one instance per query)
    def _layer_times(
        self, t: int, cp: int, b: int, recompute: Recompute
    ) -> tuple[float, float, float, float]:
        """One layer's F, B = I + W and F + I + W, and the output layer's F + I + W, in seconds."""
        shape = Shape(t, cp, self.seq, b, t > 1, True, recompute, "itemised")
        layer = layer_pass_times(self.model, self.hw, shape)
        out = output_pass_times(self.model, self.hw, shape)
        return (
            layer.f_s,
            layer.i_s + layer.w_s,
            layer.f_s + layer.i_s + layer.w_s,
            out.f_s + out.i_s + out.w_s,
        )

    @lru_cache(maxsize=4096)  # noqa: B019
    def _geometry(
        self, fam: ScheduleFamily, p: int, v: int, first: int | None, last: int | None
    ) -> tuple[RankCoefficients, ...]:
        layout = make_layout(fam, self.model.num_layers, p, v, first, last)
        chunks = [layout.chunks[s % len(layout.chunks)] for s in range(len(fam.stage_ranks(p, v)))]
        return zero_latency_coefficients(
            fam.stage_ranks(p, v),
            fam.chains(p, v),
            [c.layers for c in chunks],
            [c.has_output for c in chunks],
        )

    def launcher_refuses(self, c: Candidate, launcher_reason: LauncherReason | None) -> bool:
        if not self.req.launcher or launcher_reason is None:
            return False
        return launcher_reason(self.req.launcher, c.request(self.req, self.seq), c.m) is not None

    def fit(self, c: Candidate, index: int) -> Fitted:
        """The plan with a proven lower bound on its memory (no schedule built)."""
        return fitted(
            self.model, self.hw, make_plan(self.model, c.request(self.req, self.seq)), c, index, False
        )

    def fit_exactly(self, item: Fitted) -> Fitted:
        """The same plan with its exact memory (the schedule's in-flight peaks)."""
        return fitted(self.model, self.hw, item.plan, item.candidate, item.index, True)


def search(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    progress: Callable[[int], None] | None = None,
    launcher_reason: LauncherReason | None = None,
) -> SearchResult:
    """The exact top `req.top_n` configurations (as `brute_force` would rank them), each fully explained, and
    why every other enumerated configuration is not among them. `progress(simulated)` is called per simulation."""
    state = Query(model, hw, req)
    result = SearchResult(candidates=[])
    heap: list[tuple[float, int, tuple[int, ...], int, object]] = []
    # ZeRO-2 and 3 of a configuration wait behind the stage before them (`_stage_key`): one enters the heap only
    # when that stage is out of memory.
    waiting: dict[int, tuple[int, Candidate]] = {}
    # An FP32 configuration waits behind its BF16 twin (enumerated just before it) and enters the heap only once
    # the twin fits: it needs more memory and is never faster (`_fp32_twin`).
    fp32_waiting: dict[int, tuple[int, Candidate]] = {}
    admitted_fp32: set[int] = set()
    last: tuple[Candidate, int] | None = None  # the last candidate in the heap or in the ZeRO chain
    for index, cand in enumerate(enumerate_candidates(model, hw, req, state.seq, result.rejected)):
        result.enumerated += 1
        if state.launcher_refuses(cand, launcher_reason):
            result.rejected[Rejection.LAUNCHER] += 1
            continue
        if last is not None and _fp32_twin(cand, index, *last):
            fp32_waiting[last[1]] = (index, cand)
            continue
        if cand.zero >= 2 and last is not None and _stage_key(cand) == _stage_key(last[0]):
            waiting[last[1]] = (index, cand)  # ZeRO-2/3 behind the stage before it
        else:
            heap.append((-state.cheap_bound(cand) * (1 + BOUND_SLACK), _CHEAP, (), index, cand))
        last = (cand, index)
    heapq.heapify(heap)
    misses: list[Miss] = []
    final: list[Scored] = []
    kept: list[Scored] = []

    def admit(chain: dict[int, tuple[int, Candidate]], index: int) -> int | None:
        """The candidate waiting behind `index` in `chain` enters the heap (cheap bound); its index, if any."""
        if index not in chain:
            return None
        nxt, cand = chain.pop(index)
        heapq.heappush(heap, (-state.cheap_bound(cand) * (1 + BOUND_SLACK), _CHEAP, (), nxt, cand))
        return nxt

    while heap and len(kept) < req.top_n:
        _neg, level, _, index, item = heapq.heappop(heap)
        if level == _CHEAP:
            assert isinstance(item, Candidate)
            try:
                fit = state.fit(item, index)
            except PplanError:
                result.rejected[Rejection.INVALID] += 1
                admit(waiting, index)
                continue
            result.bounded += 1
            if not fit.fits(req.headroom_fraction):
                _miss(result, misses, fit, req.headroom_fraction, index in admitted_fp32)
                admit(waiting, index)  # out of memory: the next ZeRO stage may fit
                continue
            bound = throughput_bound(model, hw, fit.plan) * (1 + BOUND_SLACK)
            heapq.heappush(heap, (-bound, _BOUND, (), index, fit))
        elif level == _BOUND:
            assert isinstance(item, Fitted)
            fit = state.fit_exactly(item)
            if not fit.fits(req.headroom_fraction):
                _miss(result, misses, fit, req.headroom_fraction, index in admitted_fp32)
                admit(waiting, index)  # out of memory: the next ZeRO stage may fit
                continue
            twin = admit(fp32_waiting, index)  # the BF16 twin fits: the FP32 one may too, and may rank first
            if twin is not None:
                admitted_fp32.add(twin)
            scored = score(model, hw, fit)
            result.simulated += 1
            if progress:
                progress(result.simulated)
            key = scored.key()
            heapq.heappush(heap, (key[0], _EXACT, key[1:-1], index, scored))
        else:
            assert isinstance(item, Scored)
            final.append(item)
            kept, _ = distinct(final, req.top_n)
    shown, folded = distinct(final, req.top_n)
    result.rejected[Rejection.EQUIVALENT] += len(folded)
    result.rejected[Rejection.BELOW_TOP] += len(final) - len(shown) - len(folded)
    for _, level, *_ in heap:
        result.rejected[Rejection.BELOW_TOP if level == _EXACT else Rejection.BOUND] += 1
    result.rejected[Rejection.HIGHER_STAGE] += len(waiting)
    result.rejected[Rejection.DOMINATED] += len(fp32_waiting)
    result.candidates = [_recommendation(model, hw, req, s) for s in shown]
    result.closest_misses = _nearest(misses)
    for reason in [r for r, n in result.rejected.items() if n == 0]:
        del result.rejected[reason]
    return result


def _fp32_twin(c: Candidate, index: int, before: Candidate, before_index: int) -> bool:
    """Whether `c` (enumerated at `index`) keeps FP32 gradients and `before` is its BF16 twin. The gradient dtype
    is the innermost enumeration loop, BF16 first (pplan.search.space.GRAD_ORDER), so the twin is the candidate
    enumerated just before, with the same ZeRO stage. Gradient bytes enter the cost model only as a factor
    (GRAD_BYTES: memory, data-parallel traffic, the optimizer's pass over them), so `c` needs more memory than the
    twin and is never faster: it can fit only if the twin does, and the twin's bounds bound it."""
    return (
        before_index == index - 1
        and c.grad_dtype == "fp32"
        and before.grad_dtype == "bf16"
        and c.zero == before.zero
    )


def _stage_key(c: Candidate) -> tuple[object, ...]:
    """Everything but the ZeRO stage: candidates with equal keys are ZeRO-stage twins. The enumeration yields a
    configuration's stages in a row, ascending. From ZeRO-1 up a higher stage is never faster (ZeRO-2 adds a
    reduce-scatter per micro-batch, ZeRO-3 the weight gathers; the optimizer shard is the same: pplan.cost), so
    while ZeRO-1 or 2 fits, the next stage ranks below it and is folded (pplan.search.rank.distinct): it needs
    evaluating only when the stage before it is out of memory. ZeRO-0 is not in the chain: its optimizer step
    runs over all the parameters, so ZeRO-1 can be faster."""
    return (
        c.family,
        c.t,
        c.p,
        c.cp,
        c.d,
        c.v,
        c.b,
        c.m,
        c.first_layers,
        c.last_layers,
        c.recompute,
        c.grad_dtype,
    )


def brute_force(
    model: ModelSpec, hw: HardwareSpec, req: SearchRequest, launcher_reason: LauncherReason | None = None
) -> list[Scored]:
    """Every enumerated configuration that fits, each simulated, in the documented order (no bound used): the
    reference `search` is tested and benchmarked against. `distinct(result, n)[0]` is the top n."""
    state = Query(model, hw, req)
    scored: list[Scored] = []
    for index, cand in enumerate(enumerate_candidates(model, hw, req, state.seq, Counter())):
        if state.launcher_refuses(cand, launcher_reason):
            continue
        try:
            fit = state.fit_exactly(state.fit(cand, index))
        except PplanError:
            continue
        if fit.fits(req.headroom_fraction):
            scored.append(score(model, hw, fit))
    return sorted(scored, key=Scored.key)


def _recommendation(model: ModelSpec, hw: HardwareSpec, req: SearchRequest, s: Scored) -> Recommendation:
    request = s.candidate.request(req, s.plan.seq_len)
    report, plan, run = explain_with_run(model, hw, request, with_sensitivity=False, split_p2p=False)
    if req.split_p2p:  # the breakdown with exposed P2P time apart from the bubble: one more simulation
        report = report.model_copy(
            update={"performance": performance(model, hw, plan, run, with_sensitivity=False, split_p2p=True)}
        )
    return Recommendation(s.candidate, request, report, knob_notes(model, hw, request, s.fitted.peak_bytes))


def _miss(
    result: SearchResult, misses: list[Miss], fit: Fitted, headroom_fraction: float, twin_fits: bool = False
) -> None:
    """Count a configuration out of memory, and keep it for the nearest misses unless a twin of it fits (an FP32
    configuration admitted because its BF16 twin fits is no miss of the cut)."""
    result.rejected[Rejection.MEMORY] += 1
    if twin_fits:
        return
    usable = fit.usable_bytes
    need = fit.peak_bytes + usable * headroom_fraction
    misses.append(Miss(fit.candidate.summary(), need, usable, fit.exact))


def _nearest(misses: list[Miss]) -> list[Miss]:
    """The five nearest misses on memory, one line per distinct shortfall (not every b / cp variant of it)."""
    misses.sort(key=lambda x: (x.need_bytes / x.usable_bytes, x.summary))
    nearest: list[Miss] = []
    for miss in misses:
        if all(abs(miss.need_bytes - kept.need_bytes) > 0.005 * kept.need_bytes for kept in nearest):
            nearest.append(miss)
        if len(nearest) == 5:
            break
    return nearest
