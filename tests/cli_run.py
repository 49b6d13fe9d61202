"""Run the pplan CLI in-process, as a user would from a shell: exit code, stdout and stderr."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from pplan.cli import main


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_pplan(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)
