"""Golden files: every versioned JSON document pplan prints, for a fixed set of command lines, compared with the
copy stored under `tests/golden/` (numbers to a relative 1e-9, everything else exactly).

A golden file pins behaviour across refactors: a change that moves a number or renames a key fails here, and
whoever makes it on purpose regenerates the files and reads the diff:

    PPLAN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_documents.py --all-tiers

(`--all-tiers`: `validate` fits every GPU type's efficiency with each set left out, and `--fit` in sample too,
seconds of work, so their golden files are checked in the acceptance tier; the fast tier compares the H100 part of
`validate --fit`.)
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from pplan.profiles.catalog import load_published_runs
from tests.cli_run import run_pplan

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("PPLAN_UPDATE_GOLDEN") == "1"

CASES: dict[str, tuple[str, ...]] = {
    "explain-llama3-8b-t8": (
        "explain",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--tp",
        "8",
        "--pp",
        "1",
        "--json",
    ),
    "explain-llama3-70b-interleaved": (
        "explain",
        "--model",
        "llama3-70b",
        "--gpus",
        "64",
        "--global-batch",
        "128",
        "--tp",
        "4",
        "--pp",
        "4",
        "--vp",
        "2",
        "--schedule",
        "interleaved-1f1b",
        "--micro-batch",
        "1",
        "--recompute",
        "selective",
        "--distributed-optimizer",
        "--json",
    ),
    "explain-gpt3-korthikanti-zbv": (
        "explain",
        "--model",
        "gpt3-175b",
        "--hardware",
        "a100-sxm-80gb",
        "--gpus",
        "1024",
        "--global-batch",
        "1536",
        "--tp",
        "8",
        "--pp",
        "16",
        "--schedule",
        "zbv",
        "--micro-batch",
        "1",
        "--recompute",
        "full",
        "--activation-model",
        "korthikanti",
        "--grad-dtype",
        "bf16",
        "--json",
    ),
    "explain-llama3-405b-dualpipev-cp": (
        "explain",
        "--model",
        "llama3-405b",
        "--gpus",
        "2048",
        "--global-batch",
        "2048",
        "--tp",
        "8",
        "--pp",
        "8",
        "--cp",
        "2",
        "--schedule",
        "dualpipev",
        "--first-stage-layers",
        "7",
        "--last-stage-layers",
        "7",
        "--micro-batch",
        "1",
        "--recompute",
        "full",
        "--zero-stage",
        "1",
        "--train-tokens",
        "15e12",
        "--json",
    ),
    "explain-llama3-8b-unit-uneven": (
        "explain",
        "--model",
        "llama3-8b",
        "--gpus",
        "16",
        "--global-batch",
        "64",
        "--tp",
        "2",
        "--pp",
        "4",
        "--schedule",
        "zb-h1",
        "--first-stage-layers",
        "7",
        "--last-stage-layers",
        "7",
        "--pass-durations",
        "unit",
        "--all-stages",
        "--no-flash-attention",
        "--json",
    ),
    "recommend-llama3-8b-64": (
        "recommend",
        "--model",
        "llama3-8b",
        "--gpus",
        "64",
        "--global-batch",
        "256",
        "--format",
        "json",
    ),
    "size-llama3-8b": (
        "size",
        "--model",
        "llama3-8b",
        "--train-tokens",
        "1e12",
        "--hardware",
        "h100-sxm-80gb,b200-180gb",
        "--gpus",
        "8,16,32",
        "--days",
        "60",
        "--price",
        "h100-sxm-80gb=2.5,b200-180gb=5",
        "--jobs",
        "1",
        "--json",
    ),
    "recommend-llama3-70b-pinned": (
        "recommend",
        "--model",
        "llama3-70b",
        "--gpus",
        "256",
        "--global-batch",
        "512",
        "--tp",
        "8",
        "--recompute",
        "selective,full",
        "--zero-stage",
        "0,1",
        "--launcher",
        "megatron",
        "--top",
        "5",
        "--format",
        "json",
    ),
    "schedule-1f1b": ("schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--json"),
    "bubble-p4": ("bubble", "--pp", "4", "--microbatches", "4,8,16", "--format", "json"),
    "schedule-interleaved": (
        "schedule",
        "interleaved-1f1b",
        "--pp",
        "4",
        "--vp",
        "2",
        "--microbatches",
        "8",
        "--comm",
        "0.1",
        "--json",
    ),
    "schedule-zbv-unequal": (
        "schedule",
        "zbv",
        "--pp",
        "4",
        "--microbatches",
        "8",
        "--f",
        "1",
        "--b",
        "1.5",
        "--w",
        "0.7",
        "--json",
    ),
    "schedule-dualpipe": ("schedule", "dualpipe", "--pp", "4", "--microbatches", "10", "--json"),
    "validate": ("validate", "--json"),
    "validate-fit": ("validate", "--fit", "--json"),
    "validate-memory": ("validate", "--memory", "--json"),
    "profiles-hardware-h100": ("profiles", "hardware", "h100-sxm-80gb", "--json"),
    "profiles-models-llama3-8b": ("profiles", "models", "llama3-8b", "--json"),
    "profiles-all": ("profiles", "--json"),
    "fromlog-torchtitan-h100": (
        "explain",
        "--from-log",
        "tests/data/logs/torchtitan_2025_h100_allranks.log",
        "--json",
    ),
    "compare-llama3-8b-t8-70b-interleaved": (
        "compare",
        str(GOLDEN / "explain-llama3-8b-t8.json"),
        str(GOLDEN / "explain-llama3-70b-interleaved.json"),
        "--format",
        "json",
    ),
}


def differences(want: Any, got: Any, path: str = "$") -> list[str]:
    """Where `got` departs from `want`: keys, lengths, types, strings exactly; numbers to a relative 1e-9."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}: keys {sorted(set(want) ^ set(got))} differ"] if set(want) != set(got) else []
        if list(want) != list(got) and not out:
            out.append(f"{path}: key order {list(got)} != {list(want)}")
        for key in want.keys() & got.keys():
            out += differences(want[key], got[key], f"{path}.{key}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: length {len(got)} != {len(want)}"]
        return [
            d
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for d in differences(w, g, f"{path}[{i}]")
        ]
    if isinstance(want, bool) or isinstance(got, bool) or not isinstance(want, int | float):
        return [] if want == got and type(want) is type(got) else [f"{path}: {got!r} != {want!r}"]
    if not isinstance(got, int | float) or type(want) is not type(got):
        return [f"{path}: {got!r} ({type(got).__name__}) != {want!r} ({type(want).__name__})"]
    return [] if math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12) else [f"{path}: {got!r} != {want!r}"]


