"""The benchmark's analysis and calibration on synthetic records (no torch, no processes).

A "measured" run is manufactured from a known model: every pass takes its stage's F, I or W, the runtime spends
`o` before each pass and a message takes `c` between ranks. Played by hand here (not by `pplan.schedules.timeline`), the
records must give back o and c, and the prediction must then equal the measurement.
"""

from __future__ import annotations

import itertools
import math

import pytest

from pplan.bench.analysis import (
    BUBBLE_TOLERANCE,
    analyse,
    measure_gaps,
    stage_durations,
    trimmed_mean,
)
from pplan.bench.calibrate import fit_matmul_to_measured, hardware_toml, model_step_s
from pplan.bench.config import BenchConfig, scaled_model
from pplan.bench.records import OpRecord, RankRecord, StepRecord
from pplan.errors import ConfigError
from pplan.profiles.catalog import load_hardware, load_model
from pplan.schedules import Action, get_schedule
from pplan.schedules.timeline import Durations, simulate, timeline_from_records

MS = 1_000_000  # ns


def _play(config: BenchConfig, f: float, i: float, w: float, o: float, c: float) -> list[RankRecord]:
    """Hand-rolled event replay of config's schedule (times in ms): each pass starts `o` after both its rank is
    free and its input is there (input = previous stage's F / next stage's I or B, plus c across ranks)."""
    sched = config.plan
    dur = {"F": f, "I": i, "W": w, "B": i + w}
    prev = {b: a for chain in sched.chains for a, b in itertools.pairwise(chain)}
    nxt = {a: b for chain in sched.chains for a, b in itertools.pairwise(chain)}
    done: dict[tuple[int, str, int], float] = {}
    heads = [0] * sched.p
    free = [0.0] * sched.p
    ops: list[list[OpRecord]] = [[] for _ in range(sched.p)]
    while any(heads[r] < len(sched.actions[r]) for r in range(sched.p)):
        for r in range(sched.p):
            while heads[r] < len(sched.actions[r]):
                a = sched.actions[r][heads[r]]
                kinds: tuple[str, ...]
                if a.kind == "F":
                    src, kinds = prev.get(a.stage), ("F",)
                elif a.kind in ("I", "B"):
                    src, kinds = nxt.get(a.stage), ("I", "B")
                else:
                    src, kinds = None, ()
                ready = free[r]
                if src is not None:
                    got = [done[(src, k, a.microbatch)] for k in kinds if (src, k, a.microbatch) in done]
                    if not got:
                        break
                    hop = c if sched.placement[src] != r else 0.0
                    ready = max(ready, got[0] + hop)
                start = ready + o
                end = start + dur[a.kind]
                done[(a.stage, a.kind, a.microbatch)] = end
                ops[r].append(OpRecord(a.stage, a.kind, a.microbatch, round(start * MS), round(end * MS)))
                free[r] = end
                heads[r] += 1
    records = []
    for r in range(sched.p):
        step = StepRecord(0, round(max(free) * MS), ops=ops[r])
        records.append(RankRecord(rank=r, host="h", stages=sched.stages_of(r), steps=[step, step, step]))
    return records


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "zb-h1", "interleaved-1f1b"])
def test_gaps_give_back_dispatch_and_latency_and_the_prediction_matches(name: str) -> None:
    config = BenchConfig(name, 2, 4, steps=3)
    o, c = 0.5, 1.5
    records = _play(config, f=6.0, i=5.0, w=4.0, o=o, c=c)
    steps = [[(0, r.steps[k]) for r in records] for k in range(3)]
    gaps = measure_gaps(config.plan, steps)
    assert gaps.dispatch and set(gaps.dispatch) == {round(o * MS)}
    assert gaps.hop and all(g == pytest.approx((c + o) * MS, abs=2) for g in gaps.hop)
    result = analyse(config, records)
    assert result.dispatch_ms == pytest.approx(o, abs=1e-5)
    assert result.hop_latency_ms == pytest.approx(c, abs=1e-5)
    assert result.measured.makespan == pytest.approx(result.predicted.makespan, abs=1e-5)
    assert result.bubble_error == pytest.approx(0.0, abs=1e-7)
    assert result.order_matches


