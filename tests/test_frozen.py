"""`pplan.frozen.changed` is `dataclasses.replace` for the frozen, slotted records the search copies: equal
results, derived fields recomputed, the original untouched."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pplan.frozen import changed
from pplan.plan.configuration import make_plan
from pplan.plan.layout import Layout
from pplan.plan.records import SHARDING_FIELDS, PlanRequest, with_sharding
from pplan.profiles.catalog import load_model
from pplan.schedules import schedule_family
from pplan.search.space import Candidate


def test_changed_is_replace_with_derived_fields_recomputed() -> None:
    plan = make_plan(load_model("llama3-8b"), PlanRequest(gpus=16, global_batch=64, tp=2, pp=2, zero_stage=1))
    for change in ({"zero_stage": 3, "grad_dtype": "bf16"}, {"recompute": "full", "recompute_layers": 2}):
        got, want = changed(plan, **change), replace(plan, **change)  # type: ignore[arg-type]
        assert got == want and got.shape == want.shape and hash(got) == hash(want)
    assert changed(plan, recompute="selective").shape.recompute == "selective"  # derived in __post_init__
    assert plan.zero_stage == 1 and plan.shape.recompute == "none"
    layout = plan.layout
    moved = changed(layout, rank_chunks=layout.rank_chunks[::-1])
    assert moved == Layout(layout.chunks, layout.rank_chunks[::-1]) and hash(moved) == hash(
        Layout(layout.chunks, layout.rank_chunks[::-1])
    )


def test_with_sharding_is_changed_for_the_data_parallel_state() -> None:
    """`with_sharding` keeps the shape rather than deriving it again: the same plan as `changed` gives, for every
    field it takes; it refuses any other field."""
    plan = make_plan(load_model("llama3-8b"), PlanRequest(gpus=16, global_batch=64, tp=2, pp=2, zero_stage=1))
    change = {"zero_stage": 3, "grad_dtype": "bf16", "shard_group": 2, "reshard_after_forward": False}
    assert change.keys() == SHARDING_FIELDS
    got, want = with_sharding(plan, **change), changed(plan, **change)
    assert got == want and got.shape == want.shape and hash(got.shape) == hash(want.shape)
    assert got.shape is plan.shape and plan.zero_stage == 1
    with pytest.raises(AssertionError):
        with_sharding(plan, recompute="full")


def test_changed_copies_a_plain_slotted_dataclass() -> None:
    """A slotted dataclass that is not frozen (its copy takes plain stores) copies as `dataclasses.replace` does,
    the original untouched."""
    cell = Candidate(
        schedule_family("1f1b"), 2, 4, 1, 8, 1, 1, 64, None, None, "none", 1, "bf16", order=(1, 2)
    )
    assert type(cell).__setattr__ is object.__setattr__
    got = changed(cell, zero=3, shard_group=4)
    assert got == replace(cell, zero=3, shard_group=4) and got is not cell
    assert cell.zero == 1 and cell.shard_group is None
