"""The input boundary of profiles and files: nonsense is one `PplanError` naming the field and the fix.

Every case here was once a traceback, a hang or a silent wrong answer (issue 10's fuzz): non-finite and
boolean numbers, sizes far outside physics, a reserve larger than the HBM, 100,000-deep nesting, numbers of
thousands of digits, oversized files and unusable paths. The property tests generate profiles with random,
extreme and non-finite values and check that loading either gives finite, positive derived quantities or
refuses with a `PplanError`: never another exception.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pplan.errors import PplanError, ProfileError
from pplan.explain import explain
from pplan.model.params import total_params
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import (
    MAX_FILE_BYTES,
    MAX_NESTING,
    load_hardware,
    load_model,
    load_stage_durations,
    profile_source,
)
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from tests.cli_run import run_pplan
from tests.regression_corpus import HF_LLAMA

H100 = load_hardware("h100-sxm-80gb")
LLAMA = load_model("llama3-8b")


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # inf, -inf, nan, 1e+300 and 5e-324 are all TOML
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _toml(data: dict[str, Any]) -> str:
    """A TOML document for a profile dict: top-level keys, then one table per nested dict."""
    lines = [f"{key} = {_toml_value(value)}" for key, value in data.items() if not isinstance(value, dict)]
    for key, table in data.items():
        if isinstance(table, dict):
            lines += [f"\n[{key}]", *(f"{k} = {_toml_value(v)}" for k, v in table.items())]
    return "\n".join(lines) + "\n"


def _with(spec: HardwareSpec | ModelSpec, dotted: str, value: object) -> dict[str, Any]:
    """The spec as a profile dict with one (dotted) field replaced."""
    return _mutated(spec, {dotted: value})


def _write(tmp_path: Path, data: dict[str, Any] | str, name: str = "p.toml") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else _toml(data), encoding="utf-8")
    return str(path)


def _refusal(call: Callable[[str], object], ref: str) -> str:
    """The one line of the `ProfileError` `call(ref)` raises."""
    with pytest.raises(ProfileError) as info:
        call(ref)
    text = str(info.value)
    assert "\n" not in text and text == info.value.one_line()
    return text


# --- numbers: finite, numbers (not booleans), within the stated ranges -------------------------------------


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize(
    "field",
    [
        "gpu.hbm_gib",
        "gpu.peak_bf16_tflops",
        "gpu.hbm_bandwidth_gb_per_s",
        "memory.context_gib",
        "memory.label_gap_gib",
        "memory.nccl_per_communicator_mib",
        "memory.dynamic_fragmentation_fraction",
        "intra_node.bandwidth_gb_per_s",
        "inter_node.latency_us",
        "efficiency.matmul",
        "efficiency.kernel_overhead_us",
    ],
)
def test_non_finite_hardware_numbers_are_refused(tmp_path: Path, field: str, value: float) -> None:
    path = _write(tmp_path, _with(H100, field, value))
    text = _refusal(load_hardware, path)
    assert text.startswith(f"{path}: {field}: ") and "give a number" in text


@pytest.mark.parametrize(
    ("spec", "field", "value"),
    [
        (H100, "gpus_per_node", False),
        (H100, "gpu.hbm_gib", True),
        (H100, "efficiency.matmul", True),
        (H100, "intra_node.latency_us", False),
        (LLAMA, "num_layers", True),
        (LLAMA, "vocab_size", False),
    ],
)
def test_booleans_are_not_numbers(
    tmp_path: Path, spec: HardwareSpec | ModelSpec, field: str, value: bool
) -> None:
    path = _write(tmp_path, _with(spec, field, value))
    text = _refusal(load_hardware if spec is H100 else load_model, path)
    assert text.startswith(f"{path}: {field}: expected a number, got {str(value).lower()}; give a")


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("num_layers", 10**4 + 1, "from 1 to 10^4"),
        ("hidden_size", 10**6 + 1, "from 1 to 10^6"),
        ("num_attention_heads", 10**5 + 1, "from 1 to 10^5"),
        ("ffn_hidden_size", 10**7 + 1, "from 1 to 10^7"),
        ("vocab_size", 10**8 + 1, "from 1 to 10^8"),
        ("seq_len", 10**8 + 1, "from 1 to 10^8"),
        ("seq_len", 10**300, "from 1 to 10^8"),  # the fuzz's model sizes near 1e300
        ("num_layers", 32.0, "whole number from 1 to 10^4"),
        ("num_layers", 1e300, "whole number from 1 to 10^4"),
        ("hidden_size", "4096", "whole number from 1 to 10^6"),
    ],
)
def test_model_sizes_outside_the_stated_range(
    tmp_path: Path, field: str, value: object, allowed: str
) -> None:
    path = _write(tmp_path, _with(LLAMA, field, value))
    text = _refusal(load_model, path)
    assert text.startswith(f"{path}: {field}: ") and allowed in text


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("gpus_per_node", 1025, "from 1 to 1,024"),
        ("gpu.hbm_gib", 1e5 + 1, "above 0 and at most 10^5 GiB"),
        ("gpu.peak_bf16_tflops", 1e300, "from 0.001 to 10^7 TFLOP/s"),
        ("gpu.peak_bf16_tflops", 1e-300, "from 0.001 to 10^7 TFLOP/s"),  # would make seconds infinite
        ("gpu.peak_fp8_tflops", 1e8, "from 0.001 to 10^7 TFLOP/s"),
        ("gpu.hbm_bandwidth_gb_per_s", 5e-324, "from 0.001 to 10^7 GB/s"),
        ("intra_node.efficiency", 1e-12, "from 1e-09 to 1"),
        ("inter_node.latency_us", 1e6 + 1, "from 0 to 10^6 µs"),  # 1 s
        ("efficiency.kernel_overhead_us", 1e30, "from 0 to 10^6 µs"),
        ("efficiency.attention", 1.5, "from 1e-09 to 1"),
        ("memory.dynamic_fragmentation_fraction", 1.0, "from 0 to below 1"),
        ("memory.nccl_per_communicator_mib", -1.0, "MiB"),
    ],
)
def test_hardware_figures_outside_the_stated_range(
    tmp_path: Path, field: str, value: float, allowed: str
) -> None:
    path = _write(tmp_path, _with(H100, field, value))
    text = _refusal(load_hardware, path)
    assert text.startswith(f"{path}: {field}: ") and allowed in text


def test_fixed_parts_larger_than_the_hbm_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fuzz's case: usable memory came out at -25.8 GB with exit code 0.
    path = _write(tmp_path, _with(H100, "memory.context_gib", 105.0))
    text = _refusal(load_hardware, path)
    assert text.startswith(f"{path}: memory.context_gib: ") and "no usable HBM" in text
    assert "less than gpu.hbm_gib" in text
    squeezed = _with(H100, "memory.label_gap_gib", 79.5)  # 0.75 GiB context + 79.5 GiB gap > 80 GiB
    assert "no usable HBM" in _refusal(load_hardware, _write(tmp_path, squeezed))
    res = run_pplan(capsys, "explain", "--model", "llama3-8b", "--hardware", path, "--gpus", "8")
    _one_line_error(res.code, res.err, "memory.context_gib")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("reserve_gib", "memory.context_gib, memory.label_gap_gib and memory.nccl_per_communicator_mib"),
        ("fragmentation_fraction", "memory.dynamic_fragmentation_fraction"),
    ],
)
def test_a_profile_with_the_old_reserve_is_refused_naming_the_new_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str
) -> None:
    path = _write(tmp_path, _with(H100, f"memory.{old}", 3.5 if old == "reserve_gib" else 0.05))
    text = _refusal(load_hardware, path)
    assert text.startswith(f"{path}: memory.{old}: {old} is no longer read")
    assert f"; replace memory.{old} with {new}" in text
    res = run_pplan(capsys, "explain", "--model", "llama3-8b", "--hardware", path, "--gpus", "8")
    _one_line_error(res.code, res.err, f"memory.{old}")


def test_heads_are_checked_where_the_model_assumes_them(tmp_path: Path) -> None:
    text = _refusal(load_model, _write(tmp_path, _with(LLAMA, "num_kv_heads", 5)))
    assert ": num_kv_heads: num_kv_heads=5 must divide num_attention_heads=32; use a divisor" in text
    text = _refusal(load_model, _write(tmp_path, _with(LLAMA, "hidden_size", 4097)))
    assert ": num_attention_heads: hidden_size=4097 is not divisible" in text and "set head_dim" in text
    # With head_dim given, a ≠ h / d is allowed (as the core allows it).
    model = load_model(_write(tmp_path, _with(LLAMA, "head_dim", 96)))
    assert model.head_size == 96


def test_booleans_are_strict_too(tmp_path: Path) -> None:
    text = _refusal(load_model, _write(tmp_path, _with(LLAMA, "tied_embeddings", 0)))
    assert ": tied_embeddings: " in text and "write true or false" in text


# --- files: size, nesting, number length ----------------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    text = profile_source("models", "llama3-8b") + "# " + "x" * MAX_FILE_BYTES + "\n"
    path = _write(tmp_path, text)
    assert "larger than 1 MiB" in _refusal(load_model, path)
    assert "larger than 1 MiB" in _refusal(load_stage_durations, path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n"),
        ("deep.toml", "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n"),
        ("deep.toml", "x" + ".x" * 100_000 + " = 1\n"),  # dotted keys: quadratic memory in tomllib
        ("deep.toml", "[x" + ".x" * 100_000 + "]\n"),
        ("config.json", '{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("config.json", '{"x": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001),
    ],
)
def test_deep_nesting_is_refused_before_parsing(tmp_path: Path, name: str, text: str) -> None:
    path = _write(tmp_path, text, name)
    message = _refusal(load_model, path)
    assert message.startswith(f"{path}: line 1: nested more than {MAX_NESTING} levels deep")


def test_brackets_in_strings_and_comments_do_not_count_as_nesting(tmp_path: Path) -> None:
    many = "[{" * 200
    text = profile_source("models", "llama3-8b").replace(
        'description = "Meta Llama 3 8B"', f'description = "{many}"  # {many}'
    )
    text += f"\n# {'a.' * 200}\n"
    # Read whole and validated: refused as markup in a description (pplan.profiles.text), not as nesting.
    assert "description: holds '[', which tables read as markup" in _refusal(
        load_model, _write(tmp_path, text)
    )
    commented = profile_source("models", "llama3-8b") + f"# {many}\n# {'a.' * 200}\n"
    assert load_model(_write(tmp_path, commented)).num_layers == 32
    hf = json.dumps(HF_LLAMA | {"architectures": [many], "note": '\\"[[' * 100})
    assert load_model(_write(tmp_path, hf, "config.json")).num_layers == 32


def test_nesting_within_the_limit_reaches_the_validator(tmp_path: Path) -> None:
    text = profile_source("models", "llama3-8b") + "x = " + "[" * 60 + "]" * 60 + "\n"
    assert ": x: Extra inputs are not permitted" in _refusal(load_model, _write(tmp_path, text))


@pytest.mark.parametrize("name", ["p.toml", "config.json"])
def test_integers_beyond_pythons_digit_limit(tmp_path: Path, name: str) -> None:
    huge = "1" + "0" * 5000
    if name.endswith(".toml"):
        text = profile_source("models", "llama3-8b").replace("num_layers = 32", f"num_layers = {huge}")
    else:
        text = json.dumps(HF_LLAMA).replace('"num_hidden_layers": 32', f'"num_hidden_layers": {huge}')
    path = _write(tmp_path, text, name)
    message = _refusal(load_model, path)
    assert message.startswith(f"{path}: line ") and "more digits than Python reads" in message


def test_hf_config_values_out_of_range_are_named_by_their_key(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps(HF_LLAMA | {"num_hidden_layers": 10**400}), "config.json")
    assert _refusal(load_model, path).startswith(f"{path}: num_hidden_layers: Input should be less than")
    path = _write(tmp_path, json.dumps(HF_LLAMA | {"hidden_size": math.inf}), "config.json")
    assert _refusal(load_model, path).startswith(f"{path}: hidden_size: must be a positive integer, got inf")
    path = _write(tmp_path, json.dumps(HF_LLAMA | {"attention_bias": "false"}), "config.json")
    assert _refusal(load_model, path).startswith(f"{path}: attention_bias: must be true or false")


# --- paths ------------------------------------------------------------------------------------------------


def test_unusable_paths_are_named(tmp_path: Path) -> None:
    long = str(tmp_path / ("a" * 300 + ".toml"))
    for load in (load_model, load_stage_durations):
        text = _refusal(load, long)
        assert "path too long" in text and f"({len(long):,} characters)" in text
        assert len(text) < len(long)  # the path quoted short
    text = _refusal(load_model, "~nosuchuser_pplan/x.toml")
    assert text.startswith("model: ~nosuchuser_pplan/x.toml: cannot expand ~nosuchuser_pplan")
    assert "write the path out in full" in text
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    assert (
        _refusal(load_hardware, str(folder))
        == f"hardware: {folder}: a folder; give the path of a profile file"
    )
    assert "a folder" in _refusal(load_stage_durations, str(tmp_path))
    assert "not a usable path" in _refusal(load_model, "bad\0name.toml")


def test_an_unreadable_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(_write(tmp_path, profile_source("models", "llama3-8b")))

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    if os.geteuid() != 0:  # root reads anything: simulate it below
        path.chmod(0)
        assert "Permission denied" in _refusal(load_model, str(path))
        path.chmod(0o644)
    monkeypatch.setattr("pplan.profiles.catalog.read_bounded", refuse)  # what pplan.reading meets as root
    text = _refusal(load_model, str(path))
    assert text.startswith(f"{path}: cannot read the file (Permission denied); check the permissions")


# --- durations files --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("f = [1.0, inf]", "f[1]: Input should be a finite number"),
        ("comm = nan", "comm: Input should be a finite number"),
        ("f = true", "f: expected a number, got true"),
        ("b = 1e13", "b: Input should be less than or equal to"),
        ("f = 0\nb = 0\nw = 0", "f: every duration of f, b and w is zero"),
        (f"f = [{', '.join(['1'] * 100_001)}]", "f: List should have at most 100000 items"),
    ],
)
def test_bad_durations_are_refused(tmp_path: Path, text: str, start: str) -> None:
    path = _write(tmp_path, text + "\n", "d.toml")
    assert _refusal(load_stage_durations, path).startswith(f"{path}: {start}")


# --- through the CLI: exit code 2 and one line naming the field ---------------------------------------------


def _one_line_error(code: int, err: str, needle: str) -> None:
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("pplan: error: ") and needle in lines[0], err


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpu.hbm_gib", math.inf), ("efficiency.kernel_overhead_us", math.inf), ("gpus_per_node", False)],
)
def test_cli_refuses_bad_hardware_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object
) -> None:
    path = _write(tmp_path, _with(H100, field, value))
    for args in (("profiles", "hardware", path), ("explain", "--model", "llama3-8b", "--hardware", path)):
        res = run_pplan(capsys, *args, *(("--gpus", "8") if args[0] == "explain" else ()))
        _one_line_error(res.code, res.err, f"{path}: {field}: ")


def test_cli_refuses_bad_paths_and_files_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = _write(tmp_path, "x = " + "[" * 100_000 + "]" * 100_000 + "\n", "deep.toml")
    big = _write(tmp_path, _with(LLAMA, "num_layers", 10**300))
    cases = [
        (("--model", "~nosuchuser_pplan/x.toml"), "cannot expand"),
        (("--model", "a" * 300 + ".toml"), "path too long"),
        (("--model", deep), "nested more than 64 levels deep"),
        (("--model", big), "num_layers: "),
    ]
    for args, needle in cases:
        res = run_pplan(capsys, "explain", *args, "--hardware", "h100-sxm-80gb", "--gpus", "8")
        _one_line_error(res.code, res.err, needle)
    durations = _write(tmp_path, "f = [1.0, nan]\n", "d.toml")
    res = run_pplan(capsys, "schedule", "1f1b", "--pp", "2", "--durations", durations)
    _one_line_error(res.code, res.err, "f[1]: ")


# --- property-based: random, extreme and non-finite values --------------------------------------------------

_EXTREMES = [0, -1, 1, 2**63, 10**100, 1e-300, 5e-324, 1e300, 1.7e308, -0.0, 1e-3, 0.999, 1e4, 1e5, 1e7, 1e8]
_WILD = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from(_EXTREMES),
    st.booleans(),
    st.text(max_size=3),
)


def _near(value: object) -> st.SearchStrategy[Any]:
    """Plausible values of the same type, 0 to 3 times `value`, so that some generated profiles load."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=0, max_value=3 * value + 1)
    assert isinstance(value, float)
    return st.floats(min_value=0, max_value=3 * value + 1)


