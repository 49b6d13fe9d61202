"""ruff and mypy (strict) stay clean over pplan, tests and benchmarks: the acceptance tier, run by the README's
test command (`--all-tiers`). `python -m mypy` with no arguments checks what pyproject.toml's [tool.mypy] lists."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.skipif(shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists(),
                    reason="ruff not installed (it is in the test extra)")  # fmt: skip
def test_ruff_clean() -> None:
    res = _run("ruff", "check", "pplan", "tests", "benchmarks", "scripts")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_clean() -> None:
    pytest.importorskip("mypy")
    res = _run("mypy")
    assert res.returncode == 0, res.stdout + res.stderr
    # the configured files are the package, the tests, the benchmarks and the scripts: every one of their modules
    modules = sum(
        1 for folder in ("pplan", "tests", "benchmarks", "scripts") for _ in (ROOT / folder).rglob("*.py")
    )
    assert f"in {modules} source files" in res.stdout, res.stdout
