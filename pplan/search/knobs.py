"""Which memory knob made a shown plan fit: ZeRO-2/3 (gradients, then weights, sharded over d·cp), BF16
gradients (2 bytes per parameter instead of 4) and recompute (the first N layers of every chunk, or all of them),
each compared with the same plan one notch down; and what a sharding choice taken for speed costs (hybrid
sharding within a node, ZeRO-3's gathered weights kept), compared with the leaner choice, from the memory
model (pplan.cost.memory, exact in-flight peaks: the figures `explain` shows) against each plan's own usable
bytes (pplan.cost.usable), never hard-coded.

The search orders equal throughput by the lower ZeRO stage (pplan.search.rank), and in the cost model a higher
ZeRO stage is never faster (pplan.cost.steptime: more traffic, the same optimizer shard), so a shown ZeRO-2/3
plan is one whose lower stage does not fit or is absent from the query; BF16 gradients are never slower
(less traffic, fewer optimizer bytes), so the note says whether FP32 would fit; the search finds the least
recompute that fits (pplan.search), so the note says what one layer less (or none) would need. Where the
leaner choice fits but was not shown, the note says how much slower it runs: these knobs change the data-parallel
traffic, not the schedule, and of the pass times at most the first stage's (its embedding gradient is added into
the main gradient at the gradient dtype, pplan.cost.passtime.embedding_pass_times), so its step is the shown plan's
simulated pipeline with its own synchronisation (`pplan.cost.steptime.step_time` given the shown plan's run) where
its pass times are the same, and its own simulation where they are not.
"""

from __future__ import annotations

from dataclasses import replace

from pplan.cost.chunktimes import chunk_pass_times
from pplan.cost.memory import fp8_any_layout, plan_memory_totals
from pplan.cost.pipeline import PipelineRun, activation_peaks
from pplan.cost.steptime import step_time
from pplan.cost.usable import usable_bytes
from pplan.errors import PplanError
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

_SHARDED = {1: "optimizer states", 2: "gradients", 3: "weights"}


def peak_bytes(model: ModelSpec, hw: HardwareSpec, req: PlanRequest) -> tuple[int, int] | None:
    """Exact peak bytes of the most loaded stage of `req`'s plan and the plan's usable bytes
    (pplan.cost.usable), or None when it is no valid plan."""
    try:
        plan = make_plan(model, req)
    except PplanError:
        return None
    fraction = hw.memory.dynamic_fragmentation_fraction
    need = max(
        plan_memory_totals(model, plan, activation_peaks(model, plan, hw), fraction, fp8_any_layout(hw))
    )
    return need, usable_bytes(hw, model, plan)


def knob_notes(
    model: ModelSpec, hw: HardwareSpec, req: PlanRequest, need: int, run: PipelineRun | None = None
) -> tuple[str, ...]:
    """One line per memory knob `req` uses beyond ZeRO-1 and FP32 gradients: what the plan needs one notch down.
    `need` is `req`'s own peak (bytes); `run`, `req`'s simulated pipeline, prices a leaner sharding or gradient
    choice that fits (`_slower`; without it the note says only that it is not faster)."""
    replicas = req.gpus // (req.tp * req.pp * req.cp)
    notes = []
    slower = _Slower(model, hw, req, run)
    if req.zero_stage >= 2:
        lower = req.zero_stage - 1
        less = replace(req, zero_stage=lower, reshard_after_forward=True)
        head = f"fits with ZeRO-{req.zero_stage} ({_SHARDED[req.zero_stage]} sharded over d·cp = {replicas * req.cp})"
        notes.append(head + ": " + _verdict(f"ZeRO-{lower}", peak_bytes(model, hw, less), need, slower(less)))
    if req.grad_dtype == "bf16":
        fp32 = replace(req, grad_dtype="fp32")
        notes.append("BF16 gradients: " + _verdict("FP32", peak_bytes(model, hw, fp32), need, slower(fp32)))
    if req.recompute == "full":
        n = req.recompute_layers if req.recompute_method == "block" else None
        if n is not None:
            head = f"fits recomputing the first {f'{n} layers' if n > 1 else 'layer'} of every chunk"
        else:
            head = "fits with full recompute"
        if n is not None and n > 1:
            less, what = replace(req, recompute_layers=n - 1), f"{n - 1}"
        else:
            less = replace(req, recompute="none", recompute_layers=None, recompute_method="uniform")
            what = "no recompute"
        notes.append(f"{head}: " + _verdict(what, peak_bytes(model, hw, less), need))
    if req.shard_group is not None:
        full = replace(req, shard_group=None)
        notes.append(
            f"hybrid sharding (groups of {req.shard_group} GPUs, {replicas * req.cp // req.shard_group} replicas): "
            + _cheaper(
                f"full sharding over d·cp = {replicas * req.cp}",
                peak_bytes(model, hw, full),
                need,
                slower(full),
            )
        )
    if not req.reshard_after_forward:
        resharding = replace(req, reshard_after_forward=True)
        notes.append(
            "ZeRO-3 weights kept gathered from forward to backward: "
            + _cheaper("resharding", peak_bytes(model, hw, resharding), need, slower(resharding))
        )
    return tuple(notes)