def _either(near: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Half plausible, half wild (a plain `one_of` would flatten `_WILD` and pick `near` one time in six)."""
    return st.booleans().flatmap(lambda wild: _WILD if wild else near)


def _mutations(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """One to three of the (dotted) fields of `base` replaced by plausible or wild values."""
    return st.lists(st.sampled_from(sorted(base)), min_size=1, max_size=3, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({key: _either(_near(base[key])) for key in keys})
    )


def _numeric_fields(spec: HardwareSpec | ModelSpec) -> dict[str, int | float]:
    """Every number of a profile, by dotted field name."""

    def walk(data: dict[str, Any], prefix: str) -> dict[str, int | float]:
        out: dict[str, int | float] = {}
        for key, value in data.items():
            if isinstance(value, dict):
                out |= walk(value, f"{prefix}{key}.")
            elif isinstance(value, int | float) and not isinstance(value, bool):
                out[f"{prefix}{key}"] = value
        return out

    return walk(spec.model_dump(exclude_none=True), "")


def _mutated(spec: HardwareSpec | ModelSpec, changes: dict[str, Any]) -> dict[str, Any]:
    data = spec.model_dump(exclude_none=True)
    for dotted, value in changes.items():
        *tables, key = dotted.split(".")
        target = data
        for table in tables:
            target = target[table]
        target[key] = value
    return data


def _finite_numbers(value: object) -> bool:
    """Every float in a (nested) dump is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite_numbers(v) for v in value)
    return True


