"""Every figure of ../shared/reference/seed-figures.md, through the public API and through `pplan explain --json`.

Expected values are the seed's own numbers, re-derived by hand in each test from the symbols (s, b, h, t, p, m, L)
rather than read back from pplan.
"""

from __future__ import annotations

from typing import Any

import pytest

from pplan.documents.explain import ExplainReport
from pplan.explain import explain
from pplan.model.params import params_per_layer, total_params
from pplan.plan.configuration import PlanRequest
from pplan.plan.layout import make_layout
from pplan.profiles.catalog import load_hardware, load_model
from pplan.schedules import FAMILIES
from pplan.schedules.closed_forms import bubble_fractions
from tests.cli_run import run_pplan

S, H, T, L = 8192, 8192, 8, 80  # the seed's "our shape": s = 8192, h = 8192, t = 8, L = 80, b = 1
SBH_T = S * H // T  # s·b·h/t
MODEL = load_model("llama3-70b")
H100 = load_hardware("h100-sxm-80gb")


def seed_plan(**overrides: Any) -> ExplainReport:
    """The seed's setting: t = 8 with SP, b = 1, d = 64, m = 16, p = 4, 1F1B, Korthikanti 34, BF16 grads."""
    args: dict[str, Any] = dict(
        gpus=8 * 4 * 64,
        global_batch=1024,
        micro_batch=1,
        tp=8,
        pp=4,
        schedule="1f1b",
        recompute="selective",
        grad_dtype="bf16",
        activation_model="korthikanti",
    )
    args.update(overrides)
    return explain(MODEL, H100, PlanRequest(**args), durations="unit")


def test_our_shape_parameter_counts() -> None:
    assert params_per_layer(MODEL) == 855_654_400
    assert total_params(MODEL) == 70_553_706_496


def test_s1_p2p_message() -> None:
    assert seed_plan().pipeline.p2p_message_bytes == S // T * H * 2 == 16_777_216


def test_s2_tensor_parallel_traffic_per_microbatch() -> None:
    expected = 4 * 2 * (T - 1) * (S * H * 2) // T * L
    assert expected == 75_161_927_680
    assert seed_plan().communication.tp_bytes_per_microbatch == expected


def _states(stage: Any) -> int:
    return int(stage.weights_bytes + stage.grads_bytes + stage.optimizer_bytes)


def test_s3_states_per_tp_rank_without_pipeline() -> None:
    report = seed_plan(pp=1, gpus=8 * 64, global_batch=64 * 16)
    assert round(_states(report.memory.stages[0]) / 1e9, 1) == 141.1


def test_s4_states_per_stage_even_and_honest() -> None:
    stages = seed_plan().memory.stages
    assert round(sum(_states(s) for s in stages) / 4 / 1e9, 1) == 35.3
    assert [round(_states(s) / 1e9, 2) for s in stages] == [36.33, 34.23, 34.23, 36.33]


def test_s5_stage0_activations_1f1b() -> None:
    expected = 34 * SBH_T * 4 * (L // 4)
    assert expected == 22_817_013_760
    report = seed_plan()
    assert report.memory.stages[0].activation_bytes == expected
    assert report.memory.stages[0].fits


def test_s5_holds_with_flash_attention_instead_of_selective_recompute() -> None:
    assert (
        seed_plan(recompute="none", flash_attention=True).memory.stages[0].activation_bytes == 22_817_013_760
    )


def test_s6_gpipe_stage0_activations_do_not_fit() -> None:
    expected = 16 * (L // 4) * 34 * SBH_T
    assert expected == 91_268_055_040
    stage0 = seed_plan(schedule="gpipe").memory.stages[0]
    assert stage0.activation_bytes == expected
    assert not stage0.fits


@pytest.mark.parametrize("p", [4, 8, 16])
def test_s7_stage0_activations_independent_of_p(p: int) -> None:
    report = seed_plan(pp=p, gpus=8 * p * 4, global_batch=4 * 16)
    assert report.plan.num_microbatches == 16
    assert report.memory.stages[0].activation_bytes == 22_817_013_760


def test_s8_attention_score_term_without_recompute() -> None:
    a = 64
    expected = S * H * L // T * (34 + 5 * a * S // H)
    assert round(expected / 1e9, 1) == 237.6
    report = seed_plan(recompute="none", flash_attention=False)
    assert report.memory.stages[0].activation_bytes == expected


def test_identity_m() -> None:
    report = seed_plan()
    assert report.plan.dp == 64
    assert report.plan.num_microbatches == 1024 // (1 * 64) == 16


# --- bubble -----------------------------------------------------------------------------------------------


def test_b1_and_b2_bubble_and_in_flight() -> None:
    one = seed_plan()
    gpipe = seed_plan(schedule="gpipe")
    assert one.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 16)
    assert gpipe.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 16)
    assert [s.in_flight_microbatches for s in one.memory.stages] == [4, 3, 2, 1]
    assert [s.in_flight_microbatches for s in gpipe.memory.stages] == [16] * 4


