"""ZeRO-2/3 and the gradient dtype as search axes (issue 13): hand-derived bytes, the two published cuts that fit
without recompute only thanks to them, and the CLI's comma list."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pplan.cost.comm import data_parallel_bytes_per_step
from pplan.cost.memory import gathered_weights_bytes, plan_memory, rank_params
from pplan.cost.pipeline import activation_peaks
from pplan.cost.usable import usable_bytes
from pplan.explain import explain
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.recommend import recommendations
from pplan.search import SearchRequest
from tests.cli_run import run_pplan

H100 = load_hardware("h100-sxm-80gb")
VOCAB_H_8B = 128_256 * 4_096  # Llama 3 8B's embedding (and untied output) matrix: 525,336,576 parameters


def _plan(zero: int, grads: str, m_batch: int = 128) -> tuple[object, ...]:
    """Llama 3 8B on 8 GPUs, t 1 p 1 cp 2, so d = 4 and the gradients shard over N = d·cp = 8."""
    model = load_model("llama3-8b")
    req = PlanRequest(gpus=8, global_batch=m_batch, micro_batch=1, tp=1, pp=1, cp=2, schedule="1f1b",
                      zero_stage=zero, grad_dtype=grads)  # type: ignore[arg-type]  # fmt: skip
    plan = make_plan(model, req)
    (rank,) = plan_memory(model, plan, usable_bytes(H100, model, plan), activation_peaks(model, plan), 0.15)
    return model, plan, rank


@pytest.mark.parametrize(("grads", "per_param"), [("bf16", 2), ("fp32", 4)])
def test_zero2_gradients_are_sharded_over_d_cp(grads: str, per_param: int) -> None:
    model, plan, rank = _plan(2, grads)
    p = rank_params(model, plan, 0)  # type: ignore[arg-type]
    assert rank.grads_bytes == pytest.approx(per_param * p / 8, abs=1)  # type: ignore[attr-defined]
    assert rank.weights_bytes == pytest.approx(2 * p, abs=1)  # type: ignore[attr-defined]
    assert rank.optimizer_bytes == pytest.approx(12 * p / 8, abs=1)  # type: ignore[attr-defined]
    _, _, zero1 = _plan(1, grads)
    assert zero1.grads_bytes == pytest.approx(per_param * p, abs=1)  # type: ignore[attr-defined]


def test_zero3_weights_and_gathered_units() -> None:
    model, plan, rank = _plan(3, "bf16")
    p = rank_params(model, plan, 0)  # type: ignore[arg-type]
    assert rank.weights_bytes == pytest.approx(2 * p / 8, abs=1)  # type: ignore[attr-defined]
    # the two largest units at t = 1 are the output layer (vocab·h + the final norm's h) and the embedding
    # (vocab·h), not two layers (218 M parameters each): 2 bytes each, gathered whole
    assert gathered_weights_bytes(model, plan) == 2 * (VOCAB_H_8B + 4_096 + VOCAB_H_8B)  # type: ignore[arg-type]
    assert rank.gathered_weights_bytes == 2 * (2 * VOCAB_H_8B + 4_096)  # type: ignore[attr-defined]


def test_zero2_and_3_move_gradients_every_microbatch() -> None:
    """ZeRO-2: m reduce-scatters of the BF16 gradients plus one parameter all-gather; ZeRO-3: m × (reduce-scatter
    + 2 all-gathers), each ring moving (N−1)/N of the buffer (N = 8, m = 128 / (1·4) = 32)."""
    model, plan2, _ = _plan(2, "bf16")
    p = rank_params(model, plan2, 0)  # type: ignore[arg-type]
    share = 7 / 8
    assert data_parallel_bytes_per_step(plan2, p) == int(32 * share * 2 * p + share * 2 * p)  # type: ignore[arg-type]
    _, plan3, _ = _plan(3, "bf16")
    assert data_parallel_bytes_per_step(plan3, p) == int(32 * (share * 2 * p + 2 * share * 2 * p))  # type: ignore[arg-type]
    _, plan1, _ = _plan(1, "bf16")
    assert data_parallel_bytes_per_step(plan1, p) == int(share * 2 * p + share * 2 * p)  # type: ignore[arg-type]


def test_llama3_405b_meta_cut_fits_without_recompute() -> None:
    """Dubey et al. 2024 §3.3.2: t 8 p 16 cp 1 on 8,192 GPUs at 8K tokens, no activation checkpointing. The best
    plan needs weights or gradients sharded (ZeRO-2 or 3), and the stage below does not fit."""
    req = SearchRequest(gpus=8192, global_batch=2048, tp=8, pp=16, cp=1, recompute=("none",), top_n=1)
    (best,) = recommendations(load_model("llama3-405b"), H100, req).candidates
    z = best.request.zero_stage
    assert best.request.recompute == "none" and z >= 2
    assert any(
        k.startswith(f"fits with ZeRO-{z}") and f"ZeRO-{z - 1} needs" in k and "does not fit" in k
        for k in best.knobs
    )


def test_nemo_405b_recipe_fits_without_recompute() -> None:
    """NeMo's Llama 3.1 405B pretraining recipe: 576 GPUs, t 8 p 9 cp 2 v 7, global batch 252, micro-batch 1."""
    req = SearchRequest(gpus=576, global_batch=252, tp=8, pp=9, cp=2, vp=7, micro_batch=1,
                        schedules=("interleaved-1f1b",), top_n=1)  # fmt: skip
    (best,) = recommendations(load_model("llama3-405b"), H100, req).candidates
    assert best.request.recompute == "none" and best.request.grad_dtype == "bf16"
    assert any(k.startswith("BF16 gradients: FP32 needs") and "does not fit" in k for k in best.knobs)