def _check_derived(model: ModelSpec, hardware: HardwareSpec) -> None:
    """Positive, finite derived quantities; an explain either answers in finite numbers or refuses."""
    assert hardware.hbm_after_fixed_bytes > 0 and hardware.gpu.hbm_bytes > 0
    for link in (hardware.intra_node, hardware.inter_node):
        assert 0 < link.achievable_bytes_per_s < math.inf and 0 <= link.latency_s <= 1
    eff = hardware.efficiency
    assert 0 < hardware.gpu.peak_bf16_tflops * 1e12 * eff.matmul * eff.attention_fraction < math.inf
    assert 0 < total_params(model) < 2**63
    try:
        report = explain(model, hardware, PlanRequest(gpus=1, global_batch=1))
    except PplanError:
        return
    assert report.performance is not None  # analytic pass times (the default) always give a performance block
    assert report.performance.step_s > 0
    assert _finite_numbers(report.model_dump())


_HW_FIELDS = _numeric_fields(H100)
_MODEL_FIELDS = _numeric_fields(LLAMA) | {"head_dim": 128, "max_position_embeddings": 8192}
_HF_FIELDS = {k: v for k, v in HF_LLAMA.items() if k != "model_type"} | {
    "head_dim": 128,
    "attention_bias": False,
    "tie_word_embeddings": False,
}
_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(changes=_mutations(_HW_FIELDS))
def test_generated_hardware_profiles_load_sanely_or_are_refused(
    tmp_path: Path, changes: dict[str, Any]
) -> None:
    path = _write(tmp_path, _mutated(H100, changes), "hw.toml")
    try:
        hardware = load_hardware(path)
    except PplanError as err:
        assert "\n" not in str(err)
        return
    _check_derived(LLAMA, hardware)