def test_b3_zb_h1_third_of_1f1b_same_memory() -> None:
    zb = seed_plan(schedule="zb-h1")
    assert zb.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 16 / 3)
    assert round(zb.pipeline.bubble_fraction_of_ideal * 100, 2) == 6.25
    # Qi et al.: the peak over workers equals 1F1B's p·M_B (the last stage holds p W passes back to drain the tail)
    zb_peak = max(s.activation_bytes for s in zb.memory.stages)
    assert zb_peak == max(s.activation_bytes for s in seed_plan().memory.stages)


def test_b4_zb_h2_zero_bubble_about_twice_the_memory() -> None:
    zb = seed_plan(schedule="zb-h2")
    # (p−1)(F + I − 2W) = 0 inside every rank's window; the synchronous step keeps the (p−1)·F start skew, which
    # Qi et al. remove by dropping the optimizer step's synchronisation.
    assert zb.pipeline.bubble_in_window_fraction_of_ideal == 0
    assert zb.pipeline.bubble_fraction_of_ideal == pytest.approx(3 * 1 / (16 * 3))
    ratio = zb.memory.stages[0].activation_bytes / seed_plan().memory.stages[0].activation_bytes
    assert ratio == (2 * 4 - 1) / 4  # (2p − 1)·M_B against p·M_B


def test_b5_deep_pipeline() -> None:
    report = seed_plan(pp=16, gpus=8 * 16 * 4, global_batch=4 * 8)
    assert report.plan.num_microbatches == 8
    assert report.pipeline.bubble_fraction_of_ideal == pytest.approx(15 / 8)


def test_b6_interleaving_microbatches_for_ten_percent() -> None:
    f1 = FAMILIES["1f1b"]
    il = FAMILIES["interleaved-1f1b"]
    assert bubble_fractions(f1, 4, 1, 30)[0] == pytest.approx(0.10)
    assert bubble_fractions(il, 4, 4, 8)[0] == pytest.approx(3 / 32)  # 9.4 %
    assert round(bubble_fractions(il, 4, 4, 7)[0] * 100, 1) == 10.7
    report = seed_plan(schedule="interleaved-1f1b", vp=4, gpus=8 * 4 * 128, global_batch=1024)
    assert report.plan.num_microbatches == 8
    assert report.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 32)


def test_b7_interleaved_layout() -> None:
    layout = make_layout(FAMILIES["interleaved-1f1b"], 16 * 5, p=8, v=2)
    assert layout.rank_chunks[0] == (0, 8)
    first_layer = [sum(c.layers for c in layout.chunks[:i]) for i in range(16)]
    assert first_layer[0] == 0 and first_layer[8] == 8 * 5  # the 1st and the 9th sixteenth


def test_b8_interleaving_memory_factor() -> None:
    base = seed_plan().memory.stages[0].activation_bytes
    il = seed_plan(schedule="interleaved-1f1b", vp=2).memory.stages[0].activation_bytes
    assert il / base == 1 + (4 - 1) / (4 * 2) == 1.375


def test_b9_dualpipe() -> None:
    p, m = 8, 16
    report = seed_plan(schedule="dualpipe", pp=p, gpus=8 * p * 64, global_batch=1024)
    fb, b, w = 1 + 2, 2, 1  # F&B = F + full B when not overlapped; full B = I + W; unit passes
    assert report.pipeline.bubble_fraction_of_ideal == pytest.approx((p / 2 - 1) * (fb + b - 3 * w) / (m * 3))
    one = seed_plan(pp=p, gpus=8 * p * 64, global_batch=1024)
    mid = p // 2
    assert report.memory.stages[mid].params == pytest.approx(
        2 * one.memory.stages[mid].params
    )  # 2× parameters
    assert max(s.in_flight_microbatches for s in report.memory.stages) == p + 1  # PP + 1 micro-batches


