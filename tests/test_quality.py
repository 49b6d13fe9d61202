"""ruff and mypy (strict) stay clean: run as part of the README's test command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.skipif(shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists(),
                    reason="ruff not installed (it is in the test extra)")  # fmt: skip
def test_ruff_clean() -> None:
    res = _run("ruff", "check", "pplan", "tests", "benchmarks")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_clean() -> None:
    pytest.importorskip("mypy")
    res = _run("mypy")
    assert res.returncode == 0, res.stdout + res.stderr
