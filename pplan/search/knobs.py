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
recompute that fits (pplan.search), so the note says what one layer less (or none) would need.
"""

from __future__ import annotations

from dataclasses import replace

from pplan.cost.memory import plan_memory_totals
from pplan.cost.pipeline import activation_peaks
from pplan.cost.usable import usable_bytes
from pplan.errors import PplanError
from pplan.plan.configuration import PlanRequest, make_plan
from pplan.profiles.specs import HardwareSpec, ModelSpec

_SHARDED = {1: "optimizer states", 2: "gradients", 3: "weights"}


def peak_bytes(model: ModelSpec, hw: HardwareSpec, req: PlanRequest) -> tuple[int, int] | None:
    """Exact peak bytes of the most loaded stage of `req`'s plan and the plan's usable bytes
    (pplan.cost.usable), or None when it is no valid plan."""
    try:
        plan = make_plan(model, req)
    except PplanError:
        return None
    fraction = hw.memory.dynamic_fragmentation_fraction
    need = max(plan_memory_totals(model, plan, activation_peaks(model, plan, hw), fraction))
    return need, usable_bytes(hw, model, plan)


def knob_notes(model: ModelSpec, hw: HardwareSpec, req: PlanRequest, need: int) -> tuple[str, ...]:
    """One line per memory knob `req` uses beyond ZeRO-1 and FP32 gradients: what the plan needs one notch down.
    `need` is `req`'s own peak (bytes)."""
    replicas = req.gpus // (req.tp * req.pp * req.cp)
    notes = []
    if req.zero_stage >= 2:
        lower = req.zero_stage - 1
        other = peak_bytes(model, hw, replace(req, zero_stage=lower, reshard_after_forward=True))
        head = f"fits with ZeRO-{req.zero_stage} ({_SHARDED[req.zero_stage]} sharded over d·cp = {replicas * req.cp})"
        notes.append(head + ": " + _verdict(f"ZeRO-{lower}", other, need))
    if req.grad_dtype == "bf16":
        other = peak_bytes(model, hw, replace(req, grad_dtype="fp32"))
        notes.append("BF16 gradients: " + _verdict("FP32", other, need))
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
        full = peak_bytes(model, hw, replace(req, shard_group=None))
        notes.append(
            f"hybrid sharding (groups of {req.shard_group} GPUs, {replicas * req.cp // req.shard_group} replicas): "
            + _cheaper(f"full sharding over d·cp = {replicas * req.cp}", full, need)
        )
    if not req.reshard_after_forward:
        resharding = peak_bytes(model, hw, replace(req, reshard_after_forward=True))
        notes.append(
            "ZeRO-3 weights kept gathered from forward to backward: "
            + _cheaper("resharding", resharding, need)
        )
    return tuple(notes)


def _cheaper(what: str, other: tuple[int, int] | None, need: int) -> str:
    """A sharding choice taken for speed: what the leaner choice would need (the search shows the faster one)."""
    if other is None:
        return f"{what} is no valid plan"
    peak, usable = other
    return f"{what} needs {(need - peak) / 1e9:.1f} GB less ({peak / 1e9:.1f} of {usable / 1e9:.1f} GB) but runs slower"


def _verdict(what: str, other: tuple[int, int] | None, need: int) -> str:
    if other is None:
        return f"{what} is no valid plan"
    peak, usable = other
    more = (peak - need) / 1e9
    # a notch down usually needs more; beside a plan keeping ZeRO-3's weights gathered it can need less
    amount = f"{more:.1f} GB more" if more >= 0 else f"{-more:.1f} GB less"
    if peak > usable:
        return f"{what} needs {amount}, does not fit ({peak / 1e9:.1f} of {usable / 1e9:.1f} GB usable)"
    return f"{what} needs {amount}, fits ({peak / 1e9:.1f} of {usable / 1e9:.1f} GB), not faster"
