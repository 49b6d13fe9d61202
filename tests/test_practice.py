"""Sanity against practice: the published H100 GPT-3 175B configuration is among recommend's best."""

from __future__ import annotations

import pytest

from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.validation.practice import GAP, TOP, practice_rows

SETS = {s["name"]: s for s in load_published_runs()["sets"]}


def test_nvidia_gpt3_runs_rank_near_the_top() -> None:
    data = SETS["nvidia-dgxc-gpt3-175b-bf16"]
    rows = practice_rows(data, load_model, load_hardware(data["hardware"]))
    assert len(rows) == len(data["rows"])
    for row in rows:
        assert row.published.startswith("t=4 p=8 v=12")  # the published layout, explained as published
        assert row.gap is not None and row.gap == pytest.approx(
            1 - row.published_tokens_per_s / row.best_tokens_per_s
        )  # type: ignore[operator]
        assert row.passes, row
        assert (row.rank is not None and row.rank <= TOP) or row.gap <= GAP
