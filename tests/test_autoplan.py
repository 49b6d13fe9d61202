"""`--schedule auto` on a plan (pplan.cost.autoplan, pplan.cost.pipeline.auto_plan): the memory limit derived from
memory is the largest that fits, the plan's peaks and step come off the lists built for it, the memory-cycle bound
holds, and explain prints both derivations."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from pplan.cost.memory import (
    fragmentation_bytes,
    plan_gathered_weights_bytes,
    plan_memory_totals,
    plan_offload_buffer_bytes,
    plan_static_totals,
    plan_working_bytes,
)
from pplan.cost.pipeline import activation_peaks, auto_memory_limits, auto_plan, simulate_plan
from pplan.cost.steptime import step_time, step_time_bound
from pplan.cost.usable import usable_bytes
from pplan.errors import ConfigError
from pplan.explain import explain
from pplan.model import activations as act
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.schedules import get_schedule, to_torch_csv
from pplan.schedules.auto import auto_schedule
from pplan.schedules.bounds import memory_limited_ends
from pplan.schedules.families.zero_bubble import zb_h1
from pplan.schedules.timeline import Durations, peak_in_flight, simulate
from tests.cli_run import run_pplan

H100 = load_hardware("h100-sxm-80gb")
LLAMA70 = load_model("llama3-70b")


def _request(**kw: object) -> PlanRequest:
    base: dict[str, object] = dict(gpus=64, global_batch=256, tp=8, pp=8, schedule="auto")
    base.update(kw)
    return PlanRequest(**base)  # type: ignore[arg-type]


def _hand_need(plan_req: PlanRequest, k: int) -> tuple[int, ...]:
    """Each rank's bytes with k micro-batches in flight, summed here from the memory module's parts: static bytes,
    then k × (one micro-batch's layer activations + the model ends the rank holds) + the transients, with the
    allocator's fragmentation on the dynamic part."""
    plan = make_plan(LLAMA70, plan_req)
    per_layer = act.layer_activations(LLAMA70, plan).total_bytes
    emb = act.embedding_end(LLAMA70, plan.shape).total_bytes
    out = act.output_end(LLAMA70, plan.shape).total_bytes
    fraction = H100.memory.dynamic_fragmentation_fraction
    needs = []
    for r, (static, gathered, buffer) in enumerate(
        zip(
            plan_static_totals(LLAMA70, plan),
            plan_gathered_weights_bytes(LLAMA70, plan),
            plan_offload_buffer_bytes(LLAMA70, plan),
            strict=True,
        )
    ):
        chunk = plan.layout.chunks[r]
        a = chunk.layers * per_layer + (emb if chunk.has_embedding else 0) + (out if chunk.has_output else 0)
        dynamic = k * a + plan_working_bytes(LLAMA70, plan) + gathered + buffer
        needs.append(static + dynamic + fragmentation_bytes(dynamic, fraction))
    return tuple(needs)


@pytest.mark.parametrize(
    "kw", [{}, {"zero_stage": 1}, {"recompute": "selective"}, {"zero_stage": 3, "global_batch": 128}]
)
def test_the_derived_limit_is_the_most_that_fits(kw: dict[str, object]) -> None:
    req = _request(**kw)
    plan = make_plan(LLAMA70, req)
    limits = auto_memory_limits(LLAMA70, H100, plan)
    usable = usable_bytes(H100, LLAMA70, plan)
    for r, k in enumerate(limits):
        assert 1 <= k <= plan.num_microbatches
        assert _hand_need(req, k)[r] <= usable or k == 1
        if k < plan.num_microbatches:
            assert _hand_need(req, k + 1)[r] > usable
    # and the plan built with it fits, with its peaks within the limits
    peaks = activation_peaks(LLAMA70, plan, H100)
    assert all(n <= k for n, k in zip(peaks.in_flight_per_stage, limits, strict=True))
    totals = plan_memory_totals(LLAMA70, plan, peaks, H100.memory.dynamic_fragmentation_fraction)
    assert max(totals) <= usable


def test_headroom_lowers_the_limit_to_keep_that_fraction_free() -> None:
    plan = make_plan(LLAMA70, _request(memory_headroom=0.2))
    usable = usable_bytes(H100, LLAMA70, plan)
    peaks = activation_peaks(LLAMA70, plan, H100)
    totals = plan_memory_totals(LLAMA70, plan, peaks, H100.memory.dynamic_fragmentation_fraction)
    assert max(totals) <= usable * 0.8
    roomy = auto_memory_limits(LLAMA70, H100, make_plan(LLAMA70, _request()))
    assert all(a <= b for a, b in zip(auto_memory_limits(LLAMA70, H100, plan), roomy, strict=True))
    assert auto_memory_limits(LLAMA70, H100, plan) != roomy


def test_a_given_limit_is_used_as_given_and_caps_the_peaks() -> None:
    plan = make_plan(LLAMA70, _request(memory_limit=5))
    got = auto_plan(LLAMA70, H100, plan)
    assert got.memory_limits == (5,) * 8 and not got.derived
    assert max(got.result.peak_in_flight) <= 5
    run = simulate_plan(LLAMA70, H100, plan)
    assert max(run.summary.peak_in_flight_per_stage) <= 5
    # the step is the simulation of the lists built for the plan's own stage inputs
    assert run.lists is got.result.schedule
    assert run.summary.makespan == pytest.approx(got.result.makespan_s, rel=1e-12)
    per_stage, _ = peak_in_flight(got.result.schedule, [1.0] * 8)
    assert tuple(round(x) for x in per_stage) == run.peaks.in_flight_per_stage


def test_memory_limit_is_refused_without_auto_and_out_of_range() -> None:
    with pytest.raises(ConfigError) as err:
        make_plan(LLAMA70, _request(schedule="zb-h1", memory_limit=4))
    assert err.value.field == "--memory-limit" and "--schedule auto" in err.value.fix
    with pytest.raises(ConfigError) as err:
        _request(memory_limit=0)
    assert err.value.field == "--memory-limit"


def test_the_memory_limited_ends_by_hand() -> None:
    # p = 2, K = 1, F = I = W = 1, free hops. Rank 0: each micro-batch runs F0, F1, I1, I0, W0 before the next F0
    # may start, a cycle of 5: 3 micro-batches end no earlier than 15 (and the scheduler reaches it). Rank 1: its
    # first forward starts at 1 and it has 9 of work (the window bound: 1 + 0 idle + 9 − 1·2 + 0 + 2 = 10; its
    # cycle F1, I1, W1 gives only 3·3 = 9)
    lat = [[0.0, 0.0], [0.0, 0.0]]
    assert memory_limited_ends(3, (1, 1), (1, 1), (1, 1), (1, 1), lat) == (15, 10)
    assert auto_schedule(2, 3, 1, 1.0, 1.0, 1.0).makespan_s == pytest.approx(15)
    # hops count down and back. Rank 0, K = 2 of m = 3: cycle 1 + (0.5 + 2) + (1 + 0.25) + 1 + 1 = 6.75, twice;
    # window: first gradient at 1.5 + 2 + 1.25 = 4.75, idle 4.75 − 2·1 = 2.75, then 9 − 2·2 of work, then the
    # trip 3.75 and the last I and W: 2.75 + 5 + 5.75 = 13.5 as well. Rank 1, K = m: one cycle, 2 + 1 + 1
    lat = [[0.0, 0.5], [0.25, 0.0]]
    assert memory_limited_ends(3, (2, 3), (1, 2), (1, 1), (1, 1), lat) == (13.5, 4)


def test_zb_h1_is_at_the_memory_bound_with_uniform_stages() -> None:
    # Qi et al. 2024 Table 2: ZB-H1's bubble is (p − 1)(F + I − W) at 1F1B's memory; the window bound on rank 0
    # with K = p is m(F + I + W) + (p − 1)(F + I − W), so at that memory nothing beats ZB-H1
    for p, m, (f, i, w) in ((4, 16, (1.0, 1.2, 0.9)), (8, 24, (1.0, 1.0, 1.0)), (6, 30, (2.0, 2.5, 1.5))):
        lat = [[0.0] * p for _ in range(p)]
        want = m * (f + i + w) + (p - 1) * (f + i - w)
        assert max(memory_limited_ends(m, (p,) * p, (f,) * p, (i,) * p, (w,) * p, lat)) == pytest.approx(want)
        zb = simulate(zb_h1(p, m, None), Durations(f, i, w), 0.0)
        assert zb.makespan == pytest.approx(want)
        assert auto_schedule(p, m, p, f, i, w).gap == pytest.approx(0.0, abs=1e-12)


def test_the_memory_limited_ends_never_exceeds_auto_makespans() -> None:
    rng = random.Random(7)
    for _ in range(60):
        p, m = rng.randint(1, 6), rng.randint(1, 14)
        limits = [rng.randint(1, m + 1) for _ in range(p)]
        f, i, w = ([rng.uniform(0.1, 2) for _ in range(p)] for _ in range(3))
        lat = [[0.0 if a == b else rng.uniform(0, 0.3) for b in range(p)] for a in range(p)]
        res = auto_schedule(p, m, limits, f, i, w, lat)
        tl = simulate(res.schedule, Durations(f, i, w), lat).summary()
        ends = memory_limited_ends(m, [min(k, m) for k in limits], f, i, w, lat)
        assert res.makespan_s >= max(ends) * (1 - 1e-12)
        for r in range(p):
            assert tl.last_end_per_rank[r] >= ends[r] * (1 - 1e-12)


@pytest.mark.parametrize("kw", [{}, {"memory_limit": 2}, {"memory_limit": 1, "global_batch": 64}])
def test_step_bound_holds_for_auto_plans(kw: dict[str, object]) -> None:
    plan = make_plan(LLAMA70, _request(**kw))
    exact = step_time(LLAMA70, H100, plan, split_p2p=False).step_s
    assert step_time_bound(LLAMA70, H100, plan) <= exact * (1 + 1e-12)


def test_auto_is_never_slower_than_zb_h1_at_its_memory_on_a_plan() -> None:
    # at K = p (ZB-H1's memory) ZB-H1's lists are among auto's candidates
    auto = step_time(LLAMA70, H100, make_plan(LLAMA70, _request(memory_limit=8)), split_p2p=False)
    zb = step_time(LLAMA70, H100, make_plan(LLAMA70, _request(schedule="zb-h1")), split_p2p=False)
    assert auto.step_s <= zb.step_s * (1 + 1e-12)


def test_explain_prints_the_limit_and_the_gap() -> None:
    report = explain(LLAMA70, H100, _request(memory_limit=6))
    by_name = {d.quantity: d for d in report.derivations}
    assert by_name["auto_memory_limit"].value == 6
    assert "--memory-limit 6" in by_name["auto_memory_limit"].formula
    gap = by_name["auto_gap_to_lower_bound"]
    assert gap.value >= 0 and math.isfinite(gap.value) and "lower bound" in gap.formula
    assert report.plan.schedule == "auto"


def _explain_args(global_batch: int) -> tuple[str, ...]:
    """`pplan explain` of Llama 3 70B on 64 H100s at t8 p8 (d = 1, so m = the global batch)."""
    return tuple(f"explain --model llama3-70b --gpus 64 --global-batch {global_batch} --tp 8 --pp 8".split())


def test_explain_cli_takes_auto_and_its_limit(capsys: pytest.CaptureFixture[str]) -> None:
    args = _explain_args(256)
    out = run_pplan(capsys, *args, "--schedule", "auto", "--memory-limit", "4", "--json")
    assert out.code == 0, out.err
    doc = out.json()
    limit = next(d for d in doc["derivations"] if d["quantity"] == "auto_memory_limit")
    assert limit["value"] == 4
    assert max(doc["pipeline"]["peak_in_flight_per_stage"]) <= 4
    bad = run_pplan(capsys, *args, "--schedule", "1f1b", "--memory-limit", "4")
    assert bad.code == 2 and "--memory-limit" in bad.err and "Traceback" not in bad.err
    assert len(bad.err.strip().splitlines()) == 1


def test_explain_writes_the_plans_own_lists_as_torch_csv(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = _explain_args(64)
    out = tmp_path / "auto.csv"
    assert run_pplan(capsys, *args, "--schedule", "auto", "--memory-limit", "4", "--csv", str(out)).code == 0
    plan = make_plan(LLAMA70, _request(global_batch=64, memory_limit=4))
    assert out.read_text() == to_torch_csv(auto_plan(LLAMA70, H100, plan).result.schedule)
    hand = tmp_path / "zb.csv"
    assert run_pplan(capsys, *args, "--schedule", "zb-h1", "--csv", str(hand)).code == 0
    assert hand.read_text() == to_torch_csv(get_schedule("zb-h1", 8, 64))
    # over the export cap (p·v·m ≤ 50,000), refused before any work, naming --csv
    big = run_pplan(capsys, *_explain_args(65536), "--schedule", "1f1b", "--csv", str(tmp_path / "x.csv"))
    assert big.code == 2 and big.err.startswith("pplan: error: --csv") and not (tmp_path / "x.csv").exists()


def test_auto_refuses_more_stage_micro_batches_than_its_cap(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "explain",
        "--model",
        "llama3-70b",
        "--gpus",
        "128",
        "--tp",
        "8",
        "--pp",
        "16",
        "--schedule",
        "auto",
    ]
    bad = run_pplan(capsys, *args, "--global-batch", "2048")  # p·m = 16·2048 > 16,384
    assert bad.code == 2 and "--global-batch" in bad.err and "16,384" in bad.err
    assert len(bad.err.strip().splitlines()) == 1


@pytest.mark.parametrize(("p", "m"), [(4, 16), (8, 32), (6, 30)])
def test_with_memory_to_spare_auto_holds_no_more_than_zb_h2(p: int, m: int) -> None:
    # equal times, free hops: ZB-H2's lists reach the lower bound holding 2p − 1 per stage (Qi et al. Table 2);
    # given room for all m, auto ties them and takes the leaner lists rather than holding every micro-batch
    res = auto_schedule(p, m, m, 1.0, 1.0, 1.0)
    assert res.gap == pytest.approx(0.0, abs=1e-12)
    assert max(res.peak_in_flight) <= 2 * p - 1