def test_a_leaner_choice_that_fits_says_how_much_slower_it_runs() -> None:
    """Where FP32 gradients or a lower ZeRO stage fit but the shown plan's choice is faster, the note gives the
    slowdown: each figure against `explain` of the two plans, each simulated on its own."""
    model = load_model("llama3-70b")
    req = SearchRequest(gpus=2048, global_batch=1024, top_n=3)
    checked = 0
    for c in recommendations(model, H100, req).candidates:
        for note in c.knobs:
            for part in note.split("; "):
                if "fits (" not in part or "slower" not in part:
                    continue
                what = part.split(": ")[-1].split(" needs")[0]
                other = (
                    replace(c.request, grad_dtype="fp32")
                    if what == "FP32"
                    else replace(
                        c.request, zero_stage=int(what.removeprefix("ZeRO-")), reshard_after_forward=True
                    )
                )
                mine = explain(model, H100, c.request, with_sensitivity=False).performance
                theirs = explain(model, H100, other, with_sensitivity=False).performance
                assert mine is not None and theirs is not None
                slower = theirs.step_s / mine.step_s - 1
                assert f"runs {slower * 100:.1f} % slower" in part, (part, slower)
                checked += 1
    assert checked >= 3


def test_grad_dtype_comma_list(capsys: pytest.CaptureFixture[str]) -> None:
    args = (
        "recommend",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--global-batch",
        "128",
        "--top",
        "1",
        "--format",
        "json",
    )
    both = run_pplan(capsys, *args, "--grad-dtype", "fp32,bf16").json()
    fp32 = run_pplan(capsys, *args, "--grad-dtype", "fp32").json()
    assert fp32["candidates"][0]["plan"]["grad_dtype"] == "fp32"
    assert both["candidates"][0]["plan"]["grad_dtype"] in ("fp32", "bf16")
    bad = run_pplan(capsys, *args, "--grad-dtype", "fp32,fp16")
    assert bad.code == 2 and "--grad-dtype" in bad.err


def test_torchtitan_search_runs_fp32_gradients_and_no_zero_1_2(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "recommend", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "128",
                    "--launcher", "torchtitan", "--format", "json").json()  # fmt: skip
    for c in doc["candidates"]:
        assert c["plan"]["grad_dtype"] == "fp32" and c["plan"]["zero_stage"] in (0, 3)
