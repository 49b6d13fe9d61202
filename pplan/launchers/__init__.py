"""Launcher output: one validated `Plan` as Megatron-LM arguments or a torchtitan job config.

The package owns what pplan writes for a job launcher. `capabilities` declares what each launcher runs and which
arguments write it (one `LauncherCapabilities` per launcher, named in `names`); `support` applies those
declarations (the refusals and their texts, and the search's `SearchFilter`); `megatron` writes Megatron-LM's
`pretrain_gpt.py` arguments with the notes they cannot carry, and `megatron_validate` checks such arguments
against Megatron-LM's own option table (`megatron_lm_options.json`, shipped as package data) and `validate_args`
rules; `torchtitan` writes torchtitan 0.3.x arguments (`--module`/`--config` and overrides) or, for
`torchtitan@0.2`, a 0.2.x job-config TOML, for the models `torchtitan_models` lists. `launcher_text` here is
the one dispatch the CLI's `--format megatron|torchtitan|torchtitan@0.2` prints. Everything is pure (no I/O)
but `megatron_validate`'s one read of its bundled table.
"""

from __future__ import annotations

from pplan.launchers.capabilities import capabilities_of
from pplan.launchers.megatron import megatron_text
from pplan.launchers.support import check_supported
from pplan.launchers.torchtitan import torchtitan_text
from pplan.plan.configuration import Plan
from pplan.profiles.specs import ModelSpec


def launcher_text(launcher: str, model: ModelSpec, plan: Plan) -> str:
    """What `--format LAUNCHER` prints: Megatron's flags, torchtitan 0.3.x's arguments, or the 0.2.x TOML.

    Raises ConfigError naming `--launcher` when the launcher cannot run the plan or build the model.
    """
    check_supported(launcher, plan, model)
    if capabilities_of(launcher).release is None:  # not a torchtitan release: Megatron-LM's arguments
        return megatron_text(model, plan)
    return torchtitan_text(launcher, model, plan)
