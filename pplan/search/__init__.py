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
bound (the free-hop makespan of each rank's layers, counted by kind for a routed model with dense layers), then
one from the plan alone (its data-parallel traffic and optimizer step, `Query.sync_bound`; and whether its
weights, gradients and optimizer states alone overflow, `Query.static_miss`, which no recompute or micro-batch can
cure), then the proven bound, then the exact value. A configuration is final when its exact value comes to the
front, since every other configuration's exact value is at most its own figure; the search stops when N
distinct configurations are final, so the answer is the brute-force top N (`brute_force`, tested) while most
configurations are only ever bounded. At equal figures a bound is refined before an exact value is finalised.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import NamedTuple, Protocol

from pplan.collector import collector_paused
from pplan.cost.memory import ActivationPeaks, plan_gathered_weights_bytes, plan_static_totals
from pplan.cost.passtime import layer_pass_times, output_pass_times
from pplan.cost.pipeline import warmup_held, warmup_peaks
from pplan.cost.steptime import SyncRank, plan_tails, sync_floor_s, sync_hidden, sync_ranks
from pplan.cost.uncertainty import Extrapolation, envelope_misses
from pplan.cost.usable import usable_bytes
from pplan.documents.explain import ExplainReport
from pplan.errors import PplanError
from pplan.explain import explain_with_run, performance
from pplan.frozen import changed
from pplan.model import activations as act
from pplan.model.flops import layer_kinds
from pplan.model.precision import Precision
from pplan.plan.configuration import (
    Plan,
    PlanRequest,
    Recompute,
    Shape,
    check_expert_split,
    make_plan,
    with_sharding,
)
from pplan.plan.layout import make_layout
from pplan.profiles.specs import HardwareSpec, ModelSpec
from pplan.schedules import ScheduleFamily
from pplan.schedules.bounds import RankCoefficients, zero_latency_coefficients, zero_latency_makespan
from pplan.schedules.periodic import PROVIDERS, StructureKey, structure_key
from pplan.search.knobs import knob_notes
from pplan.search.prefetch import Prefetch
from pplan.search.prefetch import available as prefetch_available
from pplan.search.rank import Fitted, Scored, distinct, fitted, score, throughput_bound
from pplan.search.space import (
    GRAD_ORDER,
    MAX_CHUNK_LAYERS,
    Candidate,
    Cut,
    Rejection,
    SearchRequest,
    enumerate_candidates,
    enumerate_cuts,
    group_successors,
    sharding_variants,
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
"""(launcher, request, m) → why the launcher cannot run the plan, or None (what `brute_force` asks of each
configuration's request)."""


class LauncherFilter(Protocol):
    """What the launcher refuses, asked as the search enumerates (pplan.launchers.support.SearchFilter): the rules on
    what every configuration of a cut shares, once per cut, and those on one configuration's ZeRO stage, sharding,
    recompute and gradient dtype; a configuration is refused when either is."""

    def cut_refuses(
        self, family: ScheduleFamily, t: int, p: int, cp: int, d: int, v: int, m: int, first: int | None,
        last: int | None, offload: bool, ep: int, etp: int, precision: str,
    ) -> bool: ...  # fmt: skip

    def cell_refuses(
        self, t: int, p: int, cp: int, d: int, ep: int, etp: int, zero: int, recompute: Recompute,
        recompute_layers: int | None, grad_dtype: str, shard_group: int | None, reshard: bool,
        pairs_hide_experts: bool,
    ) -> bool: ...  # fmt: skip


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
    """Configurations whose memory and proven throughput bound were computed (partial recomputes the bisection
    skipped count too: each is proven out of memory by a bound that only falls with N)."""
    simulated: int = 0
    """Configurations whose schedule was simulated for the exact throughput."""


_CHEAP, _SYNC, _BOUND, _EXACT = 0, 1, 2, 3
ROUNDING_BYTES = 2**20
"""Slack for the bytes `Query.least_partial` computes in closed form instead of summing (each part is rounded up
on its own in pplan.cost.memory): far above any rounding, far below a layer's activations."""
BOUND_SLACK = 1e-9
"""Bounds are raised by this fraction so that floating-point rounding cannot put a bound a hair below the exact
value it bounds (where the bound is tight, e.g. 1F1B with uniform stages, both are the same sum in another order)."""


class Query:
    """One query's state: the model, hardware, request and the caches of its cheap bound."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, req: SearchRequest) -> None:
        self.model, self.hw, self.req = model, hw, req
        self.seq = req.seq_len or model.seq_len
        self.tokens = req.global_batch * self.seq
        self._bounds: dict[tuple[object, ...], float] = {}  # `cheap_bound` of each cut and recompute asked
        self._peaks: dict[tuple[object, ...], ActivationPeaks] = {}
        self._plans: dict[tuple[object, ...], Plan] = {}
        # `plan` of every ZeRO stage, gradient dtype and sharding choice asked of a cut
        self._variant_plans: dict[tuple[object, ...], Plan] = {}
        self._sync_floors: dict[tuple[object, ...], tuple[float, float]] = {}
        self._sync_ranks: dict[tuple[object, ...], frozenset[SyncRank]] = {}  # `sync_ranks` of each cut
        self._static_dead: dict[tuple[object, ...], dict[tuple[int, str], tuple[int, int]]] = {}
        self._static_fit: set[tuple[object, ...]] = set()  # `static_miss` keys (and ZeRO, dtype) that fit
        self._floors: dict[tuple[object, ...], dict[tuple[int, str], tuple[int, int]] | None] = {}
        self._cell_refusals: dict[tuple[object, ...], tuple[bool, ...]] = {}

    def cheap_bound(self, c: Candidate) -> float:
        """tokens / the free-hop makespan bound (pplan.schedules.bounds.zero_latency_makespan): no step is shorter.
        It counts passes only, so it is the same for every ZeRO stage, gradient dtype and sharding choice of a cut
        and recompute: remembered for those."""
        return self._bound(
            c.family, c.t, c.p, c.cp, c.v, c.b, c.m, c.first_layers, c.last_layers, c.recompute,
            c.recompute_layers, c.most_layers, c.ep, c.precision, c.etp,
        )  # fmt: skip

    def cell_bound(self, cut: Cut, i: int) -> float:
        """`cheap_bound` of `cut.cell(i)`, without making the cell (the search bounds every cut's heads). Not
        remembered: the enumeration asks once per cut and recompute, and most cuts are never expanded."""
        _, recompute, n = cut.options[i // (len(cut.zeros) * len(cut.grads))]
        return self._bound(
            cut.family, cut.t, cut.p, cut.cp, cut.v, cut.b, cut.m, cut.first_layers, cut.last_layers, recompute, n,
            cut.most_layers, cut.ep, cut.precision, cut.etp, remember=False,
        )  # fmt: skip

    def _bound(
        self,
        family: ScheduleFamily,
        t: int,
        p: int,
        cp: int,
        v: int,
        b: int,
        m: int,
        first_layers: int | None,
        last_layers: int | None,
        recompute: Recompute,
        recompute_layers: int | None,
        most_layers: int,
        ep: int,
        precision: Precision,
        etp: int = 1,
        remember: bool = True,
    ) -> float:
        cut = (family, t, p, cp, v, b, m, first_layers, last_layers, recompute, recompute_layers, ep, precision, etp)  # fmt: skip
        bound = self._bounds.get(cut)
        if bound is None:
            # a split backward matters only to tensor-parallel overlap, an overlapped all-to-all only with one:
            # the same shape otherwise, so families share their layer times
            f, back, layer, other, out = self._layer_times(
                t, cp, b, "none" if recompute_layers else recompute, family.splits_backward and t > 1, ep,
                precision, family.overlaps_expert_comm and ep * etp > 1, etp,
            )  # fmt: skip
            if recompute_layers:
                # the first N layers of every chunk re-run their forward (F) in the backward: a chunk of L ≤ most
                # layers adds N·F ≥ L·F·N/most, so every layer's backward is at least F·N/most longer
                extra = f * recompute_layers / most_layers
                back, layer, other = back + extra, layer + extra, other + extra
            ranks = self._geometry(family, p, v, first_layers, last_layers)
            makespan = zero_latency_makespan(ranks, m, f, back, layer, out, family.splits_backward, other)
            bound = self.tokens / makespan
            if remember:
                self._bounds[cut] = bound
        return bound

    @lru_cache(maxsize=16384)  # noqa: B019  (one instance per query)
    def _layer_times(
        self,
        t: int,
        cp: int,
        b: int,
        recompute: Recompute,
        splits_backward: bool,
        ep: int = 1,
        precision: Precision = "bf16",
        expert_comm_overlap: bool = False,
        etp: int = 1,
    ) -> tuple[float, float, float, float, float]:
        """The lesser of the layer kinds' F and B = I + W (pplan.model.flops.layer_kinds), each kind's F + I + W
        (a routed model's routed layers, then its dense ones: the same figure twice for a model of one kind), and
        the output layer's F + I + W, in seconds."""
        shape = Shape(
            t, cp, self.seq, b, t > 1, True, recompute, "itemised", stack=self.req.stack,
            splits_backward=splits_backward, tp_comm_overlap=self.req.tp_comm_overlap and t > 1, ep=ep, etp=etp,
            expert_comm_overlap=expert_comm_overlap, precision=precision,
        )  # fmt: skip
        layers = [layer_pass_times(kind, self.hw, shape) for kind, _ in layer_kinds(self.model)]
        out = output_pass_times(self.model, self.hw, shape)
        return (
            min(x.f_s for x in layers),
            min(x.i_s + x.w_s for x in layers),
            layers[0].f_s + layers[0].i_s + layers[0].w_s,
            layers[-1].f_s + layers[-1].i_s + layers[-1].w_s,
            out.f_s + out.i_s + out.w_s,
        )

    @lru_cache(maxsize=4096)  # noqa: B019
    def _geometry(
        self, fam: ScheduleFamily, p: int, v: int, first: int | None, last: int | None
    ) -> tuple[RankCoefficients, ...]:
        layout = make_layout(fam, self.model.num_layers, p, v, first, last, self.model)
        chunks = [layout.chunks[s % len(layout.chunks)] for s in range(len(fam.stage_ranks(p, v)))]
        return zero_latency_coefficients(
            fam.stage_ranks(p, v),
            fam.chains(p, v),
            [c.layers for c in chunks],
            [c.has_output for c in chunks],
            [c.dense_layers for c in chunks],
        )

    def launcher_refuses(self, c: Candidate, launcher: LauncherFilter | None) -> bool:
        """Whether the query's launcher refuses `c`."""
        if not self.req.launcher or launcher is None:
            return False
        if self.cut_refused(c, launcher):
            return True
        return launcher.cell_refuses(
            c.t, c.p, c.cp, c.d, c.ep, c.etp, c.zero, c.recompute, c.recompute_layers, c.grad_dtype,
            c.shard_group, c.reshard, c.family.overlaps_expert_comm,
        )  # fmt: skip

    def cell_refusals(self, cut: Cut, launcher: LauncherFilter | None) -> tuple[bool, ...]:
        """`launcher_refuses` of each of `cut`'s cells on a cut that passes, without making the cells (a cut's
        cells have no shard group and reshard after forward: their sharding variants are made later,
        `sharding_variants`). Remembered per what the cell rules read of the cut and its lattice's pattern."""
        if not self.req.launcher or launcher is None:
            return (False,) * len(cut)
        key = (cut.t, cut.p, cut.cp, cut.d, cut.ep, cut.etp, cut.family.overlaps_expert_comm, cut.pattern)
        got = self._cell_refusals.get(key)
        if got is None:
            got = self._cell_refusals[key] = tuple(
                launcher.cell_refuses(
                    cut.t, cut.p, cut.cp, cut.d, cut.ep, cut.etp, zero, recompute, n, grads, None, True,
                    cut.family.overlaps_expert_comm,
                )
                for _, recompute, n, zero, grads in map(cut.choices, range(len(cut)))
            )  # fmt: skip
        return got

    def cut_refused(self, c: Cut | Candidate, launcher: LauncherFilter | None) -> bool:
        """Whether the query's launcher refuses every configuration of `c`'s cut."""
        if not self.req.launcher or launcher is None:
            return False
        offload = c.offload if isinstance(c, Cut) else c.offload_modules
        return launcher.cut_refuses(
            c.family, c.t, c.p, c.cp, c.d, c.v, c.m, c.first_layers, c.last_layers, bool(offload), c.ep, c.etp,
            c.precision,
        )  # fmt: skip

    def refusal(
        self, c: Candidate, launcher: LauncherFilter | None, launcher_passed: bool = False
    ) -> Rejection | None:
        """Why the query's filters drop `c` before it is costed: the launcher cannot run it, or it lies outside the
        calibrated envelope on more axes than `max_extrapolation`; None when neither (`launcher_passed`: the
        launcher is known to run it)."""
        if not launcher_passed and self.launcher_refuses(c, launcher):
            return Rejection.LAUNCHER
        most = self.req.max_extrapolation
        if (
            most is not None
            and len(self._misses(c.t, c.p, c.cp, c.zero, c.family.name, c.ep, c.precision)) > most
        ):
            return Rejection.EXTRAPOLATED
        return None

    @lru_cache(maxsize=4096)  # noqa: B019  (one instance per query)
    def _misses(
        self, t: int, p: int, cp: int, zero: int, schedule: str, ep: int = 1, precision: str = "bf16"
    ) -> tuple[Extrapolation, ...]:
        return envelope_misses(
            self.model, self.hw, tp=t, pp=p, cp=cp, zero_stage=zero, seq_len=self.seq, gpus=self.req.gpus,
            schedule=schedule, stack=self.req.stack, tp_comm_overlap=self.req.tp_comm_overlap and t > 1,
            precision=precision, ep=ep,
        )  # fmt: skip

    def first_partial(self, c: Candidate) -> Candidate | None:
        """Without recompute `c` is out of memory: the same configuration recomputing the first layer of every
        chunk, when the query tries partial recompute and the chunks have more than one layer."""
        req = self.req
        if (
            c.recompute != "none"
            or "full" not in req.recompute
            or not req.partial_recompute
            or c.most_layers < 2
        ):
            return None
        return c.partial(1, req.recompute.index("full"))

    def least_partial(
        self, c: Candidate, plan: Plan | None, below: tuple[int, ...] | None = None
    ) -> tuple[Candidate | None, int, Fitted | None]:
        """From `c` (the first N layers of every chunk recomputed), the least N' ≥ N whose proven lower bound on
        memory may fit (None when even the largest partial N does not), how many N were skipped, and `c`'s own
        bound when N' = N. The bound (what ranks hold at their first backward, `fitted`) falls linearly in N' over
        the whole partial range: every chunk has at least N' layers (chunks differ by one layer at most and N'
        stops one short of the largest), so each rank holding K micro-batches saves K·(one layer's activations −
        its input)·(1 + fragmentation) per layer more recomputed, while the recompute transient stays one layer.
        So one bound at N gives every N': those it puts over the limit by more than the rounding slack
        (`ROUNDING_BYTES`) are skipped; a plan it lets through that does not fit only sends the search on."""
        n = c.recompute_layers or 1
        hi = c.most_layers - 1  # the largest partial N
        try:
            base = changed(plan, recompute="full", recompute_layers=n, recompute_method="block",
                           recompute_modules=()) if plan is not None else make_plan(self.model, c.request(self.req, self.seq))  # fmt: skip
        except PplanError:
            return None, hi - n + 1, None
        shape = base.shape
        grow = 1 + self.hw.memory.dynamic_fragmentation_fraction
        whole = act.layer_activations(self.model, shape, "none").total_bytes
        saved = (whole - act.layer_activations(self.model, shape, "full").total_bytes) * grow
        held = warmup_held(base)
        prefit = None
        totals: tuple[float, ...]
        if (
            below is not None
            and plan is not None
            and plan.recompute == "none"
            and n == 1
            and not plan.offload_modules
        ):
            # from no recompute's bound: one layer per chunk recomputed saves `saved` per micro-batch held and
            # adds the recompute transient (one layer's activations)
            totals = tuple(t + whole * grow - saved * k for t, k in zip(below, held, strict=True))
            limit = usable_bytes(self.hw, self.model, base) * (1 - self.req.headroom_fraction)
            need = n
        else:
            prefit = fitted(self.model, self.hw, base, c, -1, False)
            if prefit.fits(self.req.headroom_fraction):
                return c, 0, prefit
            totals = tuple(float(t) for t in prefit.totals)
            limit = prefit.usable_bytes * (1 - self.req.headroom_fraction)
            need = n + 1
        for total, k in zip(totals, held, strict=True):
            over = total - limit - ROUNDING_BYTES  # N' below n + over / (saved·k) is over even with the slack
            if over > 0:
                need = max(need, n + math.ceil(over / (saved * k)) if k else hi + 1)
        if need > hi:
            return None, hi - n + 1, None
        if need == n:
            return c, 0, prefit
        return c.partial(need, c.order[-4]), need - n, None

    def static_miss(self, c: Candidate) -> tuple[int, int] | None:
        """(the most loaded rank's static bytes, usable bytes) when `c`'s weights, gradients and optimizer states
        alone (pplan.cost.memory.plan_static_totals: a lower bound on its memory whatever its micro-batch,
        recompute or offload) leave less than the headroom free; None when they do not. Remembered per cut
        shape, so that every micro-batch, recompute, lower ZeRO stage and FP32 twin of it is known out of memory
        without a plan: static bytes do not depend on the first three, and fall with the ZeRO stage and with BF16
        gradients while the usable bytes do not (ZeRO-0 opens one more communicator, pplan.cost.usable)."""
        key = (
            c.family.name,
            c.t,
            c.p,
            c.cp,
            c.v,
            c.first_layers,
            c.last_layers,
            c.ep,
            c.etp,
            c.precision,
            c.shard_group,
        )
        for (zero, grads), miss in self._static_dead.get(key, {}).items():
            if c.zero <= zero and grads in ("bf16", c.grad_dtype):
                return miss
        if (*key, c.zero, c.grad_dtype) in self._static_fit:
            return None
        plan = self.plan(c)
        need = max(plan_static_totals(self.model, plan))
        usable = usable_bytes(self.hw, self.model, plan)
        if need <= usable * (1 - self.req.headroom_fraction):
            self._static_fit.add((*key, c.zero, c.grad_dtype))
            return None
        self._static_dead.setdefault(key, {})[c.zero, c.grad_dtype] = (need, usable)
        return need, usable

    def sync_bound(self, c: Candidate, plan: Plan | None = None) -> float:
        """tokens / (max(the free-hop makespan bound, the data-parallel traffic) + the optimizer step): a proven
        upper bound on `c`'s throughput no higher than its cheap bound, from its plan but no pass time
        (pplan.cost.steptime.sync_floor_s). It tells apart the cells of a cut that the cheap bound cannot: ZeRO-3
        gathers every unit's weights twice per micro-batch. `plan`: `c`'s plan, or one of it with another
        recompute (what a partial-recompute seed has: recompute moves no data-parallel bytes)."""
        key = (*c.order[:-4], c.zero, c.grad_dtype, c.shard_group, c.reshard)  # all but the recompute
        floor = self._sync_floors.get(key)
        if floor is None:
            plan = plan or self.plan(c)
            cut = (*c.order[:-4], c.zero >= 2)  # what `sync_ranks` reads: the cut, and whether units shard
            ranks = self._sync_ranks.get(cut)
            if ranks is None:
                ranks = self._sync_ranks[cut] = sync_ranks(self.model, plan)
            floor = self._sync_floors[key] = sync_floor_s(self.model, self.hw, plan, ranks)
        traffic, optimizer = floor
        return self.tokens / (max(self.tokens / self.cheap_bound(c), traffic) + optimizer)

    def sync_bound_with_variants(
        self, c: Candidate, plan: Plan | None = None, enough: float = math.inf
    ) -> float:
        """`sync_bound` of `c` and of every sharding variant it may lead to (pplan.search.space.sharding_variants:
        made only once `c` fits, and hybrid sharding within a node can move less over the slower links): a bound
        for all of them, since the search defers `c` (and so its variants) with it. Stops at the first figure of
        at least `enough` (the search then does not defer `c`)."""
        figure = self.sync_bound(c, plan)
        more = sharding_variants(c, self.req, self.hw.gpus_per_node)
        while more and figure < enough:
            variant = more.pop()
            figure = max(figure, self.sync_bound(variant))
            more += sharding_variants(variant, self.req, self.hw.gpus_per_node)
        return figure

    def plan(self, c: Candidate) -> Plan:
        """`c`'s plan. Configurations that differ only in their ZeRO stage, gradient dtype and sharding choices
        share one `make_plan`, with those fields replaced (it derives nothing from them but checks the shard
        group, which `sharding_variants` chose to divide d·cp)."""
        key = c.order[:-2]
        mine = (c.zero, c.grad_dtype, c.shard_group, c.reshard)
        got = self._variant_plans.get((key, mine))
        if got is not None:
            return got
        base = self._plans.get(key)
        if base is None:
            base = self._plans[key] = make_plan(self.model, c.request(self.req, self.seq))
        if (base.zero_stage, base.grad_dtype, base.shard_group, base.reshard_after_forward) != mine:
            base = with_sharding(base, zero_stage=c.zero, grad_dtype=c.grad_dtype, shard_group=c.shard_group,
                                 reshard_after_forward=c.reshard)  # fmt: skip
        self._variant_plans[key, mine] = base
        return base

    def fit(self, c: Candidate, index: int, plan: Plan | None = None) -> Fitted:
        """`c`'s plan (`plan`, when at hand) with a proven lower bound on its memory (no schedule built). The
        warm-up peaks depend on neither the ZeRO stage nor the gradient dtype, so those are computed once for the
        configurations that differ only in them."""
        key = (*c.order[:-2], c.shard_group, c.reshard)
        plan = plan or self.plan(c)
        peaks = self._peaks.get(key)
        if peaks is None:
            peaks = self._peaks[key] = warmup_peaks(self.model, plan)
        return fitted(self.model, self.hw, plan, c, index, False, peaks)

    def fit_exactly(self, item: Fitted) -> Fitted:
        """The same plan with its exact memory (the schedule's in-flight peaks)."""
        return fitted(self.model, self.hw, item.plan, item.candidate, item.index, True)


@collector_paused()
def search(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    progress: Callable[[int], None] | None = None,
    launcher: LauncherFilter | None = None,
) -> SearchResult:
    """The exact top `req.top_n` configurations (as `brute_force` would rank them), each fully explained, and
    why every other enumerated configuration is not among them. `progress(simulated)` is called per simulation.
    The cyclic garbage collector is paused meanwhile (pplan.collector)."""
    if req.ep is not None or req.etp is not None:
        check_expert_split(model, req.ep or 1, req.etp or 1)
    state = Query(model, hw, req)
    result = SearchResult(candidates=[])
    heap: list[tuple[float, int, tuple[object, ...], int, object]] = []
    # A configuration whose ZeRO stage (2, 3) or recompute (`_recompute_predecessor`) is one step up from another
    # enumerated one waits behind it (`_chain_key`), and enters the heap only when every such predecessor is out
    # of memory: while one fits, it is never slower than the waiting one and ranks first.
    chains = _Chains(req.recompute)
    # An FP32 configuration waits behind its BF16 twin (enumerated just before it) and enters the heap only once
    # the twin fits: it needs more memory and is never faster (`_fp32_twin`).
    fp32_waiting: dict[int, tuple[int, Callable[[], Candidate]]] = {}  # made only if the twin fits
    admitted_fp32: set[int] = set()
    # Without a launcher to filter cells, a cut's cells are placed lazily: only those that go straight to the heap
    # (its heads, `_Lattice`) at first, the rest when one of its cells is first out of memory (`materialise`).
    # Until then every other cell waits on a head, so what `_Chains` would say of it is the lattice's own.
    lazy = (launcher is None or not req.launcher) and req.max_extrapolation is None
    lattices: dict[tuple[object, ...], _Lattice] = {}
    unplaced: dict[int, tuple[Cut, int, _Lattice]] = {}  # head index → its cut, first index, lattice
    last: tuple[Candidate, int] | None = None  # the last candidate placed (in the heap or waiting in a chain)
    for cut in enumerate_cuts(model, hw, req, state.seq, result.rejected, every_partial=False):
        base = result.enumerated
        result.enumerated += len(cut)
        if lazy:
            lattice = lattices.get(cut.pattern) or lattices.setdefault(cut.pattern, _Lattice.of(cut, req))
            # one entry for the whole cut, at its heads' best cheap bound (heads of one recompute option share
            # it): its cells are made only if it comes to the front (`expand`)
            figure = max(state.cell_bound(cut, i) for i in lattice.option_heads)
            entry = _CutEntry(cut, base, lattice)
            heap.append((-figure * (1 + BOUND_SLACK), _CHEAP, (), base + lattice.heads[0], entry))
            continue
        if state.cut_refused(cut, launcher):  # every configuration of the cut, counted as the cells would be
            result.rejected[Rejection.LAUNCHER] += len(cut)
            continue
        refusals = state.cell_refusals(cut, launcher)  # most of a launcher's refusals: no cell made for them
        for i in range(len(cut)):
            if refusals[i]:
                result.rejected[Rejection.LAUNCHER] += 1
                continue
            cand, index = cut.cell(i), base + i
            refused = state.refusal(cand, launcher, launcher_passed=True)
            if refused is not None:
                result.rejected[refused] += 1
                continue
            if last is not None and _fp32_twin(cand, index, *last):
                fp32_waiting[last[1]] = (index, _given(cand))
                continue
            if not chains.place(index, cand):
                heap.append((-state.cheap_bound(cand) * (1 + BOUND_SLACK), _CHEAP, (), index, cand))
            last = (cand, index)
    heapq.heapify(heap)
    misses: list[_Missed] = []
    final: list[Scored] = []
    kept: list[Scored] = []

    def push(index: int, cand: Candidate) -> None:
        heapq.heappush(heap, (-state.cheap_bound(cand) * (1 + BOUND_SLACK), _CHEAP, (), index, cand))

    made = result.enumerated  # indices of the candidates made on demand follow the enumerated ones

    admitted: set[tuple[object, ...]] = set()

    def admit(variant: Candidate) -> None:
        """Make `variant` (a sharding variant, pplan.search.space.sharding_variants) and push it, once."""
        nonlocal made
        key = (variant.order, variant.shard_group, variant.reshard)
        if key in admitted or state.refusal(variant, launcher) is not None:
            return
        admitted.add(key)
        made += 1
        result.enumerated += 1
        push(made, variant)

    def expand(entry: _CutEntry) -> None:
        """Place `entry`'s heads, as the enumeration would have, and push each at its cheap bound."""
        cut, base, lattice = entry
        for i in lattice.heads:
            cand = cut.cell(i)
            chains.place(base + i, cand)
            heapq.heappush(heap, (-state.cheap_bound(cand) * (1 + BOUND_SLACK), _CHEAP, (), base + i, cand))
            if i + 1 in lattice.twins:
                fp32_waiting[base + i] = (base + i + 1, partial(cut.cell, i + 1))
            unplaced[base + i] = (cut, base, lattice)

    def materialise(index: int) -> None:
        """Place the cells of `index`'s cut that are not heads, as the enumeration would have (they wait)."""
        got = unplaced.pop(index, None)
        if got is None:
            return
        cut, base, lattice = got
        for i in lattice.heads:
            unplaced.pop(base + i, None)
        for i in lattice.twins:
            if i - 1 not in lattice.heads:
                fp32_waiting[base + i - 1] = (base + i, partial(cut.cell, i))
        if lattice.keyed:
            for i, _ in lattice.waits_on:
                waits = chains.place(base + i, cut.cell(i))
                assert waits, "a cell that is not a head waits on one"
        else:  # what `place` would record, read off the lattice, the cells made only when released
            for i, on in lattice.waits_on:
                chains.wait(base + i, partial(cut.cell, i), {base + j: why for j, why in on})

    prefits: dict[int, Fitted] = {}  # memory bounds already computed for a resolved seed

    def out_of_memory(
        index: int,
        cand: Candidate,
        plan: Plan | None = None,
        bound_totals: tuple[int, ...] | None = None,
        static: bool = False,
    ) -> None:
        """`cand` is out of memory (or invalid): what waited only on it enters the heap. Without recompute, or
        recomputing the first N layers of every chunk: the partial recomputes with more layers enter the heap as
        one seed (`_PartialSeed`), bounded like `cand`, and what waited on `cand` for its recompute waits on it;
        not when its static bytes alone are too many (`static`: no recompute can fit it, `Query.static_miss`)."""
        materialise(index)
        for successor in group_successors(cand, req):
            admit(successor)
        if not static:
            more_recompute(index, cand, plan, bound_totals)
        for nxt, waiting in chains.release(index):
            push(nxt, waiting)

    def more_recompute(
        index: int, cand: Candidate, plan: Plan | None, bound_totals: tuple[int, ...] | None
    ) -> None:
        """The partial recomputes of `cand` with more layers, as one seed in the heap at `cand`'s next N's cheap
        bound (also a bound for every larger N), what waited on `cand` for its recompute waiting on it: when `cand`
        is out of memory, and for a tuned family (auto) also when it fits, whose lists gain from the memory more
        recompute frees."""
        nonlocal made
        more = None
        # a sharding variant's recompute successors are its base's (or `group_successors`)
        if index not in admitted_fp32 and not _variant(cand):
            more = cand.more_recompute() if cand.recompute == "full" else state.first_partial(cand)
        if more is not None and state.launcher_refuses(more, launcher):
            more = None  # e.g. torchtitan: no partial recompute (made on demand, so not filtered when enumerated)
        if more is not None:
            made += 1
            result.enumerated += 1
            chains.move_waiters(index, made)
            seed = _PartialSeed(more, plan, bound_totals)
            heapq.heappush(heap, (-state.cheap_bound(more) * (1 + BOUND_SLACK), _CHEAP, (), made, seed))

    def missed(index: int, fit: Fitted) -> None:
        """`fit` is out of memory: kept among the nearest misses (FP32 twins and sharding variants flagged)."""
        _miss(result, misses, fit, req.headroom_fraction, index in admitted_fp32 or _variant(fit.candidate))

    def resolve(index: int, seed: _PartialSeed) -> Candidate | None:
        """Its least partial recompute that may fit (the others proven out of memory), its FP32 twin
        behind it; None (and what waited on the seed released) when none may."""
        nonlocal made
        cand, skipped, prefit = state.least_partial(seed.candidate, seed.plan, seed.bound_totals)
        out = skipped - (cand is None)  # the seed itself was counted when it was made
        result.enumerated += out
        result.rejected[Rejection.MEMORY] += skipped
        result.bounded += skipped  # each proven out of memory by the bound's closed form
        if cand is None:
            for nxt, waiting in chains.release(index):
                push(nxt, waiting)
            return None
        if cand.grad_dtype == "bf16" and "fp32" in req.grad_dtypes:
            made += 1
            result.enumerated += 1
            twin = replace(cand, grad_dtype="fp32", order=(*cand.order[:-1], GRAD_ORDER.index("fp32")))
            fp32_waiting[index] = (made, _given(twin))
        if prefit is not None:
            prefits[index] = replace(prefit, index=index)
        return cand

    prefetch = _prefetch(state, heap, req)
    try:
        while heap and len(kept) < req.top_n:
            neg, level, _, index, item = heapq.heappop(heap)
            if isinstance(item, _CutEntry):
                expand(item)
                continue
            if level == _CHEAP:
                # first the data-parallel traffic and optimizer (one plan, no pass times): the cells the cheap
                # bound cannot tell apart, e.g. ZeRO-3's gathers, mostly stop here
                seed = item if isinstance(item, _PartialSeed) else None
                head = seed.candidate if seed is not None else item
                assert isinstance(head, Candidate)
                try:
                    static = (
                        state.static_miss(head) if seed is None else None
                    )  # a seed's cut fits: it was made
                    figure = (
                        math.inf
                        if static or head.zero < 2  # below ZeRO-2, one collective per step: rarely binding
                        else state.sync_bound_with_variants(head, seed.plan if seed else None, -neg)
                    )
                except PplanError:
                    static, figure = None, math.inf  # refused: the fit below counts it
                if static is not None:
                    result.rejected[Rejection.MEMORY] += 1
                    result.bounded += 1
                    if index not in admitted_fp32 and not _variant(head):
                        need, usable = static[0] + static[1] * req.headroom_fraction, static[1]
                        misses.append((need / usable, need, usable, False, head))
                    out_of_memory(index, head, static=True)
                    continue
                if figure * (1 + BOUND_SLACK) < -neg:
                    heapq.heappush(heap, (-figure * (1 + BOUND_SLACK), _SYNC, (), index, item))
                    continue
                level = _SYNC
            if level == _SYNC:
                if isinstance(item, _PartialSeed):
                    resolved = resolve(index, item)
                    if resolved is None or chains.place(index, resolved):
                        continue  # none may fit, or it waits on its ZeRO stage below
                    item = resolved
                assert isinstance(item, Candidate)
                try:
                    fit = prefits.pop(index, None) or state.fit(item, index)
                except PplanError:
                    result.rejected[Rejection.INVALID] += 1
                    out_of_memory(index, item)
                    continue
                result.bounded += 1
                # Its sharding variants (more memory, maybe faster) enter the heap now, at its cheap bound (also
                # theirs: they run the same passes), so none is finalised out of order: when it may fit, and keeping
                # ZeRO-3's gathered weights also when that may take less memory on some rank.
                if not fit.fits(req.headroom_fraction):
                    missed(index, fit)
                    if req.keep_gathered and _keeping_may_cost_less(model, fit.plan):
                        admit(replace(fit.candidate, reshard=False))
                    out_of_memory(
                        index, fit.candidate, fit.plan, fit.totals
                    )  # the next ZeRO stage or more recompute may fit
                    continue
                if fit.candidate.family.tuned:
                    more_recompute(index, fit.candidate, fit.plan, None)
                variants = sharding_variants(fit.candidate, req, hw.gpus_per_node)
                tails = plan_tails(model, hw, fit.plan) if variants else None
                if tails is not None and not sync_hidden(fit.plan, tails):  # else none is faster
                    for variant in variants:
                        admit(variant)
                bound = throughput_bound(model, hw, fit.plan, tails) * (1 + BOUND_SLACK)
                heapq.heappush(heap, (-bound, _BOUND, (), index, fit))
            elif level == _BOUND:
                assert isinstance(item, Fitted)
                if prefetch is not None:
                    prefetch.poll()
                fit = state.fit_exactly(item)
                if not fit.fits(req.headroom_fraction):
                    missed(index, fit)
                    out_of_memory(
                        index, fit.candidate, fit.plan
                    )  # the next ZeRO stage or more recompute may fit
                    continue
                if index in fp32_waiting:  # the BF16 twin fits: the FP32 one may too, and may rank first
                    twin, make_twin = fp32_waiting.pop(index)
                    admitted_fp32.add(twin)
                    push(twin, make_twin())
                scored = score(model, hw, fit)
                result.simulated += 1
                if progress:
                    progress(result.simulated)
                key = scored.key()
                heapq.heappush(heap, (key[0], _EXACT, key[1:], index, scored))
            else:
                assert isinstance(item, Scored)
                # in the documented order, whatever order they were finalised in
                bisect.insort(final, item, key=Scored.key)
                kept, _ = distinct(final, req.top_n)
    finally:
        if prefetch is not None:
            PROVIDERS.remove(prefetch.provide)
            prefetch.close()
    shown, folded = distinct(final, req.top_n)
    result.rejected[Rejection.EQUIVALENT] += len(folded)
    result.rejected[Rejection.BELOW_TOP] += len(final) - len(shown) - len(folded)
    never: list[_Lattice] = []  # the lattice of each cut never expanded
    for _, level, _, _, item in heap:
        if isinstance(item, _CutEntry):
            never.append(item.lattice)
            continue
        result.rejected[Rejection.BELOW_TOP if level == _EXACT else Rejection.BOUND] += 1
    for reason in chains.left():
        result.rejected[reason] += 1
    unmaterialised = [
        lattice for head, (_, base, lattice) in unplaced.items() if head == base + lattice.heads[0]
    ]  # once per cut
    _count_unplaced(result.rejected, never, unmaterialised)
    result.rejected[Rejection.DOMINATED] += len(fp32_waiting)
    result.candidates = [_recommendation(model, hw, req, s) for s in shown]
    result.closest_misses = _nearest(misses)
    # in the order of the pipeline that rejects them (`Rejection`), whatever order they were counted in
    result.rejected = Counter({r: result.rejected[r] for r in Rejection if result.rejected[r]})
    return result


def _count_unplaced(
    rejected: Counter[Rejection], never: list[_Lattice], unmaterialised: list[_Lattice]
) -> None:
    """Count the cells of the cuts never expanded (`never`, one lattice per cut: their heads bounded out, the FP32
    twins of heads dominated, the rest waiting on them) and of the cuts expanded but never materialised
    (`unmaterialised`: the cells waiting on heads), a lattice at a time (cuts of one pattern share it): the
    counts of adding each cut's."""
    unexpanded, expanded = Counter(map(id, never)), Counter(map(id, unmaterialised))
    lattices = dict(zip(map(id, never + unmaterialised), never + unmaterialised, strict=True))
    for key, lattice in lattices.items():
        n = unexpanded[key]
        rejected[Rejection.BOUND] += n * len(lattice.heads)
        rejected[Rejection.DOMINATED] += n * sum(i + 1 in lattice.twins for i in lattice.heads)
        for reason, count in lattice.waiting.items():
            rejected[reason] += (n + expanded[key]) * count


def _keeping_may_cost_less(model: ModelSpec, plan: Plan) -> bool:
    """Whether a ZeRO-3 plan that reshards after forward (and is tried without: `SearchRequest.keep_gathered`)
    has a rank whose gathered weights would take fewer bytes kept whole than as the two-unit prefetch buffer (a
    rank of at most two units): then keeping them is not dominated in memory, and is tried even though this
    plan is out of memory."""
    if plan.zero_stage != 3 or not plan.reshard_after_forward:
        return False
    kept = plan_gathered_weights_bytes(model, with_sharding(plan, reshard_after_forward=False))
    return any(k < g for k, g in zip(kept, plan_gathered_weights_bytes(model, plan), strict=True))


def _variant(c: Candidate) -> bool:
    """Whether `c` is a sharding variant (pplan.search.space.sharding_variants): a choice made for speed (or, rarely,
    keeping ZeRO-3's gathered weights on ranks of two units), whose base's miss stands for the cut."""
    return c.sharding_order != (0, 0)


def _given(c: Candidate) -> Callable[[], Candidate]:
    return lambda: c


PREFETCH_FROM_HEADS = 2000
"""Queries with at least this many configurations in the first heap build structures ahead on a second core
(pplan.search.prefetch); smaller ones finish before a child would help."""


def _prefetch(
    state: Query, heap: list[tuple[float, int, tuple[object, ...], int, object]], req: SearchRequest
) -> Prefetch | None:
    """Start building, on another core, the structures the search will likely ask for: those of the
    configurations that pass the memory lower bound (or would with ZeRO-3), best cheap bound first (the order
    the search takes them in)."""
    if (
        not req.prefetch
        or sum(len(e[4].lattice.heads) if isinstance(e[4], _CutEntry) else 1 for e in heap)
        < PREFETCH_FROM_HEADS
        or not prefetch_available()
    ):
        return None

    def keys() -> Iterator[StructureKey]:
        for _, _, _, index, item in sorted(heap, key=lambda e: (e[0], e[3])):
            yield from head_keys(_heads(index, item))

    def head_keys(heads: list[tuple[int, Candidate]]) -> Iterator[StructureKey]:
        for index, head in heads:
            sharded = 3 in req.zero_stages and head.d * head.cp > 1 and head.zero < 3
            for cand in [head, changed(head, zero=3)] if sharded else [head]:
                try:
                    fit = state.fit(cand, index)
                except PplanError:
                    break
                if fit.fits(req.headroom_fraction):
                    plan = fit.plan
                    key = structure_key(plan.kind.name, plan.pp, plan.generator_v, plan.num_microbatches)
                    if key is not None:
                        yield key
                    break

    prefetch = Prefetch(keys)
    PROVIDERS.append(prefetch.provide)
    return prefetch


def _heads(index: int, item: object) -> list[tuple[int, Candidate]]:
    """The configurations (with their indices) a heap entry stands for: a candidate itself, a cut's heads."""
    if isinstance(item, _CutEntry):
        return [(item.base + i, item.cut.cell(i)) for i in item.lattice.heads]
    return [(index, item)] if isinstance(item, Candidate) else []


def _fp32_twin(c: Candidate, index: int, before: Candidate, before_index: int) -> bool:
    """Whether `c` (enumerated at `index`) keeps FP32 gradients and `before` is its BF16 twin. The gradient dtype
    is the innermost enumeration loop, BF16 first (pplan.search.space.GRAD_ORDER), so the twin is the candidate
    enumerated just before, with the same ZeRO stage. Gradient bytes enter the cost model only as a factor
    (GRAD_BYTES: memory, data-parallel traffic, the optimizer's pass over them, the embedding gradient's add into
    the main gradient), so `c` needs more memory than the twin and is never faster: it can fit only if the twin does, and the twin's bounds bound it. Not for a tuned
    family (auto): its lists change with the memory limit the FP32 gradients lower, and the scheduler is not
    proven monotone in it."""
    return (
        before_index == index - 1
        and c.grad_dtype == "fp32"
        and before.grad_dtype == "bf16"
        and c.zero == before.zero
        and not c.family.tuned
    )


Key = tuple[int, ...]


def _chain_key(
    c: Candidate, layers: int | None = None, zero: int | None = None, rc: int | None = None
) -> Key:
    """Everything that names a configuration: its place in the enumeration order (`Candidate.order`: the cut, the
    offload set, the recompute mode asked and its N, the ZeRO stage, the gradient dtype), with N, the ZeRO stage or
    the recompute mode's index replaced when given."""
    o = c.order
    return (
        *o[:-4], o[-4] if rc is None else rc, o[-3] if layers is None else layers, o[-2] if zero is None else zero,
        o[-1],
    )  # fmt: skip


def _zero_predecessor(c: Candidate) -> Key | None:
    """ZeRO-2 waits behind ZeRO-1 and ZeRO-3 behind ZeRO-2 of the same configuration. From ZeRO-1 up a higher
    stage is never faster (ZeRO-2 adds a reduce-scatter per micro-batch, ZeRO-3 the weight gathers; the optimizer
    shard is the same: pplan.cost) and needs no more memory, so while the stage below fits, this one ranks below
    it and is folded (pplan.search.rank.distinct). ZeRO-0 is not in the chain: its optimizer step runs over all
    the parameters, so ZeRO-1 can be faster."""
    return _chain_key(c, zero=c.zero - 1) if c.zero >= 2 else None


def _recompute_predecessor(c: Candidate, rc_none: int | None) -> Key | None:
    """Selective recompute and full recompute of the first layer of every chunk wait behind no recompute (mode
    index `rc_none` in the order asked, when asked); the first N + 1 layers behind the first N; every layer behind
    the largest partial N placed (`_Chains.place`), or no recompute. Each step re-runs more forward work in the
    backward (the step is no shorter: pass times only grow, pplan.cost.passtime) and keeps no more activations,
    so while the predecessor fits, this one ranks below it (`Candidate.recompute_cost` breaks ties) and is folded
    as its twin."""
    if c.recompute == "selective" or (c.recompute == "full" and c.recompute_layers == 1):
        return None if rc_none is None else _chain_key(c, layers=MAX_CHUNK_LAYERS, rc=rc_none)
    if c.recompute == "full" and c.recompute_layers is not None:
        return _chain_key(c, layers=c.recompute_layers - 1)
    return None  # plain full recompute: `_Chains.place` looks for the largest partial N


@dataclass(frozen=True, slots=True)
class _PartialSeed:
    """Recomputing the first N, N + 1, … layers of every chunk of one configuration, not yet looked at: in the heap
    at the bound of N (a bound for them all: more recompute is never faster), resolved to the least N that may
    fit only when that bound comes to the front (`Query.least_partial`). `plan`: the configuration's plan with
    another recompute, when at hand (so no plan is rebuilt)."""

    candidate: Candidate
    plan: Plan | None
    bound_totals: tuple[int, ...] | None = None
    """The proven lower bound on memory per rank of `plan` (one recompute step below `candidate`), when known."""


class _CutEntry(NamedTuple):
    """A cut in the heap as one entry, before any of its cells is made (pplan.search.search's `expand`)."""

    cut: Cut
    base: int
    """The enumeration index of its first cell."""
    lattice: _Lattice


@dataclass(frozen=True, slots=True)
class _Lattice:
    """What `_Chains` does with the cells of one cut placed in a row while none is out of memory: which go straight
    to the heap (`heads`), which are FP32 twins of the cell before (`twins`), and why the rest would be left
    unevaluated if no head were ever released (`waiting`: `_Chains.left`, and DOMINATED for the twins of cells that
    are not heads). Chain keys differ between cuts only in the cut's prefix, so it is the same for every cut of a
    pattern (`Cut.pattern`) and computed once per pattern, by placing one cut's cells in a scratch `_Chains`."""

    heads: tuple[int, ...]
    twins: frozenset[int]
    waiting: Counter[Rejection]
    waits_on: tuple[tuple[int, tuple[tuple[int, str], ...]], ...]
    """Each cell that waits (not a head, not a twin): the cells it waits on and why ("zero", "recompute")."""
    keyed: bool
    """Whether a cell of the lattice can be another configuration's predecessor outside it (a partial recompute:
    resolved seeds wait on those), so materialising must record the cells' chain keys (`_Chains.place`)."""
    option_heads: tuple[int, ...] = ()
    """The first head of each recompute option among the heads: the cheap bound differs only between options."""

    @staticmethod
    def of(cut: Cut, req: SearchRequest) -> _Lattice:
        chains = _Chains(req.recompute)
        heads: list[int] = []
        twins: set[int] = set()
        last: tuple[Candidate, int] | None = None
        for i in range(len(cut)):
            cand = cut.cell(i)
            if last is not None and _fp32_twin(cand, i, *last):
                twins.add(i)
                continue
            if not chains.place(i, cand):
                heads.append(i)
            last = (cand, i)
        waiting = Counter(chains.left())
        waiting[Rejection.DOMINATED] += len(twins - {h + 1 for h in heads})
        waits_on = chains.waits_on()
        keyed = any(n is not None for _, mode, n in cut.options if mode == "full")
        per_option = len(cut.zeros) * len(cut.grads)
        option_heads = tuple({i // per_option: i for i in reversed(heads)}.values())
        return _Lattice(tuple(heads), frozenset(twins), waiting, waits_on, keyed, option_heads)


class _Chains:
    """The configurations that wait behind others (`_zero_predecessor`, `_recompute_predecessor`): each enters
    the heap once all the predecessors it waits on are out of memory or invalid."""

    def __init__(self, recompute: tuple[str, ...]) -> None:
        self._rc_none = recompute.index("none") if "none" in recompute else None
        self._placed: dict[Key, int] = {}
        self._largest_partial: dict[Key, int] = {}
        self._next: dict[int, list[int]] = {}
        self._waiting: dict[int, Callable[[], Candidate]] = {}
        self._on: dict[int, dict[int, str]] = {}
        self._gone: set[int] = set()
        """Indices already out of memory or invalid (released)."""

    def place(self, index: int, c: Candidate) -> bool:
        """Record `c`; True if it waits (False: it goes straight to the heap). A tuned family's (auto's)
        configurations never wait: the memory a higher ZeRO stage or more recompute frees raises its memory limit
        (pplan.cost.autoplan), so neither chain's "never faster" holds for it."""
        if c.family.tuned or (c.zero < 2 and c.recompute == "none"):  # first in both chains
            self._placed[_chain_key(c)] = index
            return False
        before: dict[int, str] = {}
        zero = _zero_predecessor(c)
        if zero is not None and self._waits_on(zero):
            before[self._placed[zero]] = "zero"
        more = _recompute_predecessor(c, self._rc_none)
        if more is None and c.recompute == "full":
            partial = self._largest_partial.get(_chain_key(c, layers=0))
            if partial:
                more = _chain_key(c, layers=partial)
            elif self._rc_none is not None:
                more = _chain_key(c, layers=MAX_CHUNK_LAYERS, rc=self._rc_none)
        if more is not None and self._waits_on(more):
            before.setdefault(self._placed[more], "recompute")
        key = _chain_key(c)
        self._placed[key] = index
        if c.recompute == "full" and c.recompute_layers is not None:
            self._largest_partial[_chain_key(c, layers=0)] = c.recompute_layers
        if not before:
            return False
        self.wait(index, _given(c), before)
        return True

    def wait(self, index: int, make: Callable[[], Candidate], on: dict[int, str]) -> None:
        """`index` (made by `make` once released) waits on the indices of `on`, each for its reason."""
        self._waiting[index] = make
        self._on[index] = on
        for pred in on:
            self._next.setdefault(pred, []).append(index)

    def waits_on(self) -> tuple[tuple[int, tuple[tuple[int, str], ...]], ...]:
        """Each waiting index with what it waits on (for `_Lattice`)."""
        return tuple((i, tuple(self._on[i].items())) for i in self._waiting)

    def _waits_on(self, key: Key) -> bool:
        """Whether the configuration of `key` was placed and is not yet out of memory."""
        index = self._placed.get(key)
        return index is not None and index not in self._gone

    def move_waiters(self, index: int, new: int) -> None:
        """What waited on `index` for its recompute waits on `new` (a seed of more recompute made from it); the
        seed is placed under its own key only once it is resolved to one N (`place`)."""
        for nxt in list(self._next.get(index, [])):
            if self._on[nxt].get(index) == "recompute":
                del self._on[nxt][index]
                self._on[nxt][new] = "recompute"
                self._next[index].remove(nxt)
                self._next.setdefault(new, []).append(nxt)

    def release(self, index: int) -> list[tuple[int, Candidate]]:
        """`index` is out of memory or invalid: the candidates now waiting on nothing."""
        self._gone.add(index)
        free = []
        for nxt in self._next.pop(index, []):
            on = self._on[nxt]
            on.pop(index, None)
            if not on:
                del self._on[nxt]
                free.append((nxt, self._waiting.pop(nxt)()))
        return free

    def left(self) -> list[Rejection]:
        """Why each candidate still waiting was never evaluated."""
        return [
            Rejection.HIGHER_STAGE if "zero" in set(self._on[i].values()) else Rejection.MORE_RECOMPUTE
            for i in self._waiting
        ]


@collector_paused()
def brute_force(
    model: ModelSpec, hw: HardwareSpec, req: SearchRequest, launcher_reason: LauncherReason | None = None
) -> list[Scored]:
    """Every enumerated configuration that fits, each simulated, in the documented order (no bound used): the
    reference `search` is tested and benchmarked against. `distinct(result, n)[0]` is the top n."""
    state = Query(model, hw, req)
    scored: list[Scored] = []
    for index, cand in enumerate(enumerate_candidates(model, hw, req, state.seq, Counter())):
        if _launcher_refuses(req, launcher_reason, cand, state.seq):
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


def _launcher_refuses(req: SearchRequest, reason: LauncherReason | None, cand: Candidate, seq: int) -> bool:
    """Whether the query's launcher refuses `cand`'s whole request (`brute_force`'s reference for the search's
    `LauncherFilter`)."""
    if not req.launcher or reason is None:
        return False
    return reason(req.launcher, cand.request(req, seq), cand.m) is not None


def _recommendation(model: ModelSpec, hw: HardwareSpec, req: SearchRequest, s: Scored) -> Recommendation:
    request = s.candidate.request(req, s.plan.seq_len)
    report, plan, run = explain_with_run(model, hw, request, with_sensitivity=False, split_p2p=False)
    if req.split_p2p:  # the breakdown with exposed P2P time apart from the bubble: one more simulation
        report = report.model_copy(
            update={"performance": performance(model, hw, plan, run, with_sensitivity=False, split_p2p=True)}
        )
    return Recommendation(
        s.candidate, request, report, knob_notes(model, hw, request, s.fitted.peak_bytes, run)
    )


_Missed = tuple[float, float, int, bool, Candidate]
"""A miss as the search keeps it: (need / usable, need bytes, usable bytes, exact, configuration); its summary is
written only for the nearest (`_nearest`)."""


def _miss(
    result: SearchResult,
    misses: list[_Missed],
    fit: Fitted,
    headroom_fraction: float,
    twin_fits: bool = False,
) -> None:
    """Count a configuration out of memory, and keep it for the nearest misses unless a twin of it fits (an FP32
    configuration admitted because its BF16 twin fits is no miss of the cut; nor is a sharding variant, `_variant`,
    whose base's miss is kept)."""
    result.rejected[Rejection.MEMORY] += 1
    if twin_fits:
        return
    usable = fit.usable_bytes
    need = fit.peak_bytes + usable * headroom_fraction
    misses.append((need / usable, need, usable, fit.exact, fit.candidate))


def _nearest(misses: list[_Missed]) -> list[Miss]:
    """The five nearest misses on memory (need / usable, then the summary), one line per distinct shortfall (not
    every b / cp variant of it)."""
    misses.sort(key=lambda x: x[0])
    nearest: list[Miss] = []
    for _, group in itertools.groupby(misses, key=lambda x: x[0]):
        for miss in sorted((Miss(c.summary(), need, usable, exact) for _, need, usable, exact, c in group),
                           key=lambda x: x.summary):  # fmt: skip
            if all(abs(miss.need_bytes - kept.need_bytes) > 0.005 * kept.need_bytes for kept in nearest):
                nearest.append(miss)
            if len(nearest) == 5:
                return nearest
    return nearest
