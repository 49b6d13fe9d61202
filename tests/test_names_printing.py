"""Names and free text from inputs cannot inject into output (issue 38, item 3).

A newline in a model's `name` once became an uncommented argument line in `--format megatron` output, and escape
sequences in model, GPU and config-folder names were printed raw. Names are now validated where profiles are
(`pplan.profiles.text`), names pplan derives from a folder are made safe, and the launcher comment lines, the SVG
helper and `profiles --source` escape whatever reaches them anyway.
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pplan.errors import ProfileError
from pplan.launchers.megatron import megatron_text
from pplan.launchers.torchtitan import torchtitan_text
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import list_profiles, load_hardware, load_model, profile_source
from pplan.profiles.text import escaped, name_problem, safe_name
from pplan.render import svg
from tests.cli_run import run_pplan
from tests.regression_corpus import HF_LLAMA

LLAMA = load_model("llama3-8b")
PLAN = make_plan(LLAMA, PlanRequest(gpus=8, global_batch=8, tp=8))
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""Characters no output line may hold: C0 and C1 controls but tab and newline, bidirectional marks and overrides,
and the Unicode line and paragraph separators (written out here, not taken from pplan)."""

HOSTILE_NAMES = [
    "x\n--foo $(touch INJECTED)",
    "title\x1b]0;pwned\x07\x1b[2J",
    "back`touch INJECTED`tick",
    "[bold red]loud[/]",
    "rtl\u202eexe.txt",
    "semi; rm -rf x",
    "a" * 65,
    "",
    "tab\there",
    "line\u2028sep",
]


def _set(source: str, key: str, value: str, section: str | None = None) -> str:
    """`source` (a profile's TOML) with the first `key = ...` (in `[section]` when given) set to `value`."""
    start = 0 if section is None else source.index(f"\n[{section}]\n")
    pattern = re.compile(rf"(?m)^{re.escape(key)} = .*$")
    match = pattern.search(source, start)
    assert match is not None, key
    return source[: match.start()] + f"{key} = {json.dumps(value)}" + source[match.end() :]


def _write(tmp_path: Path, text: str, name: str = "p.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _refusal(load: object, path: str) -> str:
    with pytest.raises(ProfileError) as info:
        load(path)  # type: ignore[operator]
    text = info.value.one_line()
    assert "\n" not in text
    return text


# --- bundled profiles keep loading -------------------------------------------------------------------------


def test_every_bundled_name_and_text_is_accepted() -> None:
    for entry in list_profiles("models"):
        assert name_problem(load_model(entry.name).name) is None
    for entry in list_profiles("hardware"):
        hardware = load_hardware(entry.name)
        for name in (hardware.name, hardware.gpu.name, hardware.intra_node.name, hardware.inter_node.name):
            assert name_problem(name) is None, name


# --- the boundary: one line naming the field and the fix --------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_model_name_is_refused_naming_the_field(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, _set(profile_source("models", "llama3-8b"), "name", name))
    text = _refusal(load_model, path)
    assert text.startswith(f"{path}: name: ")
    assert "use letters, digits, spaces" in text or "; give a " in text
    assert not CONTROL.search(text)


@pytest.mark.parametrize(
    ("key", "section"), [("name", None), ("name", "gpu"), ("name", "intra_node"), ("name", "inter_node")]
)
def test_a_hostile_hardware_name_is_refused_naming_the_field(
    tmp_path: Path, key: str, section: str | None
) -> None:
    source = profile_source("hardware", "h100-sxm-80gb")
    path = _write(tmp_path, _set(source, key, "H100\x1b]0;pwned\x07", section))
    field = key if section is None else f"{section}.{key}"
    assert _refusal(load_hardware, path).startswith(f"{path}: {field}: holds the character \\x1b")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("two\nlines", "holds the character \\n"),
        ("[red]markup[/]", "holds '[', which tables read as markup"),
        ("x" * 501, "is 501 characters long"),
    ],
)
def test_hostile_free_text_is_refused(tmp_path: Path, text: str, said: str) -> None:
    path = _write(tmp_path, _set(profile_source("models", "llama3-8b"), "description", text))
    assert _refusal(load_model, path).startswith(f"{path}: description: {said}")


