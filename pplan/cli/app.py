"""The typer application object and the consoles every command shares."""

from __future__ import annotations

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