class _Slower:
    """How much longer a variant of `req` that changes only its data-parallel synchronisation (ZeRO stage,
    gradient dtype, sharding) steps than `req`, as a fraction: priced on `req`'s simulated pipeline `run` where
    their pass times are the same (the schedule is), on its own simulation where not (the gradient dtype's
    embedding gradient). None without a run or for no valid plan."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, req: PlanRequest, run: PipelineRun | None) -> None:
        self.model, self.hw, self.req, self.run = model, hw, req, run
        self.base_s: float | None = None

    def _step_s(self, req: PlanRequest) -> float | None:
        if self.run is None:
            return None
        try:
            plan = make_plan(self.model, req)
        except PplanError:
            return None
        same = chunk_pass_times(self.model, self.hw, plan) == self.run.chunk_times
        return step_time(self.model, self.hw, plan, run=self.run if same else None, split_p2p=False).step_s

    def __call__(self, variant: PlanRequest) -> float | None:
        if self.base_s is None:  # priced once, when a note first needs it
            self.base_s = self._step_s(self.req)
        step_s = self._step_s(variant)
        return None if step_s is None or self.base_s is None else step_s / self.base_s - 1


def _slower_text(slower: float | None) -> str:
    """'runs 4.5 % slower' (under 0.1 %: said so), or 'not faster' when it was not priced."""
    if slower is None:
        return "not faster"
    return f"runs {slower * 100:.1f} % slower" if slower >= 0.0005 else "runs slower (by under 0.1 %)"


def _cheaper(what: str, other: tuple[int, int] | None, need: int, slower: float | None = None) -> str:
    """A sharding choice taken for speed: what the leaner choice would need (the search shows the faster one)."""
    if other is None:
        return f"{what} is no valid plan"
    peak, usable = other
    runs = _slower_text(slower) if slower is not None else "runs slower"
    return f"{what} needs {(need - peak) / 1e9:.1f} GB less ({peak / 1e9:.1f} of {usable / 1e9:.1f} GB) but {runs}"


def _verdict(what: str, other: tuple[int, int] | None, need: int, slower: float | None = None) -> str:
    if other is None:
        return f"{what} is no valid plan"
    peak, usable = other
    more = (peak - need) / 1e9
    # a notch down usually needs more; beside a plan keeping ZeRO-3's weights gathered it can need less
    amount = f"{more:.1f} GB more" if more >= 0 else f"{-more:.1f} GB less"
    if peak > usable:
        return f"{what} needs {amount}, does not fit ({peak / 1e9:.1f} of {usable / 1e9:.1f} GB usable)"
    runs = _slower_text(slower)
    return f"{what} needs {amount}, fits ({peak / 1e9:.1f} of {usable / 1e9:.1f} GB), {'but ' * (slower is not None)}{runs}"


ALTERNATIVE_GAIN = 0.005
"""A stack knob's alternative is named when it steps at least this much (a fraction) faster."""


def stack_knob_notes(
    model: ModelSpec, hw: HardwareSpec, req: PlanRequest, plan: Plan, step_s: float
) -> tuple[str, ...]:
    """For a routed plan of a named stack release (pplan.profiles.releases): the token dispatchers the release
    runs on this GPU other than the plan's, and EP overlap where the plan leaves it off and its cut allows it,
    each priced on the same plan by its own simulation (`plan`, `step_s`: `req`'s plan and step); a line for the fastest
    dispatcher and for the overlap where they step `ALTERNATIVE_GAIN` faster. These knobs change no memory in
    pplan's model, so the plan fits with them as it is."""
    from pplan.plan.rules import ep_overlap_refusal
    from pplan.profiles.releases import release_dispatchers, release_of

    if model.moe is None or req.release is None or req.ep <= 1:
        return ()
    release = release_of(req.stack, req.release)
    if release is None:
        return ()

    def faster(variant: PlanRequest) -> float | None:
        try:
            other = make_plan(model, variant)
        except PplanError:
            return None
        return 1 - step_time(model, hw, other).step_s / step_s

    notes = []
    others = [d for d in release_dispatchers(release, hw.gpu.name) if d != req.moe_dispatcher]
    priced = [(gain, d) for d in others if (gain := faster(replace(req, moe_dispatcher=d))) is not None]
    if priced:
        gain, best = max(priced)
        if gain >= ALTERNATIVE_GAIN:
            notes.append(
                f"--moe-dispatcher {best} steps {gain * 100:.1f} % faster than {req.moe_dispatcher} (the same plan; "
                f"{release.stack} {release.name} has it on this GPU)"
            )
    if (
        not plan.moe_ep_overlap
        and ep_overlap_refusal(req.ep, plan.pp, plan.vp, req.recompute, req.moe_dispatcher) is None
    ):
        gain_overlap = faster(replace(req, moe_ep_overlap=True))
        if gain_overlap is not None and gain_overlap >= ALTERNATIVE_GAIN:
            notes.append(f"--moe-ep-overlap steps {gain_overlap * 100:.1f} % faster (the same plan)")
    return tuple(notes)