def test_the_megatron_injection_is_refused_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reproduction as written: a newline and `$(touch INJECTED)` in the name, `--format megatron`."""
    path = _write(tmp_path, _set(profile_source("models", "llama3-8b"), "name", HOSTILE_NAMES[0]))
    got = run_pplan(
        capsys,
        "recommend",
        "--model",
        path,
        "--hardware",
        "h100-sxm-80gb",
        "--gpus",
        "8",
        "--format",
        "megatron",
    )
    assert got.code == 2 and got.out == ""
    assert got.err.count("\n") == 1 and f"{path}: name: holds the character \\n" in got.err


# --- defence in depth: what reaches output is escaped -----------------------------------------------------


def _run_as_bash(text: str, cwd: Path) -> None:
    """Paste `text` into a shell script and run it (it fails: the flags are no command; nothing else may run)."""
    subprocess.run(["bash", "-c", text], cwd=cwd, capture_output=True, timeout=30, check=False)


@pytest.mark.parametrize("launcher", ["megatron", "torchtitan", "torchtitan@0.2"])
def test_launcher_text_escapes_a_name_that_skipped_validation(tmp_path: Path, launcher: str) -> None:
    """A spec built in code (model_copy skips validation) with a hostile name: every line is still a comment or
    a flag line, and pasting the text into a shell runs nothing of the name."""
    hostile = LLAMA.model_copy(update={"name": "x\n$(touch INJECTED)\n`touch INJECTED`\x1b[2J"})
    if launcher == "megatron":
        text, plain = megatron_text(hostile, PLAN), megatron_text(LLAMA, PLAN)
    else:
        text, plain = torchtitan_text(launcher, hostile, PLAN), torchtitan_text(launcher, LLAMA, PLAN)
    assert text.count("\n") == plain.count("\n")
    assert not CONTROL.search(text)
    _run_as_bash(text, tmp_path)
    assert not (tmp_path / "INJECTED").exists()


def test_svg_text_tooltips_and_attributes_hold_no_control_character() -> None:
    hostile = "a\n</text><script>x</script>\x1b[2J\u202e"
    drawing = svg.document(
        svg.open_svg(10, 10),
        [svg.text(1, 2, hostile, class_=hostile), svg.rect(0, 0, 1, 1, tooltip=hostile)],
    )
    assert not CONTROL.search(drawing)
    assert drawing.count("\n") == 4  # the start tag, two parts, the end tag, the final newline
    root = ET.fromstring(drawing)
    assert [el.tag.split("}")[1] for el in root.iter()] == ["svg", "text", "rect", "title"]
    shown = root.find("{http://www.w3.org/2000/svg}text")
    assert shown is not None and shown.text == "a\\n</text><script>x</script>\\x1b[2J\\u202e"


def test_a_config_folder_name_becomes_a_safe_model_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "evil\x1b]0;pwned\x07\x1b[2J[bold]x"
    folder.mkdir()
    path = _write(folder, json.dumps(HF_LLAMA), "config.json")
    model = load_model(path)
    assert model.name == "evil_0_pwned_2J_bold_x"  # each run of refused characters is one underscore
    assert not CONTROL.search(model.source) and "[" not in model.source
    got = run_pplan(capsys, "explain", "--model", path, "--gpus", "8", "--tp", "8", "--pp", "1")
    assert got.code == 0, got.err
    assert not CONTROL.search(got.out) and "evil_0_pwned_2J_bold_x" in got.out


def test_profile_source_escapes_what_a_terminal_acts_on(tmp_path: Path) -> None:
    raw = profile_source("models", "llama3-8b") + "# \x1b]0;pwned\x07 and \u202e\n"
    shown = profile_source("models", _write(tmp_path, raw))
    assert shown.endswith("# \\x1b]0;pwned\\x07 and \\u202e\n")
    assert shown.count("\n") == raw.count("\n")


def test_safe_name_and_escaped() -> None:
    assert safe_name("Meta-Llama-3.1-8B") == "Meta-Llama-3.1-8B"
    assert safe_name("\x1b\x1b") == "model"
    assert len(safe_name("x" * 100)) == 64
    assert escaped("a\x1b[1m\n") == "a\\x1b\\x5b1m\\n"
    assert escaped("a[b]", markup=False) == "a[b]"


def test_compare_escapes_names_read_from_report_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reports are user files pplan did not validate as profiles: their names and labels print escaped."""
    got = run_pplan(
        capsys, "explain", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--pp", "1", "--json"
    )
    assert got.code == 0, got.err
    report = json.loads(got.out)
    (tmp_path / "a.json").write_text(got.out, encoding="utf-8")
    report["hardware"]["name"] = "hw\x1b]0;pwned\x07[bold]"
    report["performance"]["breakdown_s"]["evil\x1b[31m\nline"] = 0.5
    (tmp_path / "b.json").write_text(json.dumps(report), encoding="utf-8")
    got = run_pplan(capsys, "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert got.code == 0, got.err
    assert not CONTROL.search(got.out)
    unwrapped = "".join(got.out.split())  # rich may wrap the title or the caption
    assert "hw\\x1b\\x5d0;pwned\\x07\\x5bbold\\x5d" in unwrapped
    assert "evil\\x1b\\x5b31m\\nline" in unwrapped