def test_differences_sees_what_matters() -> None:
    """The comparison itself: a moved number, a renamed key, a retyped value and a reordered key all count."""
    base = {"a": 1.0, "b": [1, "x"], "c": True}
    assert differences(base, {"a": 1.0 + 1e-12, "b": [1, "x"], "c": True}) == []
    assert differences(base, {"a": 1.001, "b": [1, "x"], "c": True})
    assert differences(base, {"a": 1.0, "B": [1, "x"], "c": True})
    assert differences(base, {"a": 1.0, "b": [1.0, "x"], "c": True})
    assert differences(base, {"a": 1.0, "b": [1, "x"], "c": 1})
    assert differences(base, {"b": [1, "x"], "a": 1.0, "c": True})


SLOW_CASES = {"validate", "validate-fit"}
"""Both fit the A100 sets (in sample with --fit, and leaving each set out): the Megatron set's ten runs go up to 1T
parameters on 3,072 GPUs, seconds of work."""
assert set(CASES) >= SLOW_CASES


VALIDATE_GROUP = pytest.mark.xdist_group("validate")
"""The validate runs share their fits in one test process (tests/conftest.py): one worker takes them all."""


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=[pytest.mark.acceptance, VALIDATE_GROUP])
        if c in SLOW_CASES
        else pytest.param(c, marks=VALIDATE_GROUP)
        if c.startswith("validate")
        else c
        for c in sorted(CASES)
    ],
)
def test_document_matches_golden(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *CASES[case])
    assert res.code == 0, res.err
    got = res.json()
    path = GOLDEN / f"{case}.json"
    if UPDATE:
        path.write_text(json.dumps(got, indent=2) + "\n", encoding="utf-8")
    want = json.loads(path.read_text(encoding="utf-8"))
    found = differences(want, got)
    assert not found, "\n".join(found[:20])


def test_validate_fit_matches_golden_for_one_gpu_type(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast tier's share of `validate-fit`: with only the H100 sets published, the document is the golden
    file's with those sets alone (each GPU type is fitted on its own sets; the H100 fits take a second or two)."""
    import pplan.profiles.catalog as catalog  # `pplan validate` imports its loaders per run

    hardware = "h100-sxm-80gb"
    runs = load_published_runs()
    some = {**runs, "sets": [s for s in runs["sets"] if s["hardware"] == hardware]}
    assert len(some["sets"]) >= 2
    monkeypatch.setattr(catalog, "load_published_runs", lambda: some)
    res = run_pplan(capsys, *CASES["validate-fit"])
    assert res.code == 0, res.err
    golden = json.loads((GOLDEN / "validate-fit.json").read_text(encoding="utf-8"))
    want = {**golden, "sets": [s for s in golden["sets"] if s["hardware"] == hardware]}
    assert len(want["sets"]) == len(some["sets"])
    found = differences(want, res.json())
    assert not found, "\n".join(found[:20])
