"""`pplan.frozen.changed` is `dataclasses.replace` for the frozen, slotted records the search copies: equal
results, derived fields recomputed, the original untouched."""

from __future__ import annotations

from dataclasses import replace

from pplan.frozen import changed
from pplan.plan.configuration import PlanRequest, make_plan
from pplan.plan.layout import Layout
from pplan.profiles.catalog import load_model


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
