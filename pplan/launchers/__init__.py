"""Launcher output: one validated `Plan` as Megatron-LM arguments, Megatron-Bridge overrides or a torchtitan config.

The package owns what pplan writes for a job launcher. `names` holds the launcher names (the choices of
`--launcher` and `--format`, importing only `typing`); `capabilities` declares what each launcher runs and which
arguments write it (one `LauncherCapabilities` per launcher); `support` applies those declarations (the refusals
and their texts, and the search's `SearchFilter`); `megatron` writes Megatron-LM's `pretrain_gpt.py` arguments with
the notes they cannot carry, and `megatron_validate` checks such arguments against Megatron-LM's own option table
(`megatron_lm_options.json`, shipped as package data) and `validate_args` rules; `torchtitan` writes torchtitan
0.3.x arguments (`--module`/`--config` and overrides) or, for `torchtitan@0.2`, a 0.2.x job-config TOML, for the
models `torchtitan_models` lists; `megatron_bridge` writes Megatron-Bridge recipe overrides. `launcher_text` here
is the one dispatch the CLI's `--format megatron|torchtitan|torchtitan@0.2|megatron-bridge` prints. Everything is
pure (no I/O) but `megatron_validate`'s one read of its bundled table.

Importing the package loads only `names`: the command line offers the launcher names without the core, and the
other modules load when first used (`pplan.launchers.support`, or `launchers.support` as an attribute).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pplan.launchers.names import LAUNCHERS, Launcher

if TYPE_CHECKING:
    from types import ModuleType

    from pplan.launchers import capabilities as capabilities
    from pplan.launchers import megatron as megatron
    from pplan.launchers import megatron_bridge as megatron_bridge
    from pplan.launchers import megatron_validate as megatron_validate
    from pplan.launchers import support as support
    from pplan.launchers import torchtitan as torchtitan
    from pplan.launchers import torchtitan_models as torchtitan_models
    from pplan.plan.records import Plan
    from pplan.profiles.model_spec import ModelSpec

__all__ = ["LAUNCHERS", "Launcher", "launcher_text"]

_SUBMODULES = frozenset(
    {
        "capabilities",
        "megatron",
        "megatron_bridge",
        "megatron_validate",
        "support",
        "torchtitan",
        "torchtitan_models",
    }
)


def __getattr__(name: str) -> ModuleType:
    """The package's modules as attributes (`launchers.support`), imported when first asked for."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def launcher_text(launcher: str, model: ModelSpec, plan: Plan) -> str:
    """What `--format LAUNCHER` prints: Megatron's flags, torchtitan 0.3.x's arguments, or the 0.2.x TOML.

    Raises ConfigError naming `--launcher` when the launcher cannot run the plan or build the model.
    """
    from pplan.launchers.capabilities import MEGATRON_BRIDGE, capabilities_of
    from pplan.launchers.megatron import megatron_text
    from pplan.launchers.megatron_bridge import bridge_text
    from pplan.launchers.support import check_supported
    from pplan.launchers.torchtitan import torchtitan_text

    check_supported(launcher, plan, model)
    if capabilities_of(launcher) is MEGATRON_BRIDGE:  # recipe overrides, not flags
        return bridge_text(model, plan)
    if capabilities_of(launcher).release is None:  # not a torchtitan release: Megatron-LM's arguments
        return megatron_text(model, plan)
    return torchtitan_text(launcher, model, plan)
