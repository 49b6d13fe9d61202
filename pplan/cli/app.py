"""The typer application object, the consoles and the option choices every command shares."""

from __future__ import annotations

from enum import StrEnum

import typer
from rich.console import Console

app = typer.Typer(
    name="pplan",
    help="Plan how to cut a transformer across GPUs: tensor, pipeline and data parallelism, schedules, memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

console = Console()
err_console = Console(stderr=True)


class Launcher(StrEnum):
    """Job launchers pplan writes settings for (`--format` and `--launcher`)."""

    megatron = "megatron"
    torchtitan = "torchtitan"
