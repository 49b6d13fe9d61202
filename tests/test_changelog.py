"""CHANGELOG.md is release notes (Keep a Changelog 1.1.0), not a development log.

An "Unreleased" section comes first, then one `## [x.y.z] - YYYY-MM-DD` section per version, newest first, the
newest being pyproject's `version`; inside a section only Keep a Changelog's kinds of change (`### Added`, ...).
Entries speak to users: no issue numbers (`issue 12`, `#12`), which belong to the git history. `changelog_problems`
checks a text; the tests run it on CHANGELOG.md and check that it catches planted faults.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KINDS = frozenset({"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"})
_VERSION = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
_ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)


def pyproject_version(root: Path = ROOT) -> str:
    with (root / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def changelog_problems(text: str, version: str) -> list[str]:
    """Every way `text` departs from the layout above, one line each (empty: none); `version` is pyproject's."""
    problems: list[str] = []
    sections = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.startswith("## ")]
    if not sections or sections[0][1] != "## [Unreleased]":
        problems.append("the first section is not '## [Unreleased]'")
    released: list[tuple[int, tuple[int, int, int], dt.date]] = []
    for number, line in sections:
        if line == "## [Unreleased]":
            if number != sections[0][0]:
                problems.append(f"line {number}: a second or later Unreleased section")
            continue
        match = _VERSION.match(line)
        if match is None:
            problems.append(f"line {number}: not '## [x.y.z] - YYYY-MM-DD': {line!r}")
            continue
        try:
            date = dt.date.fromisoformat(match.group(4))
        except ValueError:
            problems.append(f"line {number}: no such date {match.group(4)}")
            continue
        released.append((number, (int(match[1]), int(match[2]), int(match[3])), date))
    newest = ".".join(map(str, released[0][1])) if released else None
    if newest is not None and newest != version:
        problems.append(f"the newest version section is {newest}, pyproject says {version}")
    for (_, newer, newer_date), (number, older, older_date) in itertools.pairwise(released):
        if older >= newer:
            problems.append(f"line {number}: version {older} does not come before {newer}")
        if older_date > newer_date:
            problems.append(f"line {number}: dated {older_date}, after the newer version's {newer_date}")
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("### ") and line[4:] not in KINDS:
            problems.append(f"line {number}: {line!r} is not one of {', '.join(sorted(KINDS))}")
        problems.extend(f"line {number}: issue reference {m.group(0)!r}" for m in _ISSUE.finditer(line))
    return problems


def test_the_changelog_is_release_notes() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog_problems(text, pyproject_version()) == []


GOOD = """# Changelog

## [Unreleased]

### Added
- `pplan size --budget`.

## [0.2.0] - 2026-12-10

### Fixed
- Exit code 1 when nothing fits.

## [0.1.0] - 2026-11-29

### Added
- `pplan recommend`.
"""


def test_a_well_formed_changelog_passes() -> None:
    assert changelog_problems(GOOD, "0.2.0") == []


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (lambda t: t.replace("## [Unreleased]\n", ""), "first section"),
        (lambda t: t.replace("- `pplan recommend`.", "- `pplan recommend` (issue 12)."), "issue reference"),
        (lambda t: t.replace("- `pplan recommend`.", "- `pplan recommend` (#12)."), "issue reference"),
        (lambda t: t.replace("2026-12-10", "2026-13-10"), "no such date"),
        (lambda t: t.replace("2026-12-10", "2026-11-01"), "after the newer version"),
        (lambda t: t.replace("[0.1.0]", "[0.3.0]"), "does not come before"),
        (lambda t: t.replace("[0.2.0] - 2026-12-10", "[0.2.0]"), "not '## [x.y.z]"),
        (lambda t: t.replace("### Fixed", "### Fixed (issue 14)"), "is not one of"),
        (lambda t: t.replace("### Fixed", "### Performance"), "is not one of"),
    ],
)
def test_planted_faults_are_caught(edit: Callable[[str], str], found: str) -> None:
    problems = changelog_problems(edit(GOOD), "0.2.0")
    assert any(found in p for p in problems), problems


def test_the_newest_version_must_be_pyprojects() -> None:
    assert any("pyproject says 0.3.0" in p for p in changelog_problems(GOOD, "0.3.0"))