@pytest.mark.parametrize(("p", "m", "expected"), [(4, 8, 3 / 11), (4, 32, 3 / 35), (8, 8, 7 / 15)])
def test_b10_tutorial_idle_of_step(p: int, m: int, expected: float) -> None:
    assert bubble_fractions(FAMILIES["1f1b"], p, 1, m)[1] == pytest.approx(expected)


@pytest.mark.parametrize(("p", "utilisation"), [(4, 0.25), (8, 0.125)])
def test_b11_no_microbatching(p: int, utilisation: float) -> None:
    assert 1 - bubble_fractions(FAMILIES["gpipe"], p, 1, 1)[1] == pytest.approx(utilisation)


def test_b12_rule_of_thumb() -> None:
    p = 4
    for m in range(4 * p, 8 * p):
        assert 1 - bubble_fractions(FAMILIES["1f1b"], p, 1, m)[1] >= 0.8


def test_sixteen_stage_question_advice() -> None:
    report = seed_plan(pp=16, gpus=8 * 16 * 4, global_batch=4 * 8)
    text = " ".join(report.advice)
    assert "more micro-batches" in text and "interleaving" in text and "ZB-H1" in text
    assert text.index("more micro-batches") < text.index("interleaving") < text.index("ZB-H1")
    assert "structural imbalance" in text


# --- the same through the CLI ---------------------------------------------------------------------------

SEED_ARGS = (
    "explain", "--json", "--model", "llama3-70b", "--hardware", "h100-sxm-80gb", "--gpus", "2048",
    "--global-batch", "1024", "--micro-batch", "1", "--tp", "8", "--pp", "4", "--schedule", "1f1b",
    "--recompute", "selective", "--grad-dtype", "bf16", "--activation-model", "korthikanti",
    "--pass-durations", "unit",
)  # fmt: skip


def test_seed_figures_through_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *SEED_ARGS)
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["schema"] == "pplan.explain/1"
    assert doc["plan"]["dp"] == 64 and doc["plan"]["num_microbatches"] == 16
    assert doc["pipeline"]["p2p_message_bytes"] == 16_777_216  # S1
    assert doc["communication"]["tp_bytes_per_microbatch"] == 75_161_927_680  # S2
    stages = doc["memory"]["stages"]
    states = [s["weights_bytes"] + s["grads_bytes"] + s["optimizer_bytes"] for s in stages]
    assert [round(x / 1e9, 2) for x in states] == [36.33, 34.23, 34.23, 36.33]  # S4b
    assert stages[0]["activation_bytes"] == 22_817_013_760  # S5
    assert [s["in_flight_microbatches"] for s in stages] == [4, 3, 2, 1]  # B2
    assert doc["pipeline"]["bubble_fraction_of_ideal"] == pytest.approx(3 / 16)  # B1
    assert doc["pipeline"]["bubble_fraction_of_step"] == pytest.approx(3 / 19)


@pytest.mark.parametrize(
    ("extra", "key", "expected"),
    [
        (("--schedule", "gpipe"), "activation_bytes", 91_268_055_040),  # S6
        (("--recompute", "none", "--no-flash-attention"), "activation_bytes", 237_565_378_560),  # S8
    ],
)
def test_more_seed_figures_through_cli(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], key: str, expected: int
) -> None:
    args = list(SEED_ARGS)
    for flag, value in zip(extra[::2], extra[1::2], strict=False):
        i = args.index(flag)
        args[i + 1] = value
    if "--no-flash-attention" in extra:
        args.append("--no-flash-attention")
    res = run_pplan(capsys, *args)
    assert res.code == 0, res.err
    assert res.json()["memory"]["stages"][0][key] == expected


def test_s3_and_b5_through_cli(capsys: pytest.CaptureFixture[str]) -> None:
    args = list(SEED_ARGS)
    args[args.index("--pp") + 1] = "1"
    args[args.index("--gpus") + 1] = "512"
    doc = run_pplan(capsys, *args).json()
    s0 = doc["memory"]["stages"][0]
    assert round((s0["weights_bytes"] + s0["grads_bytes"] + s0["optimizer_bytes"]) / 1e9, 1) == 141.1
    args[args.index("--pp") + 1] = "16"
    args[args.index("--gpus") + 1] = str(8 * 16 * 4)
    args[args.index("--global-batch") + 1] = "32"
    doc = run_pplan(capsys, *args).json()
    assert doc["pipeline"]["bubble_fraction_of_ideal"] == pytest.approx(15 / 8)
