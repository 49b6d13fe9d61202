"""A worked example, figure by figure, through the public API and through `pplan explain --json`.

The setting: a Llama-3-70B-shaped model (hidden h = 8192, L = 80 layers, a = 64 attention heads, 8 KV heads, FFN
hidden 28672 with SwiGLU, vocabulary 128256, untied embeddings, RMSNorm; Dubey et al. 2024, "The Llama 3 Herd of
Models", arXiv 2407.21783, Table 3) at sequence s = 8192 and micro-batch b = 1, tensor parallel t = 8 with sequence
parallelism, p = 4 pipeline stages, d = 64 data-parallel replicas, global batch 1024 so m = 16 micro-batches, the
1F1B schedule, BF16 weights, gradients and activations, on H100 SXM 80GB (NVIDIA H100 datasheet).

Activations use Korthikanti et al.'s GPT-3 layer coefficients on purpose (`activation_model="korthikanti"`), so the
figures follow their published formulas rather than an itemised count of a Llama layer. Every expected value is
worked out by hand in the test from the symbols (s, b, h, a, t, p, m, v, L) and the public formula named beside it,
rather than read back from pplan. Sources, cited by short name below:
- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
  arXiv 2104.04473: §2.2.1 bubble (p−1)/m of ideal and 1F1B's ≤ p micro-batches in flight, §2.2.2 interleaving,
  §3.1 notation (m = B/(b·d)), §3.2 P2P of b·s·h and tensor-parallel traffic 8·b·s·h·(t−1)/t per layer, §4.1
  scatter/gather (P2P ÷ t).
- Huang et al. 2019, "GPipe", arXiv 1811.06965, §2: bubble O((K−1)/(M+K−1)) of the step, negligible for M ≥ 4K.
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198:
  Table 2 and §4.1 (s·b·h·(34 + 5as/h) per layer; 34·s·b·h/t with sequence parallelism and selective recompute),
  §4.2.3 / Eq. 5 (the first stage under 1F1B holds L layers' worth, independent of p) and the interleaving factor
  1 + (p−1)/(p·v) (Megatron-LM's `theoretical_memory_usage.py` writes the same).
- Rajbhandari et al. 2020, "ZeRO", arXiv 1910.02054, §3.1: 16 bytes per parameter for mixed-precision Adam.
- Qi et al. 2024, "Zero Bubble Pipeline Parallelism", arXiv 2401.10241, Table 2 (B their input-gradient pass, pplan's I):
  ZB-H1 (p−1)(F+B−W) at p·M_B, ZB-H2 (p−1)(F+B−2W) at (2p−1)·M_B.
- DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", arXiv 2412.19437, Table 2: DualPipe.
- Dao et al. 2022, "FlashAttention", arXiv 2205.14135: the attention scores are never stored.
- Ring all-reduce: 2(t−1)/t of the buffer per GPU (Thakur et al. 2005; Patarasuk & Yuan 2009).
"""

from __future__ import annotations

from typing import Any

import pytest

from pplan.documents.explain import ExplainReport
from pplan.explain import explain
from pplan.model.params import params_per_layer, total_params
from pplan.plan.layout import make_layout
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.schedules import FAMILIES
from pplan.schedules.closed_forms import bubble_fractions
from tests.cli_run import run_pplan

S, H, T, L = 8192, 8192, 8, 80  # the worked example's shape: s = 8192, h = 8192, t = 8, L = 80, b = 1
SBH_T = S * H // T  # s·b·h/t
MODEL = load_model("llama3-70b")
H100 = load_hardware("h100-sxm-80gb")


def worked_plan(**overrides: Any) -> ExplainReport:
    """The worked example: t = 8 with SP, b = 1, d = 64, m = 16, p = 4, 1F1B, Korthikanti 34, BF16 grads."""
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