def test_stage_durations_least_squares_by_hand() -> None:
    """A stage with three full backwards of 10 ms, one I of 4 and one W of 5 (overhead 0): the normal equations
    4i + 3w = 34, 3i + 4w = 35 give i = 31/7, w = 38/7."""
    sched = get_schedule("1f1b", 2, 4)
    ops = [
        OpRecord(0, "F", 0, 0, 2 * MS),
        OpRecord(0, "B", 0, 2 * MS, 12 * MS),
        OpRecord(0, "B", 1, 12 * MS, 22 * MS),
        OpRecord(0, "B", 2, 22 * MS, 32 * MS),
        OpRecord(0, "I", 3, 32 * MS, 36 * MS),
        OpRecord(0, "W", 3, 36 * MS, 41 * MS),
    ]
    f, i, w = stage_durations(sched, [(0, StepRecord(0, 0, ops=ops)), (0, StepRecord(0, 0))], 0.0)
    assert f[0] == pytest.approx(2.0)
    assert i[0] == pytest.approx(31 / 7)
    assert w[0] == pytest.approx(38 / 7)
    assert (i[1], w[1]) == (0.0, 0.0)


def test_trimmed_mean() -> None:
    assert trimmed_mean([1.0] * 9 + [100.0]) == 1.0  # the stall is cut at 10 %
    assert trimmed_mean([1.0, 3.0]) == 2.0
    assert trimmed_mean([]) == 0.0


def test_timeline_from_records_equals_the_simulation_it_came_from() -> None:
    sched = get_schedule("zbv", 2, 4)
    sim = simulate(sched, Durations(2.0, 1.5, 1.0), 0.25, activation_bytes=[10, 20, 30, 40])
    records = [(r, a, t0, t1) for r in range(sched.p) for a, t0, t1 in sim.intervals(r)]
    got = timeline_from_records(sched, reversed(records), origin=0.0, activation_bytes=[10, 20, 30, 40])
    assert got.schedule is sched
    for field in ("makespan", "bubble", "bubble_fraction_of_step", "bubble_fraction_of_ideal"):
        assert getattr(got, field) == pytest.approx(getattr(sim, field))
    assert got.busy_per_rank == pytest.approx(sim.busy_per_rank)
    assert got.peak_in_flight_per_stage == sim.peak_in_flight_per_stage
    assert got.peak_bytes_per_rank == sim.peak_bytes_per_rank
    assert got.p2p_messages == sim.p2p_messages == 16


def test_timeline_from_records_keeps_a_different_order_and_refuses_gaps() -> None:
    sched = get_schedule("gpipe", 2, 2)
    # rank 1 runs B1 before B0: a legal order that is not GPipe's
    order = {0: ["0F0", "0F1", "0B0", "0B1"], 1: ["1F0", "1F1", "1B1", "1B0"]}
    records = []
    for r, names in order.items():
        for k, text in enumerate(names):
            a = Action(int(text[0]), text[1], int(text[2]))  # type: ignore[arg-type]
            records.append((r, a, 10.0 * k + r, 10.0 * k + r + 5))
    tl = timeline_from_records(sched, records)
    assert [str(a) for a in tl.schedule.actions[1]] == order[1]
    assert tl.makespan == pytest.approx(36.0)  # origin = first start (0); rank 1 ends at 31 + 5
    assert tl.busy_per_rank == (20.0, 20.0)
    with pytest.raises(ConfigError, match="not gpipe's"):
        timeline_from_records(sched, records[:-1])
    with pytest.raises(ConfigError, match="starts before"):
        timeline_from_records(sched, [*records[:-1], (1, Action(1, "B", 0), 25.0, 40.0)])


def test_tolerance_is_the_issue_figure() -> None:
    assert BUBBLE_TOLERANCE == 0.05


