"""`pplan bench --json` ("pplan.bench/1") end to end: a tiny sleep-mode run whose document validates against
`BenchDocument` and whose key structure equals the golden skeleton `tests/golden/bench-skeleton.json`.

Timings vary from run to run, so the golden file holds the shape, not the values: every key in order, and for each
value its JSON type ("integer", "number", "string", "boolean", "null"; "integer|null" where a value is null on
some machines, e.g. CUDA peaks without a GPU); a list holds the skeleton all its items share. Regenerate with
`PPLAN_UPDATE_GOLDEN=1` and read the diff (the nullable leaves are written by hand).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.cli_run import run_pplan

GOLDEN = Path(__file__).parent / "golden" / "bench-skeleton.json"
UPDATE = os.environ.get("PPLAN_UPDATE_GOLDEN") == "1"

TINY = ("bench", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "--steps", "1", "--warmup", "1",
        "--f-ms", "2", "--i-ms", "2", "--w-ms", "2", "--json")  # fmt: skip


def _leaf(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    assert isinstance(value, str), value
    return "string"


def _merge(a: Any, b: Any) -> Any:
    """One skeleton for two list items: leaves of different types join as "a|b"."""
    if isinstance(a, str) and isinstance(b, str):
        return "|".join(sorted(set(a.split("|")) | set(b.split("|"))))
    if isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b):
        return {k: _merge(a[k], b[k]) for k in a}
    if isinstance(a, list) and isinstance(b, list):
        if not a or not b:
            return a or b
        return [_merge(a[0], b[0])]
    raise AssertionError(f"list items of different shapes: {a!r} and {b!r}")


def skeleton(value: Any) -> Any:
    """Keys in order and JSON types of `value`; a list becomes [the skeleton its items share] ([] when empty)."""
    if isinstance(value, dict):
        return {k: skeleton(v) for k, v in value.items()}
    if isinstance(value, list):
        shared: Any = None
        for item in value:
            shape = skeleton(item)
            shared = shape if shared is None else _merge(shared, shape)
        return [] if shared is None else [shared]
    return _leaf(value)


def skeleton_differences(want: Any, got: Any, path: str = "$") -> list[str]:
    """Where `got` departs from `want`: keys and their order exactly; a leaf type must be one `want` allows."""
    if isinstance(want, dict) and isinstance(got, dict):
        if list(want) != list(got):
            return [f"{path}: keys {list(got)} != {list(want)}"]
        return [d for k in want for d in skeleton_differences(want[k], got[k], f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if not want or not got:
            return [] if not want and not got else [f"{path}: {got!r} != {want!r}"]
        return skeleton_differences(want[0], got[0], f"{path}[]")
    if isinstance(want, str) and isinstance(got, str):
        return [] if set(got.split("|")) <= set(want.split("|")) else [f"{path}: {got} not {want}"]
    return [f"{path}: {got!r} != {want!r}"]


def test_skeleton_sees_what_matters() -> None:
    want = {"a": "integer", "b": ["integer|null"], "c": [{"x": "number"}]}
    assert skeleton_differences(want, skeleton({"a": 1, "b": [None, 3], "c": [{"x": 1.0}]})) == []
    assert skeleton_differences(want, skeleton({"a": 1.0, "b": [], "c": [{"x": 1.0}]}))
    assert skeleton_differences(want, skeleton({"b": [1], "a": 1, "c": [{"x": 1.0}]}))
    assert skeleton_differences(want, skeleton({"a": 1, "b": ["s"], "c": [{"x": 1.0}]}))
    assert skeleton_differences(want, skeleton({"a": 1, "b": [1], "c": [{"x": 1.0, "y": 2}]}))


@pytest.mark.acceptance
def test_bench_json_validates_and_matches_the_golden_skeleton(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.pipelining")
    from pplan.documents.base import version_of
    from pplan.documents.bench import BenchDocument
    from pplan.documents.registry import DOCUMENTS

    res = run_pplan(capsys, *TINY)
    assert res.code == 0, res.err
    doc = res.json()
    assert DOCUMENTS["bench"] is BenchDocument
    assert doc["schema"] == version_of(BenchDocument) == "pplan.bench/1"
    model = BenchDocument.model_validate(doc)
    assert json.dumps(model.model_dump(mode="json")) == json.dumps(
        doc
    )  # written back unchanged, key order too
    assert doc["config"]["mode"] == "sleep" and "calibration" not in doc
    # each step is a pplan.schedule/1 block first (its keys in its order), then the bench's own keys
    schedule_keys = list(json.loads((GOLDEN.parent / "schedule-1f1b.json").read_text(encoding="utf-8")))
    for block in ("measured", "predicted"):
        assert list(doc[block])[: len(schedule_keys)] == schedule_keys
        assert doc[block]["schema"] == "pplan.schedule/1"
    got = skeleton(doc)
    if UPDATE:
        GOLDEN.write_text(json.dumps(got, indent=2) + "\n", encoding="utf-8")
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    found = skeleton_differences(want, got)
    assert not found, "\n".join(found[:20])
