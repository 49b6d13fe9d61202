"""Who waits on whom, and what comes next: the order the search (pplan.search.engine) may leave configurations
unevaluated in, without changing its answer.

Waiting (`Chains`): ZeRO-2 waits behind ZeRO-1 and ZeRO-3 behind ZeRO-2 of the same configuration
(`zero_predecessor`); selective recompute and the first N layers of every chunk behind no recompute, N + 1 behind
N, every layer behind the largest partial N placed (`recompute_predecessor`). A configuration that waits enters
the queue only once every predecessor it waits on is out of memory or invalid: while one fits, the waiting one is
never faster and ranks below it. An FP32 configuration waits behind its BF16 twin, enumerated just before it, and
enters once the twin fits (`fp32_twin`).
One cut's cells in a row (`Lattice`): which go straight to the queue, which are FP32 twins, which wait on what;
the same for every cut of a pattern, so computed once per pattern.
What comes next: a configuration out of memory leads to its hybrid-sharded group's successors
(pplan.search.space.group_successors) and to its partial recomputes with more layers (a seed,
pplan.search.engine); one that fits leads to its sharding variants (pplan.search.space.sharding_variants;
`keeping_may_cost_less`: also from one out of memory, where keeping ZeRO-3's gathered weights may take less).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pplan.cost.memory import plan_gathered_weights_bytes
from pplan.plan.records import Plan, with_sharding
from pplan.profiles.model_spec import ModelSpec
from pplan.search.space import MAX_CHUNK_LAYERS, Candidate, Cut, Rejection, SearchRequest

Key = tuple[int, ...]
"""A configuration's name in the chains (`chain_key`)."""


def fp32_twin(c: Candidate, index: int, before: Candidate, before_index: int) -> bool:
    """Whether `c` (enumerated at `index`) keeps FP32 gradients and `before` is its BF16 twin. The gradient dtype
    is the innermost enumeration loop, BF16 first (pplan.search.space.GRAD_ORDER), so the twin is the candidate
    enumerated just before, with the same ZeRO stage. Gradient bytes enter the cost model only as a factor
    (GRAD_BYTES: memory, data-parallel traffic, the optimizer's pass over them, the embedding gradient's add into
    the main gradient), so `c` needs more memory than the twin and is never faster: it can fit only if the twin
    does, and the twin's bounds bound it. Not for a tuned family (auto): its lists change with the memory limit
    the FP32 gradients lower, and the scheduler is not proven monotone in it."""
    return (
        before_index == index - 1
        and c.grad_dtype == "fp32"
        and before.grad_dtype == "bf16"
        and c.zero == before.zero
        and not c.family.tuned
    )


def chain_key(c: Candidate, layers: int | None = None, zero: int | None = None, rc: int | None = None) -> Key:
    """Everything that names a configuration: its place in the enumeration order (`Candidate.order`: the cut, the
    offload set, the recompute mode asked and its N, the ZeRO stage, the gradient dtype), with N, the ZeRO stage or
    the recompute mode's index replaced when given."""
    o = c.order
    return (
        *o[:-4], o[-4] if rc is None else rc, o[-3] if layers is None else layers, o[-2] if zero is None else zero,
        o[-1],
    )  # fmt: skip


def zero_predecessor(c: Candidate) -> Key | None:
    """ZeRO-2 waits behind ZeRO-1 and ZeRO-3 behind ZeRO-2 of the same configuration. From ZeRO-1 up a higher
    stage is never faster (ZeRO-2 adds a reduce-scatter per micro-batch, ZeRO-3 the weight gathers; the optimizer
    shard is the same: pplan.cost) and needs no more memory, so while the stage below fits, this one ranks below
    it and is folded (pplan.search.rank.distinct). ZeRO-0 is not in the chain: its optimizer step runs over all
    the parameters, so ZeRO-1 can be faster."""
    return chain_key(c, zero=c.zero - 1) if c.zero >= 2 else None


def recompute_predecessor(c: Candidate, rc_none: int | None) -> Key | None:
    """Selective recompute and full recompute of the first layer of every chunk wait behind no recompute (mode
    index `rc_none` in the order asked, when asked); the first N + 1 layers behind the first N; every layer behind
    the largest partial N placed (`Chains.place`), or no recompute. Each step re-runs more forward work in the
    backward (the step is no shorter: pass times only grow, pplan.cost.passtime) and keeps no more activations,
    so while the predecessor fits, this one ranks below it (`Candidate.recompute_cost` breaks ties) and is folded
    as its twin."""
    if c.recompute == "selective" or (c.recompute == "full" and c.recompute_layers == 1):
        return None if rc_none is None else chain_key(c, layers=MAX_CHUNK_LAYERS, rc=rc_none)
    if c.recompute == "full" and c.recompute_layers is not None:
        return chain_key(c, layers=c.recompute_layers - 1)
    return None  # plain full recompute: `Chains.place` looks for the largest partial N


def given(c: Candidate) -> Callable[[], Candidate]:
    """A maker of `c` already made (what a waiting configuration is released as)."""
    return lambda: c


