"""The search's proven bounds: the figures it orders configurations by before their exact value, each at least
the exact throughput (or at most the exact memory) it stands for, each cheaper than the next.

Throughput, upper bounds (tokens / a step no shorter than the real one):
- `Query.cheap_bound`: the free-hop makespan of each rank's passes (pplan.schedules.bounds.zero_latency_makespan),
  no plan built; the same for every ZeRO stage, gradient dtype and sharding choice of a cut and recompute.
- `Query.sync_bound`: that makespan or the data-parallel traffic, whichever is longer, plus the optimizer step
  (pplan.cost.steptime.sync_floor_s): one plan, no pass time.
- pplan.search.rank.throughput_bound: the proven bound of the plan's own schedule (pplan.cost.steptime).
Memory, lower bounds (bytes no more than the plan needs):
- `Query.static_miss`: weights, gradients and optimizer states alone (whatever the micro-batch, recompute or
  offload).
- `Query.fit`: what ranks hold at their first backward (pplan.cost.pipeline.warmup_peaks), no schedule built.
- `Query.least_partial`: that bound in closed form over every partial recompute N of one configuration.
`Query` keeps each bound's cache for one query, the plans it builds, and its filters (pplan.search.filters).
"""

from __future__ import annotations

import math
from functools import lru_cache

from pplan.cost.memory import ActivationPeaks, fp8_any_layout, plan_static_totals
from pplan.cost.passes import PassTimes
from pplan.cost.passtime import layer_pass_times, output_end_times, with_expert_parallel, with_mtp_modules
from pplan.cost.pipeline import activation_shape, warmup_held, warmup_peaks
from pplan.cost.steptime import SyncFloor, SyncRank, sync_floor, sync_floor_s, sync_ranks
from pplan.cost.usable import usable_bytes
from pplan.errors import PplanError
from pplan.frozen import changed
from pplan.model import activations as act
from pplan.model.flops import layer_kinds
from pplan.model.precision import Precision
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import Recompute
from pplan.plan.layout import make_layout
from pplan.plan.records import Plan, with_sharding
from pplan.plan.shape import MoeKnobs, Shape
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import ScheduleFamily
from pplan.schedules.bounds import RankCoefficients, zero_latency_coefficients, zero_latency_makespan
from pplan.search.filters import Filters
from pplan.search.lattice import keeping_may_cost_less
from pplan.search.rank import Fitted, fitted
from pplan.search.result import Missed, missed_by
from pplan.search.space import Candidate, Cut, SearchRequest, sharding_variants

ROUNDING_BYTES = 2**20
"""Slack for the bytes `Query.least_partial` computes in closed form instead of summing (each part is rounded up
on its own in pplan.cost.memory): far above any rounding, far below a layer's activations."""
BOUND_SLACK = 1e-9
"""Bounds are raised by this fraction so that floating-point rounding cannot put a bound a hair below the exact
value it bounds (where the bound is tight, e.g. 1F1B with uniform stages, both are the same sum in another order)."""


