"""pplan.sizing against hand derivations: GPU-hours, cost and energy; the job's MTBF, Young's interval and the
first-order wall time; the default interruption rate from the Llama 3 report's counts; the batch policy and the
GPU counts; the answers over hand-made points; and a sweep point equals `recommend`'s best for the same inputs."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.hardware_spec import PowerSpec
from pplan.recommend import awkward_batch, forced_model_parallel, recommendations
from pplan.search import SearchRequest
from pplan.sizing import answers
from pplan.sizing.costs import run_cost
from pplan.sizing.goodput import (
    INTERRUPTIONS_PER_GPU_HOUR,
    GoodputInputs,
    goodput,
    wall_time_s,
    young_interval_s,
)
from pplan.sizing.policy import BatchPolicy, default_counts
from pplan.sizing.sweep import SizePoint, SizeQuery, size_point


def test_gpu_hours_cost_and_energy_by_hand() -> None:
    # 1,024 GPUs for 30 days at $2.50: 1,024 × 720 h = 737,280 GPU-hours, $1,843,200; 128 nodes of 8 drawing
    # 8 × 700 + 4,600 W = 10.2 kW each at PUE 1.2: 720 h × 128 × 10.2 kW × 1.2 = 1,128,038.4 kWh
    cost = run_cost(1024, 8, 30 * 86_400, 2.5, PowerSpec(gpu_watts=700, node_overhead_watts=4600), pue=1.2)
    assert cost.gpu_hours == pytest.approx(737_280)
    assert cost.cost_usd == pytest.approx(1_843_200)
    assert cost.energy_kwh == pytest.approx(720 * 128 * 10.2 * 1.2)
    # a partial node is a whole node; no price, no cost; no power, no energy
    part = run_cost(12, 8, 3600, None, PowerSpec(gpu_watts=700, node_overhead_watts=4600))
    assert part.cost_usd is None and part.energy_kwh == pytest.approx((12 * 700 + 2 * 4600) / 1000)
    assert run_cost(8, 8, 3600, 1.0, None).energy_kwh is None


def test_the_default_rate_is_llama3s_count() -> None:
    # 419 unexpected interruptions in 54 days on 16,384 GPUs (arXiv 2407.21783 §3.3.4)
    assert pytest.approx(419 / (54 * 24 * 16_384)) == INTERRUPTIONS_PER_GPU_HOUR
    assert pytest.approx(1.973e-5, rel=1e-3) == INTERRUPTIONS_PER_GPU_HOUR


def test_young_interval_minimises_the_first_order_overhead() -> None:
    write, mtbf = 30.0, 3 * 3600.0
    tau = young_interval_s(write, mtbf)
    assert tau == pytest.approx(math.sqrt(2 * 30 * 10_800))  # 805 s

    def overhead(t: float) -> float:
        return write / t + t / (2 * mtbf)

    assert all(overhead(tau) <= overhead(tau * f) for f in (0.5, 0.9, 1.1, 2.0))


def test_wall_time_and_goodput_by_hand() -> None:
    # 2,048 GPUs at the default rate: M = 3600 / (1.973e-5 × 2048) s; a 1 TB checkpoint at 100 GB/s writes in
    # 10 s and reads back in 10 s after a 600 s relaunch
    inputs = GoodputInputs(storage_bytes_per_s=100e9, restart_s=600.0)
    got = goodput(30 * 86_400, 2048, 1e12, inputs)
    mtbf = 3600 / (INTERRUPTIONS_PER_GPU_HOUR * 2048)
    tau = math.sqrt(2 * 10 * mtbf)
    wall = 30 * 86_400 * (1 + 10 / tau) / (1 - (610 + (tau + 10) / 2) / mtbf)
    assert got.mtbf_s == pytest.approx(mtbf) and got.interval_s == pytest.approx(tau)
    assert got.checkpoint_write_s == pytest.approx(10) and got.restart_s == pytest.approx(610)
    assert got.wall_s == pytest.approx(wall) and got.fraction == pytest.approx(30 * 86_400 / wall)
    assert 0.9 < got.fraction < 1
    # the default bandwidth scales with the job: 2 TB/s per 16,384 GPUs
    scaled = goodput(1.0, 16_384, 2e12, GoodputInputs())
    assert scaled.checkpoint_write_s == pytest.approx(1.0)


def test_a_run_that_cannot_progress_has_no_goodput() -> None:
    # a restart as long as the mean time between interruptions: nothing is ever kept
    assert wall_time_s(100.0, 10.0, 1.0, restart_s=3600.0, mtbf_s=3600.0) == math.inf
    got = goodput(100.0, 16_384, 1e9, GoodputInputs(interruptions_per_gpu_hour=1.0, restart_s=3600.0))
    assert got.fraction == 0.0


def test_batch_policy() -> None:
    fixed = BatchPolicy(4 * 2**20)
    assert fixed.sequences(64, 64, 8192) == fixed.sequences(4096, 64, 8192) == 512
    grow = BatchPolicy(2**21, 2**24)
    assert grow.sequences(64, 64, 8192) == 256
    assert grow.sequences(256, 64, 8192) == 1024
    assert grow.sequences(4096, 64, 8192) == 2048  # the ceiling: 16M tokens
    assert "grow" in grow.describe(8192) and "fixed" in fixed.describe(8192)


def test_default_counts_are_whole_nodes_doubling_with_the_1_5x_between() -> None:
    assert default_counts(8, 8, 128) == (8, 16, 24, 32, 48, 64, 96, 128)
    assert default_counts(72, 1, 500) == (72, 144, 216, 288, 432)
    assert default_counts(8, 100, 200) == (128, 192)


def _point(hw: str, gpus: int, days: float, tps_per_gpu: float, usd: float | None) -> SizePoint:
    from pplan.plan.records import PlanRequest

    wall = days * 86_400
    return SizePoint(
        hardware=hw, gpus=gpus, global_batch=512, request=PlanRequest(gpus=gpus, global_batch=512),
        tokens_per_s=tps_per_gpu * gpus, wall_s=wall,
        cost=run_cost(gpus, 8, wall, usd, None),
    )  # fmt: skip


def test_answers_over_hand_made_points() -> None:
    none = SizePoint(hardware="a", gpus=32, global_batch=512, request=None, reason="out of memory")
    a = [
        none,
        _point("a", 64, 100, 1000, 2.0),
        _point("a", 128, 52, 960, 2.0),
        _point("a", 256, 40, 600, 2.0),
    ]
    b = [_point("b", 64, 45, 2000, 5.0), _point("b", 128, 24, 1900, 5.0)]
    points = [*a, *b]
    assert {hw: p.gpus if p else None for hw, p in answers.least_fitting(points).items()} == {
        "a": 64,
        "b": 64,
    }
    fewest = answers.fewest_meeting(points, 50 * 86_400)
    assert (
        fewest["a"] is not None
        and fewest["a"].gpus == 256
        and fewest["b"] is not None
        and fewest["b"].gpus == 64
    )
    # within 50 days: a×256 costs 256 × 960 h × $2 = $491,520; b×64 costs 64 × 1,080 h × $5 = $345,600;
    # b×128 costs 128 × 576 × 5 = $368,640: b×64 is the cheapest
    cheapest = answers.cheapest_meeting(points, 50 * 86_400)
    assert cheapest is not None and (cheapest.hardware, cheapest.gpus) == ("b", 64)
    assert answers.cheapest_meeting(points, 10 * 86_400) is None
    near = answers.nearest_miss(points)
    assert near is not None and (near.hardware, near.gpus) == ("b", 128)
    # a×64 $307,200 100 d; a×128 $319,488 52 d; b×64 $345,600 45 d; b×128 $368,640 24 d; a×256 dominated
    assert [(p.hardware, p.gpus) for p in answers.pareto(points)] == [
        ("b", 128),
        ("b", 64),
        ("a", 128),
        ("a", 64),
    ]
    within = answers.fastest_within(points, 350_000)
    assert within is not None and (within.hardware, within.gpus) == ("b", 64)
    # a's marginal efficiency: 64 → 128: (122,880 − 64,000) / 64 / 1,000 = 0.92; 128 → 256: (153,600 − 122,880)
    # / 128 / 1,000 = 0.24 < 0.5: the knee is 128
    knee = answers.knee(a)
    assert knee is not None and knee.gpus == 128
    eff = answers.scaling_efficiency(a[2], points)
    assert eff == pytest.approx(0.96)


def test_a_sweep_point_is_recommends_best() -> None:
    """The point's plan and step time are `recommend`'s top candidate for the same model, hardware, GPUs and
    batch; the time to train is steps × step time."""
    model, hw = load_model("llama3-8b"), load_hardware("h100-sxm-80gb")
    template = SearchRequest(gpus=1, global_batch=1, prefetch=False)
    query = SizeQuery(1e12, 8192, BatchPolicy(2**21), template, GoodputInputs())
    point = size_point(model, hw, 64, 256, query)
    best = recommendations(
        model, hw, replace(template, gpus=64, global_batch=256, seq_len=8192, top_n=1)
    ).candidates[0]
    assert point.request == best.request
    assert best.report.performance is not None and point.step_s == best.report.performance.step_s
    assert point.steps == math.ceil(1e12 / (256 * 8192))
    assert point.work_s == pytest.approx(point.steps * point.step_s)
    assert point.cost is not None and point.cost.gpu_hours == pytest.approx(64 * point.wall_s / 3600)


def test_the_batch_forces_model_parallelism_by_hand() -> None:
    # 48 GPUs, 32 sequences: gcd 16, so t·p·cp must be a multiple of 3 (d divides 32): awkward
    assert forced_model_parallel(48, 32) == 3 and awkward_batch(48, 32, 8)
    # 64 GPUs, 32 sequences: t·p·cp a multiple of 2 — a node's worth or less, a power of two: not awkward
    assert forced_model_parallel(64, 32) == 2 and not awkward_batch(64, 32, 8)
    # 4,096 GPUs, 256 sequences: t·p·cp ≥ 16, more than a node: awkward
    assert forced_model_parallel(4096, 256) == 16 and awkward_batch(4096, 256, 8)
    assert forced_model_parallel(96, 96) == 1 and not awkward_batch(96, 96, 8)
