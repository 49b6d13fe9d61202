"""What a query drops before a configuration is costed: what its launcher cannot run (`LauncherFilter`, asked of
a cut once and of a cut's cells per what the cell rules read), and what lies outside the calibrated envelope on
more axes than `SearchRequest.max_extrapolation` allows (the extrapolations of pplan.cost.uncertainty.confidence). `Filters` keeps
the query's answers to both; `brute_force` asks the launcher of each configuration's whole request instead
(`LauncherReason`), the reference the split rules are tested against.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Protocol

from pplan.cost.uncertainty import Extrapolation, confidence
from pplan.plan.knobs import Recompute
from pplan.plan.records import PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import ScheduleFamily
from pplan.search.space import Candidate, Cut, Rejection, SearchRequest

LauncherReason = Callable[[str, PlanRequest, int], str | None]
"""(launcher, request, m) → why the launcher cannot run the plan, or None (what `brute_force` asks of each
configuration's request)."""


class LauncherFilter(Protocol):
    """What the launcher refuses, asked as the search enumerates (pplan.launchers.support.SearchFilter): the rules on
    what every configuration of a cut shares (once for all its micro-batch sizes, then the rule on m), and those on
    one configuration's ZeRO stage, sharding, recompute and gradient dtype; a configuration is refused when either
    is."""

    def layout_refuses(
        self, family: ScheduleFamily, t: int, p: int, cp: int, d: int, v: int, first: int | None,
        last: int | None, offload: bool, ep: int, etp: int, precision: str,
    ) -> bool: ...  # fmt: skip

    def m_refuses(self, family: ScheduleFamily, p: int, m: int) -> bool: ...

    def cell_refuses(
        self, t: int, p: int, cp: int, d: int, ep: int, etp: int, zero: int, recompute: Recompute,
        recompute_layers: int | None, grad_dtype: str, shard_group: int | None, reshard: bool,
        pairs_hide_experts: bool,
    ) -> bool: ...  # fmt: skip


def reason_refuses(req: SearchRequest, reason: LauncherReason | None, cand: Candidate, seq: int) -> bool:
    """Whether the query's launcher refuses `cand`'s whole request (`brute_force`'s reference for the search's
    `LauncherFilter`)."""
    if not req.launcher or reason is None:
        return False
    return reason(req.launcher, cand.request(req, seq), cand.m) is not None


class Filters:
    """One query's filters and what they answered (`Query` adds its bounds)."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, req: SearchRequest) -> None:
        self.model, self.hw, self.req = model, hw, req
        self.seq = req.seq_len or model.seq_len
        self._cell_refusals: dict[tuple[object, ...], tuple[bool, ...]] = {}

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
        return self.layout_refused(c, launcher) or (
            c.p > 1
            and launcher is not None
            and bool(self.req.launcher)
            and launcher.m_refuses(c.family, c.p, c.m)
        )

    def layout_refused(self, c: Cut | Candidate, launcher: LauncherFilter | None) -> bool:
        """Whether the query's launcher refuses every configuration of `c`'s cut, whatever its micro-batch size
        (all but the launcher's rule on m, `LauncherFilter.m_refuses`)."""
        if not self.req.launcher or launcher is None:
            return False
        offload = c.offload if isinstance(c, Cut) else c.offload_modules
        return launcher.layout_refuses(
            c.family, c.t, c.p, c.cp, c.d, c.v, c.first_layers, c.last_layers, bool(offload), c.ep, c.etp,
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
        return confidence(
            self.model, self.hw, tp=t, pp=p, cp=cp, zero_stage=zero, seq_len=self.seq, gpus=self.req.gpus,
            schedule=schedule, stack=self.req.stack, tp_comm_overlap=self.req.tp_comm_overlap and t > 1,
            precision=precision, ep=ep,
        ).extrapolations  # fmt: skip