def is_variant(c: Candidate) -> bool:
    """Whether `c` is a sharding variant (pplan.search.space.sharding_variants): a choice made for speed (or, rarely,
    keeping ZeRO-3's gathered weights on ranks of two units), whose base's miss stands for the cut."""
    return c.sharding_order != (0, 0)


def keeping_may_cost_less(model: ModelSpec, plan: Plan) -> bool:
    """Whether a ZeRO-3 plan that reshards after forward (and is tried without: `SearchRequest.keep_gathered`)
    has a rank whose gathered weights would take fewer bytes kept whole than as the two-unit prefetch buffer (a
    rank of at most two units): then keeping them is not dominated in memory, and is tried even though this
    plan is out of memory."""
    if plan.zero_stage != 3 or not plan.reshard_after_forward:
        return False
    kept = plan_gathered_weights_bytes(model, with_sharding(plan, reshard_after_forward=False))
    return any(k < g for k, g in zip(kept, plan_gathered_weights_bytes(model, plan), strict=True))


@dataclass(frozen=True, slots=True)
class Lattice:
    """What `Chains` does with the cells of one cut placed in a row while none is out of memory: which go straight
    to the queue (`heads`), which are FP32 twins of the cell before (`twins`), and why the rest would be left
    unevaluated if no head were ever released (`waiting`: `Chains.left`, and DOMINATED for the twins of cells that
    are not heads). Chain keys differ between cuts only in the cut's prefix, so it is the same for every cut of a
    pattern (`Cut.pattern`) and computed once per pattern, by placing one cut's cells in a scratch `Chains`."""

    heads: tuple[int, ...]
    twins: frozenset[int]
    waiting: Counter[Rejection]
    waits_on: tuple[tuple[int, tuple[tuple[int, str], ...]], ...]
    """Each cell that waits (not a head, not a twin): the cells it waits on and why ("zero", "recompute")."""
    keyed: bool
    """Whether a cell of the lattice can be another configuration's predecessor outside it (a partial recompute:
    resolved seeds wait on those), so materialising must record the cells' chain keys (`Chains.place`)."""
    option_heads: tuple[int, ...] = ()
    """The first head of each recompute option among the heads: the cheap bound differs only between options."""

    @staticmethod
    def of(cut: Cut, req: SearchRequest, dropped: tuple[bool, ...] | None = None) -> Lattice:
        """The lattice of `cut`'s pattern; with `dropped`, of its cells a filter passes (a cell that would wait on
        a dropped one does not: what `Chains.place` does when its predecessor was never placed)."""
        chains = Chains(req.recompute)
        heads: list[int] = []
        twins: set[int] = set()
        last: tuple[Candidate, int] | None = None
        for i in range(len(cut)):
            if dropped is not None and dropped[i]:
                continue
            cand = cut.cell(i)
            if last is not None and fp32_twin(cand, i, *last):
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
        return Lattice(tuple(heads), frozenset(twins), waiting, waits_on, keyed, option_heads)


def count_unplaced(rejected: Counter[Rejection], never: list[Lattice], unmaterialised: list[Lattice]) -> None:
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


class Chains:
    """The configurations that wait behind others (`zero_predecessor`, `recompute_predecessor`): each enters
    the queue once all the predecessors it waits on are out of memory or invalid."""

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
        """Record `c`; True if it waits (False: it goes straight to the queue). A tuned family's (auto's)
        configurations never wait: the memory a higher ZeRO stage or more recompute frees raises its memory limit
        (pplan.cost.autoplan), so neither chain's "never faster" holds for it."""
        if c.family.tuned or (c.zero < 2 and c.recompute == "none"):  # first in both chains
            self._placed[chain_key(c)] = index
            return False
        before: dict[int, str] = {}
        zero = zero_predecessor(c)
        if zero is not None and self._waits_on(zero):
            before[self._placed[zero]] = "zero"
        more = recompute_predecessor(c, self._rc_none)
        if more is None and c.recompute == "full":
            partial = self._largest_partial.get(chain_key(c, layers=0))
            if partial:
                more = chain_key(c, layers=partial)
            elif self._rc_none is not None:
                more = chain_key(c, layers=MAX_CHUNK_LAYERS, rc=self._rc_none)
        if more is not None and self._waits_on(more):
            before.setdefault(self._placed[more], "recompute")
        key = chain_key(c)
        self._placed[key] = index
        if c.recompute == "full" and c.recompute_layers is not None:
            self._largest_partial[chain_key(c, layers=0)] = c.recompute_layers
        if not before:
            return False
        self.wait(index, given(c), before)
        return True

    def wait(self, index: int, make: Callable[[], Candidate], on: dict[int, str]) -> None:
        """`index` (made by `make` once released) waits on the indices of `on`, each for its reason."""
        self._waiting[index] = make
        self._on[index] = on
        for pred in on:
            self._next.setdefault(pred, []).append(index)

    def waits_on(self) -> tuple[tuple[int, tuple[tuple[int, str], ...]], ...]:
        """Each waiting index with what it waits on (for `Lattice`)."""
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
