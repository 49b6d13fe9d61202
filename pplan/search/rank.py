"""How `recommend` orders configurations and folds near-duplicates, and the exact evaluation it ranks by.

Order (a total order, so "the top N" is well defined): higher predicted tokens/s first; then the lower ZeRO stage
(at equal throughput, less sharding: fewer collectives than the model counts as hidden); then less recompute
(none, selective, the first N layers of every chunk, every layer: `Candidate.recompute_cost`); then no activation
offload before offload (at equal throughput, no copies to the host); then FP32 gradients
before BF16 (at equal throughput, the numerically safer reduction, Megatron-LM's default); then less peak memory
on the most loaded stage; then the smaller model replica t·p·cp; then enumeration order (t, cp, p, b ascending,
the schedules in the order asked, v, layer split, recompute in the order asked, ZeRO stage, gradient dtype, BF16 first);
then full sharding before hybrid sharding, resharding after forward before keeping the gathered weights.
Folding: walking that order, a configuration with the same cut and schedule as one already shown (t, p, v,
schedule, recompute, layers per chunk) and a throughput within 0.1 % of it differs only in how b, cp and d
share the batch, in its ZeRO stage or in its gradient dtype, and is counted instead of shown; so is one that
differs from a shown one in its ZeRO stage, recompute policy, gradient dtype or sharding (hybrid, gathered weights
kept) alone, whatever its throughput
(twins: the first walked is the best of its cut; `pplan.search.knobs` says what its ZeRO stage, recompute and
gradient dtype buy).
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.cost.memory import ActivationPeaks, fp8_any_layout, plan_memory_totals
from pplan.cost.pipeline import activation_peaks, warmup_peaks
from pplan.cost.steptime import RankTail, step_time, step_time_bound
from pplan.cost.usable import usable_bytes
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.search.space import Candidate

EQUIVALENT_RELATIVE = 1e-3
KEY_DIGITS = 12
"""Throughput is ranked to 12 significant digits: plans that are the same arithmetic in another order (b and cp
trading places, a schedule summary extended from a cached period or simulated afresh) differ in the last bits,
and the tie-breakers, not rounding, must order them."""


@dataclass(frozen=True, slots=True)
class Fitted:
    """A configuration checked for memory: exact per-stage memory, as `explain` computes it."""

    candidate: Candidate
    plan: Plan
    index: int
    """Position in the enumeration (the last tie-breaker)."""
    totals: tuple[int, ...]
    """Bytes per GPU of each pipeline rank (`RankMemory.total_bytes`)."""
    usable_bytes: int
    """The plan's usable bytes per GPU (pplan.cost.usable: HBM less context, label gap and its NCCL buffers)."""
    exact: bool
    """True: the memory `explain` shows; False: a proven lower bound on it (what ranks hold at their first
    backward, pplan.cost.pipeline.warmup_peaks)."""

    @property
    def peak_bytes(self) -> int:
        return max(self.totals)

    def fits(self, headroom_fraction: float) -> bool:
        """Every rank keeps `headroom_fraction` of usable memory free (`RankMemory.headroom_bytes`)."""
        return self.usable_bytes - self.peak_bytes >= self.usable_bytes * headroom_fraction


@dataclass(frozen=True, slots=True)
class Scored:
    """A configuration that fits, with its exact predicted throughput (the simulated step, as `explain`)."""

    fitted: Fitted
    tokens_per_s: float

    @property
    def candidate(self) -> Candidate:
        return self.fitted.candidate

    @property
    def plan(self) -> Plan:
        return self.fitted.plan

    def key(self) -> tuple[float, int, int, int, int, int, int, tuple[int, ...], tuple[int, int]]:
        """The documented order: ascending key = better first."""
        c = self.candidate
        bf16 = int(c.grad_dtype == "bf16")
        return (
            -float(f"{self.tokens_per_s:.{KEY_DIGITS}g}"), c.zero, c.recompute_cost, int(bool(c.offload_modules)),
            bf16, self.fitted.peak_bytes, c.replica, c.order, c.sharding_order,
        )  # fmt: skip


