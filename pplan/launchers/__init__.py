"""Launcher output: one validated `Plan` as Megatron-LM arguments or a torchtitan job config.

The package owns what pplan writes for a job launcher. `support` decides which launcher runs which schedule
and plan (the names in `LAUNCHERS`, the refusals and their texts); `megatron` writes Megatron-LM's
`pretrain_gpt.py` arguments with the notes they cannot carry; `torchtitan` writes a torchtitan v0.2.x job-config
TOML and the same fields as command-line overrides. `launcher_text` here is the one dispatch the CLI's
`--format megatron|torchtitan` prints. Everything is pure (no I/O).
"""

from __future__ import annotations

from pplan.launchers.megatron import megatron_text
from pplan.launchers.support import check_supported, launcher_name
from pplan.launchers.torchtitan import torchtitan_overrides, torchtitan_toml
from pplan.plan.configuration import Plan
from pplan.profiles.specs import ModelSpec


def launcher_text(launcher: str, model: ModelSpec, plan: Plan) -> str:
    """What `--format megatron|torchtitan` prints: the flags, or the TOML followed by its overrides as a comment.

    Raises ConfigError naming `--launcher` when the launcher cannot run the plan.
    """
    check_supported(launcher, plan)
    if launcher_name(launcher) == "megatron":
        return megatron_text(model, plan)
    return (
        torchtitan_toml(model, plan).rstrip("\n")
        + "\n\n# the same as command-line overrides:\n# "
        + torchtitan_overrides(model, plan)
    )
