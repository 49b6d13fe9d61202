"""Every launcher's arguments for one plan as data: what each JSON candidate of `pplan recommend` carries
(`LauncherArguments`), the same arguments `--format megatron|torchtitan` prints, or why that launcher cannot run
the plan as planned."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pplan.documents.recommend import LauncherArguments, LauncherRun
from pplan.errors import PplanError

if TYPE_CHECKING:
    from pplan.plan.records import PlanRequest
    from pplan.profiles.model_spec import ModelSpec


def launcher_arguments(model: ModelSpec, request: PlanRequest) -> LauncherArguments:
    """Megatron-LM's `pretrain_gpt.py` arguments and torchtitan 0.3.x's (`-m torchtitan.train`) for `request`'s
    plan, each with the environment it needs, or the one-line reason the launcher refuses it."""
    from pplan.launchers.megatron import megatron_args, megatron_env
    from pplan.launchers.support import check_supported
    from pplan.launchers.torchtitan import torchtitan_args
    from pplan.plan.configuration import make_plan

    plan = make_plan(model, request)

    def run(launcher: str) -> LauncherRun:
        try:
            check_supported(launcher, plan, model)
            if launcher == "megatron":
                return LauncherRun(arguments=megatron_args(model, plan), environment=megatron_env(plan))
            return LauncherRun(arguments=torchtitan_args(model, plan), environment={})
        except PplanError as err:
            return LauncherRun(arguments=None, environment={}, refused=err.one_line())

    return LauncherArguments(megatron=run("megatron"), torchtitan=run("torchtitan"))