def test_parameter_counts_of_the_llama3_70b_shape() -> None:
    """Per layer: Q and O 2·h², K and V 2·h·(8·128), SwiGLU 3·h·28672, two RMSNorms 2·h; in all 80 layers plus the
    untied embedding and output layer (V·h each) and the final norm."""
    assert params_per_layer(MODEL) == 855_654_400
    assert total_params(MODEL) == 70_553_706_496


def test_p2p_message_per_stage_boundary() -> None:
    """One message per stage boundary per micro-batch: s·b·h values (Narayanan §3.2), split t ways under sequence
    parallelism (their scatter/gather, §4.1), in BF16: s/t·h·2 bytes = 16.8 MB."""
    assert worked_plan().pipeline.p2p_message_bytes == S // T * H * 2 == 16_777_216


def test_tensor_parallel_traffic_per_microbatch() -> None:
    """Four collectives per layer (2 forward, 2 backward) on s·b·h·2 bytes, each a ring moving 2(t−1)/t of it per GPU:
    Narayanan §3.2's 8·b·s·h·(t−1)/t per layer, over L = 80 layers = 75.2 GB."""
    expected = 4 * 2 * (T - 1) * (S * H * 2) // T * L
    assert expected == 75_161_927_680
    assert worked_plan().communication.tp_bytes_per_microbatch == expected


def _states(stage: Any) -> int:
    return int(stage.weights_bytes + stage.grads_bytes + stage.optimizer_bytes)


def test_model_states_per_tp_rank_without_pipeline() -> None:
    """16 bytes per parameter (BF16 weights and gradients, FP32 master copy and Adam m, v; ZeRO §3.1) ÷ t:
    141.1 GB."""
    report = worked_plan(pp=1, gpus=8 * 64, global_batch=64 * 16)
    assert round(_states(report.memory.stages[0]) / 1e9, 1) == 141.1


def test_model_states_per_stage_even_and_itemised() -> None:
    """p = 4: an even split gives 141.1 / 4 = 35.3 GB; counted per stage, stage 0 also holds the embedding and stage 3
    the final norm and the output layer: 36.33, 34.23, 34.23, 36.33 GB."""
    stages = worked_plan().memory.stages
    assert round(sum(_states(s) for s in stages) / 4 / 1e9, 1) == 35.3
    assert [round(_states(s) / 1e9, 2) for s in stages] == [36.33, 34.23, 34.23, 36.33]


def test_stage0_activations_1f1b() -> None:
    """Korthikanti Table 2 (SP + selective recompute): 34·s·b·h/t per layer; 1F1B keeps p micro-batches of L/p layers
    on stage 0 (Eq. 5): 22.8 GB, which fits an 80 GB H100."""
    expected = 34 * SBH_T * 4 * (L // 4)
    assert expected == 22_817_013_760
    report = worked_plan()
    assert report.memory.stages[0].activation_bytes == expected
    assert report.memory.stages[0].fits


def test_stage0_activations_same_with_flash_attention_instead_of_selective_recompute() -> None:
    """Flash attention never stores the attention scores (Dao et al.), which removes Korthikanti's 5as/h term exactly
    as selective recompute does."""
    assert (
        worked_plan(recompute="none", flash_attention=True).memory.stages[0].activation_bytes
        == 22_817_013_760
    )


def test_gpipe_stage0_activations_do_not_fit() -> None:
    """GPipe keeps all m = 16 micro-batches of stage 0's 20 layers (Narayanan §2.2.1): 91.3 GB, over an 80 GB H100."""
    expected = 16 * (L // 4) * 34 * SBH_T
    assert expected == 91_268_055_040
    stage0 = worked_plan(schedule="gpipe").memory.stages[0]
    assert stage0.activation_bytes == expected
    assert not stage0.fits


@pytest.mark.parametrize("p", [4, 8, 16])
def test_stage0_activations_independent_of_p(p: int) -> None:
    """Korthikanti Eq. 5: p in flight × L/p layers = L layers' worth on stage 0 whatever p (m ≥ p): 22.8 GB
    each time."""
    report = worked_plan(pp=p, gpus=8 * p * 4, global_batch=4 * 16)
    assert report.plan.num_microbatches == 16
    assert report.memory.stages[0].activation_bytes == 22_817_013_760


def test_attention_score_term_without_recompute() -> None:
    """Korthikanti Table 2 (tensor + sequence parallel, no recompute) on stage 0 (Eq. 5): s·b·h·L/t × (34 + 5as/h),
    5as/h = 320: 237.6 GB."""
    a = 64
    expected = S * H * L // T * (34 + 5 * a * S // H)
    assert round(expected / 1e9, 1) == 237.6
    report = worked_plan(recompute="none", flash_attention=False)
    assert report.memory.stages[0].activation_bytes == expected


def test_microbatch_identity() -> None:
    """m = B/(b·d) (Narayanan §3.1): 1024 sequences, micro-batch 1, d = 64 → m = 16."""
    report = worked_plan()
    assert report.plan.dp == 64
    assert report.plan.num_microbatches == 1024 // (1 * 64) == 16


# --- bubble -----------------------------------------------------------------------------------------------


def test_1f1b_and_gpipe_bubble_and_in_flight() -> None:
    """Narayanan §2.2.1: GPipe and 1F1B both idle (p−1)/m of ideal, 3/16 = 18.75 %; GPipe holds m micro-batches on
    every stage, 1F1B p − i on stage i."""
    one = worked_plan()
    gpipe = worked_plan(schedule="gpipe")
    assert one.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 16)
    assert gpipe.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 16)
    assert [s.in_flight_microbatches for s in one.memory.stages] == [4, 3, 2, 1]
    assert [s.in_flight_microbatches for s in gpipe.memory.stages] == [16] * 4


