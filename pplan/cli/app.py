"""The typer application object, the consoles, and JSON output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import typer
import typer.core
from rich.console import Console
from typer.models import CommandFunctionType


class PanelledCommand(typer.core.TyperCommand):
    """Help as plain text that never cuts an option's name at any width: click's layout (each name in full, its
    help wrapped beside it or below it) with the options grouped in their panels (`rich_help_panel`: plan axes,
    search, memory knobs, output, ...), panels in the order their first option is declared."""

    def format_options(self, ctx: Any, formatter: Any) -> None:  # typer's own click types
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        for name, rows in panels.items():
            with formatter.section(name):
                formatter.write_dl(rows)


class _Typer(typer.Typer):
    """Every command gets `PanelledCommand`'s help unless it names its own class."""

    def command(
        self, *args: Any, cls: type[typer.core.TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(*args, cls=cls or PanelledCommand, **kwargs)


app = _Typer(
    name="pplan",
    help="Plan how to cut a transformer across GPUs: tensor, pipeline and data parallelism, schedules, memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
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
