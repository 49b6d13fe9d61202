"""The launchers pplan writes settings for, by name: the choices of `--launcher` and `--format`.

Only `typing` is imported, so the command line can offer the names without loading the core; what each launcher
runs is its declaration's (`pplan.launchers.capabilities`, which checks it declares exactly these names).
"""

from __future__ import annotations

from typing import Literal, get_args

Launcher = Literal["megatron", "torchtitan", "torchtitan@0.2", "megatron-bridge"]
"""The job launchers pplan writes settings for (`--format`, `--launcher`)."""
LAUNCHERS: tuple[Launcher, ...] = get_args(Launcher)