def fitted(
    model: ModelSpec,
    hw: HardwareSpec,
    plan: Plan,
    candidate: Candidate,
    index: int,
    exact: bool,
    peaks: ActivationPeaks | None = None,
    static_totals: tuple[int, ...] | None = None,
) -> Fitted:
    """Memory of every stage (the same functions `explain` uses): exact, or a proven lower bound on it. `peaks`:
    the plan's `warmup_peaks` (`exact` False) or `activation_peaks`, and `static_totals` its
    `plan_static_totals`, when already at hand."""
    if peaks is None:
        peaks = activation_peaks(model, plan, hw) if exact else warmup_peaks(model, plan)
    totals = plan_memory_totals(
        model, plan, peaks, hw.memory.dynamic_fragmentation_fraction, fp8_any_layout(hw), static_totals
    )
    return Fitted(candidate, plan, index, totals, usable_bytes(hw, model, plan), exact)


def throughput_bound(
    model: ModelSpec, hw: HardwareSpec, plan: Plan, tails: tuple[RankTail, ...] | None = None
) -> float:
    """A proven upper bound on the tokens/s `score` returns (pplan.cost.steptime.step_time_bound; `tails`: the
    plan's `plan_tails`, when at hand)."""
    return plan.global_batch * plan.seq_len / step_time_bound(model, hw, plan, tails)


def score(model: ModelSpec, hw: HardwareSpec, item: Fitted) -> Scored:
    """The exact predicted throughput: the simulated step as `explain` computes it."""
    return Scored(item, step_time(model, hw, item.plan, split_p2p=False).tokens_per_s)


def equivalent(a: Scored, b: Scored) -> bool:
    """Same cut family: the same t, p, cp (so d), schedule family, expert split and GEMM precision; or the same
    but for how cp, d and the micro-batch share the batch, at a throughput within 0.1 %. The table shows one row
    per family, its best (the walk is best first): the chunks per rank v, the micro-batch, the layer split, the
    recompute, the ZeRO stage and the gradient dtype tune the family's best rather than make another cut (`explain`
    and the knob notes show what each buys)."""
    ca, cb = a.candidate, b.candidate
    if (ca.t, ca.p, ca.family.name, ca.ep, ca.etp, ca.precision) != (
        cb.t, cb.p, cb.family.name, cb.ep, cb.etp, cb.precision,
    ):  # fmt: skip
        return False
    return ca.cp == cb.cp or abs(a.tokens_per_s - b.tokens_per_s) <= EQUIVALENT_RELATIVE * b.tokens_per_s


def _twin_key(s: Scored) -> tuple[object, ...]:
    """Everything but the ZeRO stage, the recompute policy, the gradient dtype and the sharding choices:
    configurations with the same key are twins."""
    c = s.candidate
    return (c.t, c.p, c.v, c.family.name, s.plan.layout.chunks, c.b, c.cp, c.ep, c.etp, c.precision)


def distinct(ordered: list[Scored], n: int) -> tuple[list[Scored], list[Scored]]:
    """Walking `ordered` (best first): (the first `n` neither equivalent to one already taken nor the twin — other
    ZeRO stage, recompute policy or gradient dtype — of one already walked past, shown or folded; the folded ones).
    The first twin walked is the best of its configuration (the lowest ZeRO stage and the least recompute that
    fit, BF16 before FP32: never slower),
    and stays its one row even when it was itself folded into a shown one, so the search may skip the twins it
    proves come later (pplan.search) without changing the answer."""
    kept: list[Scored] = []
    folded: list[Scored] = []
    walked: set[tuple[object, ...]] = set()
    for cand in ordered:
        if len(kept) == n:
            break
        key = _twin_key(cand)
        if key in walked or any(equivalent(cand, k) for k in kept):
            folded.append(cand)
        else:
            kept.append(cand)
        walked.add(key)
    return kept, folded