def test_zb_h1_third_of_1f1b_same_memory() -> None:
    """Qi et al. Table 2 with F = B = W: ZB-H1's (p−1)(F+B−W) is 1/3 of 1F1B's (p−1)(F+B+W), 6.25 %, at 1F1B's
    p·M_B."""
    zb = worked_plan(schedule="zb-h1")
    assert zb.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 16 / 3)
    assert round(zb.pipeline.bubble_fraction_of_ideal * 100, 2) == 6.25
    # Qi et al.: the peak over workers equals 1F1B's p·M_B (the last stage holds p W passes back to drain the tail)
    zb_peak = max(s.activation_bytes for s in zb.memory.stages)
    assert zb_peak == max(s.activation_bytes for s in worked_plan().memory.stages)


def test_zb_h2_zero_bubble_about_twice_the_memory() -> None:
    """Qi et al. Table 2: ZB-H2's (p−1)(F+B−2W) is 0 with equal passes, at (2p−1)·M_B of activations."""
    zb = worked_plan(schedule="zb-h2")
    # (p−1)(F + I − 2W) = 0 inside every rank's window; the synchronous step keeps the (p−1)·F start skew, which
    # Qi et al. remove by dropping the optimizer step's synchronisation.
    assert zb.pipeline.bubble_in_window_fraction_of_ideal == 0
    assert zb.pipeline.bubble_fraction_of_ideal == pytest.approx(3 * 1 / (16 * 3))
    ratio = zb.memory.stages[0].activation_bytes / worked_plan().memory.stages[0].activation_bytes
    assert ratio == (2 * 4 - 1) / 4  # (2p − 1)·M_B against p·M_B


def test_deep_pipeline_bubble() -> None:
    """(p−1)/m of ideal (Narayanan §2.2.1) at p = 16, m = 8: 15/8 = 187.5 %."""
    report = worked_plan(pp=16, gpus=8 * 16 * 4, global_batch=4 * 8)
    assert report.plan.num_microbatches == 8
    assert report.pipeline.bubble_fraction_of_ideal == pytest.approx(15 / 8)


