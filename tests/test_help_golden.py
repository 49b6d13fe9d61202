"""The `--help` text of the commands whose options are built from the settings declaration (`explain`,
`recommend`, `size`), pinned byte for byte under `tests/golden/help-COMMAND.txt`: a refactor of how options are
declared must not change what a user reads. Run in a fresh interpreter at a fixed width, without colour.

    PPLAN_UPDATE_GOLDEN=1 python -m pytest tests/test_help_golden.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("PPLAN_UPDATE_GOLDEN") == "1"
COMMANDS = ("explain", "recommend", "size")


def _help(command: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "TERM", "COLUMNS", "LINES"}}
    env |= {
        "COLUMNS": "120",
        "LINES": "50",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "_TYPER_FORCE_DISABLE_TERMINAL": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pplan", command, "--help"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_text_is_unchanged(command: str) -> None:
    path = GOLDEN / f"help-{command}.txt"
    text = _help(command)
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert "--help" in text and len(text.splitlines()) > 20
    assert text == path.read_text(encoding="utf-8"), (
        f"`pplan {command} --help` changed; read the diff, then update"
    )
