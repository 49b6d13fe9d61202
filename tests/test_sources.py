"""pplan refers to no file outside itself: facts cite their public sources, not the notes pplan was written from.

pplan was first written from two texts that are not part of it, with notes collected beside them. Its code,
comments, tests, profiles and documents must stand on their own: each figure cites the public source it comes from
(a paper with its arXiv id and section, table or equation; a vendor datasheet by name; a project's file at a named
release), never a path outside the repository nor those texts by their working name. `find_outside_references`
scans a text for such references; the tests run it over every file of the scanned trees and check that it
catches planted ones.

The needles are built by concatenation below, so this file does not match itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED_DIRS = ("pplan", "tests", "benchmarks", "hardware", "models", "docs")
SCANNED_FILES = ("README.md", "ARCHITECTURE.md", "CHANGELOG.md")
SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"})
BINARY_SUFFIXES = frozenset({".pyc", ".pyo", ".so", ".whl", ".gz", ".zip", ".png", ".jpg", ".pdf"})

MD, JSON = ".md", ".json"
PATH_NEEDLES = (
    ".." + "/shared",
    "shared" + "/reference",
    "shared" + "/se" + "eds",
    "launchers" + MD,
    "hardware" + MD,
    "formulas" + MD,
    "seed" + "-figures" + MD,
    "torch-pipelining" + "-notes" + MD,
    "calibration" + JSON,
)
_SEED = "the " + "seed"
# _SEED followed by 's (straight or typographic apostrophe) or by s, in any case; a random seed (_SEED alone,
# `manual_seed`, `--seed`) does not match.
_PHRASE = re.compile(r"\b" + _SEED + r"(?:['\u2019]s\b|s\b)", re.IGNORECASE)
_PATHS = re.compile("|".join(re.escape(n) for n in PATH_NEEDLES))


def find_outside_references(text: str) -> list[tuple[int, str]]:
    """(line number, matched text) for every path in PATH_NEEDLES and every _PHRASE (see above) in `text`."""
    hits: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        hits.extend((number, m.group(0)) for m in _PATHS.finditer(line))
        hits.extend((number, m.group(0)) for m in _PHRASE.finditer(line))
    return hits


def scanned_files(root: Path = ROOT) -> Iterator[Path]:
    """Every file of the scanned trees and top-level documents under `root`, caches and binaries left out."""
    for name in SCANNED_FILES:
        if (root / name).is_file():
            yield root / name
    for folder in SCANNED_DIRS:
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).parts
            if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in rel):
                continue
            if path.is_file() and path.suffix not in BINARY_SUFFIXES:
                yield path


def outside_references(root: Path = ROOT) -> list[str]:
    return [
        f"{path.relative_to(root).as_posix()}:{number}: {found}"
        for path in scanned_files(root)
        for number, found in find_outside_references(path.read_text(encoding="utf-8", errors="replace"))
    ]


def test_no_file_refers_outside_pplan_or_to_the_texts_it_was_written_from() -> None:
    hits = outside_references()
    assert not hits, "cite the public source instead:\n" + "\n".join(hits)


def test_the_scan_covers_the_tree() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in scanned_files()}
    for expected in (
        "README.md",
        "ARCHITECTURE.md",
        "pplan/__init__.py",
        "tests/test_sources.py",
        "tests/test_worked_example.py",
        "hardware/h100-sxm-80gb.toml",
        "models/llama3-70b.toml",
        "benchmarks/bench_pipeline.py",
    ):
        assert expected in names
    assert len(names) > 100


@pytest.mark.parametrize("needle", PATH_NEEDLES)
def test_the_scanner_finds_a_planted_path(needle: str) -> None:
    text = f'"""Fine.\n\nAs collected in {needle}, the figure is 16.8 MB."""\n'
    assert find_outside_references(text) == [(3, needle)]


@pytest.mark.parametrize(
    "planted",
    [
        _SEED + "'s 16 bytes per parameter",
        "as " + _SEED + "s write them",
        "The " + "Seed's whole-model figure",
        _SEED + "\u2019s figure",
    ],
)
def test_the_scanner_finds_a_planted_phrase(planted: str) -> None:
    hits = find_outside_references("x = 1\n# " + planted + "\n")
    assert [number for number, _ in hits] == [2]


def test_the_scanner_leaves_random_seeds_and_citations_alone() -> None:
    text = "\n".join(
        [
            "torch.manual_seed(config.seed)",
            "rng = random.Random(seed)",
            "pplan bench --seed 3",
            "builds the whole stack from " + _SEED + " (a random seed); seeded inputs",
            "34·s·b·h/t per layer (Korthikanti et al. 2022, arXiv 2205.05198, Table 2)",
            "NVIDIA dgxc-benchmarking, nemo_megatron/README_175b.md",
            "Megatron-LM's theoretical_memory_usage.py; tests/golden/explain-llama3-8b-t8.json",
        ]
    )
    assert find_outside_references(text) == []


def test_a_planted_file_fails_the_tree_scan(tmp_path: Path) -> None:
    (tmp_path / "pplan").mkdir()
    (tmp_path / "pplan" / "clean.py").write_text(
        '"""Ring all-reduce: 2(t−1)/t (Thakur et al. 2005)."""\n', encoding="utf-8"
    )
    assert outside_references(tmp_path) == []
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "planted.py").write_text("# see " + PATH_NEEDLES[1] + "/x\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("intro\n\n" + _SEED + "'s numbers\n", encoding="utf-8")
    (tmp_path / "tests" / "__pycache__").mkdir()
    (tmp_path / "tests" / "__pycache__" / "stale.txt").write_text(_SEED + "s\n", encoding="utf-8")
    assert outside_references(tmp_path) == [
        "README.md:3: " + _SEED + "'s",
        "tests/planted.py:1: " + PATH_NEEDLES[1],
    ]
