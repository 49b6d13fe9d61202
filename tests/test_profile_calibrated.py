"""`efficiency.calibrated` follows the figures, never a copied flag: a hardware profile is calibrated only where its
GPU, node, link and efficiency figures are those its efficiencies were fitted with (`efficiency.fingerprint`,
`pplan.profiles.hardware_spec.calibration_fingerprint`). A copied or edited profile still loads, and explain, recommend and
`pplan profiles` then say it is not calibrated; its `[calibration]` error band, earned by other figures, is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pplan.bench.calibrate import Calibration, hardware_toml
from pplan.profiles.catalog import load_hardware, profile_source
from pplan.profiles.hardware_spec import HardwareSpec, calibration_fingerprint
from tests.cli_run import run_pplan

H100_TOML = profile_source("hardware", "h100-sxm-80gb")
FITTED = ("h100-sxm-80gb", "a100-sxm-80gb")
"""The bundled profiles fitted to public runs on their own figures (`pplan validate --fit`)."""
TAKEN = {
    "h200-sxm-141gb": "h100-sxm-80gb",
    "h800-sxm-80gb": "h100-sxm-80gb",
    "a100-sxm-40gb": "a100-sxm-80gb",
}
"""Profiles whose efficiencies are another's (`[efficiency] from`), on other figures: not fitted to runs of theirs."""


def _write(tmp_path: Path, text: str, name: str = "copy.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _h100_with(tmp_path: Path, old: str, new: str) -> str:
    assert H100_TOML.count(old) == 1, old
    return _write(tmp_path, H100_TOML.replace(old, new))


# --- the bundled profiles ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FITTED)
def test_the_fitted_profiles_stay_calibrated(name: str) -> None:
    hw = load_hardware(name)
    assert hw.efficiency.calibrated and hw.calibration is not None
    assert not hw.fitted_to_other_figures
    assert hw.efficiency.fingerprint == calibration_fingerprint(hw), (
        f"hardware/{name}.toml: its figures changed since the fit; after re-fitting (pplan validate --fit), write "
        f'efficiency.fingerprint = "{calibration_fingerprint(hw)}"'
    )


@pytest.mark.parametrize(("name", "source"), sorted(TAKEN.items()))
def test_figures_taken_from_another_gpu_are_not_calibrated(name: str, source: str) -> None:
    hw, fitted = load_hardware(name), load_hardware(source)
    assert not hw.efficiency.calibrated and hw.fitted_to_other_figures and hw.calibration is None
    # the figures themselves are the source's: only the status differs
    assert hw.efficiency == fitted.efficiency.model_copy(update={"calibrated": False})


@pytest.mark.parametrize("name", ["b200-180gb", "gb200-nvl72"])
def test_the_unfitted_profiles_stay_uncalibrated(name: str) -> None:
    hw = load_hardware(name)
    assert (
        not hw.efficiency.calibrated and hw.efficiency.fingerprint is None and not hw.fitted_to_other_figures
    )


# --- copies and edits ----------------------------------------------------------------------------------------


def test_a_copied_h100_with_other_hbm_bandwidth_loads_uncalibrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _h100_with(tmp_path, "hbm_bandwidth_gb_per_s = 3350.0", "hbm_bandwidth_gb_per_s = 3000.0")
    hw = load_hardware(path)
    assert hw.gpu.hbm_bandwidth_gb_per_s == 3000  # it loads, as written ...
    assert not hw.efficiency.calibrated and hw.fitted_to_other_figures  # ... but not as calibrated
    assert hw.calibration is None  # the H100's error band and envelope are not this profile's
    assert hw.efficiency.matmul == load_hardware("h100-sxm-80gb").efficiency.matmul

    args = ("explain", "--model", "llama3-70b", "--hardware", path, "--gpus", "64", "--global-batch", "64")
    text = run_pplan(capsys, *args)
    assert text.code == 0, text.err
    assert (
        re.search(r"confidence\s+NOT calibrated: h100-sxm-80gb", text.out)
        and "NOT calibrated for this plan" in text.out
    )
    doc = run_pplan(capsys, *args, "--json").json()
    assert doc["performance"]["calibrated"] is False
    assert "GPU" in [x["axis"] for x in doc["performance"]["extrapolation"]]
    bundled = run_pplan(capsys, *args[:4], "h100-sxm-80gb", *args[5:], "--json").json()
    assert bundled["performance"]["calibrated"] is True

    detail = run_pplan(capsys, "profiles", "hardware", path)
    assert re.search(r"calibration status \(derived\)\s+not calibrated", detail.out)


def test_recommend_states_the_copy_is_uncalibrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _h100_with(tmp_path, "hbm_bandwidth_gb_per_s = 3350.0", "hbm_bandwidth_gb_per_s = 3000.0")
    args = (
        "recommend",
        "--model",
        "llama3-8b",
        "--gpus",
        "64",
        "--global-batch",
        "512",
        "--format",
        "json",
        "--hardware",
    )
    copied = run_pplan(capsys, *args, path)
    assert copied.code == 0, copied.err
    assert re.findall(r'"calibrated": (true|false)', copied.out) and '"calibrated": true' not in copied.out
    bundled = run_pplan(capsys, *args, "h100-sxm-80gb")
    assert '"calibrated": true' in bundled.out and '"calibrated": false' not in bundled.out


def test_an_exact_copy_under_another_name_stays_calibrated(tmp_path: Path) -> None:
    path = _write(tmp_path, H100_TOML.replace('name = "h100-sxm-80gb"', 'name = "my-h100"'))
    hw = load_hardware(path)
    assert hw.name == "my-h100" and hw.efficiency.calibrated and hw.calibration is not None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("peak_bf16_tflops = 989.4", "peak_bf16_tflops = 1000.0"),
        ("sms = 132", "sms = 114"),  # the H100 PCIe's SMs
        ("gpus_per_node = 8", "gpus_per_node = 4"),
        ("bandwidth_gb_per_s = 450.0", "bandwidth_gb_per_s = 200.0"),  # NVLink
        (
            "bandwidth_gb_per_s = 50.0  # source: NDR",
            "bandwidth_gb_per_s = 25.0  # source: NDR",
        ),  # the network
        ("latency_us = 5.0", "latency_us = 8.0"),
        ("matmul = 0.613", "matmul = 0.7"),  # an efficiency edited by hand, the flag left as it was
        ("loss_hbm = 0.65", "loss_hbm = 0.7"),
    ],
)
def test_any_fingerprinted_figure_changed_leaves_the_profile_uncalibrated(
    tmp_path: Path, old: str, new: str
) -> None:
    hw = load_hardware(_h100_with(tmp_path, old, new))
    assert not hw.efficiency.calibrated and hw.fitted_to_other_figures


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("hbm_gib = 80.0", "hbm_gib = 96.0"),  # capacity sets what fits, not how fast
        ("context_gib = 0.75", "context_gib = 1.0"),
        ("gpu_watts = 700.0", "gpu_watts = 500.0"),
        ('description = "DGX H100 node, NVLink 4, NDR InfiniBand"', 'description = "ours"'),
    ],
)
def test_figures_no_step_time_depends_on_keep_the_calibration(tmp_path: Path, old: str, new: str) -> None:
    assert load_hardware(_h100_with(tmp_path, old, new)).efficiency.calibrated


