"""`--schedule auto` for one plan: the memory limit of each stage, and the lists built for the plan's own times.

Owns `memory_limits` (K per stage) and `AutoPlan` (what explain prints of the lists: limits, how they were set, the
scheduler's result); pplan.cost.pipeline builds the lists from the plan's analytic stage inputs (`auto_plan`) and
takes the step and the peaks off them. The scheduler itself is pplan.schedules.auto.

The limit K_r of rank r (one stage per rank) is the user's `--memory-limit`, or derived from memory:

    need_r(k) = S_r + ⌈(k·a_r + c_r)·(1 + φ)⌉ ≤ U·(1 − h)

with S_r the rank's static bytes (weights, gradients, optimizer states, FP8 copies: `plan_static_totals`), a_r
one micro-batch's activation bytes on the rank (its layers and the model ends it holds), c_r the transients
that do not grow with k (one recomputed checkpoint's working bytes, ZeRO-3's gathered weights, the offload's
transit buffer), φ the allocator's fragmentation fraction (the profile's `memory.dynamic_fragmentation_fraction`),
U the plan's usable bytes (pplan.cost.usable) and h the headroom asked for. K_r is the largest such k, at most m,
and at least 1: a rank where one micro-batch does not fit is reported out of memory, as any plan's is. These are
the same terms `plan_memory_totals` adds, so a derived limit fits by construction (a test checks it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pplan.cost.memory import (
    fp8_any_layout,
    plan_gathered_weights_bytes,
    plan_offload_buffer_bytes,
    plan_static_totals,
    plan_working_bytes,
    with_fragmentation,
)
from pplan.cost.usable import usable_bytes
from pplan.plan.records import Plan
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules.auto import AutoResult


@dataclass(frozen=True, slots=True)
class AutoPlan:
    """A plan's automatic schedule: the limit K per stage, whether it was derived from memory, the result."""

    memory_limits: tuple[int, ...]
    derived: bool
    """True when K came from memory (`memory_limits`), False when the user gave --memory-limit."""
    result: AutoResult


def memory_limits(
    model: ModelSpec, hardware: HardwareSpec, plan: Plan, microbatch_bytes: Sequence[int]
) -> tuple[int, ...]:
    """K per stage (module docstring); `microbatch_bytes[r]`: one micro-batch's activation bytes on rank r."""
    m = plan.num_microbatches
    if plan.memory_limit is not None:
        return (min(plan.memory_limit, m),) * plan.pp
    budget = usable_bytes(hardware, model, plan) * (1 - plan.memory_headroom)
    fraction = hardware.memory.dynamic_fragmentation_fraction
    working = plan_working_bytes(model, plan)
    out = []
    for static, a, gathered, buffer in zip(
        plan_static_totals(model, plan, fp8_any_layout(hardware)),
        microbatch_bytes,
        plan_gathered_weights_bytes(model, plan, fp8_any_layout(hardware)),
        plan_offload_buffer_bytes(model, plan),
        strict=True,
    ):
        fixed = working + gathered + buffer

        def need(k: int, static: int = static, a: int = a, fixed: int = fixed) -> int:
            return static + with_fragmentation(k * a + fixed, fraction)  # as `plan_memory_totals` sums it

        if a <= 0:
            out.append(m)
            continue
        k = max(1, min(m, math.floor(((budget - static) / (1 + fraction) - fixed) / a)))
        while k > 1 and need(k) > budget:  # the ceiling and float rounding, checked on the exact sum
            k -= 1
        while k < m and need(k + 1) <= budget:
            k += 1
        out.append(k)
    return tuple(out)
