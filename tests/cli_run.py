"""Run the pplan CLI in-process, as a user would from a shell: exit code, stdout and stderr."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
import typer
import typer.main

from pplan.cli import main, register

register()  # every command, so the one build `_built_once` shares has them all

_build_command = typer.main.get_command
_COMMANDS: dict[int, tuple[typer.Typer, Any]] = {}


def _built_once(app: typer.Typer) -> Any:
    """typer builds the click command from the app (every command's signature and type hints) on each call, about
    15 ms: a third of a typical in-process run. The commands are the same for the whole session, so the runs here
    share one build; a shell (and `test_python_dash_m_runs`) builds it as usual."""
    key = id(app)
    if key not in _COMMANDS:
        _COMMANDS[key] = (app, _build_command(app))
    return _COMMANDS[key][1]


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_pplan(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    code = 0
    with mock.patch.object(typer.main, "get_command", _built_once):
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def assert_shown_in_order(shown: str, printed_text: str) -> None:
    """Every line of a documented output excerpt (trailing spaces aside; "..." lines mark cuts) appears, in order,
    in what was printed."""
    printed = [line.rstrip() for line in printed_text.splitlines()]
    at = 0
    for line in (x.rstrip() for x in shown.splitlines()):
        if line == "...":
            continue
        assert line in printed[at:], line
        at = printed.index(line, at) + 1