def test_scaled_model_keeps_the_profile_shape() -> None:
    llama = scaled_model(load_model("llama3-8b"), 128, 32, 4)
    assert (llama.hidden_size, llama.num_attention_heads, llama.kv_heads, llama.head_size) == (128, 8, 2, 16)
    assert llama.ffn_hidden_size == 448  # 14336 / 4096 × 128 = 448
    assert (llama.mlp, llama.norm, llama.num_layers, llama.seq_len) == ("swiglu", "rmsnorm", 4, 32)
    gpt = scaled_model(load_model("gpt-1.7b"), 64, 16, 2)
    assert (gpt.num_attention_heads, gpt.kv_heads, gpt.ffn_hidden_size) == (4, 4, 256)
    with pytest.raises(ConfigError, match="--hidden"):
        scaled_model(load_model("gpt-1.7b"), 50, 16, 2)


def test_calibration_recovers_the_efficiency_that_made_the_times() -> None:
    """Records whose busy time is pplan's pass-time model at e = 0.37 fit back to 0.37 (blocks large enough
    that the GEMMs, not fixed costs, set the time)."""
    config = BenchConfig("gpipe", 2, 4, mode="compute", hidden=1024, seq_len=512, micro_batch=4)
    hw = load_hardware("h100-sxm-80gb")
    probe = analyse(config, _play(config, 1.0, 1.0, 1.0, 0.0, 0.0))
    target = model_step_s(
        probe, hw.model_copy(update={"efficiency": hw.efficiency.model_copy(update={"matmul": 0.37})})
    )
    # one pass time for every F, I and W so that the measured busy time is the target
    per_pass_ms = target * 1e3 / (config.microbatches * config.num_stages * 3)
    result = analyse(config, _play(config, per_pass_ms, per_pass_ms, per_pass_ms, 0.0, 0.0))
    cal = fit_matmul_to_measured(result, hw)
    assert cal.matmul == pytest.approx(0.37, rel=1e-5)
    assert cal.hardware.efficiency.calibrated


def test_calibration_toml_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = BenchConfig("gpipe", 2, 4, mode="compute", hidden=64)
    hw = load_hardware("a100-sxm-80gb")
    result = analyse(config, _play(config, 2.0, 2.0, 2.0, 0.0, 0.0))
    cal = fit_matmul_to_measured(result, hw)
    path = tmp_path / "fitted.toml"
    path.write_text(hardware_toml(cal))
    back = load_hardware(str(path))
    assert back.efficiency.matmul == pytest.approx(cal.matmul)
    assert back.name == "a100-sxm-80gb-bench"
    assert back.gpu == hw.gpu and back.intra_node == hw.intra_node
    assert "fitted by `pplan bench --calibrate`" in path.read_text()


def test_calibration_refuses_sleep_runs_and_impossible_speed() -> None:
    sleep = BenchConfig("gpipe", 2, 4)
    with pytest.raises(ConfigError, match="--mode compute"):
        fit_matmul_to_measured(
            analyse(sleep, _play(sleep, 1.0, 1.0, 1.0, 0.0, 0.0)), load_hardware("h100-sxm-80gb")
        )
    fast = BenchConfig("gpipe", 2, 4, mode="compute", hidden=64)
    with pytest.raises(ConfigError, match="faster than"):
        fit_matmul_to_measured(
            analyse(fast, _play(fast, 1e-6, 1e-6, 1e-6, 0.0, 0.0)), load_hardware("h100-sxm-80gb")
        )


def test_config_errors_come_from_the_registry() -> None:
    with pytest.raises(ConfigError, match="unknown schedule"):
        BenchConfig("nope", 2, 4)
    with pytest.raises(ConfigError, match="--microbatches"):
        BenchConfig("dualpipev", 2, 2)
    with pytest.raises(ConfigError, match="one chain"):
        BenchConfig("dualpipe", 2, 4)
    with pytest.raises(ConfigError, match="--runtime"):
        BenchConfig("zb-h1", 2, 4, runtime="torch")
    with pytest.raises(ConfigError, match="--pp"):
        BenchConfig("gpipe", 1, 4)
    assert BenchConfig("ScheduleInterleaved1F1B", 2, 4).runner == "ScheduleInterleaved1F1B"
    assert BenchConfig("zb-h2", 2, 4).torch_class is None
    assert BenchConfig("1f1b", 2, 4, runtime="csv").uses_csv
    assert math.isclose(
        BenchConfig("1f1b", 2, 4, hidden=32, seq_len=8, micro_batch=3).message_bytes(), 3 * 8 * 32 * 4
    )
