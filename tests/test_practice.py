"""Sanity against practice: the published H100 GPT-3 175B configuration is among recommend's best."""

from __future__ import annotations

from typing import Any

import pytest

from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.validation.practice import GAP, TOP, practice_rows

SETS = {s["name"]: s for s in load_published_runs()["sets"]}
NVIDIA = SETS["nvidia-dgxc-gpt3-175b-bf16"]


def _check_ranks_near_the_top(data: dict[str, Any]) -> None:
    rows = practice_rows(data, load_model, load_hardware(data["hardware"]))
    assert len(rows) == len(data["rows"])
    for row in rows:
        assert row.published.startswith("t=4 p=8 v=12")  # the published layout, explained as published
        assert row.published_tokens_per_s is not None, row  # it fits under pplan's memory model
        assert row.gap == pytest.approx(1 - row.published_tokens_per_s / row.best_tokens_per_s)
        assert row.passes, row
        assert (row.rank is not None and row.rank <= TOP) or (row.gap is not None and row.gap <= GAP)


def test_the_512_gpu_nvidia_gpt3_run_ranks_near_the_top() -> None:
    """The fast tier's check: one run (a search of its own, under a second)."""
    (run,) = [r for r in NVIDIA["rows"] if r["gpus"] == 512]
    _check_ranks_near_the_top({**NVIDIA, "rows": [run]})


@pytest.mark.acceptance
def test_nvidia_gpt3_runs_rank_near_the_top() -> None:
    _check_ranks_near_the_top(NVIDIA)


def test_practice_skips_per_layer_sets_and_builds_inline_models() -> None:
    # `validate --practice` walks every set: a per-layer set has no configuration to search for, and the README
    # table's models are built from the set's template (regression: both raised KeyError 'model')
    sets = {s["name"]: s for s in load_published_runs()["sets"]}
    layer = sets["korthikanti-table4-layer-times"]
    assert practice_rows(layer, load_model, load_hardware(layer["hardware"])) == []
    readme = sets["megatron-lm-readme-h100-weak-scaling"]
    (row,) = practice_rows(
        {**readme, "rows": readme["rows"][:1]}, load_model, load_hardware(readme["hardware"])
    )
    assert row.published.startswith("t=1 p=1")
