"""The typer application object, the consoles, and JSON output."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(
    name="pplan",
    help="Plan how to cut a transformer across GPUs: tensor, pipeline and data parallelism, schedules, memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _commands() -> None:
    """The group of commands (a callback keeps `pplan COMMAND` a group when only that command is registered:
    pplan.cli.register)."""


console = Console()
err_console = Console(stderr=True)


def json_text(doc: Any, ensure_ascii: bool = True) -> str:
    """`doc` as strict JSON (RFC 8259): NaN and infinities are refused here rather than written as the `NaN` /
    `Infinity` tokens that JavaScript's JSON.parse and most launchers reject."""
    return json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=ensure_ascii)
