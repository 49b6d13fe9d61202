"""`pplan COMMAND --help` loads the command line and the choices of its options, never the core: no cost model,
search, documents, renderers, profile loaders or launchers, and no torch or numpy. Each command's help is run in a
fresh interpreter and the modules it imported are compared with what the command line may load. (pydantic is
loaded all the same: typer 0.2x adapts every parameter's type through it.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pplan.cli import COMMAND_MODULES

LIGHT = (
    "pplan",
    "pplan.cli",
    "pplan.errors",
    "pplan.collector",
    "pplan.sizing",
    "pplan.sizing.costs",
    "pplan.sizing.goodput",
    "pplan.sizing.policy",
    "pplan.plan",
    "pplan.plan.knobs",
    "pplan.plan.settings",
    "pplan.profiles",
    "pplan.profiles.stacks",
    "pplan.profiles.kinds",
    "pplan.model",
    "pplan.model.precision",
    "pplan.bench",
    "pplan.bench.choices",
    "pplan.launchers",
    "pplan.launchers.names",
    "pplan.profiles.releases",
    "pplan.documents",
    "pplan.documents.names",
)
"""What `--help` may import of pplan: the command line's own package, the errors, and the modules that hold the
options' choices (each imports only `typing`, but the releases' table, whose knob names say which flags take `--no-`
and which reads its data only when a release is asked for; the document names `schema --help` lists)."""

LIGHT_PACKAGES = ("pplan.cli.", "pplan.schedules")
"""Packages `--help` may import whole: the command line, and the schedule registry (pure Python, no pydantic:
the schedule names are its data)."""

PROBE = """
import json, sys
sys.argv = ["pplan", *sys.argv[1:]]
from pplan.cli import main
try:
    main()
except SystemExit:
    pass
sys.stdout.flush()
print("\\n" + json.dumps(sorted(sys.modules)))
"""


def _help_modules(command: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, command, "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    modules: list[str] = json.loads(out.rstrip().rsplit("\n", 1)[1])
    return modules


@pytest.mark.parametrize("command", sorted(COMMAND_MODULES))
def test_help_imports_no_core(command: str) -> None:
    modules = _help_modules(command)
    heavy = [
        m
        for m in modules
        if (m.startswith("pplan") and m not in LIGHT and not m.startswith(LIGHT_PACKAGES))
        or m.split(".")[0] in ("torch", "numpy")
    ]
    assert not heavy, f"`pplan {command} --help` imports {heavy}"


def test_probe_sees_a_command_run_import_the_core() -> None:
    """The probe can fail: running a command (not its help) imports the core."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "profiles", "models"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    modules = json.loads(out.rstrip().rsplit("\n", 1)[1])
    assert "pplan.profiles.model_spec" in modules
