"""The step-time model against published runs: the bundled profiles meet the accuracy target of issue 14 (in
sample: mean ≤ 5 %, worst ≤ 10 % per set; leave one set out: mean ≤ 8 %; issue 15's FP8 sets the same), re-fitting
reproduces the figures the profiles carry, and published times are derived from the FLOP counts their sources
name."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pplan.cost.passtime import layer_pass_times
from pplan.errors import PplanError
from pplan.explain import explain
from pplan.model.flops import model_flops_per_step
from pplan.model.params import total_params
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import Recompute
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.validation.published import (
    JITTER_GRID,
    check_sets,
    fit_efficiency,
    row_model,
    row_request,
    run_request,
    strong_scaling,
    validate_set,
)

PUBLISHED = load_published_runs()["sets"]
SETS = {s["name"]: s for s in PUBLISHED}
MISSES = {
    "megatron-lm-readme-h100-weak-scaling": "mean 6.2 %: its 32B row comes out 23 % slow (0.19 s of FP32 gradient "
    "reduce-scatter exposed over one NIC per GPU; its 16B and 70B neighbours are within 4.5 %), its 119B row 8 % "
    "fast (vp = 23 assumed: the table states no micro-batch or interleaving)",
}
"""Sets that miss the in-sample target today, and how (strict xfail: a fix shows as a failure to update this)."""
assert set(SETS) >= set(MISSES)


def _marked(names: list[str]) -> list[object]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(reason=MISSES[n], strict=True)) if n in MISSES else n
        for n in names
    ]


@pytest.mark.parametrize("name", _marked(sorted(SETS)))
def test_bundled_profiles_meet_the_accuracy_target(name: str) -> None:
    data = SETS[name]
    result = validate_set(data, load_model, load_hardware(data["hardware"]))
    assert result.mape <= 0.05
    assert result.worst <= 0.10, [(r.label, r.error) for r in result.rows]


@pytest.mark.acceptance
def test_fit_reproduces_the_profiles_and_sets_left_out_stay_within_target() -> None:
    # every GPU type's efficiency fitted to all its sets is the one its profile carries, and each set predicted
    # with the efficiency fitted to the other sets of its type keeps a mean error of at most 8 %
    checks = check_sets(PUBLISHED, load_model, load_hardware, refit=True)
    for check in checks:
        hardware = load_hardware(check.in_sample.hardware)
        stated = getattr(hardware.efficiency, check.field)  # the GEMM efficiency, or the FP8 one for FP8 sets
        assert check.matmul == pytest.approx(stated, abs=0.0015), check.in_sample.name
    # every set, left out, keeps its mean within 8 % (the README table 6.6 %, the FP8 GPT-3 set 6.4 % with the FP8
    # efficiency of the one Llama 2 row, the one mixture-of-experts run 6.4 % unfitted)
    assert [(c.in_sample.name, c.left_out.mape) for c in checks if c.left_out.mape > 0.08] == []


GAP_MISSES: dict[str, str] = {}


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(m, marks=pytest.mark.xfail(reason=GAP_MISSES[m], strict=True)) if m in GAP_MISSES else m
        for m in ("gpt-22b", "gpt3-175b", "gpt-529.6b", "gpt-1t")
    ],
)
def test_full_against_selective_recompute_reproduces_table5(model: str) -> None:
    # Korthikanti et al. Table 5: selective recompute with sequence parallelism runs 29.0 %, 31.8 %, 29.7 % and
    # 32.1 % faster than full recompute (step ratio − 1); issue 14 asks for each within 3 points
    data = SETS["korthikanti-table5-end-to-end"]
    result = validate_set(data, load_model, load_hardware(data["hardware"]))
    gap = next(g for g in result.recompute_gaps if g.model == model)
    published = {"gpt-22b": 0.290, "gpt3-175b": 0.318, "gpt-529.6b": 0.297, "gpt-1t": 0.321}[model]
    assert gap.published == pytest.approx(
        published, abs=0.0015
    )  # the rows' step times give the paper's figure
    assert abs(gap.predicted - gap.published) <= 0.03


def test_fit_of_one_set_is_its_own_minimum() -> None:
    # the golden-section fit lands where the set's error is lowest: a step either way does no better
    data = SETS["nvidia-dgxc-gpt3-175b-bf16"]
    hardware = load_hardware(data["hardware"])
    best = fit_efficiency([data], load_model, hardware)

    def mape(x: float) -> float:
        return validate_set(data, load_model, hardware.with_efficiency(matmul=x)).mape

    assert mape(best) <= min(mape(best - 0.01), mape(best + 0.01))


def test_a_tuned_micro_batch_is_the_fastest_that_fits() -> None:
    # SC'21 states no micro-batch and tunes it per model: each row's is the b with the shortest step `explain`
    # predicts among every b that divides the per-replica batch and fits (a brute force through explain's memory
    # and step, not the search's bounds); the small unpipelined models take all 16 sequences at once
    data = SETS["megatron-sc21-table1"]
    hw = load_hardware(data["hardware"])
    chosen = []
    for row in data["rows"]:
        model = row_model(data, row, load_model)
        base = run_request(row, data["stated"], data["assumed"], data["stack"])
        per_replica = base.global_batch * base.tp * base.pp * base.cp // base.gpus
        best: tuple[float, int] | None = None
        for b in (b for b in range(1, per_replica + 1) if per_replica % b == 0):
            try:
                rep = explain(
                    model, hw, replace(base, micro_batch=b), with_sensitivity=False, split_p2p=False
                )
            except PplanError:
                continue
            if rep.memory.fits and rep.performance and (best is None or rep.performance.step_s < best[0]):
                best = (rep.performance.step_s, b)
        assert best is not None
        chosen.append(row_request(data, row, model, hw).micro_batch)
        assert chosen[-1] == best[1], row["model"]
    assert chosen[:3] == [16, 16, 16] and chosen[-1] == 1


def test_published_step_time_from_tflops_uses_eq3() -> None:
    # Narayanan et al. Table 1, 1T row: 3,072 GPUs at 163 TFLOP/s each; Eq. 3 FLOPs for B = 3,072, s = 2,048,
    # L = 128, h = 25,600, V = 51,200 -> step time by hand.
    B, s, L, h, V = 3072, 2048, 128, 25600, 51200
    eq3 = 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    data = SETS["megatron-sc21-table1"]
    result = validate_set(data, load_model, load_hardware("a100-sxm-80gb"))
    row = next(r for r in result.rows if r.label.startswith("gpt-1t "))
    assert row.published_s == pytest.approx(eq3 / (3072 * 163e12))


def test_published_step_time_from_megatron_model_flops() -> None:
    # Megatron-LM README row 1.7B: 48 GPUs at 408.8 TFLOP/s; model FLOPs of Megatron-LM's
    # num_floating_point_operations for an MHA GeLU GPT: 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)), B = 192,
    # s = 4096, L = 24, h = 2048, V = 131072.
    B, s, L, h, V = 192, 4096, 24, 2048, 131072
    flops = 72 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))
    data = SETS["megatron-lm-readme-h100-weak-scaling"]
    model = row_model(data, data["rows"][0], load_model)
    assert model_flops_per_step(model, s, B) == pytest.approx(flops, rel=1e-12)
    result = validate_set(data, load_model, load_hardware("h100-sxm-80gb"))
    assert result.rows[0].published_s == pytest.approx(flops / (48 * 408.8e12))


def test_readme_shapes_reproduce_the_published_parameter_counts() -> None:
    # the template (untied 131,072-entry embeddings, 4h MLP) gives the README's parameter column to 3 %
    data = SETS["megatron-lm-readme-h100-weak-scaling"]
    published_b = [1.7, 7.1, 16, 32, 70, 119, 177, 314, 462]
    for row, billions in zip(data["rows"], published_b, strict=True):
        assert total_params(row_model(data, row, load_model)) / 1e9 == pytest.approx(billions, rel=0.03)


@pytest.mark.parametrize(
    ("model", "pp", "vp", "gpus"), [("gpt-529.6b", 35, 3, 280), ("gpt-1t", 64, None, 512)]
)
def test_recompute_overheads_match_the_530b_and_1t_statement(
    model: str, pp: int, vp: int | None, gpus: int
) -> None:
    # Korthikanti et al. 2022 §6: for 530B and 1T, full recompute adds about 36 % to a layer's time and selective
    # recompute (with sequence parallelism) about 2 %; pplan's layer times at those configurations (Table 3)
    spec, hw = load_model(model), load_hardware("a100-sxm-80gb")

    def layer_s(recompute: Recompute, sp: bool) -> float:
        req = PlanRequest(gpus=gpus, global_batch=gpus, tp=8, pp=pp, vp=vp, seq_len=2048, recompute=recompute,
                          schedule="interleaved-1f1b" if vp else "1f1b", sequence_parallel=sp,
                          flash_attention=False)  # fmt: skip
        t = layer_pass_times(spec, hw, make_plan(spec, req).shape)
        return t.f_s + t.i_s + t.w_s

    assert layer_s("full", False) / layer_s("none", False) - 1 == pytest.approx(0.36, abs=0.015)
    assert layer_s("selective", True) / layer_s("none", True) - 1 == pytest.approx(0.02, abs=0.01)


def test_strong_scaling_fit_finds_the_allowance_a_steeper_drop_needs() -> None:
    # the Megatron-LM README's statement (47 % → 42 % MFU, 96 → 4,608 GPUs): pplan's drop with the table's cut is
    # already steeper (×0.772 against ×0.894), so the fitted straggler allowance is 0. A steeper published drop
    # needs an allowance: it grows with √(2 ln G), so it lowers the ratio, but only a little here (the step at 96
    # GPUs is almost all busy time, at 4,608 a fifth is bubble), and the fit takes the largest c it tries
    bundled = load_published_runs()
    (statement,) = bundled["statements"]
    h100 = load_hardware(statement["hardware"])
    check = strong_scaling(statement, bundled["sets"], load_model, h100)
    assert check.predicted_ratio < check.published_ratio
    assert check.jitter == 0.0
    assert [p.fitted_mfu for p in check.points] == [p.predicted_mfu for p in check.points]
    steeper = {**statement, "points": [{"gpus": 96, "mfu": 0.47}, {"gpus": 4608, "mfu": 0.32}]}
    fitted = strong_scaling(steeper, bundled["sets"], load_model, h100)
    assert fitted.jitter == max(JITTER_GRID)
    first, last = fitted.points
    assert 0.32 / 0.47 < last.fitted_mfu / first.fitted_mfu < fitted.predicted_ratio
