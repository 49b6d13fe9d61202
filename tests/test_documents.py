"""The document layer: every JSON document pplan prints is a registered pydantic model whose published JSON Schema
(`pplan schema NAME`) describes exactly what the command prints.

Checked against the golden documents under `tests/golden/` (what the commands print, stored independently of the
models) with a small JSON Schema walker written here: every printed key is in the schema, every required key is
printed, every value has the schema's type and bounds; the models read the golden documents back and write them
out again unchanged, key order included. Also: `pplan schema` lists and prints every document and input profile,
and the renderers draw only what they are handed.
"""

from __future__ import annotations

import ast
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pplan.documents.base import version_of
from pplan.documents.registry import DOCUMENTS, INPUTS
from pplan.documents.schedule import ScheduleDocument
from pplan.documents.validate import ValidateDocument
from pplan.render import svg
from pplan.render.schedule import timeline_svg, timeline_svg_height
from pplan.schedules import get_schedule
from pplan.schedules.document_fields import schedule_fields
from pplan.schedules.timeline import Durations, simulate
from tests.cli_run import run_pplan

GOLDEN = Path(__file__).parent / "golden"
RENDER = Path(__file__).parent.parent / "pplan" / "render"

VERSIONS = {
    "explain": "pplan.explain/2",
    "recommend": "pplan.recommend/2",
    "schedule": "pplan.schedule/1",
    "bench": "pplan.bench/1",
    "validate": "pplan.validate/3",
    "size": "pplan.size/1",
    "compare": "pplan.compare/1",
    "fromlog": "pplan.fromlog/1",
    "bubble": "pplan.bubble/1",
}
"""The published version strings, as the README and the golden documents state them."""


def golden_documents() -> list[tuple[str, Path]]:
    """(document name, file) for every golden output document: the name is the file name's first word (skeletons,
    which hold the shape of a document rather than one, are left to their own test)."""
    found = []
    for path in sorted(GOLDEN.glob("*.json")):
        name = path.stem.split("-")[0]
        if name in VERSIONS and not path.stem.endswith("-skeleton"):
            found.append((name, path))
    return found


GOLDEN_DOCUMENTS = golden_documents()


# --- a JSON Schema walker (the subset pydantic writes: $ref, anyOf, properties, items, bounds) -------------------

_JSON_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].removeprefix("#/$defs/")
        node = root["$defs"][name]
    return node


