"""Hardware figures must be physically plausible: a value in the wrong unit is refused in one line naming the field,
the value with its unit, the plausible range and, where it is 1,000× (1,024×, or 8× for bits) off, the likely unit
and the value to write (`pplan.profiles.plausible.PLAUSIBLE`). Every bundled profile passes, and so would GPUs a few
generations on. Also here: `pplan profiles` shows memory in GB (10^9 bytes), as every other command does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pplan.errors import ProfileError
from pplan.profiles.catalog import list_profiles, load_hardware, profile_source
from pplan.profiles.fields import GB
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.plausible import PLAUSIBLE, implausible_figures
from tests.cli_run import run_pplan

H100_TOML = profile_source("hardware", "h100-sxm-80gb")
H100 = load_hardware("h100-sxm-80gb")
BUNDLED = [entry.name for entry in list_profiles("hardware")]


def _with(tmp_path: Path, dotted: str, value: str, source: str = H100_TOML) -> str:
    """A copy of a bundled profile's TOML (the H100's by default) with the one value of `dotted` (`gpu.sms`) changed,
    written to `tmp_path`; its path."""
    section, key = dotted.split(".")
    start = source.index(f"\n[{section}]\n")
    end = source.find("\n[", start + 1)
    end = len(source) if end < 0 else end
    body, count = re.subn(rf"(?m)^{key} = [^#\n]+", f"{key} = {value} ", source[start:end], count=1)
    assert count == 1, dotted
    path = tmp_path / "my.toml"
    path.write_text(source[:start] + body + source[end:], encoding="utf-8")
    return str(path)


def _refusal(path: str) -> str:
    with pytest.raises(ProfileError) as info:
        load_hardware(path)
    text = str(info.value)
    assert "\n" not in text and text == info.value.one_line()
    return text


# --- the cases, through the CLI ----------------------------------------------------------------------


def test_hbm_bandwidth_in_tb_per_s_is_refused_in_one_line_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The case: 4.8 (TB/s written in GB/s) gave a 366 s step at 22 TFLOP/s per GPU, marked calibrated.
    path = _with(tmp_path, "gpu.hbm_bandwidth_gb_per_s", "4.8")
    line = (
        f"pplan: error: {path}: gpu.hbm_bandwidth_gb_per_s: 4.8 GB/s is below any GPU's memory bandwidth "
        "(100–100,000 GB/s); a value in TB/s? write 4800"
    )
    for args in (
        ("explain", "--model", "llama3-70b", "--hardware", path, "--gpus", "64", "--global-batch", "64"),
        ("recommend", "--model", "llama3-8b", "--hardware", path, "--gpus", "8", "--global-batch", "8"),
        ("profiles", "hardware", path),
    ):
        res = run_pplan(capsys, *args)
        assert res.code == 2 and res.out == ""
        assert res.err.splitlines() == [line], res.err


def test_network_bandwidth_in_gbit_per_s_is_refused_naming_the_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # NDR's 400 Gb/s written as GB/s: 8× the 50 GB/s per direction.
    path = _with(tmp_path, "inter_node.bandwidth_gb_per_s", "400.0")
    res = run_pplan(capsys, "explain", "--model", "llama3-8b", "--hardware", path, "--gpus", "8")
    assert res.code == 2
    assert res.err.splitlines() == [
        f"pplan: error: {path}: inter_node.bandwidth_gb_per_s: 400 GB/s is above any network link per GPU "
        "(1–300 GB/s); a value in Gb/s? write 50"
    ]


def test_a_link_at_the_gbit_figure_of_its_own_name_is_refused_even_in_range(tmp_path: Path) -> None:
    # HDR's 200 Gb/s written as 200: inside the range (a 1.6 Tb/s NIC is 200 GB/s), but the name says bits.
    a100 = profile_source("hardware", "a100-sxm-80gb")
    text = _refusal(_with(tmp_path, "inter_node.bandwidth_gb_per_s", "200.0", source=a100))
    assert text.endswith(
        "inter_node.bandwidth_gb_per_s: 200 GB/s is the 200 Gb/s of the link's name ('InfiniBand HDR 200 Gb/s') in "
        "bits, not bytes; a value in Gb/s? write 25"
    )


@pytest.mark.parametrize(
    ("dotted", "value", "shown", "unit", "write"),
    [
        ("gpu.peak_bf16_tflops", "2.5", "2.5 TFLOP/s", "PFLOP/s", "2500"),
        ("gpu.peak_bf16_tflops", "989400.0", "989,400 TFLOP/s", "GFLOP/s", "989.4"),
        ("gpu.peak_fp8_tflops", "1.9789", "1.9789 TFLOP/s", "PFLOP/s", "1978.9"),
        ("gpu.hbm_gib", "81920.0", "81,920 GiB", "MiB", "80"),
        ("gpu.hbm_bandwidth_gb_per_s", "3350000.0", "3,350,000 GB/s", "MB/s", "3350"),
        ("memory.context_gib", "64.0", "64 GiB", "MiB", "0.0625"),
        ("memory.nccl_per_communicator_mib", "0.287109375", "0.287109 MiB", "GiB", "294"),
        ("memory.nccl_per_communicator_mib", "301056.0", "301,056 MiB", "KiB", "294"),
        ("intra_node.bandwidth_gb_per_s", "0.45", "0.45 GB/s", "TB/s", "450"),
        ("intra_node.latency_us", "3000.0", "3,000 µs", "ns", "3"),
        ("inter_node.latency_us", "0.005", "0.005 µs", "ms", "5"),
        ("inter_node.latency_us", "5e-6", "5e-06 µs", "s", "5"),
        ("host_link.bandwidth_gb_per_s", "64000.0", "64,000 GB/s", "MB/s", "64"),
        ("efficiency.kernel_overhead_us", "4000.0", "4,000 µs", "ns", "4"),
        ("efficiency.attention_cudnn_fixed_us", "41400.0", "41,400 µs", "ns", "41.4"),
        ("power.gpu_watts", "0.7", "0.7 W", "kW", "700"),
        ("power.node_overhead_watts", "4.6", "4.6 W", "kW", "4600"),
    ],
)
def test_a_unit_slip_names_the_unit_and_the_value_to_write(
    tmp_path: Path, dotted: str, value: str, shown: str, unit: str, write: str
) -> None:
    path = _with(tmp_path, dotted, value)
    text = _refusal(path)
    bound = PLAUSIBLE[dotted]
    assert text.startswith(f"{path}: {dotted}: {shown} is ")
    assert f"{bound.what} (" in text and f" {bound.unit})" in text
    assert text.endswith(f"; a value in {unit}? write {write}")


def test_an_implausible_value_with_no_likely_unit_gives_the_range(tmp_path: Path) -> None:
    # 60,000 SMs: a count, no unit to blame.
    text = _refusal(_with(tmp_path, "gpu.sms", "60000"))
    assert text.endswith(
        "gpu.sms: 60,000 SMs is above any GPU's streaming multiprocessor count (4–4,096 SMs); give a number from 4 "
        "to 4,096 SMs"
    )
    # 0.05 GB/s of HBM is no known unit's figure either (50 GB/s, 50 kB/s)
    text = _refusal(_with(tmp_path, "gpu.hbm_bandwidth_gb_per_s", "0.05"))
    assert text.endswith("(100–100,000 GB/s); give a number from 100 to 100,000 GB/s")
    # a latency that may be 0 says so
    assert _refusal(_with(tmp_path, "intra_node.latency_us", "1e-8")).endswith(
        "1e-08 µs is below any link's latency (0, or 0.1–1,000 µs); give a number from 0.1 to 1,000 µs (or 0)"
    )


def test_a_reserve_in_mib_that_leaves_no_hbm_names_the_unit_too(tmp_path: Path) -> None:
    # 768 MiB of context written as GiB: larger than the HBM, which is said first, with the likely unit.
    path = _with(tmp_path, "memory.context_gib", "768.0")
    assert _refusal(path) == (
        f"{path}: memory.context_gib: the context and label gap (768.85 GiB) leave no usable HBM of gpu.hbm_gib = 80; "
        "make memory.context_gib + memory.label_gap_gib less than gpu.hbm_gib (memory.context_gib: a value in MiB? "
        "write 0.75)"
    )
    path = _with(tmp_path, "memory.label_gap_gib", "870.4")
    assert _refusal(path).endswith("(memory.label_gap_gib: a value in MiB? write 0.85)")


def test_every_implausible_figure_is_named_on_the_one_line(tmp_path: Path) -> None:
    first = Path(_with(tmp_path, "gpu.hbm_bandwidth_gb_per_s", "4.8")).read_text(encoding="utf-8")
    path = _with(tmp_path, "power.gpu_watts", "0.7", source=first)
    text = _refusal(path)
    assert text.startswith(f"{path}: gpu.hbm_bandwidth_gb_per_s: 4.8 GB/s is below")
    assert "(also implausible: power.gpu_watts); a value in TB/s? write 4800" in text


def test_the_hard_limits_still_come_first(tmp_path: Path) -> None:
    """A figure outside what the arithmetic takes keeps its own message; the plausibility check runs on what passes
    it, after the usable-memory rule."""
    assert "from 0.001 to 10^7 TFLOP/s" in _refusal(_with(tmp_path, "gpu.peak_bf16_tflops", "1e-300"))
    text = _refusal(_with(tmp_path, "memory.context_gib", "105.0"))
    assert "memory.context_gib: " in text and "no usable HBM" in text


# --- the bounds --------------------------------------------------------------------------------------------


def _field_of(dotted: str) -> Any:
    """The pydantic field a `PLAUSIBLE` key names (a typo would make its bound check nothing)."""
    model: type[BaseModel] = HardwareSpec
    *sections, name = dotted.split(".")
    for section in sections:
        annotation = model.model_fields[section].annotation
        members = (annotation, *getattr(annotation, "__args__", ()))
        model = next(m for m in members if isinstance(m, type) and issubclass(m, BaseModel))
    return model.model_fields[name]


@pytest.mark.parametrize("dotted", sorted(PLAUSIBLE))
def test_every_bound_names_a_field_and_suggests_real_units(dotted: str) -> None:
    bound = PLAUSIBLE[dotted]
    assert _field_of(dotted) is not None
    assert 0 <= bound.low < bound.high and bound.unit and bound.what
    for slip in bound.slips:
        assert slip.factor > 0 and slip.factor != 1 and slip.unit != bound.unit


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_profile_is_plausible(name: str) -> None:
    assert implausible_figures(load_hardware(name)) == []


@pytest.mark.parametrize("name", ["b200-180gb", "gb200-nvl72"])
def test_gpus_three_times_a_blackwell_would_pass(name: str) -> None:
    data = load_hardware(name).model_dump()
    for dotted in (
        "gpu.peak_bf16_tflops",
        "gpu.peak_fp8_tflops",
        "gpu.hbm_gib",
        "gpu.hbm_bandwidth_gb_per_s",
        "intra_node.bandwidth_gb_per_s",
        "inter_node.bandwidth_gb_per_s",
        "host_link.bandwidth_gb_per_s",
    ):
        section, key = dotted.split(".")
        data[section][key] *= 3
    if data.get("power"):
        data["power"]["gpu_watts"] *= 3
    future = HardwareSpec.model_validate(data)
    assert implausible_figures(future) == []


def _set(data: dict[str, Any], dotted: str, value: object) -> None:
    section, key = dotted.split(".")
    data[section] = {**data[section], key: value}


def _loads(dotted: str, value: float) -> bool:
    """Whether the H100 profile with `value` for `dotted` validates (from a dict, as a file is)."""
    data = H100.model_dump()
    _set(data, dotted, value)
    try:
        HardwareSpec.model_validate(data)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("dotted", sorted(PLAUSIBLE))
def test_the_bounds_are_inclusive_and_the_next_value_is_refused(dotted: str) -> None:
    bound = PLAUSIBLE[dotted]
    integer = dotted == "gpu.sms"
    step = 1 if integer else None
    low = int(bound.low) if integer else bound.low
    high = int(bound.high) if integer else bound.high
    assert _loads(dotted, low) and _loads(dotted, high)  # inside the hard limits, and plausible
    assert not _loads(dotted, high + step if step else high * (1 + 1e-9))
    above = high + step if step else high * (1 + 1e-9)
    problem = bound.problem(dotted, above)
    assert problem is not None and problem.field == dotted and " is above " in problem.message
    if bound.low > 0:
        below = low - step if step else low * (1 - 1e-9)
        problem = bound.problem(dotted, below)
        assert problem is not None and " is below " in problem.message
    assert (bound.problem(dotted, 0) is None) == (bound.zero or bound.low == 0)


def test_hbm_written_in_tb_is_read_as_the_label() -> None:
    # (through a file, 0.08 GiB would first leave no usable HBM past the context and label gap)
    problem = PLAUSIBLE["gpu.hbm_gib"].problem("gpu.hbm_gib", 0.141)
    assert problem is not None and problem.fix == "a value in TB? write 141"


def test_boundary_values_through_a_file(tmp_path: Path) -> None:
    assert (
        load_hardware(_with(tmp_path, "gpu.hbm_bandwidth_gb_per_s", "100.0")).gpu.hbm_bandwidth_gb_per_s
        == 100
    )
    assert "is below" in _refusal(_with(tmp_path, "gpu.hbm_bandwidth_gb_per_s", "99.9"))
    assert (
        load_hardware(_with(tmp_path, "inter_node.bandwidth_gb_per_s", "300.0")).inter_node.bandwidth_gb_per_s
        == 300
    )
    assert "is above" in _refusal(_with(tmp_path, "inter_node.bandwidth_gb_per_s", "300.5"))
    assert load_hardware(_with(tmp_path, "inter_node.latency_us", "0.0")).inter_node.latency_us == 0
    assert load_hardware(_with(tmp_path, "gpu.peak_bf16_tflops", "10.0")).gpu.peak_bf16_tflops == 10
    assert "a value in PFLOP/s? write 9990" in _refusal(_with(tmp_path, "gpu.peak_bf16_tflops", "9.99"))


# --- units shown: `pplan profiles` in GB ---------------------------------------------------------------------


def test_profiles_table_shows_memory_in_gb(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "profiles", "hardware")
    assert res.code == 0, res.err
    assert "GiB" not in res.out.replace("hbm_gib is GiB", "")
    assert "GB (10⁹ bytes" in res.out
    row = next(line for line in res.out.splitlines() if line.strip().startswith("h100-sxm-80gb"))
    hbm, usable = H100.gpu.hbm_bytes / GB, H100.hbm_after_fixed_bytes / GB
    assert f"{hbm:.1f}" in row.split() and f"{usable:.1f}" in row.split()
    assert (round(hbm, 1), round(usable, 1)) == (85.9, 84.2)  # 80 GiB, and 80 − 0.75 − 0.85 GiB


def test_profile_detail_shows_hbm_and_usable_memory_in_gb(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "profiles", "hardware", "h100-sxm-80gb")
    assert res.code == 0, res.err
    assert re.search(r"HBM \(derived\)\s+85\.90\s+GB \(10⁹ bytes\)", res.out)
    assert re.search(r"usable HBM \(derived\)\s+84\.18\s+GB \(10⁹ bytes\)", res.out)