@_SETTINGS
@given(changes=_mutations(_MODEL_FIELDS))
def test_generated_model_profiles_load_sanely_or_are_refused(tmp_path: Path, changes: dict[str, Any]) -> None:
    path = _write(tmp_path, _mutated(LLAMA, changes), "m.toml")
    try:
        model = load_model(path)
    except PplanError as err:
        assert "\n" not in str(err)
        return
    _check_derived(model, H100)


@_SETTINGS
@given(changes=_mutations(_HF_FIELDS))
def test_generated_hf_configs_load_sanely_or_are_refused(tmp_path: Path, changes: dict[str, Any]) -> None:
    path = _write(
        tmp_path, json.dumps(HF_LLAMA | changes), "config.json"
    )  # NaN, Infinity as Python writes them
    try:
        model = load_model(path)
    except PplanError as err:
        assert "\n" not in str(err)
        return
    _check_derived(model, H100)


@_SETTINGS
@given(
    changes=st.fixed_dictionaries(
        {
            key: st.one_of(st.none(), _either(_near(1.0)), st.lists(_either(_near(1.0)), max_size=4))
            for key in ("f", "b", "w", "comm")
        }
    )
)
def test_generated_durations_load_sanely_or_are_refused(tmp_path: Path, changes: dict[str, Any]) -> None:
    data = {k: v for k, v in changes.items() if v is not None}
    path = _write(tmp_path, "\n".join(f"{k} = {_toml_value(v)}" for k, v in data.items()) + "\n", "d.toml")
    try:
        spec = load_stage_durations(path)
    except PplanError as err:
        assert "\n" not in str(err)
        return
    values = [x for v in (spec.f, spec.b, spec.w) for x in (v if isinstance(v, list) else [v])]
    assert all(0 <= x < math.inf for x in [*values, spec.comm]) and any(values)


@pytest.mark.parametrize(
    ("field", "value"),
    [("calibration.error_low", 0.5), ("calibration.tp_max", 0), ("host_link.efficiency", 3.0)],
)
def test_optional_sections_name_the_bad_field(tmp_path: Path, field: str, value: object) -> None:
    # `[calibration]`, `[pod]` and `[host_link]` are optional sections: an error inside one still names its field
    path = _write(tmp_path, _with(H100, field, value))
    assert _refusal(load_hardware, path).startswith(f"{path}: {field}: ")


def test_a_bad_pod_names_its_field(tmp_path: Path) -> None:
    data = {
        **_with(H100, "efficiency.matmul", H100.efficiency.matmul),
        "pod": {"gpus": 0, "oversubscription": 7},
    }
    path = _write(tmp_path, data)
    assert _refusal(load_hardware, path).startswith(f"{path}: pod.gpus: ")