class Query(Filters):
    """One query's state: the model, hardware, request, its filters, and the caches of its bounds."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, req: SearchRequest) -> None:
        super().__init__(model, hw, req)
        self.tokens = req.global_batch * self.seq
        self.moe_knobs = MoeKnobs.of(req)  # every plan's MoE knobs (the request's): the layer times read them
        self._bounds: dict[tuple[object, ...], float] = {}  # `cheap_bound` of each cut and recompute asked
        self._peaks: dict[tuple[object, ...], ActivationPeaks] = {}
        self._savings: dict[Shape, tuple[int, float]] = {}  # `_recompute_saving` per activation shape
        self._plans: dict[tuple[object, ...], Plan] = {}
        # `plan` of every ZeRO stage, gradient dtype and sharding choice asked of a cut
        self._variant_plans: dict[tuple[object, ...], Plan] = {}
        # a plan of each configuration but its micro-batch size and recompute (`_plan_at_b`)
        self._plans_but_b: dict[tuple[object, ...], Plan] = {}
        self._sync_floors: dict[tuple[object, ...], SyncFloor] = {}  # of each cut but its b: `sync_floor`
        self._sync_ranks: dict[tuple[object, ...], frozenset[SyncRank]] = {}  # `sync_ranks` of each cut
        # `sync_floor` per what it reads of a configuration (`_sync_floor`): cuts of other families, v or layer
        # splits whose ranks hold the same parameters and units share it
        self._floors_alike: dict[tuple[object, ...], SyncFloor] = {}
        # `sync_bound_with_variants`: the floors of a configuration and of its sharding variants, but b and recompute
        self._variant_floors: dict[tuple[object, ...], tuple[SyncFloor, ...]] = {}
        self._static_dead: dict[tuple[object, ...], dict[tuple[int, str], tuple[int, int]]] = {}
        self._static_fit: set[tuple[object, ...]] = set()  # `static_miss` keys (and ZeRO, dtype) that fit
        self._statics: dict[tuple[object, ...], tuple[int, ...]] = {}  # `static_totals`
        # `stages_out` of each cut but its micro-batch size, per ZeRO stage: the largest b its frugal cell may fit
        # at, the least b it does not
        self._frugal: dict[tuple[tuple[object, ...], int], tuple[float, float]] = {}

    def cheap_bound(self, c: Candidate) -> float:
        """tokens / the free-hop makespan bound (pplan.schedules.bounds.zero_latency_makespan): no step is shorter.
        It counts passes only, so it is the same for every ZeRO stage, gradient dtype and sharding choice of a cut
        and recompute: remembered for those."""
        return self._bound(
            c.family, c.t, c.p, c.cp, c.v, c.b, c.m, c.first_layers, c.last_layers, c.recompute,
            c.recompute_layers, c.most_layers, c.ep, c.precision, c.etp,
        )  # fmt: skip

    def cell_bound(self, cut: Cut, i: int, b: int | None = None, m: int | None = None) -> float:
        """`cheap_bound` of `cut.cell(i)`, without making the cell (the search bounds every cut's heads); with `b`
        and `m`, of `cut.at(b, m).cell(i)`, without making that cut either. Remembered as `cheap_bound` is: a cut
        that comes to the front has its heads bounded again, cell by cell (a third of the bounds DeepSeek-V3's
        search on 2,048 GPUs asks for)."""
        _, recompute, n = cut.options[i // (len(cut.zeros) * len(cut.grads))]
        return self._bound(
            cut.family, cut.t, cut.p, cut.cp, cut.v, cut.b if b is None else b, cut.m if m is None else m,
            cut.first_layers, cut.last_layers, recompute, n, cut.most_layers, cut.ep, cut.precision, cut.etp,
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
    ) -> float:
        cut = (family, t, p, cp, v, b, m, first_layers, last_layers, recompute, recompute_layers, ep, precision, etp)  # fmt: skip
        bound = self._bounds.get(cut)
        if bound is not None:
            return bound
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
        bound = self._bounds[cut] = self.tokens / makespan
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
        the output layer's F + I + W, in seconds. What reads no expert field (`_plain_times`) is shared by every
        ep, etp and expert overlap of the other fields."""
        base, known, out, ends = self._plain_times(t, cp, b, recompute, splits_backward, precision)
        model, hw = self.model, self.hw
        kinds = layer_kinds(model)
        if ep == etp == 1 and not expert_comm_overlap:
            shape = base
            layers = [
                layer_pass_times(kind, hw, base) if times is None else times
                for (kind, _), times in zip(kinds, known, strict=True)
            ]
        else:  # what a routed kind and a routed output are priced at
            shape = changed(base, ep=ep, etp=etp, expert_comm_overlap=expert_comm_overlap)
            layers = [
                self._routed_times(kind, base, shape) if times is None else times
                for (kind, _), times in zip(kinds, known, strict=True)
            ]
        if out is None:
            # the modules' layer is of the last layer's kind: the routed one (`kinds` lists it first) or the dense
            mtp = layers[0] if model.mtp_layer is model else layers[-1]
            out = with_mtp_modules(model, hw, shape, ends, mtp)
        return (
            min(x.f_s for x in layers),
            min(x.i_s + x.w_s for x in layers),
            layers[0].f_s + layers[0].i_s + layers[0].w_s,
            layers[-1].f_s + layers[-1].i_s + layers[-1].w_s,
            out.f_s + out.i_s + out.w_s,
        )

    def _routed_times(self, kind: ModelSpec, base: Shape, shape: Shape) -> PassTimes:
        """`layer_pass_times` of a routed layer `kind` at `shape`, `base` (a `_plain_times` shape) with other expert
        fields. Expert-parallel or overlapped without recompute, it is how `layer_pass_times` prices it (a
        routed layer's items at ep 1 without the overlap, `_at_ep_one`, with the expert GEMMs and all-to-alls of
        its own ep: pplan.cost.passtime.with_expert_parallel; the bounds' shapes offload nothing), not remembered
        per ep (each cut shape asks once)."""
        if shape.recompute != "none" or not (shape.ep > 1 or shape.expert_comm_overlap):
            return layer_pass_times(kind, self.hw, shape)
        return with_expert_parallel(kind, self.hw, shape, self._at_ep_one(kind, base, shape.etp))

    @lru_cache(maxsize=4096)  # noqa: B019
    def _at_ep_one(self, kind: ModelSpec, base: Shape, etp: int) -> PassTimes:
        """`layer_pass_times` of `kind` at `base` (ep 1, no expert overlap) with expert tensor parallel `etp`."""
        return layer_pass_times(kind, self.hw, base if etp == base.etp else changed(base, etp=etp))

    @lru_cache(maxsize=4096)  # noqa: B019
    def _plain_times(
        self, t: int, cp: int, b: int, recompute: Recompute, splits_backward: bool, precision: Precision
    ) -> tuple[Shape, tuple[PassTimes | None, ...], PassTimes | None, PassTimes]:
        """The layer shape `_layer_times` prices, at the expert fields' defaults (ep, etp, the expert all-to-all's
        overlap); and of its pass times, those that read none of those fields: each dense layer kind's
        (pplan.cost.passtime.layer_pass_times prices a dense layer at their defaults whatever they are), None for a
        routed kind; the output layer's, unless a multi-token-prediction module runs a routed layer in it (None
        then); and the output layer and loss alone (pplan.cost.passtime.output_end_times), which the output's
        multi-token-prediction modules are added to at each ep, etp and overlap. The same figures
        `layer_pass_times` and `output_pass_times` give at any ep, etp and overlap, asked once per the other fields
        instead of once per cut shape (DeepSeek-V3 on 2,048 GPUs: 952 against 7,264)."""
        shape = Shape(
            t, cp, self.seq, b, t > 1, True, recompute, "itemised", stack=self.req.stack,
            splits_backward=splits_backward, tp_comm_overlap=self.req.tp_comm_overlap and t > 1,
            precision=precision, moe_knobs=self.moe_knobs,
        )  # fmt: skip
        model, hw = self.model, self.hw
        layers = tuple(
            layer_pass_times(kind, hw, shape) if kind.moe is None else None for kind, _ in layer_kinds(model)
        )
        routed_output = model.mtp_layers and model.mtp_layer.moe is not None
        ends = output_end_times(model, hw, shape)
        return shape, layers, None if routed_output else with_mtp_modules(model, hw, shape, ends), ends

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
        grow = 1 + self.hw.memory.dynamic_fragmentation_fraction
        whole, saved = self._recompute_saving(base.shape)
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
            prefit = self.fit(c, -1, base)
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

    def _recompute_saving(self, shape: Shape) -> tuple[int, float]:
        """`least_partial`'s one layer's activations, and what recomputing it saves per micro-batch held (with
        fragmentation), remembered per activation shape (pplan.cost.pipeline.activation_shape: activation bytes
        read none of the fields it drops, ep among them)."""
        key = activation_shape(shape)
        got = self._savings.get(key)
        if got is None:
            grow = 1 + self.hw.memory.dynamic_fragmentation_fraction
            whole = act.layer_activations(self.model, shape, "none").total_bytes
            saved = (whole - act.layer_activations(self.model, shape, "full").total_bytes) * grow
            got = self._savings[key] = (whole, saved)
        return got

    def static_miss(self, c: Candidate) -> tuple[int, int] | None:
        """(the most loaded rank's static bytes, usable bytes) when `c`'s weights, gradients and optimizer states
        alone (pplan.cost.memory.plan_static_totals: a lower bound on its memory whatever its micro-batch,
        recompute or offload) leave less than the headroom free; None when they do not. Remembered per cut
        shape, so that every micro-batch, recompute, lower ZeRO stage and FP32 twin of it is known out of memory
        without a plan: static bytes do not depend on the first three, and fall with the ZeRO stage and with BF16
        gradients while the usable bytes do not (ZeRO-0 opens one more communicator, pplan.cost.usable)."""
        key = _static_key(c)
        for (zero, grads), miss in self._static_dead.get(key, {}).items():
            if c.zero <= zero and grads in ("bf16", c.grad_dtype):
                return miss
        if (*key, c.zero, c.grad_dtype) in self._static_fit:
            return None
        plan = self.plan(c)
        need = max(self.static_totals(c, plan))
        usable = usable_bytes(self.hw, self.model, plan)
        if need <= usable * (1 - self.req.headroom_fraction):
            self._static_fit.add((*key, c.zero, c.grad_dtype))
            return None
        self._static_dead.setdefault(key, {})[c.zero, c.grad_dtype] = (need, usable)
        return need, usable

    def static_totals(self, c: Candidate, plan: Plan) -> tuple[int, ...]:
        """`plan_static_totals` of `plan` (`c`'s), remembered per what they read of a configuration: its cut but b,
        recompute and offload, its ZeRO stage, gradient dtype and shard group (`_static_key`; the rest of a plan is
        the query's). The search asks them of every fit and of every frugal cell, and a cut's micro-batch sizes,
        recomputes and ZeRO-3 gathers share them."""
        key = (*_static_key(c), c.zero, c.grad_dtype)
        got = self._statics.get(key)
        if got is None:
            got = self._statics[key] = plan_static_totals(self.model, plan, fp8_any_layout(self.hw))
        return got

    def sync_bound(self, c: Candidate, plan: Plan | None = None) -> float:
        """tokens / (max(the free-hop makespan bound, the data-parallel traffic) + the optimizer step): a proven
        upper bound on `c`'s throughput no higher than its cheap bound, from its plan but no pass time
        (pplan.cost.steptime.sync_floor_s). It tells apart the cells of a cut that the cheap bound cannot: ZeRO-3
        gathers every unit's weights twice per micro-batch. `plan`: `c`'s plan, or one of it with another
        recompute (what a partial-recompute seed has: recompute moves no data-parallel bytes)."""
        traffic, optimizer = sync_floor_s(self._sync_floor(c, plan), c.m)
        return self.tokens / (max(self.tokens / self.cheap_bound(c), traffic) + optimizer)

    def _sync_floor(self, c: Candidate, plan: Plan | None = None) -> SyncFloor:
        """`sync_floor` of `c`, remembered for all but its micro-batch size (which only sets m, an argument of
        `sync_floor_s`) and its recompute (`plan`: as `sync_bound`'s)."""
        shape = (*c.order[:3], *c.order[4:-4])  # the cut but its micro-batch size, which only sets m here
        key = (*shape, c.zero, c.grad_dtype, c.shard_group, c.reshard)  # all but b and the recompute
        floor = self._sync_floors.get(key)
        if floor is None:
            cut = (*shape, c.zero >= 2)  # what `sync_ranks` reads: the cut, and whether units shard
            ranks = self._sync_ranks.get(cut)
            if ranks is None:
                plan = plan or self.plan(c)
                ranks = self._sync_ranks[cut] = sync_ranks(self.model, plan)
            # what `sync_floor` reads besides the query's settings: its ranks' parameters and units, the
            # parallel degrees and the sharding choices (not the schedule family, v or layer split themselves)
            alike = (
                ranks,
                c.t,
                c.cp,
                c.p,
                c.ep,
                c.etp,
                c.precision,
                c.zero,
                c.grad_dtype,
                c.shard_group,
                c.reshard,
            )
            floor = self._floors_alike.get(alike)
            if floor is None:
                floor = self._floors_alike[alike] = sync_floor(
                    self.model, self.hw, plan or self.plan(c), ranks
                )
            self._sync_floors[key] = floor
        return floor

    def sync_bound_with_variants(self, c: Candidate, plan: Plan | None = None) -> float:
        """`sync_bound` of `c` and of every sharding variant it may lead to (pplan.search.space.sharding_variants:
        made only once `c` fits, and hybrid sharding within a node can move less over the slower links): a bound
        for all of them, since the search defers `c` (and so its variants) with it. The variants run `c`'s passes
        (the same cheap bound) and differ from it only in their sharding choices, so their floors (`sync_floor`)
        are remembered with `c`'s, per all of `c` but its micro-batch size and recompute, and each call only
        reads them at `c`'s m."""
        shape = (*c.order[:3], *c.order[4:-4])
        key = (*shape, c.zero, c.grad_dtype, c.shard_group, c.reshard)
        floors = self._variant_floors.get(key)
        if floors is None:
            found = [self._sync_floor(c, plan)]
            more = sharding_variants(c, self.req, self.hw.gpus_per_node)
            while more:
                variant = more.pop()
                found.append(self._sync_floor(variant))
                more += sharding_variants(variant, self.req, self.hw.gpus_per_node)
            floors = self._variant_floors[key] = tuple(found)
        passes, tokens, m = self.tokens / self.cheap_bound(c), self.tokens, c.m
        figure = 0.0
        for floor in floors:
            traffic, optimizer = sync_floor_s(floor, m)
            figure = max(figure, tokens / (max(passes, traffic) + optimizer))
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
            base = self._plans[key] = self._plan_at_b(c, key)
        if (base.zero_stage, base.grad_dtype, base.shard_group, base.reshard_after_forward) != mine:
            base = with_sharding(base, zero_stage=c.zero, grad_dtype=c.grad_dtype, shard_group=c.shard_group,
                                 reshard_after_forward=c.reshard)  # fmt: skip
        self._variant_plans[key, mine] = base
        return base

    def _plan_at_b(self, c: Candidate, key: tuple[int, ...]) -> Plan:
        """`make_plan` of `c` (`key`: its `order` but the ZeRO stage and gradient dtype). A plan of the same
        configuration at another micro-batch size or recompute is copied with `c`'s instead: `make_plan` derives
        nothing else from them (the layout, d and shard group read none; the layer shape is rederived by
        `changed`), and its checks that read them are made here: b·d divides the global batch, the family's rule
        on m, N within the largest chunk (where one fails, `make_plan` raises it). Not to selective recompute from
        another (`make_plan` checks its modules against the model)."""
        same = (*key[:3], *key[4:-2])
        other = self._plans_but_b.get(same)
        n = c.recompute_layers
        if (
            other is not None
            and self.req.global_batch % (c.b * c.d) == 0
            and c.family.m_problem(c.p, c.m) is None
            and (c.recompute != "selective" or other.recompute == "selective")
            and (n is None or n <= max(chunk.layers for chunk in other.layout.chunks))
        ):
            return changed(
                other, micro_batch=c.b, num_microbatches=c.m, recompute=c.recompute, recompute_layers=n,
                recompute_method="block" if n else "uniform",
                recompute_modules=other.recompute_modules if c.recompute == "selective" else (),
            )  # fmt: skip
        plan = make_plan(self.model, c.request(self.req, self.seq))
        if plan.recompute != "selective" or same not in self._plans_but_b:
            self._plans_but_b[same] = plan
        return plan

    def fit(self, c: Candidate, index: int, plan: Plan | None = None) -> Fitted:
        """`c`'s plan (`plan`, when at hand) with a proven lower bound on its memory (no schedule built). The
        warm-up peaks (pplan.cost.pipeline.warmup_peaks) read the layout, the schedule's counts and one
        micro-batch's activation bytes, priced at `activation_shape` (which sets ep to 1: a routed layer's saved
        tensors depend on etp, not ep), so they depend on neither the ZeRO stage, the gradient dtype, the sharding
        choices nor the expert-parallel degree: computed once for the configurations that differ only in them
        (DeepSeek-V3 on 2,048 GPUs: 2,191 instead of 4,717). Not across ep under activation offload, whose host
        bytes are priced at the plan's own shape."""
        # `order`: (t, cp, p, b, schedule, v, layer split, offload set, ep, etp, precision, recompute, N, ZeRO, …)
        o = c.order
        key = (*o[:8], o[8] if c.offload_modules else 0, *o[9:-2])
        plan = plan or self.plan(c)
        peaks = self._peaks.get(key)
        if peaks is None:
            peaks = self._peaks[key] = warmup_peaks(self.model, plan)
        return fitted(self.model, self.hw, plan, c, index, False, peaks, self.static_totals(c, plan))

    def stages_out(
        self, cut: Cut, base: int, dropped: tuple[bool, ...] | None = None
    ) -> tuple[int, list[tuple[int, Missed]]] | None:
        """How many of `cut`'s ZeRO stages, from the lowest asked up, hold no configuration that may fit: every
        cell at such a stage, and every configuration it leads to, is out of memory. With those stages' most
        frugal cells as misses (by enumeration index), where looked at (a stage known out by a smaller
        micro-batch of the cut keeps its miss there). None when the cut has no single most frugal cell to bound
        the others with.

        For each ZeRO stage z, the frugal cell recomputes the most its options allow (every layer under `full`,
        else `selective`, else none) with the gradient dtype of fewest bytes (BF16 when asked: the cut lists it
        first). Every other cell at stage z (less recompute, a partial recompute made on demand, FP32 gradients,
        hybrid sharding over fewer GPUs) holds at least as many bytes on every rank: the static bytes do not fall
        and the bound on activations (what each rank holds at its first backward) does not fall with less
        recompute. So the frugal cell's static bytes (`static_miss`, known for every b at once) or else its
        memory lower bound (`fit`) decide the stage. Not used where that order is not the model's: an offload set
        (it excludes recompute of every layer), a tuned (auto) schedule (its lists are built for the memory they
        find), or ZeRO-3 whose gathered weights may take less kept whole (`keeping_may_cost_less`, tried when the
        base is out of memory). Stages are looked at from the lowest up and the count stops at the first that may
        fit: no order between stages is assumed. A stage whose every cell a filter drops (`dropped`, per cell)
        counts as out unlooked at: none of its cells is evaluated either way."""
        if cut.offload or cut.family.tuned:
            return None
        o = next((i for mode in ("full", "selective", "none") for i, (_, recompute, n) in enumerate(cut.options)
                  if recompute == mode and n is None), None)  # fmt: skip
        if o is None:
            return None
        # the same cut at another micro-batch size: the bound grows with b (what a rank holds at its first
        # backward is b × the micro-batches it holds then, whose share of m = B / (b·d) never rises as m falls)
        shape = (*cut.prefix[:3], *cut.prefix[4:])
        misses: list[tuple[int, Missed]] = []
        per_stage = len(cut.grads)
        for z, zero in enumerate(cut.zeros):
            if dropped is not None and all(
                dropped[(k * len(cut.zeros) + z) * per_stage + g]
                for k in range(len(cut.options))
                for g in range(per_stage)
            ):
                continue
            fits_up_to, out_from = self._frugal.get((shape, zero), (0, math.inf))
            if cut.b <= fits_up_to:
                return z, misses
            if cut.b < out_from:
                i = (o * len(cut.zeros) + z) * per_stage  # gradient dtype 0: the fewest bytes
                try:
                    miss = self._frugal_miss(cut.cell(i), base + i)
                except PplanError:
                    return None if z == 0 else (z, misses)
                if miss is None:
                    self._frugal[shape, zero] = (max(fits_up_to, cut.b), out_from)
                    return z, misses
                missed, every_b = miss
                self._frugal[shape, zero] = (fits_up_to, 0 if every_b else cut.b)
                misses.append((base + i, missed))
        return len(cut.zeros), misses

    def _frugal_miss(self, cell: Candidate, index: int) -> tuple[Missed, bool] | None:
        """`stages_out` of one frugal cell: None when it may fit; else its miss, and whether it is out at every
        micro-batch size (its static bytes alone overflow) rather than from its own b up (its memory bound)."""
        headroom = self.req.headroom_fraction
        static = self.static_miss(cell)
        if static is not None:
            return missed_by(cell, *static, headroom, False), True
        fit = self.fit(cell, index)
        if fit.fits(headroom) or (self.req.keep_gathered and keeping_may_cost_less(self.model, fit.plan)):
            return None
        return missed_by(cell, fit.peak_bytes, fit.usable_bytes, headroom, fit.exact), False

    def fit_exactly(self, item: Fitted) -> Fitted:
        """The same plan with its exact memory (the schedule's in-flight peaks)."""
        return fitted(self.model, self.hw, item.plan, item.candidate, item.index, True)


def _static_key(c: Candidate) -> tuple[object, ...]:
    """What a configuration's static bytes (pplan.cost.memory.plan_static_totals) read of it besides its ZeRO stage
    and gradient dtype: its cut but the micro-batch size, recompute and offload, and its shard group (d follows
    from t, cp and p in a query; the rest of its plan is the query's)."""
    return (
        c.family.name, c.t, c.p, c.cp, c.v, c.first_layers, c.last_layers, c.ep, c.etp, c.precision, c.shard_group,
    )  # fmt: skip
