"""One JSON interface: every command that prints a document takes `--format json` and keeps `--json` as its alias
(the same bytes); `pplan schema --help` and `pplan schema --list` name the same documents; every property of
every document's and input profile's published JSON Schema carries a description."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pplan.documents.names import DOCUMENT_NAMES, INPUT_NAMES
from pplan.documents.registry import DOCUMENTS, INPUTS
from tests.cli_run import run_pplan

QUICK = {
    "explain": (
        "explain",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--global-batch",
        "16",
        "--tp",
        "8",
        "--pp",
        "1",
    ),
    "schedule": ("schedule", "1f1b", "--pp", "2", "--microbatches", "4"),
    "profiles": ("profiles", "hardware", "h100-sxm-80gb"),
    "bubble": ("bubble", "--pp", "4", "--microbatches", "4,8"),
}
"""Quick runs of commands printing a document (recommend's alias is tested in test_launcher_paste)."""
SLOW_OR_TORCH = ("validate", "bench")
"""Commands too slow here (or needing torch): their help must offer both spellings. (size: its own change.)"""


@pytest.mark.parametrize("name", sorted(QUICK))
def test_format_json_and_the_json_alias_print_the_same(capsys: pytest.CaptureFixture[str], name: str) -> None:
    formatted = run_pplan(capsys, *QUICK[name], "--format", "json")
    alias = run_pplan(capsys, *QUICK[name], "--json")
    assert formatted.code == alias.code == 0, formatted.err + alias.err
    assert formatted.out == alias.out and isinstance(formatted.json(), dict)


@pytest.mark.parametrize("name", ["recommend", *SLOW_OR_TORCH, *QUICK])
def test_every_document_command_offers_both_spellings(capsys: pytest.CaptureFixture[str], name: str) -> None:
    res = run_pplan(capsys, name, "--help")
    assert res.code == 0
    formats = re.search(r"--format <([^>]*)>", res.out)
    assert formats is not None and "json" in formats.group(1).split("|"), res.out
    assert re.search(r"^\s+--json\s", res.out, flags=re.M), res.out


def test_schema_help_and_list_name_the_same_documents(capsys: pytest.CaptureFixture[str]) -> None:
    listed = [line.split()[0] for line in run_pplan(capsys, "schema", "--list").out.splitlines()]
    assert listed == [*DOCUMENT_NAMES, *INPUT_NAMES] == [*DOCUMENTS, *INPUTS]
    help_text = " ".join(run_pplan(capsys, "schema", "--help").out.split())
    named = re.search(r"A document \(([^)]*)\) or an input profile \(([^)]*)\)", help_text)
    assert named is not None, help_text
    assert named.group(1).split(", ") + named.group(2).split(", ") == listed


def _undescribed(schema: dict[str, Any]) -> list[str]:
    """`Class.property` for every property of `schema` and its definitions without a description (a property
    given as a bare reference counts as described when the referenced class is)."""
    defs = schema.get("$defs", {})
    out = []
    for owner, body in [(schema.get("title", "?"), schema), *defs.items()]:
        for prop, spec in body.get("properties", {}).items():
            if "description" in spec:
                continue
            target = spec.get("$ref", "").rsplit("/", 1)[-1]
            if target and "description" in defs.get(target, {}):
                continue
            out.append(f"{owner}.{prop}")
    return out


@pytest.mark.parametrize("name", DOCUMENT_NAMES)
def test_every_schema_property_is_described(name: str) -> None:
    schema = DOCUMENTS[name].model_json_schema(by_alias=True, mode="serialization")
    assert _undescribed(schema) == []


@pytest.mark.parametrize("name", INPUT_NAMES)
def test_every_input_profile_property_is_described(name: str) -> None:
    """`pplan schema hardware` and `pplan schema model` too: what a profile file may hold (the calibration
    envelope's bounds had none)."""
    schema = INPUTS[name][0].model_json_schema(by_alias=True, mode="validation")
    assert _undescribed(schema) == []


def test_the_walker_finds_an_undescribed_property() -> None:
    from pplan.documents.base import Out

    class Bare(Out):
        described: int
        """A property with a description."""
        bare: int

    assert _undescribed(Bare.model_json_schema(mode="serialization")) == ["Bare.bare"]


def test_the_bubble_document_holds_the_charts_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """`pplan bubble --format json` (it had no JSON output): 1F1B's bubble is (p − 1)/m of the ideal time and
    interleaving's (p − 1)/(v·m), on equal passes (Narayanan et al. 2021, eq. 1 and 2); the table prints the same
    figures in percent."""
    res = run_pplan(capsys, "bubble", "--pp", "4", "--microbatches", "8,4,16", "--format", "json")
    assert res.code == 0, res.err
    doc = res.json()
    assert (
        doc["schema"] == "pplan.bubble/1" and doc["microbatches"] == [4, 8, 16] and doc["measure"] == "span"
    )
    curves = {(c["schedule"], c["v"]): c for c in doc["curves"]}
    for (name, v), curve in curves.items():
        if name in ("1f1b", "interleaved-1f1b"):
            want = [(4 - 1) / (v * m) for m in curve["microbatches"]]
            assert curve["bubble_fraction_of_ideal"] == pytest.approx(want), (name, v)
    assert {(n, v) for n, v in curves} >= {("1f1b", 1), ("interleaved-1f1b", 2), ("interleaved-1f1b", 4)}
    table = run_pplan(capsys, "bubble", "--pp", "4", "--microbatches", "8,4,16").out
    row = next(line for line in table.splitlines() if "1F1B" in line and "interleaved" not in line)
    shown = [float(x) for x in re.findall(r"(\d+\.\d)%", row)]
    assert shown == [round(100 * f, 1) for f in curves["1f1b", 1]["bubble_fraction_of_ideal"]]
