"""Fuzz: no name from any input adds a line or a control character to any output (issue 38, items 3 and 7).

Random names (control characters, newlines, `$(...)`, backticks, rich markup, very long ones, Unicode
bidirectional overrides, and names that are valid) go into a model profile's `name`, a hardware profile's `name`
and `gpu.name`, and the folder of a Hugging Face config.json. For each, every output (the explain table,
`--format megatron`, `--format torchtitan`, `--json`, `--svg`) either is refused with exit 2 and one error line,
or holds no control character and exactly as many lines as the same output for a plain name (the table aside:
rich wraps a long name onto more lines). The acceptance tier runs the property on many examples; the fast tier
runs a seeded sample of it.
"""

from __future__ import annotations

import json
import re
import tempfile
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pplan.profiles.catalog import profile_source
from tests.cli_run import run_pplan
from tests.regression_corpus import HF_LLAMA

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""What no output may hold (tab and newline aside): C0 and C1 controls, bidirectional marks, embeddings,
overrides and isolates, Unicode line and paragraph separators."""
QUERY = ("--gpus", "8", "--tp", "8", "--pp", "1", "--global-batch", "8")
OUTPUTS: dict[str, tuple[str, ...]] = {
    "table": (),
    "megatron": ("--format", "megatron"),
    "torchtitan": ("--format", "torchtitan"),
    "json": ("--json",),
    "svg": ("--svg",),
}
FRAGMENTS = [
    "\n", "\r", "\x1b[2J", "\x1b]0;pwned\x07", "$(touch INJECTED)", "`id`", "[bold]", "[/]", "[link=x]",
    "\u202e", "\u2066", "\u2028", "\x00", "\x7f", "\x9b", ";", "|", "&", "'", '"', "\\", " ", "-", "名", "é",
]  # fmt: skip
LONG = ["x" * 65, "y" * 500, "z" * 5000]

names = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6).map("".join),
    st.text(min_size=1, max_size=40),
    st.text(alphabet=st.characters(categories=["L", "Nd"]), min_size=1, max_size=30),
    st.sampled_from(LONG),
)


def _toml_string(value: str) -> str:
    """`value` as a TOML basic string: controls, quotes and backslashes escaped (written here, not by pplan)."""
    out = []
    for char in value:
        if char in '"\\':
            out.append("\\" + char)
        elif unicodedata.category(char) == "Cc":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _set(source: str, key: str, value: str, section: str | None = None) -> str:
    start = 0 if section is None else source.index(f"\n[{section}]\n")
    match = re.compile(rf"(?m)^{key} = .*$").search(source, start)
    assert match is not None
    return source[: match.start()] + f"{key} = {_toml_string(value)}" + source[match.end() :]


def _model(folder: Path, name: str) -> tuple[str, ...]:
    path = folder / "model.toml"
    path.write_text(_set(profile_source("models", "llama3-8b"), "name", name), encoding="utf-8")
    return ("--model", str(path))


def _hardware(folder: Path, name: str) -> tuple[str, ...]:
    text = _set(profile_source("hardware", "h100-sxm-80gb"), "name", name)
    path = folder / "hw.toml"
    path.write_text(_set(text, "name", name, "gpu"), encoding="utf-8")
    return ("--model", "llama3-8b", "--hardware", str(path))


def _config_folder(folder: Path, name: str) -> tuple[str, ...]:
    usable = name.replace("/", "_").replace("\x00", "_")[:200] or "_"
    if usable in (".", ".."):
        usable += "_"
    where = folder / usable
    where.mkdir(exist_ok=True)
    (where / "config.json").write_text(json.dumps(HF_LLAMA), encoding="utf-8")
    return ("--model", str(where / "config.json"))


SURFACES: dict[str, Callable[[Path, str], tuple[str, ...]]] = {
    "model": _model,
    "hardware": _hardware,
    "config folder": _config_folder,
}


def _outputs(
    capsys: pytest.CaptureFixture[str], inputs: tuple[str, ...], folder: Path
) -> dict[str, tuple[int, str, str]]:
    """Each output's exit code, text (the SVG file's for --svg) and stderr."""
    got = {}
    for what, flags in OUTPUTS.items():
        extra = (*flags, str(folder / "plan.svg"), "--force") if what == "svg" else flags
        result = run_pplan(capsys, "explain", *inputs, *QUERY, *extra)
        text = result.out
        if what == "svg" and result.code == 0:
            text = (folder / "plan.svg").read_text(encoding="utf-8")
        got[what] = (result.code, text, result.err)
    return got


def _check(capsys: pytest.CaptureFixture[str], surface: str, name: str) -> set[int]:
    """The property for one name on one surface; the exit codes seen."""
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as dir_:
        make = SURFACES[surface]
        plain = _outputs(capsys, make(Path(plain_dir), "plain"), Path(plain_dir))
        fuzzed = _outputs(capsys, make(Path(dir_), name), Path(dir_))
    for what, (code, text, err) in fuzzed.items():
        assert not CONTROL.search(err), (what, err)
        if code == 2:
            assert text == "" and err.endswith("\n") and err.count("\n") == 1, (what, err)
            continue
        assert code == 0, (what, err)
        assert not CONTROL.search(text), what
        if what != "table":
            assert text.count("\n") == plain[what][1].count("\n"), what
        if what == "svg":
            ET.fromstring(text)  # well-formed: no name broke out of its element
        if what == "json":
            json.loads(text)
    return {code for code, _, _ in fuzzed.values()}


SAMPLE = [
    ("model", "x\n--foo $(touch INJECTED)", 2),
    ("model", "Llama (mine) 名前", 0),
    ("hardware", "H100\x1b]0;pwned\x07\x1b[2J", 2),
    ("config folder", "evil\x1b[2J[bold]\u202e\nx", 0),  # a folder's name is made safe, not refused
]


@pytest.mark.parametrize(("surface", "name", "code"), SAMPLE)
def test_seeded_sample(capsys: pytest.CaptureFixture[str], surface: str, name: str, code: int) -> None:
    assert _check(capsys, surface, name) == {code}


@pytest.mark.acceptance  # 60 names × 10 explain runs per surface
@pytest.mark.parametrize("surface", list(SURFACES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names)
def test_no_name_injects(capsys: pytest.CaptureFixture[str], surface: str, name: str) -> None:
    _check(capsys, surface, name)