def test_interleaving_microbatches_for_ten_percent() -> None:
    """Interleaving divides the bubble by v: (p−1)/(v·m) (Narayanan §2.2.2). At p = 4 a 10 % bubble needs m = 30 with
    v = 1 and m = 8 with v = 4 (9.4 %; m = 7 gives 10.7 %)."""
    f1 = FAMILIES["1f1b"]
    il = FAMILIES["interleaved-1f1b"]
    assert bubble_fractions(f1, 4, 1, 30)[0] == pytest.approx(0.10)
    assert bubble_fractions(il, 4, 4, 8)[0] == pytest.approx(3 / 32)  # 9.4 %
    assert round(bubble_fractions(il, 4, 4, 7)[0] * 100, 1) == 10.7
    report = worked_plan(schedule="interleaved-1f1b", vp=4, gpus=8 * 4 * 128, global_batch=1024)
    assert report.plan.num_microbatches == 8
    assert report.pipeline.bubble_fraction_of_ideal == pytest.approx(3 / 32)


def test_interleaved_layout() -> None:
    """Narayanan §2.2.2: each device holds v non-contiguous chunks; at p = 8, v = 2 (16 chunks) device 0 holds
    chunks 0 and 8, the 1st and the 9th sixteenth of the layers."""
    layout = make_layout(FAMILIES["interleaved-1f1b"], 16 * 5, p=8, v=2)
    assert layout.rank_chunks[0] == (0, 8)
    first_layer = [sum(c.layers for c in layout.chunks[:i]) for i in range(16)]
    assert first_layer[0] == 0 and first_layer[8] == 8 * 5  # the 1st and the 9th sixteenth


def test_interleaving_memory_factor() -> None:
    """Korthikanti §4.2.3 (with m for the number of chunks) and Megatron-LM's `theoretical_memory_usage.py`: stage 0
    holds × (1 + (p−1)/(p·v)) of 1F1B's activations; p = 4, v = 2: × 1.375."""
    base = worked_plan().memory.stages[0].activation_bytes
    il = worked_plan(schedule="interleaved-1f1b", vp=2).memory.stages[0].activation_bytes
    assert il / base == 1 + (4 - 1) / (4 * 2) == 1.375


def test_dualpipe_bubble_parameters_and_in_flight() -> None:
    """DeepSeek-V3 Table 2: DualPipe's bubble (PP/2 − 1)(F&B + B − 3W), 2× parameters, PP + 1 micro-batches in
    flight."""
    p, m = 8, 16
    report = worked_plan(schedule="dualpipe", pp=p, gpus=8 * p * 64, global_batch=1024)
    fb, b, w = 1 + 2, 2, 1  # F&B = F + full B when not overlapped; full B = I + W; unit passes
    assert report.pipeline.bubble_fraction_of_ideal == pytest.approx((p / 2 - 1) * (fb + b - 3 * w) / (m * 3))
    one = worked_plan(pp=p, gpus=8 * p * 64, global_batch=1024)
    mid = p // 2
    assert report.memory.stages[mid].params == pytest.approx(
        2 * one.memory.stages[mid].params
    )  # 2× parameters
    assert max(s.in_flight_microbatches for s in report.memory.stages) == p + 1  # PP + 1 micro-batches


@pytest.mark.parametrize(("p", "m", "expected"), [(4, 8, 3 / 11), (4, 32, 3 / 35), (8, 8, 7 / 15)])
def test_idle_fraction_of_step(p: int, m: int, expected: float) -> None:
    """Idle over the whole step, (p−1)/(m+p−1) (GPipe §2): 3/11 = 27.3 %, 3/35 = 8.6 %, 7/15 = 46.7 %."""
    assert bubble_fractions(FAMILIES["1f1b"], p, 1, m)[1] == pytest.approx(expected)


@pytest.mark.parametrize(("p", "utilisation"), [(4, 0.25), (8, 0.125)])
def test_no_microbatching(p: int, utilisation: float) -> None:
    """m = 1: (p−1)/(m+p−1) leaves a utilisation of 1/p, 25 % at p = 4 and 12.5 % at p = 8."""
    assert 1 - bubble_fractions(FAMILIES["gpipe"], p, 1, 1)[1] == pytest.approx(utilisation)


