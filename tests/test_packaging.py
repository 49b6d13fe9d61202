"""Bundled profiles are found from a source checkout and from an installed wheel.

The wheel test builds the wheel from this checkout and installs it into a fresh venv of its own, whatever way
the test interpreter has pplan (editable, from a wheel, or not at all): the venv does not see the interpreter's
site-packages while pip installs, and afterwards only as plain paths behind its own (no .pth file of theirs
runs, so an editable install's import hook cannot shadow the wheel).
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

import pplan
from pplan.profiles.catalog import bundled_dir, list_profiles, load_hardware, load_model

REPO = Path(__file__).resolve().parents[1]


def _running_from_source() -> bool:
    return Path(pplan.__file__).resolve().is_relative_to(REPO / "pplan")


@pytest.mark.skipif(not _running_from_source(), reason="pplan is imported from an installed wheel")
def test_source_checkout_reads_the_repository_profile_folders() -> None:
    assert bundled_dir("hardware") == REPO / "hardware"
    assert bundled_dir("models") == REPO / "models"
    assert {entry.path.parent for entry in list_profiles("hardware")} == {REPO / "hardware"}
    assert {entry.path.parent for entry in list_profiles("models")} == {REPO / "models"}
    assert load_hardware("h100-sxm-80gb").gpu.peak_bf16_tflops == 989.4
    assert load_model("llama3-70b").num_layers == 80


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def _interpreter_site_dirs() -> list[str]:
    """The test interpreter's site-packages folders (a venv's own and, with system site-packages, its base's)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if Path(d).is_dir()]


@pytest.mark.acceptance  # builds a wheel and a venv: seconds
def test_wheel_ships_the_profiles_and_reads_them_when_installed(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(REPO)], tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("pplan-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "pplan/profiles/hardware/h100-sxm-80gb.toml" in names
    assert "pplan/profiles/models/llama3-70b.toml" in names
    assert {"pplan/validation/published_runs.json", "pplan/validation/published_memory.json"} <= names

    # A venv without the system's site-packages and without pip: this interpreter's pip installs into it, and
    # sees only what is in it, so an installed pplan elsewhere can neither satisfy nor shadow the wheel.
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site_dir = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path
        ).stdout.strip()
    )
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index"]
    installed = _run([*install, "--ignore-installed", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (site_dir / "pplan" / "__init__.py").is_file(), installed.stdout
    # pplan's dependencies (pydantic, typer, rich) come from this interpreter: its site-packages listed after the
    # venv's own. A plain path line in a .pth file only extends sys.path (the .pth files inside that folder, such
    # as an editable pplan's, are not processed), and the venv's own pplan comes first.
    (site_dir / "zz_test_interpreter_packages.pth").write_text("\n".join(_interpreter_site_dirs()) + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    probe = textwrap.dedent(
        """
        import pplan
        from pplan.profiles.catalog import load_hardware, list_profiles
        spec = load_hardware("h100-sxm-80gb")
        print(pplan.__file__)
        print(spec.gpu.peak_bf16_tflops)
        print([e.path for e in list_profiles("hardware") if e.name == "h100-sxm-80gb"][0])
        """
    )
    ran = _run([str(python), "-c", probe], outside)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    package_file, peak, profile_path = ran.stdout.split("\n")[:3]
    assert Path(package_file).resolve().is_relative_to(site_dir.resolve()), package_file
    assert float(peak) == 989.4  # NVIDIA H100 SXM5 datasheet, dense BF16
    assert Path(profile_path).resolve().is_relative_to(site_dir.resolve()), profile_path
    assert Path(profile_path).name == "h100-sxm-80gb.toml"
