"""Published runs fit pplan's memory model at their published cuts with their release's (or their stack's) knobs
(issue 46 item 3): what the recipes hold, FP8 copies as the stacks keep them, and the residual pplan does not model
yet named here, so a new miss fails."""

from __future__ import annotations

from typing import Any

import pytest

from pplan.cost.memory import fp8_any_layout, plan_fp8_cache_bytes
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model, load_recent_runs
from pplan.validation.recent import applied_recipe, predict_all, predict_row

NOT_MODELLED: frozenset[str] = frozenset()
"""Published runs that do not fit pplan's memory model yet, each for a named reason: none. (The last one,
Megatron-Bridge 25.09's Llama 3 70B MXFP8 row on 64 GB200, printed MBS 2 beside GA 16 at GBS 128 on DP 8; the
importer takes the MBS its GA and GBS imply, 1, which its recipe runs, and it fits.)"""

SAMPLE = (
    ("megatron-bridge-performance-summary", "mb-26.06-DGX-GB200-LLAMA3.1_405B-FP8-256"),
    ("megatron-bridge-performance-summary", "mb-26.04-DGX-B200-GPT OSS 120B-BF16-64"),
    ("megatron-bridge-performance-summary", "mb-26.04.01-DGX-GB200-DeepSeekV3-MXFP8-256"),
    ("dgxc-benchmarking-24.12", "dgxc-24.12-H100-Llama-3.1-8B-BF16-8"),
    ("dgxc-benchmarking-25.04.01", "dgxc-25.04.01-H100-DeepSeek-V3-671B-BF16-512"),
    ("nemo-docs-performance-summary-25.x-partial", "nemodocs-25.04-GB200-Llama-3-70B-FP8-64"),
    ("deepseek-v3-technical-report", "dsv3-report-H800-2048"),
    ("megatron-bridge-performance-summary", "mb-26.04.01-DGX-GB200-LLAMA3_70B-FP8-64"),
    ("nemo-docs-performance-summary-25.x-partial", "nemodocs-25.07-GB200-Llama-3.1-405B-FP8-128"),
    ("megatron-bridge-performance-summary", "mb-25.09-DGX-GB200-LLAMA3_70B-MXFP8-64-alt"),
)
"""Runs that did not fit before the recipes' knobs and FP8 copies were modelled, one per mechanism: BF16
gradients and FP8 primary weights (405B, 8B), Blackwell's transpose-free FP8 (405B GB200), recipe recompute modules
(GPT-OSS, DeepSeek-V3), the stack's recompute (DGX Cloud DeepSeek-V3), ZeRO-3's sharded FP8 copies (70B FSDP),
the report's stated precisions (DeepSeek-V3), the recipe's layer offload and fused cross-entropy (Llama 3 70B FSDP
at b2), the same cut's Megatron-Bridge offload for a NeMo run (405B FSDP), the micro-batch a row's own GA and GBS
imply where its MBS column contradicts them (70B MXFP8, 25.09)."""


@pytest.mark.parametrize(("set_name", "run"), SAMPLE)
def test_a_sample_of_published_runs_fits(set_name: str, run: str) -> None:
    collection = load_recent_runs()
    data = next(s for s in collection["sets"] if s["name"] == set_name)
    row = next(r for r in data["rows"] if r["id"] == run)
    got = predict_row(data, row, load_model, load_hardware, collection)
    assert got.refused is None and got.fits, (run, got.assumed)


@pytest.mark.acceptance  # every published run priced: seconds
def test_every_expressible_published_run_fits_but_the_named_residual() -> None:
    rows = predict_all(load_recent_runs(), load_model, load_hardware)
    missed = {r.id for r in rows if r.refused is None and not r.fits}
    assert missed == NOT_MODELLED


def test_fsdp_shards_fp8_copies_and_blackwell_keeps_no_transpose() -> None:
    model = load_model("llama3-70b")
    base = dict(gpus=64, global_batch=128, seq_len=8192, precision="fp8")
    z1 = make_plan(model, PlanRequest(**base, zero_stage=1))  # type: ignore[arg-type]
    z3 = make_plan(model, PlanRequest(**base, zero_stage=3, fp8_param_gather=True))  # type: ignore[arg-type]
    z3_bf16_primary = make_plan(model, PlanRequest(**base, zero_stage=3))  # type: ignore[arg-type]
    hopper, blackwell = load_hardware("h100-sxm-80gb"), load_hardware("gb200-nvl72")
    full = plan_fp8_cache_bytes(model, z1, fp8_any_layout(hopper))[0]
    assert plan_fp8_cache_bytes(model, z1, fp8_any_layout(blackwell))[0] == pytest.approx(full / 2, rel=1e-6)
    assert plan_fp8_cache_bytes(model, z3, fp8_any_layout(hopper))[0] == pytest.approx(
        full / 2 / 64, rel=1e-6
    )
    assert plan_fp8_cache_bytes(model, z3_bf16_primary)[0] == 0


def test_recipe_knobs_reach_the_request() -> None:
    row: dict[str, Any] = {
        "precision": "bf16",
        "recipe": {
            "grad_dtype": "bf16",
            "fp8_param_gather": True,
            "recompute": "none",
            "recompute_modules": [],
        },
    }
    assert applied_recipe(row) == {"grad_dtype": "bf16", "recompute": "none"}


def test_the_importer_takes_the_micro_batch_ga_and_gbs_imply() -> None:
    """GBS = MBS × GA × DP: where a published row breaks it, its GA and GBS name the micro-batch (hand-checked on
    the 25.09 70B MXFP8 row: 128 / (16 × 8) = 1); a consistent row, or one GA cannot resolve, keeps its MBS."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "scripts" / "import_recent_runs.py"
    spec = importlib.util.spec_from_file_location("import_recent_runs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = {"mbs": 2, "ga": 16, "gbs": 128, "dp_derived": 8}
    assert module._micro_batch(row) == 1
    assert module._micro_batch({**row, "ga": 8}) == 2
    assert module._micro_batch({**row, "ga": 3}) == 2  # 128 / 24 is not whole: nothing to take
    assert module._micro_batch({**row, "ga": None}) == 2