def schema_gaps(value: Any, node: dict[str, Any], root: dict[str, Any], path: str = "$") -> list[str]:
    """Where `value` departs from the JSON Schema `node`: a key the schema does not list, a required key
    missing, a value of another type, out of its bounds or not among its choices."""
    node = _resolve(node, root)
    if "anyOf" in node:
        tries = [schema_gaps(value, branch, root, path) for branch in node["anyOf"]]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if "type" in node and not _JSON_TYPES[node["type"]](value):
        return [f"{path}: {value!r} is not of type {node['type']}"]
    if "const" in node and value != node["const"]:
        return [f"{path}: {value!r} != {node['const']!r}"]
    if "enum" in node and value not in node["enum"]:
        return [f"{path}: {value!r} not in {node['enum']}"]
    if "minimum" in node and value < node["minimum"]:
        return [f"{path}: {value!r} < {node['minimum']}"]
    if "exclusiveMinimum" in node and value <= node["exclusiveMinimum"]:
        return [f"{path}: {value!r} <= {node['exclusiveMinimum']}"]
    gaps: list[str] = []
    if isinstance(value, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                gaps += schema_gaps(item, props[key], root, f"{path}.{key}")
            elif isinstance(extra, dict):
                gaps += schema_gaps(item, extra, root, f"{path}.{key}")
            elif extra is False or props:
                gaps.append(f"{path}: key {key!r} is not in the schema")
        gaps += [f"{path}: required key {k!r} missing" for k in node.get("required", []) if k not in value]
    elif isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            gaps += schema_gaps(item, node["items"], root, f"{path}[{i}]")
    return gaps


def test_the_walker_sees_what_matters() -> None:
    """The walker itself: an unlisted key, a missing required key, a wrong type and a negative count all count."""
    root = ScheduleDocument.model_json_schema(mode="serialization")
    doc = json.loads((GOLDEN / "schedule-1f1b.json").read_text())
    assert schema_gaps(doc, root, root) == []
    assert schema_gaps({**doc, "surprise": 1}, root, root)
    assert schema_gaps({k: v for k, v in doc.items() if k != "makespan"}, root, root)
    assert schema_gaps({**doc, "pp": "4"}, root, root)
    assert schema_gaps({**doc, "p2p_messages_per_step": -1}, root, root)
    first = {**doc["actions"][0][0], "kind": "X"}
    assert schema_gaps({**doc, "actions": [[first]]}, root, root)


# --- the registry -------------------------------------------------------------------------------------------------


def test_the_registry_holds_every_document_with_its_published_version() -> None:
    assert {name: version_of(model) for name, model in DOCUMENTS.items()} == VERSIONS
    assert not set(DOCUMENTS) & set(INPUTS)


@pytest.mark.parametrize(("name", "path"), GOLDEN_DOCUMENTS, ids=[p.stem for _, p in GOLDEN_DOCUMENTS])
def test_every_golden_document_fits_its_published_schema(name: str, path: Path) -> None:
    """What the command printed (the golden file): its version is the registry's, the JSON Schema lists every key
    it holds and requires none it lacks, and the model reads it and writes it back unchanged, key order
    included."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    model = DOCUMENTS[name]
    assert doc["schema"] == version_of(model) == VERSIONS[name]
    schema = model.model_json_schema(by_alias=True, mode="serialization")
    gaps = schema_gaps(doc, schema, schema)
    assert not gaps, "\n".join(gaps[:20])
    again = model.model_validate(doc).model_dump(mode="json")
    assert json.dumps(again) == json.dumps(doc)


def test_every_document_kind_has_a_golden_file_but_bench() -> None:
    """bench/1 runs real processes, so its golden file is a skeleton (tests/test_bench_document.py)."""
    assert {name for name, _ in GOLDEN_DOCUMENTS} == set(VERSIONS) - {"bench"}
    assert (GOLDEN / "bench-skeleton.json").is_file()


@pytest.mark.parametrize("name", sorted(VERSIONS))
def test_published_schemas_are_closed_and_require_every_key(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`pplan schema NAME`: no object takes keys beyond its own, and every key is required except the ones a
    field says are left out (validate's `practice`, `recompute_gaps`, `memory` and `recent`, bench's `calibration`)."""
    res = run_pplan(capsys, "schema", name)
    assert res.code == 0, res.err
    schema = res.json()
    optional = {"practice", "recompute_gaps", "memory", "recent", "calibration"}
    for node in [schema, *schema.get("$defs", {}).values()]:
        assert node.get("additionalProperties") is False, node.get("title")
        assert set(node["properties"]) - set(node.get("required", [])) <= optional, node.get("title")
    assert "schema" in schema["required"]


def test_optional_blocks_are_left_out_not_null() -> None:
    """validate/3 without --practice (--memory) prints no `practice` (`memory`) key (the golden file has none), as its
    schema; the same document with the block prints it."""
    doc = json.loads((GOLDEN / "validate.json").read_text(encoding="utf-8"))
    assert all("practice" not in s for s in doc["sets"]) and "memory" not in doc
    assert "memory" not in ValidateDocument.model_validate(doc).model_dump(mode="json")
    model = ValidateDocument.model_validate(doc)
    assert all("practice" not in s for s in model.model_dump(mode="json")["sets"])
    row = {"published": "a", "published_tokens_per_s": None, "best": "b", "best_tokens_per_s": 1.0,
           "gap": None, "rank": None, "passes": False}  # fmt: skip
    with_practice = {**doc, "sets": [{**doc["sets"][0], "practice": [row]}]}
    dumped = ValidateDocument.model_validate(with_practice).model_dump(mode="json")
    assert dumped["sets"][0]["practice"] == [row]


def test_documents_refuse_unknown_keys_and_negative_times() -> None:
    doc = json.loads((GOLDEN / "schedule-1f1b.json").read_text(encoding="utf-8"))
    with pytest.raises(ValidationError):
        ScheduleDocument.model_validate({**doc, "unexpected": 1})
    first = {**doc["actions"][0][0], "start": -1.0}
    with pytest.raises(ValidationError):
        ScheduleDocument.model_validate({**doc, "actions": [[first], *doc["actions"][1:]]})


def test_schedule_document_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    timeline = simulate(get_schedule("zb-h1", 4, 8), Durations(1.0, 0.8, 0.6), latency=0.1)
    printed = run_pplan(capsys, "schedule", "zb-h1", "--pp", "4", "--microbatches", "8", "--b", "0.8",
                        "--w", "0.6", "--comm", "0.1", "--json").out  # fmt: skip
    document = ScheduleDocument.model_validate(schedule_fields(timeline))
    assert json.loads(printed) == document.model_dump(mode="json")


# --- pplan schema -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [(), ("--list",)])
def test_schema_lists_documents_with_versions_then_inputs(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    res = run_pplan(capsys, "schema", *args)
    assert res.code == 0, res.err
    rows = [line.split(None, 1) for line in res.out.splitlines()]
    assert [r[0] for r in rows] == [*VERSIONS, "hardware", "model"]
    assert {r[0]: r[1] for r in rows[: len(VERSIONS)]} == VERSIONS
    assert all(r[1].startswith("input: ") for r in rows[len(VERSIONS) :])


@pytest.mark.parametrize(("kind", "name", "schema"), [("hardware", "h100-sxm-80gb", "hardware"),
                                                      ("models", "llama3-8b", "model")])  # fmt: skip
def test_input_schemas_list_every_key_a_profile_holds(
    capsys: pytest.CaptureFixture[str], kind: str, name: str, schema: str
) -> None:
    """`pplan schema hardware|model` describes the profile files: every key `pplan profiles --json` prints for a
    bundled profile is in it, with the schema's type."""
    res = run_pplan(capsys, "schema", schema)
    assert res.code == 0, res.err
    root = res.json()
    profile = run_pplan(capsys, "profiles", kind, name, "--json").json()
    gaps = schema_gaps(profile, root, root)
    assert not gaps, "\n".join(gaps[:20])


def test_unknown_schema_is_one_line_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "schema", "nope")
    assert res.code == 2
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pplan: error: ")
    for choice in [*VERSIONS, "hardware", "model"]:
        assert choice in lines[0]
    res = run_pplan(capsys, "schema", "explain", "--list")
    assert res.code == 2 and res.err.startswith("pplan: error: --list")


# --- rendering ----------------------------------------------------------------------------------------------------


def test_svg_pieces_escape_what_they_write() -> None:
    assert (
        svg.text(1, 2, "a < b & c", font_size=12)
        == '<text x="1" y="2" font-size="12">a &lt; b &amp; c</text>'
    )
    assert svg.rect(0, 0, 5, 6, class_="k", fill='"x"', stroke=None) == (
        '<rect class="k" x="0" y="0" width="5" height="6" fill=\'"x"\'/>'
    )
    assert svg.element("circle", svg.title("<t>"), r=3) == '<circle r="3"><title>&lt;t&gt;</title></circle>'
    assert svg.document("<svg>", ["a"]) == "<svg>\na\n</svg>\n"


@pytest.mark.parametrize(("name", "p", "row_height"), [("1f1b", 2, 26), ("zbv", 4, 20), ("dualpipe", 6, 30)])
def test_timeline_svg_height_is_the_drawn_height(name: str, p: int, row_height: int) -> None:
    """The bench stacks two timelines by `timeline_svg_height`, computed from the data, not read back from the
    SVG; it must agree with the height the SVG declares."""
    timeline = simulate(get_schedule(name, p, 2 * p))
    root = ET.fromstring(timeline_svg(timeline, row_height=row_height))
    assert int(root.get("height", "-1")) == timeline_svg_height(timeline, row_height)
    nested = ET.fromstring(timeline_svg(timeline, row_height=row_height, y=40))
    assert nested.get("y") == "40"


SIMULATING = {
    "simulate",
    "get_schedule",
    "bubble_curves",
    "analyse",
    "launch",
    "explain",
    "search",
    "step_time",
}


@pytest.mark.parametrize("path", sorted(RENDER.glob("*.py")), ids=lambda p: p.name)
def test_renderers_import_nothing_that_computes(path: Path) -> None:
    """Renderers draw the data handed to them: none imports the simulator, the schedule builder, the bubble
    curves, the bench run or analysis, or the planners."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert not imported & SIMULATING, sorted(imported & SIMULATING)
