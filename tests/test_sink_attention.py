"""Attention sinks (GPT-OSS) on a stack that fuses them only from a release (`Stack.sink_attention_fused_from`):
`explain` states which core it priced and the step of the other, and that step is the one `explain` gives for the
other core itself."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from pplan.explain import explain
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.stacks import STACKS

BASE = PlanRequest(
    gpus=64, global_batch=256, micro_batch=1, tp=1, pp=4, ep=8, zero_stage=1, seq_len=4096, schedule="1f1b"
)


def _sink_line(assumptions: list[str]) -> str | None:
    return next((a for a in assumptions if a.startswith("attention sinks")), None)


def _step(report: object) -> float:
    perf = report.performance  # type: ignore[attr-defined]
    assert perf is not None
    return float(perf.step_s)


@pytest.mark.parametrize("fused", [True, False])
def test_the_other_core_is_priced_as_explain_prices_it(fused: bool) -> None:
    model, hw = load_model("gpt-oss-120b"), load_hardware("h100-sxm-80gb")
    req = replace(BASE, stack="megatron-bridge", flash_attention=fused)
    other = replace(req, flash_attention=not fused)
    mine, theirs = (
        explain(model, hw, req, with_sensitivity=False),
        explain(model, hw, other, with_sensitivity=False),
    )
    line = _sink_line(mine.assumptions)
    assert line is not None and ("priced fused" if fused else "priced unfused") in line
    assert "Transformer Engine 2.8 with cuDNN 9.13" in line
    shown = float(re.search(r"(\d+(?:\.\d+)?) s", line).group(1))  # type: ignore[union-attr]
    assert shown == pytest.approx(_step(theirs), rel=5e-4)
    # the unfused core runs the whole s×s scores: slower than the fused one on every GPU
    assert (_step(theirs) > _step(mine)) == fused


def test_no_sentence_where_the_stack_always_fuses_or_the_model_has_no_sinks() -> None:
    assert STACKS["torchtitan"].sink_attention_fused_from is None
    hw = load_hardware("h100-sxm-80gb")
    req = replace(BASE, stack="torchtitan")
    assert (
        _sink_line(explain(load_model("gpt-oss-120b"), hw, req, with_sensitivity=False).assumptions) is None
    )
    dense = PlanRequest(gpus=8, global_batch=64, tp=1, pp=1, seq_len=4096, stack="megatron-bridge")
    assert _sink_line(explain(load_model("llama3-8b"), hw, dense, with_sensitivity=False).assumptions) is None
