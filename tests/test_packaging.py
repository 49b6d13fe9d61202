"""Bundled profiles are found from a source checkout and from an installed wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
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


def test_wheel_ships_the_profiles_and_reads_them_when_installed(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(REPO)], tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("pplan-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "pplan/profiles/hardware/h100-sxm-80gb.toml" in names
    assert "pplan/profiles/models/llama3-70b.toml" in names

    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path
        ).stdout.strip()
    )
    # The test interpreter may itself be a venv, whose packages (pydantic, typer, rich) are out of reach of
    # `--system-site-packages`: list its site-packages after the new venv's own. A plain path line in a .pth
    # file only extends sys.path (the .pth files inside it, such as an editable pplan's, are not processed).
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_test_interpreter_packages.pth").write_text("\n".join(sorted(here)) + "\n")
    installed = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr

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
    assert Path(package_file).resolve().is_relative_to(site.resolve())
    assert float(peak) == 989.4  # NVIDIA H100 SXM5 datasheet, dense BF16
    assert Path(profile_path).resolve().is_relative_to(site.resolve())
    assert Path(profile_path).name == "h100-sxm-80gb.toml"
