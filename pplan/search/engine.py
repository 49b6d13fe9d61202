"""The best-first engine: one priority queue of configurations, each at the best figure known of it, refined a
level at a time until N distinct configurations are final.

Levels (`Level`), each figure at least the next one of the same configuration (pplan.search.bounds):
- CHEAP: the cheap bound (the free-hop makespan of each rank's layers, counted by kind for a routed model with
  dense layers). A whole cut enters at this level as one entry (`CutEntry`) at its heads' best cheap bound; its
  cells are made only when it comes to the front.
- SYNC: the bound from the plan alone (its data-parallel traffic and optimizer step, `Query.sync_bound`); and
  whether its weights, gradients and optimizer states alone overflow (`Query.static_miss`), which no recompute or
  micro-batch can cure.
- BOUND: a proven lower bound on memory (`Query.fit`) and the proven throughput bound of its own schedule
  (pplan.search.rank.throughput_bound).
- EXACT: exact memory and the simulated step (pplan.search.rank.score).
A configuration is final when its exact value comes to the front, since every other configuration's exact value
is at most its own figure; the search stops when N distinct configurations are final, so the answer is the
brute-force top N (pplan.search.brute_force, tested) while most configurations are only ever bounded. At equal
figures a bound is refined before an exact value is finalised (the level breaks the tie).
What waits behind what, and what a configuration out of memory leads to, is pplan.search.lattice's.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from functools import partial
from operator import itemgetter
from typing import NamedTuple

from pplan.cost.steptime import plan_tails, sync_hidden
from pplan.errors import PplanError
from pplan.frozen import changed
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules.periodic import PROVIDERS, StructureKey, structure_key
from pplan.search.bounds import BOUND_SLACK, ROUNDING_BYTES, Query
from pplan.search.filters import LauncherFilter
from pplan.search.lattice import (
    Chains,
    Lattice,
    count_unplaced,
    fp32_twin,
    given,
    is_variant,
    keeping_may_cost_less,
)
from pplan.search.prefetch import Prefetch
from pplan.search.prefetch import available as prefetch_available
from pplan.search.prefetch import start as start_child
from pplan.search.rank import Fitted, Scored, distinct, score, throughput_bound
from pplan.search.result import (
    NEAREST_MISSES,
    Miss,
    Missed,
    Ranked,
    Ranking,
    count_miss,
    missed_by,
    nearest,
)
from pplan.search.space import (
    GRAD_ORDER,
    Candidate,
    Cut,
    Rejection,
    SearchRequest,
    enumerate_layout_groups,
    group_successors,
    sharding_variants,
)


class Level(IntEnum):
    """How far a queued configuration is refined: what its figure is (module docstring)."""

    CHEAP = 0
    SYNC = 1
    BOUND = 2
    EXACT = 3


CHEAP, SYNC, BOUND, EXACT = Level
Entry = tuple[float, int, tuple[object, ...], int, object]
"""A queue entry: (−figure, level, the rest of the documented order's key at EXACT, enumeration index, item)."""


@dataclass(frozen=True, slots=True)
class PartialSeed:
    """Recomputing the first N, N + 1, … layers of every chunk of one configuration, not yet looked at: in the queue
    at the bound of N (a bound for them all: more recompute is never faster), resolved to the least N that may
    fit only when that bound comes to the front (`Query.least_partial`). `plan`: the configuration's plan with
    another recompute, when at hand (so no plan is rebuilt)."""

    candidate: Candidate
    plan: Plan | None
    bound_totals: tuple[int, ...] | None = None
    """The proven lower bound on memory per rank of `plan` (one recompute step below `candidate`), when known."""
    source: tuple[int, Candidate] | None = None
    """The configuration one recompute step below `candidate` (with its index) when it was proven out of memory
    without its plan (`Engine.known_out`): `plan` and `bound_totals` are its lower bound's, computed only if the
    seed comes to the front (`Engine.resolve`)."""


class CutEntry(NamedTuple):
    """A cut in the queue as one entry, before any of its cells is made (`Engine.expand`): its layout (the cut at
    b = m = 0, shared by every micro-batch size, `enumerate_layout_groups`) with its b and m, the cut itself made
    only when asked (`cut`: most entries never are)."""

    layout: Cut
    b: int
    m: int
    base: int
    """The enumeration index of its first cell."""
    lattice: Lattice
    filtered: bool = False
    """A launcher's or the envelope's filters may drop some of its cells (`Engine.expand` places those they pass)."""
    refusals: tuple[bool, ...] = ()
    """Filtered: whether the launcher refuses each of its cells (`Query.cell_refusals`)."""

    @property
    def cut(self) -> Cut:
        return self.layout.at(self.b, self.m)


class Engine:
    """One query's best-first search (module docstring): the queue, what waits in the chains, and the answer so
    far. `run` once."""

    def __init__(
        self,
        model: ModelSpec,
        hw: HardwareSpec,
        req: SearchRequest,
        progress: Callable[[int], None] | None = None,
        launcher: LauncherFilter | None = None,
    ) -> None:
        self.model, self.hw, self.req, self.progress, self.launcher = model, hw, req, progress, launcher
        self.query = Query(model, hw, req)
        self.result = Ranking(candidates=[])
        self.heap: list[Entry] = []
        # A configuration whose ZeRO stage (2, 3) or recompute is one step up from another enumerated one waits
        # behind it, and enters the queue only when every such predecessor is out of memory (pplan.search.lattice)
        self.chains = Chains(req.recompute)
        # An FP32 configuration waits behind its BF16 twin (enumerated just before it), by the twin's index, and
        # enters the queue only once the twin fits (`fp32_twin`): made only then
        self.fp32_waiting: dict[int, tuple[int, Callable[[], Candidate]]] = {}
        self.admitted_fp32: set[int] = set()
        # A cut's cells are placed lazily: only those that go straight to the queue (its heads, `Lattice`, of the
        # cells its launcher runs) at first, the rest when one of its cells is first out of memory
        # (`materialise`). Until then every other cell waits on a head, so what `Chains` would say of it is the
        # lattice's own. Not where the envelope filters cells (`eager`): every cell is placed as the enumeration
        # would have (`place_cells`), each asked of the filter.
        self.filtered = (launcher is not None and bool(req.launcher)) or req.max_extrapolation is not None
        self.eager = req.max_extrapolation is not None
        self.lattices: dict[tuple[object, ...], Lattice] = {}
        self.unplaced: dict[int, tuple[Cut, int, Lattice]] = {}  # head index → its cut, first index, lattice
        self.misses: list[Missed] = []
        self.final: list[Scored] = []
        self.kept: list[Scored] = []
        self.made = 0  # indices of the candidates made on demand follow the enumerated ones
        self.admitted: set[tuple[object, ...]] = set()
        self.prefits: dict[int, Fitted] = {}  # memory bounds already computed for a resolved seed
        # per configuration but its micro-batch size (`_b_free_key`): the least b its memory lower bound put out of
        # memory by more than the rounding slack, the miss ratio every larger b is at least, and whether keeping
        # ZeRO-3's gathered weights may cost less (which reads the weights only). Every larger b of it is out of
        # memory too (`known_out`).
        self.out_from: dict[tuple[object, ...], tuple[int, float, bool]] = {}
        # misses whose bound was not computed (`known_out`): (the least need / usable they can have, index,
        # configuration), bounded only if they may be among the nearest (`nearest_misses`)
        self.unbounded_misses: list[tuple[float, int, Candidate]] = []
        self.prefetch: Prefetch | None = None

    def run(self) -> Ranking:
        """The exact top N and why the rest are out."""
        self.enumerate()
        heapq.heapify(self.heap)
        self.made = self.result.enumerated
        self.prefetch = start_prefetch(self.query, self.heap, self.req)
        try:
            self.refine()
        finally:
            if self.prefetch is not None:
                PROVIDERS.remove(self.prefetch.provide)
                self.prefetch.close()
        return self.tally()

    # The first queue

    def enumerate(self) -> None:
        """Every cut of the space, one queue entry each (`push_cut`), but those the launcher refuses whole; their
        cells are made when the cut comes to the front (`expand`)."""
        result, query = self.result, self.query
        launcher = self.launcher if self.launcher is not None and self.req.launcher else None
        # per group of layouts (`enumerate_layout_groups`, by identity, kept alive here): its cells, those in the
        # layouts its launcher refuses at every m, and each other layout with the offset of its first cell, its
        # lattice and its cells' refusals. A group's layouts share their family, p and m: the launcher's rule on
        # m refuses all of them or none
        groups: dict[int, tuple[list[Cut], int, int, list[tuple[int, Cut, Lattice, tuple[bool, ...]]]]] = {}
        for cuts, b, m in enumerate_layout_groups(
            self.model, self.hw, self.req, query.seq, result.rejected, every_partial=False
        ):
            known = groups.get(id(cuts))
            if known is None:
                runs: list[tuple[int, Cut, Lattice, tuple[bool, ...]]] = []
                size = refused = 0
                for layout in cuts:
                    if query.layout_refused(layout, launcher):
                        refused += len(layout)
                    else:
                        refusals = query.cell_refusals(layout, self.launcher) if self.filtered else ()
                        runs.append((size, layout, self.lattice(layout), refusals))
                    size += len(layout)
                known = groups[id(cuts)] = (cuts, size, refused, runs)
            _, size, refused, runs = known
            base = result.enumerated
            result.enumerated += size
            if (
                runs
                and launcher is not None
                and cuts[0].p > 1
                and launcher.m_refuses(cuts[0].family, cuts[0].p, m)
            ):
                refused, runs = size, []
            if refused:
                result.rejected[Rejection.LAUNCHER] += refused  # every cell, counted as the cells would be
            for offset, layout, lattice, refusals in runs:
                self.push_cut(layout, b, m, base + offset, lattice, refusals)

    def push_cut(
        self, layout: Cut, b: int, m: int, base: int, lattice: Lattice, refusals: tuple[bool, ...] = ()
    ) -> None:
        """One entry for the whole cut (`layout` at b and m), at its cells' best cheap bound: the cut and its cells
        are made only if it comes to the
        front (`expand`). The cheap bound differs only between recompute options, so the heads of each option
        give it (`Lattice.option_heads`). Where filters drop cells, a cell that waits on a dropped one goes to the
        queue instead: it recomputes more than the head it waited on, so its bound is no higher (more recompute
        only lengthens passes, and the free-hop makespan never shortens when a pass lengthens)."""
        heads = lattice.option_heads
        figure = (
            self.query.cell_bound(layout, heads[0], b, m)
            if len(heads) == 1
            else max(self.query.cell_bound(layout, i, b, m) for i in heads)
        )
        entry = CutEntry(layout, b, m, base, lattice, self.filtered, refusals)
        self.heap.append((-figure * (1 + BOUND_SLACK), CHEAP, (), base + lattice.heads[0], entry))

    def lattice(self, cut: Cut, dropped: tuple[bool, ...] | None = None) -> Lattice:
        """The lattice of `cut`'s pattern (of the cells a filter passes, `dropped`), made once per pattern."""
        key = (cut.pattern, dropped)
        return self.lattices.get(key) or self.lattices.setdefault(key, Lattice.of(cut, self.req, dropped))

    def place_cells(
        self, cut: Cut, base: int, last: tuple[Candidate, int] | None
    ) -> tuple[Candidate, int] | None:
        """Each of `cut`'s cells the filters pass, in its chain or in the queue at its cheap bound; the last placed."""
        query, launcher, rejected = self.query, self.launcher, self.result.rejected
        refusals = query.cell_refusals(cut, launcher)  # most of a launcher's refusals: no cell made for them
        for i in range(len(cut)):
            if refusals[i]:
                rejected[Rejection.LAUNCHER] += 1
                continue
            cand, index = cut.cell(i), base + i
            refused = query.refusal(cand, launcher, launcher_passed=True)
            if refused is not None:
                rejected[refused] += 1
                continue
            if last is not None and fp32_twin(cand, index, *last):
                self.fp32_waiting[last[1]] = (index, given(cand))
                continue
            if not self.chains.place(index, cand):
                heapq.heappush(
                    self.heap, (-query.cheap_bound(cand) * (1 + BOUND_SLACK), CHEAP, (), index, cand)
                )
            last = (cand, index)
        return last

    # Refinement, a level at a time

    def refine(self) -> None:
        """Take the front of the queue and refine it one level, until N distinct configurations are final."""
        heap, top_n = self.heap, self.req.top_n
        while heap and len(self.kept) < top_n:
            neg, level, _, index, item = heapq.heappop(heap)
            if isinstance(item, CutEntry):
                self.expand(item)
                continue
            if level == CHEAP:
                at_sync = self.cheap(-neg, index, item)
                if at_sync is None:
                    continue
                level, item = SYNC, at_sync
            if level == SYNC:
                self.sync(index, item)
            elif level == BOUND:
                self.bound(index, item)
            else:
                self.exact(item)

    def cheap(self, front: float, index: int, item: object) -> Candidate | PartialSeed | None:
        """At its cheap bound (`front`): first the data-parallel traffic and optimizer (one plan, no pass times):
        the cells the cheap bound cannot tell apart, e.g. ZeRO-3's gathers, mostly stop here, back in the queue at
        that figure. `item` when it is to be refined at once; None when done with it for now."""
        seed = item if isinstance(item, PartialSeed) else None
        head = seed.candidate if seed is not None else item
        assert isinstance(head, Candidate)
        try:
            static = self.query.static_miss(head) if seed is None else None  # a seed's cut fits: it was made
            figure = (
                math.inf
                if static or head.zero < 2  # below ZeRO-2, one collective per step: rarely binding
                else self.query.sync_bound_with_variants(head, seed.plan if seed else None)
            )
        except PplanError:
            static, figure = None, math.inf  # refused: the fit below counts it
        if static is not None:
            self.statically_out(index, head, static)
            return None
        if figure * (1 + BOUND_SLACK) < front:
            heapq.heappush(self.heap, (-figure * (1 + BOUND_SLACK), SYNC, (), index, item))
            return None
        return seed if seed is not None else head

    def sync(self, index: int, item: object) -> None:
        """At its sync bound: a seed resolved to its least N that may fit; then the lower bound on memory. Out of
        memory: what waited on it is released. Else back in the queue at its own schedule's proven bound, its
        sharding variants (more memory, maybe faster) with it at its cheap bound (also theirs: they run the same
        passes), so none is finalised out of order: when it may fit, and keeping ZeRO-3's gathered weights also
        when that may take less memory on some rank."""
        if isinstance(item, PartialSeed):
            resolved = self.resolve(index, item)
            if resolved is None or self.chains.place(index, resolved):
                return  # none may fit, or it waits on its ZeRO stage below
            item = resolved
        assert isinstance(item, Candidate)
        model, hw, req = self.model, self.hw, self.req
        key = _b_free_key(item)
        if key is not None and index not in self.prefits:
            known = self.out_from.get(key)
            if known is not None and item.b >= known[0]:
                self.known_out(index, item, *known[1:])
                return
        try:
            fit = self.prefits.pop(index, None) or self.query.fit(item, index)
        except PplanError:
            self.result.rejected[Rejection.INVALID] += 1
            self.out_of_memory(index, item)
            return
        self.result.bounded += 1
        if not fit.fits(req.headroom_fraction):
            self.missed(index, fit)
            keep = req.keep_gathered and keeping_may_cost_less(model, fit.plan)
            if keep:
                self.admit(changed(fit.candidate, reshard=False))
            if key is not None:
                self.remember_out(key, fit, keep)
            self.out_of_memory(index, fit.candidate, fit.plan, fit.totals)  # the next ZeRO stage or recompute
            return
        if fit.candidate.family.tuned:
            self.more_recompute(index, fit.candidate, fit.plan, None)
        variants = sharding_variants(fit.candidate, req, hw.gpus_per_node)
        tails = plan_tails(model, hw, fit.plan) if variants else None
        if tails is not None and not sync_hidden(fit.plan, tails):  # else none is faster
            for variant in variants:
                self.admit(variant)
        bound = throughput_bound(model, hw, fit.plan, tails) * (1 + BOUND_SLACK)
        heapq.heappush(self.heap, (-bound, BOUND, (), index, fit))

    def remember_out(self, key: tuple[object, ...], fit: Fitted, keep: bool) -> None:
        """`fit`'s lower bound on memory is out of memory: when by more than the rounding slack on some rank, so is
        that of every larger micro-batch size of its configuration (`known_out`), remembered for the least b."""
        limit = fit.usable_bytes * (1 - self.req.headroom_fraction)
        if fit.peak_bytes - ROUNDING_BYTES <= limit:
            return
        known = self.out_from.get(key)
        if known is None or fit.candidate.b < known[0]:
            floor = missed_by(fit.candidate, fit.peak_bytes - ROUNDING_BYTES, fit.usable_bytes,
                              self.req.headroom_fraction, False)[0]  # fmt: skip
            self.out_from[key] = (fit.candidate.b, floor, keep)

    def known_out(self, index: int, cand: Candidate, floor: float, keep: bool) -> None:
        """`cand` is out of memory without its bound computed: the same configuration at a smaller micro-batch size
        b0 is, by more than the rounding slack (`remember_out`), and the bound grows with b (what a rank holds at
        its first backward is b × the micro-batches it holds then, whose share of m = B / (b·d) never rises as m
        falls; the static bytes, usable bytes and ZeRO-3's gathered weights do not read b). Counted and followed
        up as `sync` does a bounded miss; its miss kept with the least ratio it can have (`floor`, b0's), bounded
        only if it may be among the nearest (`nearest_misses`); the seed of more recompute made with it bounds it
        if that seed comes to the front (`resolve`)."""
        result = self.result
        result.bounded += 1
        result.rejected[Rejection.MEMORY] += 1
        if not (index in self.admitted_fp32 or is_variant(cand)):
            self.unbounded_misses.append((floor, index, cand))
        if keep:
            self.admit(changed(cand, reshard=False))
        self.out_of_memory(index, cand, source=(index, cand))

    def nearest_misses(self) -> list[Miss]:
        """`nearest` of the misses, the unbounded ones bounded first where they may be among them: each whose
        least ratio is at most that of the last shown (all of them while fewer than five are shown). Bounding
        more only adds misses, so the last shown's ratio never rises and the rest stay out."""
        pending = sorted(self.unbounded_misses, key=lambda x: (x[0], x[1]))
        headroom = self.req.headroom_fraction
        while True:
            shown = nearest(list(self.misses))
            cutoff = (
                shown[-1].need_bytes / shown[-1].usable_bytes if len(shown) == NEAREST_MISSES else math.inf
            )
            take = bisect.bisect_right(pending, cutoff, key=lambda x: x[0])
            if not take:
                return shown
            for _, index, cand in pending[:take]:
                fit = self.query.fit(cand, index)
                self.misses.append(missed_by(cand, fit.peak_bytes, fit.usable_bytes, headroom, False))
            del pending[:take]

    def bound(self, index: int, item: object) -> None:
        """At its proven throughput bound: exact memory, then (when it fits) the simulated step; its FP32 twin
        enters the queue."""
        assert isinstance(item, Fitted)
        if self.prefetch is not None:
            self.prefetch.poll()
        fit = self.query.fit_exactly(item)
        if not fit.fits(self.req.headroom_fraction):
            self.missed(index, fit)
            self.out_of_memory(
                index, fit.candidate, fit.plan
            )  # the next ZeRO stage or more recompute may fit
            return
        if index in self.fp32_waiting:  # the BF16 twin fits: the FP32 one may too, and may rank first
            twin, make_twin = self.fp32_waiting.pop(index)
            self.admitted_fp32.add(twin)
            self.push(twin, make_twin())
        scored = score(self.model, self.hw, fit)
        self.result.simulated += 1
        if self.progress:
            self.progress(self.result.simulated)
        key = scored.key()
        heapq.heappush(self.heap, (key[0], EXACT, key[1:], index, scored))

    def count_filtered(self, entry: CutEntry) -> bool:
        """Count the cells of a cut never expanded that a filter drops some of (`dropped`): those, and the rest as
        bounded out with the cut. False, counting nothing, when no filter drops any: then its cells are counted as
        an unfiltered cut's are (`count_unplaced`)."""
        if not entry.filtered:
            return False
        rejected = self.result.rejected
        if self.req.max_extrapolation is None:  # the launcher's refusals alone, counted without a cell made
            refused = sum(entry.refusals)
            if not refused:
                return False
            rejected[Rejection.LAUNCHER] += refused
            rejected[Rejection.BOUND] += len(entry.layout) - refused
            return True
        dropped = self.dropped(entry)
        if not any(dropped):
            return False
        rejected.update(reason or Rejection.BOUND for reason in dropped)
        return True

    def exact(self, item: object) -> None:
        """At its exact value: final, kept in the documented order, whatever order they were finalised in."""
        assert isinstance(item, Scored)
        bisect.insort(self.final, item, key=Scored.key)
        self.kept, _ = distinct(self.final, self.req.top_n)

    # What comes into the queue

    def push(self, index: int, cand: Candidate) -> None:
        heapq.heappush(self.heap, (-self.query.cheap_bound(cand) * (1 + BOUND_SLACK), CHEAP, (), index, cand))

    def admit(self, variant: Candidate) -> None:
        """Make `variant` (a sharding variant, pplan.search.space.sharding_variants) and push it, once."""
        key = (variant.order, variant.shard_group, variant.reshard)
        if key in self.admitted or self.query.refusal(variant, self.launcher) is not None:
            return
        self.admitted.add(key)
        self.made += 1
        self.result.enumerated += 1
        self.push(self.made, variant)

    def expand(self, entry: CutEntry) -> None:
        """Place `entry`'s heads, as the enumeration would have, and push each at its cheap bound. The ZeRO stages
        out of memory whatever their cells (`Query.stages_out`) are counted out first, and the cut goes on with the
        stages left."""
        cut, base, lattice, filtered, refusals = (
            entry.cut,
            entry.base,
            entry.lattice,
            entry.filtered,
            entry.refusals,
        )
        out = self.query.stages_out(cut, base, refusals or None)
        if out is not None and out[0]:
            self.stages_out_of_memory(entry, cut, *out)
            if out[0] == len(cut.zeros):
                return
            cut = changed(cut, zeros=cut.zeros[out[0] :])
            lattice = self.lattice(cut)
            refusals = self.query.cell_refusals(cut, self.launcher) if filtered else ()
        if self.eager:
            self.place_cells(cut, base, None)  # an FP32 twin follows its BF16 cell within the cut
            return
        if any(refusals):
            self.result.rejected[Rejection.LAUNCHER] += sum(refusals)
            lattice = self.lattice(cut, refusals)
        for i in lattice.heads:
            cand = cut.cell(i)
            self.chains.place(base + i, cand)
            heapq.heappush(
                self.heap, (-self.query.cheap_bound(cand) * (1 + BOUND_SLACK), CHEAP, (), base + i, cand)
            )
            if i + 1 in lattice.twins:
                self.fp32_waiting[base + i] = (base + i + 1, partial(cut.cell, i + 1))
            self.unplaced[base + i] = (cut, base, lattice)

    def stages_out_of_memory(
        self, entry: CutEntry, cut: Cut, stages: int, misses: list[tuple[int, Missed]]
    ) -> None:
        """Every cell of `entry`'s cut at its first `stages` ZeRO stages is out of memory (`Query.stages_out`):
        counted so, those a filter drops as dropped, and their most frugal cells (by index) kept among the nearest
        misses. The cut's other cells keep the indices below its own (`expand`). `cut`: the entry's."""
        if not entry.filtered:  # none dropped: each recompute option's first `stages` stages, every dtype
            passed = len(cut.options) * stages * len(cut.grads)
            self.result.rejected[Rejection.MEMORY] += passed
            self.result.bounded += passed
            self.misses += [miss for _, miss in misses]
            return
        per_stage, dropped = len(cut.grads), self.dropped(entry)
        out = [reason for i, reason in enumerate(dropped) if (i // per_stage) % len(cut.zeros) < stages]
        passed = out.count(None)
        self.result.rejected.update(reason for reason in out if reason is not None)
        self.result.rejected[Rejection.MEMORY] += passed
        self.result.bounded += passed
        self.misses += [miss for index, miss in misses if dropped[index - entry.base] is None]

    def dropped(self, entry: CutEntry) -> list[Rejection | None]:
        """Why a filter drops each of `entry`'s cells (its launcher, the envelope), as `place_cells` would; None
        for a cell none drops."""
        cut, launcher, refusals = entry.cut, self.launcher, entry.refusals
        if not entry.filtered:
            return [None] * len(cut)
        if self.req.max_extrapolation is None:
            return [Rejection.LAUNCHER if refused else None for refused in refusals]
        return [
            Rejection.LAUNCHER if refused else self.query.refusal(cut.cell(i), launcher, launcher_passed=True)
            for i, refused in enumerate(refusals)
        ]

    def materialise(self, index: int) -> None:
        """Place the cells of `index`'s cut that are not heads, as the enumeration would have (they wait)."""
        got = self.unplaced.pop(index, None)
        if got is None:
            return
        cut, base, lattice = got
        for i in lattice.heads:
            self.unplaced.pop(base + i, None)
        for i in lattice.twins:
            if i - 1 not in lattice.heads:
                self.fp32_waiting[base + i - 1] = (base + i, partial(cut.cell, i))
        if lattice.keyed:
            for i, _ in lattice.waits_on:
                waits = self.chains.place(base + i, cut.cell(i))
                assert waits, "a cell that is not a head waits on one"
        else:  # what `place` would record, read off the lattice, the cells made only when released
            for i, on in lattice.waits_on:
                self.chains.wait(base + i, partial(cut.cell, i), {base + j: why for j, why in on})

    def statically_out(self, index: int, head: Candidate, static: tuple[int, int]) -> None:
        """`head`'s static bytes alone are too many (`Query.static_miss`): out of memory, whatever its recompute."""
        result = self.result
        result.rejected[Rejection.MEMORY] += 1
        result.bounded += 1
        if index not in self.admitted_fp32 and not is_variant(head):
            self.misses.append(missed_by(head, *static, self.req.headroom_fraction, False))
        self.out_of_memory(index, head, static=True)

    def out_of_memory(
        self,
        index: int,
        cand: Candidate,
        plan: Plan | None = None,
        bound_totals: tuple[int, ...] | None = None,
        static: bool = False,
        source: tuple[int, Candidate] | None = None,
    ) -> None:
        """`cand` is out of memory (or invalid): what waited only on it enters the queue. Without recompute, or
        recomputing the first N layers of every chunk: the partial recomputes with more layers enter the queue as
        one seed (`PartialSeed`), bounded like `cand`, and what waited on `cand` for its recompute waits on it;
        not when its static bytes alone are too many (`static`: no recompute can fit it, `Query.static_miss`)."""
        self.materialise(index)
        for successor in group_successors(cand, self.req):
            self.admit(successor)
        if not static:
            self.more_recompute(index, cand, plan, bound_totals, source)
        for nxt, waiting in self.chains.release(index):
            self.push(nxt, waiting)

    def more_recompute(
        self,
        index: int,
        cand: Candidate,
        plan: Plan | None,
        bound_totals: tuple[int, ...] | None,
        source: tuple[int, Candidate] | None = None,
    ) -> None:
        """The partial recomputes of `cand` with more layers, as one seed in the queue at `cand`'s next N's cheap
        bound (also a bound for every larger N), what waited on `cand` for its recompute waiting on it: when `cand`
        is out of memory, and for a tuned family (auto) also when it fits, whose lists gain from the memory more
        recompute frees."""
        more = None
        # a sharding variant's recompute successors are its base's (or `group_successors`)
        if index not in self.admitted_fp32 and not is_variant(cand):
            more = cand.more_recompute() if cand.recompute == "full" else self.query.first_partial(cand)
        if more is not None and self.query.launcher_refuses(more, self.launcher):
            more = None  # e.g. torchtitan: no partial recompute (made on demand, so not filtered when enumerated)
        if more is not None:
            self.made += 1
            self.result.enumerated += 1
            self.chains.move_waiters(index, self.made)
            seed = PartialSeed(more, plan, bound_totals, source)
            heapq.heappush(
                self.heap, (-self.query.cheap_bound(more) * (1 + BOUND_SLACK), CHEAP, (), self.made, seed)
            )

    def missed(self, index: int, fit: Fitted) -> None:
        """`fit` is out of memory: kept among the nearest misses (FP32 twins and sharding variants flagged)."""
        twin_fits = index in self.admitted_fp32 or is_variant(fit.candidate)
        count_miss(self.result, self.misses, fit, self.req.headroom_fraction, twin_fits)

    def resolve(self, index: int, seed: PartialSeed) -> Candidate | None:
        """Its least partial recompute that may fit (the others proven out of memory), its FP32 twin
        behind it; None (and what waited on the seed released) when none may."""
        result, req = self.result, self.req
        plan, below = seed.plan, seed.bound_totals
        if seed.source is not None:  # what `sync` would have made it with, had it bounded the source
            fit = self.query.fit(seed.source[1], seed.source[0])
            plan, below = fit.plan, fit.totals
        cand, skipped, prefit = self.query.least_partial(seed.candidate, plan, below)
        out = skipped - (cand is None)  # the seed itself was counted when it was made
        result.enumerated += out
        result.rejected[Rejection.MEMORY] += skipped
        result.bounded += skipped  # each proven out of memory by the bound's closed form
        if cand is None:
            for nxt, waiting in self.chains.release(index):
                self.push(nxt, waiting)
            return None
        if cand.grad_dtype == "bf16" and "fp32" in req.grad_dtypes:
            self.made += 1
            result.enumerated += 1
            twin = changed(cand, grad_dtype="fp32", order=(*cand.order[:-1], GRAD_ORDER.index("fp32")))
            self.fp32_waiting[index] = (self.made, given(twin))
        if prefit is not None:
            self.prefits[index] = changed(prefit, index=index)
        return cand

    # The answer

    def tally(self) -> Ranking:
        """The top N in the documented order; every other configuration counted under why it is not shown."""
        result, req = self.result, self.req
        shown, folded = distinct(self.final, req.top_n)
        result.rejected[Rejection.EQUIVALENT] += len(folded)
        result.rejected[Rejection.BELOW_TOP] += len(self.final) - len(shown) - len(folded)
        never: list[Lattice] = []  # the lattice of each cut never expanded
        for _, level, _, _, item in self.heap:
            if isinstance(item, CutEntry):
                if not self.count_filtered(item):
                    never.append(item.lattice)
                continue
            result.rejected[Rejection.BELOW_TOP if level == EXACT else Rejection.BOUND] += 1
        for reason in self.chains.left():
            result.rejected[reason] += 1
        unmaterialised = [
            lattice for head, (_, base, lattice) in self.unplaced.items() if head == base + lattice.heads[0]
        ]  # once per cut
        count_unplaced(result.rejected, never, unmaterialised)
        result.rejected[Rejection.DOMINATED] += len(self.fp32_waiting)
        result.candidates = [Ranked(s, s.candidate.request(req, s.plan.seq_len)) for s in shown]
        result.closest_misses = self.nearest_misses()
        # in the order of the pipeline that rejects them (`Rejection`), whatever order they were counted in
        result.rejected = Counter({r: result.rejected[r] for r in Rejection if result.rejected[r]})
        return result


def _b_free_key(c: Candidate) -> tuple[object, ...] | None:
    """`c` but its micro-batch size (and so m): the configurations whose memory lower bound grows with b
    (`Engine.known_out`). None for a tuned (auto) schedule, whose lists are built for the memory they find, and
    for an offload set."""
    if c.family.tuned or c.offload_modules:
        return None
    return (*c.order[:3], *c.order[4:], c.shard_group, c.reshard)


PREFETCH_FROM_HEADS = 2000
"""Queries with at least this many configurations in the first queue build structures ahead on a second core
(pplan.search.prefetch); smaller ones finish before a child would help."""


def start_prefetch(query: Query, heap: list[Entry], req: SearchRequest) -> Prefetch | None:
    """Start building, on another core, the structures the search will likely ask for (`prefetch_keys`)."""
    if not req.prefetch or not _holds_at_least(heap, PREFETCH_FROM_HEADS) or not prefetch_available():
        return None
    # None when no child can start: the search builds everything itself
    prefetch = start_child(partial(prefetch_keys, query, heap, req))
    if prefetch is None:
        return None
    PROVIDERS.append(prefetch.provide)
    return prefetch


def _holds_at_least(heap: list[Entry], n: int) -> bool:
    """Whether the queue's entries stand for at least `n` configurations (a cut for its heads), counted only
    until there are `n`."""
    held = 0
    for entry in heap:
        if held >= n:
            return True
        item = entry[4]
        held += len(item.lattice.heads) if isinstance(item, CutEntry) else 1
    return held >= n


def prefetch_keys(query: Query, heap: list[Entry], req: SearchRequest) -> Iterator[StructureKey]:
    """The structures of the configurations that pass the memory lower bound (or would with ZeRO-3), best cheap
    bound first (the order the search takes them in), each once. Run in the child (pplan.search.prefetch).

    A structure is named by its schedule, p, v and m alone (`_structure_of`), which every cell of a cut shares, so
    an entry whose structure is already named (or that takes no structure) is passed over before any of its heads
    is bounded: the same keys in the same order as bounding every head and dropping repeats, at a fraction of
    the cost (DeepSeek-V3 on 2,048 GPUs: 13 structures among 48,472 cuts, whose heads' memory bounds took the
    child longer than the whole search)."""
    named: set[StructureKey] = set()
    keys: dict[tuple[object, ...], StructureKey | None] = {}  # of each (schedule, p, v, m): few, asked often
    # by figure, then index: sorted by index first, the sort by figure keeps that order among equal figures (two
    # sorts on one number each, which compare far faster than pairs of them)
    for _, _, _, index, item in sorted(sorted(heap, key=itemgetter(3)), key=itemgetter(0)):
        key = _structure_of(item, keys)
        if key is not None and key not in named and _may_fit(query, req, _heads(index, item)):
            named.add(key)
            yield key


def _structure_of(item: object, keys: dict[tuple[object, ...], StructureKey | None]) -> StructureKey | None:
    """The structure a queue entry's configurations would simulate (a cut's cells share their schedule, p, v and
    m, which alone name it: the plan's `structure_key` reads the same fields), or None when they would take
    another route; `keys` remembers them."""
    if not isinstance(item, (CutEntry, Candidate)):
        return None
    x, m = (item.layout, item.m) if isinstance(item, CutEntry) else (item, item.m)
    shape = (x.family, x.p, x.v, m)
    if shape not in keys:
        keys[shape] = structure_key(x.family.name, x.p, x.family.generator_v(x.v), m)
    return keys[shape]


def _may_fit(query: Query, req: SearchRequest, heads: list[tuple[int, Candidate]]) -> bool:
    """Whether one of `heads` (or its ZeRO-3 form) passes the memory lower bound."""
    for index, head in heads:
        sharded = 3 in req.zero_stages and head.d * head.cp > 1 and head.zero < 3
        for cand in [head, changed(head, zero=3)] if sharded else [head]:
            try:
                fit = query.fit(cand, index)
            except PplanError:
                break
            if fit.fits(req.headroom_fraction):
                return True
    return False


def _heads(index: int, item: object) -> list[tuple[int, Candidate]]:
    """The configurations (with their indices) a queue entry stands for: a candidate itself, a cut's heads."""
    if isinstance(item, CutEntry):
        return [(item.base + i, item.cut.cell(i)) for i in item.lattice.heads]
    return [(index, item)] if isinstance(item, Candidate) else []