def test_four_p_rule_of_thumb() -> None:
    """GPipe §2: the bubble is negligible once M ≥ 4K; efficiency m/(m+p−1) ≥ 0.8 at p = 4."""
    p = 4
    for m in range(4 * p, 8 * p):
        assert 1 - bubble_fractions(FAMILIES["1f1b"], p, 1, m)[1] >= 0.8


def test_sixteen_stage_advice() -> None:
    """p = 16, m = 8 (bubble 15/8 of ideal): the remedies in order, more micro-batches (free in memory under 1F1B,
    Korthikanti Eq. 5), interleaving (÷ v, Narayanan §2.2.2), ZB-H1 (another ÷ 3 at 1F1B's memory, Qi et al.),
    and the two structural imbalances (embedding on the first stage, output layer and loss on the last; Llama 3
    §3.3.2 moves a layer off each)."""
    report = worked_plan(pp=16, gpus=8 * 16 * 4, global_batch=4 * 8)
    text = " ".join(report.advice)
    assert "more micro-batches" in text and "interleaving" in text and "ZB-H1" in text
    assert text.index("more micro-batches") < text.index("interleaving") < text.index("ZB-H1")
    assert "structural imbalance" in text


# --- the same through the CLI ---------------------------------------------------------------------------

WORKED_ARGS = (
    "explain", "--json", "--model", "llama3-70b", "--hardware", "h100-sxm-80gb", "--gpus", "2048",
    "--global-batch", "1024", "--micro-batch", "1", "--tp", "8", "--pp", "4", "--schedule", "1f1b",
    "--recompute", "selective", "--grad-dtype", "bf16", "--activation-model", "korthikanti",
    "--pass-durations", "unit",
)  # fmt: skip


def test_worked_example_through_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *WORKED_ARGS)
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["schema"] == "pplan.explain/2"
    assert doc["plan"]["dp"] == 64 and doc["plan"]["num_microbatches"] == 16
    assert doc["pipeline"]["p2p_message_bytes"] == 16_777_216  # P2P message
    assert doc["communication"]["tp_bytes_per_microbatch"] == 75_161_927_680  # tensor-parallel traffic
    stages = doc["memory"]["stages"]
    states = [s["weights_bytes"] + s["grads_bytes"] + s["optimizer_bytes"] for s in stages]
    assert [round(x / 1e9, 2) for x in states] == [36.33, 34.23, 34.23, 36.33]  # model states per stage
    assert stages[0]["activation_bytes"] == 22_817_013_760  # stage-0 activations, 1F1B
    assert [s["in_flight_microbatches"] for s in stages] == [4, 3, 2, 1]  # 1F1B in flight
    assert doc["pipeline"]["bubble_fraction_of_ideal"] == pytest.approx(3 / 16)  # (p−1)/m
    assert doc["pipeline"]["bubble_fraction_of_step"] == pytest.approx(3 / 19)


@pytest.mark.parametrize(
    ("extra", "key", "expected"),
    [
        (("--schedule", "gpipe"), "activation_bytes", 91_268_055_040),  # GPipe stage 0
        (
            ("--recompute", "none", "--no-flash-attention"),
            "activation_bytes",
            237_565_378_560,
        ),  # with the attention scores
    ],
)
def test_more_worked_example_figures_through_cli(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], key: str, expected: int
) -> None:
    args = list(WORKED_ARGS)
    for flag, value in zip(extra[::2], extra[1::2], strict=False):
        i = args.index(flag)
        args[i + 1] = value
    if "--no-flash-attention" in extra:
        args.append("--no-flash-attention")
    res = run_pplan(capsys, *args)
    assert res.code == 0, res.err
    assert res.json()["memory"]["stages"][0][key] == expected


def test_states_without_pipeline_and_deep_bubble_through_cli(capsys: pytest.CaptureFixture[str]) -> None:
    args = list(WORKED_ARGS)
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
