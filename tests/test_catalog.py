"""The catalog: bundled profiles load and carry published figures; bad input is a one-line ProfileError."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pplan.errors import ProfileError
from pplan.model.params import total_params
from pplan.profiles.catalog import list_profiles, load_hardware, load_model, profile_source
from pplan.profiles.fields import GIB
from pplan.profiles.model_spec import ModelSpec
from tests.cli_run import run_pplan

HARDWARE = {
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "gb200-nvl72",
    "h100-sxm-80gb",
    "h200-sxm-141gb",
    "h800-sxm-80gb",
    "b200-180gb",
}
# Narayanan et al. SC'21 (arXiv 2104.04473) Table 1: (name, parameters in billions, heads, hidden, layers).
MEGATRON_TABLE_1 = [
    ("gpt-1.7b", 1.7, 24, 2304, 24),
    ("gpt-3.6b", 3.6, 32, 3072, 30),
    ("gpt-7.5b", 7.5, 32, 4096, 36),
    ("gpt-18.4b", 18.4, 48, 6144, 40),
    ("gpt-39.1b", 39.1, 64, 8192, 48),
    ("gpt-76.1b", 76.1, 80, 10240, 60),
    ("gpt-145.6b", 145.6, 96, 12288, 80),
    ("gpt-310.1b", 310.1, 128, 16384, 96),
    ("gpt-529.6b", 529.6, 128, 20480, 105),
    ("gpt-1t", 1008.0, 160, 25600, 128),
]
MOE_MODELS = {
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "gpt-oss-120b",
    "grok-1",
}
MODELS = (
    {"llama3-8b", "llama3-70b", "llama3-405b", "llama2-7b", "llama2-70b", "gpt3-175b", "gpt-22b"}
    | MOE_MODELS
    | {row[0] for row in MEGATRON_TABLE_1}
)


def _error(call: Callable[..., object], *args: str) -> str:
    """The message of the ProfileError `call(*args)` raises, checked to be one line."""
    with pytest.raises(ProfileError) as info:
        call(*args)
    text = str(info.value)
    assert "\n" not in text
    assert text == info.value.one_line()
    return text


# --- bundled profiles -------------------------------------------------------------------------------------


def test_list_profiles_names_every_bundled_file_sorted() -> None:
    hardware = list_profiles("hardware")
    models = list_profiles("models")
    assert {e.name for e in hardware} == HARDWARE
    assert {e.name for e in models} == MODELS
    for entries in (hardware, models):
        assert [e.name for e in entries] == sorted(e.name for e in entries)
        for entry in entries:
            assert entry.path.is_file() and entry.path.stem == entry.name
            assert entry.description


@pytest.mark.parametrize("name", sorted(HARDWARE))
def test_every_hardware_profile_loads_under_its_own_name(name: str) -> None:
    spec = load_hardware(name)
    assert spec.name == name
    # an 8-GPU NVSwitch board, or GB200 NVL72's 72-GPU NVLink domain (NVIDIA GB200 NVL72 datasheet)
    assert spec.gpus_per_node == (72 if name == "gb200-nvl72" else 8)
    # The fixed parts (see each profile's [memory] comments): a CUDA context with workspaces under 1 GiB, a label
    # gap of a few tenths of a GiB to about 2 GiB; NCCL buffers a few hundred MiB per communicator (NCCL's 4 MiB
    # NCCL_BUFFSIZE per channel and connection, plus LL and LL128); fragmentation a fraction of the dynamic bytes.
    mem = spec.memory
    assert 0.25 <= mem.context_gib <= 1 and 0 < mem.label_gap_gib <= 2
    assert 64 <= mem.nccl_per_communicator_mib <= 1024
    assert 0 < mem.dynamic_fragmentation_fraction < 0.5
    lost = 1 - spec.hbm_after_fixed_bytes / spec.gpu.hbm_bytes
    assert 0.01 <= lost <= 0.05
    assert profile_source("hardware", name).startswith("#")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_profile_loads_under_its_own_name(name: str) -> None:
    spec = load_model(name)
    assert spec.name == name
    assert spec.source
    assert f'name = "{name}"' in profile_source("models", name)


def test_hardware_datasheet_figures() -> None:
    # NVIDIA A100, H100 and DGX B200 datasheets and H200 spec table (dense BF16 TFLOP/s, NVLink GB/s per
    # direction), InfiniBand NDR/HDR line rates, and the measured rates each profile cites beside its value.
    h100 = load_hardware("h100-sxm-80gb")
    assert (h100.gpu.peak_bf16_tflops, h100.gpu.peak_fp8_tflops) == (989.4, 1978.9)
    assert (h100.intra_node.bandwidth_gb_per_s, h100.inter_node.bandwidth_gb_per_s) == (450, 50)
    assert h100.intra_node.achievable_bytes_per_s == pytest.approx(370e9, rel=0.01)  # nccl-tests ring busBw
    a100 = load_hardware("a100-sxm-80gb")
    assert (a100.gpu.peak_bf16_tflops, a100.gpu.peak_fp8_tflops) == (312, None)
    assert (a100.intra_node.bandwidth_gb_per_s, a100.inter_node.bandwidth_gb_per_s) == (300, 25)
    assert a100.inter_node.achievable_bytes_per_s == pytest.approx(24e9, rel=0.01)  # ≈24 GB/s per HDR NIC
    assert load_hardware("a100-sxm-40gb").gpu.hbm_gib == 40
    assert load_hardware("h200-sxm-141gb").gpu.hbm_gib == 141
    h800 = load_hardware("h800-sxm-80gb")
    assert h800.intra_node.bandwidth_gb_per_s == 200  # 400 GB/s total
    assert h800.intra_node.achievable_bytes_per_s == pytest.approx(160e9)  # DeepSeek-V3 §3.2.2
    b200 = load_hardware("b200-180gb")
    assert (b200.gpu.peak_bf16_tflops, b200.gpu.hbm_gib, b200.intra_node.bandwidth_gb_per_s) == (
        2250,
        180,
        900,
    )
    assert h100.hbm_after_fixed_bytes < 80 * GIB


def _megatron_params(model: ModelSpec) -> float:
    """Narayanan et al. 2021 §5.1: P = 12·L·h²·(1 + 13/(12h) + (V + s)/(12·L·h))."""
    L, h, V, s = model.num_layers, model.hidden_size, model.vocab_size, model.seq_len
    return 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))


@pytest.mark.parametrize(("name", "params_b", "heads", "hidden", "layers"), MEGATRON_TABLE_1)
def test_megatron_table_models_match_the_papers_parameter_counts(
    name: str, params_b: float, heads: int, hidden: int, layers: int
) -> None:
    model = load_model(name)
    assert (model.num_attention_heads, model.hidden_size, model.num_layers) == (heads, hidden, layers)
    assert (model.ffn_hidden_size, model.vocab_size, model.seq_len) == (4 * hidden, 51200, 2048)
    assert (model.mlp, model.norm, model.position_embedding, model.tied_embeddings) == (
        "gelu",
        "layernorm",
        "learned",
        True,
    )
    assert round(_megatron_params(model) / 1e9, 1) == params_b


def test_gpt_22b_is_korthikantis_table_3_shape() -> None:
    """Korthikanti et al. 2022 (arXiv 2205.05198) Table 3: 64 heads, hidden 6144, 48 layers; a GPT-3 layer."""
    model = load_model("gpt-22b")
    assert (model.num_attention_heads, model.hidden_size, model.num_layers) == (64, 6144, 48)
    assert (model.ffn_hidden_size, model.vocab_size, model.seq_len, model.dropout) == (
        4 * 6144,
        51200,
        2048,
        True,
    )
    assert round(_megatron_params(model) / 1e9) == 22


def test_gpt3_175b_has_175_billion_parameters() -> None:
    model = load_model("gpt3-175b")
    assert round(_megatron_params(model) / 1e9) == 175  # Brown et al. 2020 Table 2.1
    assert (model.qkv_bias, model.linear_bias, model.dropout, model.position_rows) == (True, True, True, 2048)


def _llama_params(model: ModelSpec) -> float:
    """Embedding + output + L·(QKV + output projection + SwiGLU + 2 RMSNorms) + final norm."""
    h, d, f = model.hidden_size, model.head_size, model.ffn_hidden_size
    attention = h * (model.num_attention_heads + 2 * model.kv_heads) * d + model.num_attention_heads * d * h
    layer = attention + 3 * h * f + 2 * h
    return 2 * model.vocab_size * h + model.num_layers * layer + h


@pytest.mark.parametrize(
    ("name", "params_b"), [("llama3-8b", 8.03), ("llama3-70b", 70.6), ("llama3-405b", 406)]
)
def test_llama3_shapes_give_the_model_cards_parameter_counts(name: str, params_b: float) -> None:
    model = load_model(name)
    assert (model.vocab_size, model.kv_heads, model.seq_len, model.mlp) == (128256, 8, 8192, "swiglu")
    assert math.isclose(_llama_params(model) / 1e9, params_b, rel_tol=0.002)  # Meta's model cards


def test_llama2_7b_gives_the_model_cards_parameter_count() -> None:
    """meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters (the model card's 7B; the paper's Table 1)."""
    model = load_model("llama2-7b")
    assert model.kv_heads == model.num_attention_heads == 32  # multi-head attention
    h, f = model.hidden_size, model.ffn_hidden_size
    by_hand = 2 * 32000 * h + 32 * (4 * h * h + 3 * h * f + 2 * h) + h
    assert by_hand == 6_738_415_616 == total_params(model)


# --- user paths -------------------------------------------------------------------------------------------


def test_a_user_toml_path_loads(tmp_path: Path) -> None:
    mine = tmp_path / "my-h100.toml"
    text = profile_source("hardware", "h100-sxm-80gb").replace('name = "h100-sxm-80gb"', 'name = "my-h100"')
    mine.write_text(text.replace("gpus_per_node = 8", "gpus_per_node = 4"))
    spec = load_hardware(str(mine))
    assert (spec.name, spec.gpus_per_node) == ("my-h100", 4)
    copied = tmp_path / "m.toml"
    shutil.copy(list_profiles("models")[0].path, copied)
    assert load_model(str(copied)).name == list_profiles("models")[0].name


# --- errors -----------------------------------------------------------------------------------------------


def test_unknown_name_lists_the_known_names() -> None:
    text = _error(load_model, "llama3-7b")
    assert text.startswith("model: ")
    assert "llama3-7b" in text and "llama3-8b" in text and "gpt3-175b" in text
    text = _error(load_hardware, "h100")
    assert text.startswith("hardware: ")
    assert all(name in text for name in HARDWARE)


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    text = _error(load_hardware, str(missing))
    assert str(missing) in text and "no such file" in text
    assert "no such file" in _error(load_model, str(tmp_path / "config.json"))


def test_wrong_file_kind(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("{}")
    assert "not a .toml profile" in _error(load_hardware, str(config))
    other = tmp_path / "model.yaml"
    other.write_text("")
    assert "model.yaml" in _error(load_model, str(other))


def test_unknown_kind() -> None:
    assert _error(list_profiles, "gpus").startswith("kind: ")


def test_malformed_toml_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nnum_layers = 4\nhidden_size = = 12\n')
    text = _error(load_model, str(bad))
    assert text.startswith(f"{bad}: line 3")
    assert "invalid TOML" in text


def test_malformed_json_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "model_type": "llama",\n  "hidden_size": 4096\n  "num_hidden_layers": 32\n}\n')
    text = _error(load_model, str(bad))
    assert text.startswith(f"{bad}: line 4")
    assert "invalid JSON" in text


def _model_toml(tmp_path: Path, **changes: str | None) -> str:
    """A copy of llama3-8b.toml with `key = value` lines replaced, added, or removed (for None)."""
    out = []
    for line in profile_source("models", "llama3-8b").splitlines():
        key = line.split("=")[0].strip()
        if key not in changes:
            out.append(line)
        elif changes[key] is not None:
            out.append(f"{key} = {changes[key]}")
    present = {line.split("=")[0].strip() for line in out}
    out += [f"{key} = {value}" for key, value in changes.items() if value is not None and key not in present]
    path = tmp_path / "x.toml"
    path.write_text("\n".join(out) + "\n")
    return str(path)


def test_missing_field_names_the_field(tmp_path: Path) -> None:
    path = _model_toml(tmp_path, num_layers=None)
    assert _error(load_model, path) == f"{path}: num_layers: Field required; add num_layers to the file"


@pytest.mark.parametrize("value", ["0", "-4"])
def test_zero_and_negative_values_name_the_field(tmp_path: Path, value: str) -> None:
    path = _model_toml(tmp_path, num_layers=value)
    text = _error(load_model, path)
    assert text == f"{path}: num_layers: Input should be greater than 0; fix the value in the file"


def test_nested_hardware_field_is_named_by_its_dotted_path(tmp_path: Path) -> None:
    path = tmp_path / "hw.toml"
    path.write_text(
        profile_source("hardware", "h100-sxm-80gb").replace(
            "peak_bf16_tflops = 989.4", "peak_bf16_tflops = 0"
        )
    )
    text = _error(load_hardware, str(path))
    assert text.startswith(f"{path}: gpu.peak_bf16_tflops: Input should be greater than 0")
    path.write_text(
        profile_source("hardware", "h100-sxm-80gb").replace("efficiency = 0.82", "efficiency = 1.5")
    )
    assert re.match(
        rf"{re.escape(str(path))}: intra_node\.efficiency: Input should be less than or equal to 1",
        _error(load_hardware, str(path)),
    )


def test_misspelt_field_and_inconsistent_heads(tmp_path: Path) -> None:
    path = _model_toml(tmp_path, num_layers=None, num_layer="32")
    text = _error(load_model, path)
    assert "num_layers: Field required" in text and "num_layer" in text
    path = _model_toml(tmp_path, num_kv_heads="5")
    text = _error(load_model, path)
    assert "num_kv_heads=5 must divide num_attention_heads=32" in text


# --- `pplan profiles`, which lists and shows what the catalog reads ---------------------------------------


def test_cli_lists_both_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "profiles")
    assert res.code == 0, res.err
    assert "Hardware profiles" in res.out and "Model profiles" in res.out
    assert all(name in res.out for name in HARDWARE | MODELS)


def test_cli_json_of_a_kind_and_of_one_profile(capsys: pytest.CaptureFixture[str]) -> None:
    hardware = run_pplan(capsys, "profiles", "hardware", "--json").json()
    assert {spec["name"] for spec in hardware} == HARDWARE
    h100 = next(spec for spec in hardware if spec["name"] == "h100-sxm-80gb")
    assert h100["gpu"]["peak_bf16_tflops"] == 989.4
    llama = run_pplan(capsys, "profiles", "models", "llama3-70b", "--json").json()
    assert (llama["num_layers"], llama["hidden_size"], llama["num_kv_heads"]) == (80, 8192, 8)
    both = run_pplan(capsys, "profiles", "--json").json()
    assert set(both) == {"hardware", "models"} and len(both["models"]) == len(MODELS)


def test_cli_shows_every_field_of_one_profile(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "profiles", "hardware", "h100-sxm-80gb")
    assert res.code == 0, res.err
    for text in (
        "gpu.peak_bf16_tflops",
        "989.4",
        "inter_node.efficiency",
        "memory.nccl_per_communicator_mib",
        "usable HBM",
    ):
        assert text in res.out
    source = run_pplan(capsys, "profiles", "models", "llama3-8b", "--source")
    assert source.out == profile_source("models", "llama3-8b")


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("profiles", "gpus"), "pplan: error: kind: 'gpus' is not one of 'hardware', 'models'"),
        (("profiles", "hardware", "h100"), "pplan: error: hardware: unknown hardware profile 'h100'"),
        (("profiles", "models", "nope.toml"), "pplan: error: model: nope.toml: no such file"),
        (("profiles", "--source"), "pplan: error: --source: needs one profile"),
    ],
)
def test_cli_errors_are_one_line_with_exit_code_2(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], start: str
) -> None:
    res = run_pplan(capsys, *args)
    assert res.code == 2
    assert res.err.startswith(start) and res.err.count("\n") == 1


def _efficiency_from(tmp_path: Path, body: str) -> Path:
    """The H800 profile with its `[efficiency]` table replaced by `body`."""
    text = profile_source("hardware", "h800-sxm-80gb")
    start = text.index("[efficiency]\n")
    end = text.index("\n[", start + 1)
    path = tmp_path / "gpu.toml"
    path.write_text(text[:start] + "[efficiency]\n" + body + text[end:], encoding="utf-8")
    return path


def test_efficiency_from_takes_the_named_profiles_figures_with_its_own_on_top(tmp_path: Path) -> None:
    h100 = load_hardware("h100-sxm-80gb").efficiency
    # one GH100 chip: one home for its fitted figures; the copies' own bandwidths differ from the figures the
    # fit was made with, so they do not claim the calibration (pplan.profiles.hardware_spec: the fingerprint)
    for name in ("h200-sxm-141gb", "h800-sxm-80gb"):
        copy = load_hardware(name).efficiency
        assert not copy.calibrated and copy.model_copy(update={"calibrated": True}) == h100
    a100 = load_hardware("a100-sxm-80gb").efficiency
    a40 = load_hardware("a100-sxm-40gb").efficiency
    assert not a40.calibrated and a40.model_copy(update={"calibrated": True}) == a100
    own = load_hardware(str(_efficiency_from(tmp_path, 'from = "h100-sxm-80gb"\nhbm = 0.7\n'))).efficiency
    assert own.hbm == 0.7
    assert own.matmul == h100.matmul and own.fp8_matmul == h100.fp8_matmul


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('from = "h99"\n', "names no bundled hardware profile ('h99')"),
        ('from = "h200-sxm-141gb"\n', "hardware/h200-sxm-141gb takes its own figures from another profile"),
    ],
)
def test_efficiency_from_refuses_an_unknown_or_chained_profile(
    tmp_path: Path, body: str, message: str
) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)) as err:
        load_hardware(str(_efficiency_from(tmp_path, body)))
    assert str(err.value).count("\n") == 0
