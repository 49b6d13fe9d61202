"""validate's summary table breaks a set's name only after a hyphen (issue 47: names broken mid-word at 80
columns): rendered at several widths from the golden document, each name's lines join back to the name and every
line but its last ends at a hyphen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from pplan.documents.validate import ValidateDocument
from pplan.render.validate import summary_table

GOLDEN = Path(__file__).resolve().parent / "golden" / "validate.json"


@pytest.mark.parametrize("width", [80, 90, 100, 140])
def test_set_names_break_after_hyphens_only(width: int) -> None:
    doc = ValidateDocument.model_validate(json.loads(GOLDEN.read_text(encoding="utf-8")))
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as capture:
        console.print(summary_table(doc.sets, width))
    names: list[list[str]] = []
    for line in capture.get().splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 7 or cells[0] in ("", "set"):
            continue
        if cells[1]:  # a row's first line names its GPU
            names.append([])
        names[-1].append(cells[0])
    assert ["".join(parts) for parts in names] == [s.set_ for s in doc.sets]
    for parts in names:
        assert all(part.endswith("-") for part in parts[:-1]), parts
        assert max(len(p) for p in parts) <= width