def test_a_flag_without_a_matching_fit_is_not_calibrated(tmp_path: Path) -> None:
    b200 = profile_source("hardware", "b200-180gb")
    claimed = b200.replace("calibrated = false", "calibrated = true")
    assert not load_hardware(_write(tmp_path, claimed)).efficiency.calibrated  # no fingerprint at all
    h100_fingerprint = load_hardware("h100-sxm-80gb").efficiency.fingerprint
    borrowed = claimed.replace("calibrated = true", f'calibrated = true\nfingerprint = "{h100_fingerprint}"')
    hw = load_hardware(_write(tmp_path, borrowed))
    assert not hw.efficiency.calibrated and hw.fitted_to_other_figures  # another GPU's fingerprint
    forged = claimed.replace("calibrated = true", 'calibrated = true\nfingerprint = "0123456789abcdef"')
    assert not load_hardware(_write(tmp_path, forged)).efficiency.calibrated
    unflagged = H100_TOML.replace("calibrated = true", "calibrated = false")
    hw = load_hardware(_write(tmp_path, unflagged))
    assert not hw.efficiency.calibrated and hw.calibration is None  # a matching fit the profile disowns


def test_the_rule_holds_however_the_spec_is_built() -> None:
    h100 = load_hardware("h100-sxm-80gb")
    assert HardwareSpec.model_validate(h100.model_dump()).efficiency.calibrated
    moved = h100.model_dump()
    moved["gpu"]["hbm_bandwidth_gb_per_s"] = 3000.0
    assert not HardwareSpec.model_validate(moved).efficiency.calibrated
    probe = h100.with_efficiency(matmul=0.5)  # a sensitivity probe: the fit's fingerprint no longer matches
    assert not HardwareSpec.model_validate(probe.model_dump()).efficiency.calibrated


# --- a fit records its figures -------------------------------------------------------------------------------


def test_a_fit_stamps_the_fingerprint_of_the_figures_it_made(tmp_path: Path) -> None:
    b200 = load_hardware("b200-180gb")
    fitted = b200.with_efficiency(matmul=0.42, calibrated=True)
    assert fitted.efficiency.fingerprint == calibration_fingerprint(fitted) != calibration_fingerprint(b200)
    # `pplan bench --calibrate` writes it with the profile, which loads back calibrated
    cal = Calibration(hardware=fitted, matmul=0.42, measured_s=1.0, passes=24, note="a test fit")
    back = load_hardware(_write(tmp_path, hardware_toml(cal), "fitted.toml"))
    assert back.efficiency.calibrated and back.efficiency.matmul == 0.42
    assert back.efficiency.fingerprint == fitted.efficiency.fingerprint
