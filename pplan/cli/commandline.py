"""The command lines pplan prints for a plan: `explain_command`, the `pplan explain` line that shows one in full
(recommend's table and document, size's points), spelled from the settings' declarations (pplan.plan.settings)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pplan.plan.settings import SETTINGS

if TYPE_CHECKING:
    from pplan.plan.configuration import PlanRequest


def explain_command(model: str, hardware: str, req: PlanRequest) -> str:
    """The `pplan explain` command line that shows `req` in full: each setting its declaration prints (always, or
    where it differs from its default), in the declared order."""
    args = ["pplan explain", f"--model {model}", f"--hardware {hardware}"]
    args += [s.spelled(getattr(req, s.name)) for s in SETTINGS if s.is_printed(req)]
    return " ".join(args)
