"""The simulator against published closed forms, hand derivations and invariants.

Symbols: p ranks, m micro-batches, v chunks per rank; F, I, W pass times (B = I + W); c the latency per hop.
"""

from __future__ import annotations

import pytest

from pplan.errors import ConfigError
from pplan.schedules import Action, get_schedule, make_schedule
from pplan.schedules.timeline import DeadlockError, Durations, simulate

EQUAL = Durations(1.0, 1.0, 1.0)
PM = [(2, 2), (2, 8), (3, 5), (4, 4), (4, 8), (4, 16), (4, 32), (8, 8), (8, 24), (16, 8)]


# --- GPipe and 1F1B: Narayanan et al. 2021 (arXiv 2104.04473) §2.2.1; GPipe (arXiv 1811.06965) §2 -------------


@pytest.mark.parametrize(("p", "m"), PM)
@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_gpipe_and_1f1b_bubble(name: str, p: int, m: int) -> None:
    """Idle (p−1)(F+B) against ideal m(F+B): (p−1)/m of ideal, (p−1)/(m+p−1) of the step."""
    for d in (EQUAL, Durations(1.0, 0.7, 1.3)):
        t = simulate(get_schedule(name, p, m), d)
        fb = d.f + d.i + d.w  # type: ignore[operator]
        assert t.makespan == pytest.approx((m + p - 1) * fb)
        assert t.bubble == pytest.approx((p - 1) * fb)
        assert t.bubble_fraction_of_ideal == pytest.approx((p - 1) / m)
        assert t.bubble_fraction_of_step == pytest.approx((p - 1) / (m + p - 1))


@pytest.mark.parametrize(
    ("p", "m", "of_step", "of_ideal"),
    [
        (4, 8, 3 / 11, 3 / 8),
        (4, 32, 3 / 35, 3 / 32),
        (8, 8, 7 / 15, 7 / 8),
        (4, 16, 3 / 19, 3 / 16),
        (16, 8, 15 / 23, 15 / 8),
    ],
)
def test_1f1b_bubble_worked_examples(p: int, m: int, of_step: float, of_ideal: float) -> None:
    """(p−1)/(m+p−1) of the step: 3/11 = 27.3 %, 3/35 = 8.6 %, 7/15 = 46.7 %; (p−1)/m of ideal: 18.75 % at
    p = 4, m = 16 and 187.5 % at p = 16, m = 8."""
    t = simulate(get_schedule("1f1b", p, m), EQUAL)
    assert t.bubble_fraction_of_step == pytest.approx(of_step)
    assert t.bubble_fraction_of_ideal == pytest.approx(of_ideal)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_no_microbatching_uses_one_rank_in_p(p: int) -> None:
    """With m = 1 only one stage works at a time: utilisation 1/p on every rank."""
    t = simulate(get_schedule("1f1b", p, 1), EQUAL)
    for busy in t.busy_per_rank:
        assert busy / t.makespan == pytest.approx(1 / p)


def test_rule_of_thumb_four_p() -> None:
    """GPipe's rule of thumb (the bubble is negligible for M ≥ 4K): m ≥ 4p gives efficiency m/(m+p−1) ≥ 0.8
    at p = 4."""
    t = simulate(get_schedule("1f1b", 4, 16), EQUAL)
    assert 1 - t.bubble_fraction_of_step == pytest.approx(16 / 19)
    assert 1 - t.bubble_fraction_of_step >= 0.8


@pytest.mark.parametrize(("p", "m"), PM)
def test_gpipe_and_1f1b_same_wall_clock_different_memory(p: int, m: int) -> None:
    """Narayanan §2.2.1: identical makespans; GPipe holds m on every stage, 1F1B holds min(p − i, m) on stage i."""
    g = simulate(get_schedule("gpipe", p, m), Durations(1.0, 1.5, 0.5))
    o = simulate(get_schedule("1f1b", p, m), Durations(1.0, 1.5, 0.5))
    assert g.makespan == pytest.approx(o.makespan)
    assert g.peak_in_flight_per_stage == (m,) * p
    assert o.peak_in_flight_per_stage == tuple(min(p - i, m) for i in range(p))


# --- Interleaved 1F1B: Narayanan et al. 2021 §2.2.2, Megatron's memory factor, torch's measured peak ------------


@pytest.mark.parametrize(
    ("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (4, 4, 8), (4, 2, 16), (8, 2, 16), (8, 4, 32), (4, 3, 12)]
)
def test_interleaved_bubble(p: int, v: int, m: int) -> None:
    """(p−1)/(v·m) of ideal with chunk passes 1/v of a full stage; P2P 2·m·(v·p − 1)."""
    t = simulate(get_schedule("interleaved-1f1b", p, m, v), Durations(1 / v, 1 / v, 1 / v))
    assert t.bubble_fraction_of_ideal == pytest.approx((p - 1) / (v * m))
    assert t.p2p_messages == 2 * m * (v * p - 1)


@pytest.mark.parametrize(("p", "m"), [(4, 6), (4, 10), (4, 15), (8, 12), (8, 18)])
def test_interleaved_relaxed_m_keeps_the_bubble(p: int, m: int) -> None:
    """torch's relaxation (G = m / max(1, m // p)) keeps (p−1)/(v·m) when p does not divide m."""
    t = simulate(get_schedule("interleaved-1f1b", p, m, 2), EQUAL)
    assert t.bubble_fraction_of_ideal == pytest.approx((p - 1) / (2 * m))


@pytest.mark.parametrize(
    ("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (4, 3, 8), (4, 4, 16), (8, 2, 16), (8, 3, 24)]
)
def test_interleaved_peak_in_flight_and_memory_factor(p: int, v: int, m: int) -> None:
    """Rank r holds (v−1)·p + 2(p−1−r) + 1 chunk-micro-batches (measured on torch's Interleaved1F1B, p = 4,
    v = 2: 11, 9, 7, 5). With a chunk 1/v of a stage, rank 0 holds ((v−1)p + 2p − 1)/v = p·(1 + (p−1)/(p·v))
    full-stage micro-batches: Megatron's interleaving factor (1 + (p−1)/(p·v)) on 1F1B's p, not (p−1)/(p·m)."""
    a_full = 1000.0
    t = simulate(get_schedule("interleaved-1f1b", p, m, v), EQUAL, activation_bytes=a_full / v)
    assert t.peak_in_flight_per_rank == tuple((v - 1) * p + 2 * (p - 1 - r) + 1 for r in range(p))
    factor = 1 + (p - 1) / (p * v)
    assert t.peak_in_flight_per_rank[0] / v == pytest.approx(p * factor)
    assert t.peak_bytes_per_rank is not None
    assert t.peak_bytes_per_rank[0] == pytest.approx(a_full * p * factor)


def test_interleaving_memory_factor_at_p4_v2() -> None:
    """p = 4, v = 2 → × 1.375 = 1 + (p−1)/(p·v) of 1F1B's stage-0 activations (Korthikanti et al. 2022, arXiv
    2205.05198 §4.2.3; Megatron-LM's `theoretical_memory_usage.py`)."""
    one = simulate(get_schedule("1f1b", 4, 8), EQUAL, activation_bytes=1.0)
    inter = simulate(get_schedule("interleaved-1f1b", 4, 8, 2), EQUAL, activation_bytes=0.5)
    assert one.peak_bytes_per_rank is not None and inter.peak_bytes_per_rank is not None
    assert inter.peak_bytes_per_rank[0] / one.peak_bytes_per_rank[0] == pytest.approx(1.375)


# --- Zero bubble: Qi et al. 2024 Table 2 -------------------------------------------------------------------------

FIW = [(1.0, 1.0, 1.0), (1.0, 1.0, 0.5), (2.0, 2.0, 1.0), (1.0, 1.5, 0.5), (1.2, 1.0, 0.8), (1.0, 2.0, 1.0)]


@pytest.mark.parametrize(("f", "i", "w"), FIW)
@pytest.mark.parametrize(("p", "m"), [(2, 8), (4, 8), (4, 16), (8, 32)])
def test_zb_h1_bubble(p: int, m: int, f: float, i: float, w: float) -> None:
    """(p−1)(F + I − W), for W ≤ F, W ≤ I and m ≥ p."""
    t = simulate(get_schedule("zb-h1", p, m), Durations(f, i, w))
    assert t.bubble == pytest.approx((p - 1) * (f + i - w))
    assert t.max_idle_in_span == pytest.approx((p - 1) * (f + i - w))  # stage 0 spans the whole step


def test_zb_h1_is_a_third_of_1f1b_with_equal_passes() -> None:
    """p = 4, m = 16, equal passes: (p−1)(F + I − W) is 1/16 = 6.25 % of ideal against 1F1B's 3/16 = 18.75 %."""
    zb = simulate(get_schedule("zb-h1", 4, 16), EQUAL)
    one = simulate(get_schedule("1f1b", 4, 16), EQUAL)
    assert zb.bubble_fraction_of_ideal == pytest.approx(1 / 16)
    assert one.bubble_fraction_of_ideal == pytest.approx(3 / 16)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_zb_h1_peak_memory_is_1f1bs(p: int) -> None:
    """Qi et al.: ZB-H1's peak over all workers is 1F1B's p micro-batches. Every stage reaches p (the last
    stage holds p W's back to drain the tail), not 1F1B's p − i."""
    zb = simulate(get_schedule("zb-h1", p, 4 * p), EQUAL)
    one = simulate(get_schedule("1f1b", p, 4 * p), EQUAL)
    assert max(zb.peak_in_flight_per_stage) == max(one.peak_in_flight_per_stage) == p
    assert zb.peak_in_flight_per_stage == (p,) * p


@pytest.mark.parametrize(("f", "i", "w"), FIW)
@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 7), (4, 16), (8, 32)])
def test_zb_h2_bubble(p: int, m: int, f: float, i: float, w: float) -> None:
    """(p−1)(F + I − 2W) idle inside each stage's own window (the parallelogram; Qi et al. drop the step-end
    synchronisation), for W ≤ F, W ≤ I and m ≥ 2p − 1. The step's makespan adds the (p−1)·F skew."""
    t = simulate(get_schedule("zb-h2", p, m), Durations(f, i, w))
    assert t.max_idle_in_span == pytest.approx((p - 1) * (f + i - 2 * w))
    if (f, i, w) == (1.0, 1.0, 1.0):
        assert t.idle_in_span_per_rank == pytest.approx((0.0,) * p)
        assert t.bubble == pytest.approx((p - 1) * f)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_zb_h2_holds_2p_minus_1(p: int) -> None:
    """Qi et al. Table 2: about twice the activations, (2p − 1)·M_B: 2p − 1 micro-batches on stage 0."""
    t = simulate(get_schedule("zb-h2", p, 4 * p), EQUAL)
    assert t.peak_in_flight_per_stage[0] == 2 * p - 1


@pytest.mark.parametrize("p", [2, 4, 8])
def test_zbv_is_nearly_bubble_free(p: int) -> None:
    """ZB-V with F = I = W: no idle inside any rank's window; the only bubble is the (p−1)·F start skew,
    constant in m, so the fraction → 0; 2p chunk-micro-batches = p full stages per rank (1F1B's p)."""
    for m in (2 * p, 8 * p, 32 * p):
        t = simulate(get_schedule("zbv", p, m), EQUAL)
        assert t.max_idle_in_span == pytest.approx(0.0)
        assert t.bubble == pytest.approx(p - 1)
        assert t.bubble_fraction_of_step == pytest.approx((p - 1) / (6 * m + p - 1))
        assert t.peak_in_flight_per_rank == (2 * p,) * p


# --- DualPipe: DeepSeek-V3 Table 2 ------------------------------------------------------------------------------


@pytest.mark.parametrize(("f", "w"), [(1.0, 1.0), (1.0, 0.5), (2.0, 0.5), (1.0, 0.25)])
@pytest.mark.parametrize(
    ("name", "p", "m"),
    [
        ("dualpipe", 4, 8),
        ("dualpipe", 8, 16),
        ("dualpipe", 8, 40),
        ("dualpipev", 2, 4),
        ("dualpipev", 4, 8),
        ("dualpipev", 4, 20),
    ],
)
def test_dualpipe_bubble(name: str, p: int, m: int, f: float, w: float) -> None:
    """DeepSeek: (PP/2 − 1)(F&B + B − 3W), B a full backward (= I + W), F&B an overlapped pair, run here as
    one unit that starts when both inputs have arrived (F&B = F + B). PP = p ranks for DualPipe, 2p chunks for
    DualPipeV. Reproduced exactly with F = I (the setting of DeepSeek's figure)."""
    i = f
    b = i + w
    half = p // 2 - 1 if name == "dualpipe" else p - 1
    t = simulate(get_schedule(name, p, m), Durations(f, i, w))
    assert t.bubble == pytest.approx(half * ((f + b) + b - 3 * w))


def test_dualpipe_memory_and_parameters() -> None:
    """DeepSeek-V3 Table 2: PP + 1 micro-batches of activations per device; two stages (two parameter copies)
    per rank."""
    d = simulate(get_schedule("dualpipe", 8, 16), EQUAL)
    assert d.peak_in_flight_per_rank == (9,) * 8
    v = simulate(get_schedule("dualpipev", 4, 8), EQUAL)  # PP = 8 chunks: 9 (torch measured 9 at p = 4)
    assert v.peak_in_flight_per_rank == (9,) * 4
    assert all(len(get_schedule("dualpipe", 8, 16).stages_of(r)) == 2 for r in range(8))


# --- P2P messages: each micro-batch crosses every cross-rank chunk boundary once forward, once backward ------------
# p − 1 boundaries with one chunk per rank, v·p − 1 with v chunks (interleaving's v× the P2P traffic, Narayanan et al.
# 2021 §2.2.2; Megatron-LM sends one message per boundary per micro-batch per direction).


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 16)])
def test_p2p_message_counts(p: int, m: int) -> None:
    for name in ("gpipe", "1f1b", "zb-h1", "zb-h2"):
        t = simulate(get_schedule(name, p, m), EQUAL)
        assert (t.p2p_forward_messages, t.p2p_backward_messages) == (m * (p - 1), m * (p - 1))
    for v in (2, 3):
        assert simulate(get_schedule("interleaved-1f1b", p, m, v), EQUAL).p2p_messages == 2 * m * (v * p - 1)
    # V placements: 2p − 1 boundaries, the middle one local.
    for name in ("zbv", "dualpipev"):
        assert simulate(get_schedule(name, p, max(m, 2 * p)), EQUAL).p2p_messages == 2 * max(m, 2 * p) * (
            2 * p - 2
        )
    # DualPipe: m/2 micro-batches cross p − 1 boundaries each way, in each direction.
    assert simulate(get_schedule("dualpipe", p, 2 * m), EQUAL).p2p_messages == 2 * (2 * m) * (p - 1)


# --- Latency ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 3)])
def test_gpipe_latency_adds_2_p_minus_1_hops(p: int, m: int) -> None:
    """By induction F(s, k) ends at (s + k + 1)·F + s·c: the forward wave pays (p−1)c once, and the backward
    wave the same again; nothing else waits on a message. Makespan grows by exactly 2(p−1)c."""
    s = get_schedule("gpipe", p, m)
    c = 0.25
    assert simulate(s, EQUAL, latency=c).makespan - simulate(s, EQUAL).makespan == pytest.approx(
        2 * (p - 1) * c
    )


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_1f1b_latency(p: int) -> None:
    """1F1B with one or two micro-batches behaves like GPipe: +2(p−1)c. With more, latency also enters the
    steady state: stage 0 holds p micro-batches, so the backward of micro-batch k (needed before stage 0 may
    start micro-batch k + p) comes back after a round trip through all p − 1 boundaries and back, 2(p−1) hops.
    Every further p micro-batches therefore add p(F + B) of work and one more 2(p−1)c round trip."""
    c = 0.01
    d = Durations(1.0, 1.0, 1.0)

    def grow(m: int) -> float:
        s = get_schedule("1f1b", p, m)
        return simulate(s, d, latency=c).makespan - simulate(s, d).makespan

    for m in (1, 2):
        assert grow(m) == pytest.approx(2 * (p - 1) * c)
    for m in (2, 3, p, 3 * p + 1):
        s_m = simulate(get_schedule("1f1b", p, m), d, latency=c)
        s_mp = simulate(get_schedule("1f1b", p, m + p), d, latency=c)
        assert s_mp.makespan - s_m.makespan == pytest.approx(p * 3.0 + 2 * (p - 1) * c)


def test_latency_matrix_and_callable_intra_vs_inter_node() -> None:
    """Two ranks per node: hops 0→1 and 2→3 cost 0.1, hop 1→2 costs 1.0; GPipe pays each once per direction."""
    s = get_schedule("gpipe", 4, 4)

    def lat(a: int, b: int) -> float:
        return 0.1 if a // 2 == b // 2 else 1.0

    base = simulate(s, EQUAL).makespan
    assert simulate(s, EQUAL, latency=lat).makespan - base == pytest.approx(2 * (0.1 + 1.0 + 0.1))
    matrix = [[lat(a, b) for b in range(4)] for a in range(4)]
    assert simulate(s, EQUAL, latency=matrix).makespan - base == pytest.approx(2.4)


def test_same_rank_hop_is_free() -> None:
    """In a V the stage p−1 → p hop stays on rank p − 1: with p = 1 every hop is local, latency changes nothing."""
    s = get_schedule("zbv", 1, 4)
    assert simulate(s, EQUAL, latency=5.0).makespan == simulate(s, EQUAL).makespan


# --- Non-uniform stages, bytes, errors, deadlock, speed ----------------------------------------------------------


def test_per_stage_durations() -> None:
    """m = 1: the step is the sum of every stage's F and B; the busiest rank is the slowest stage."""
    f = [1.0, 1.0, 1.0, 2.0]
    i = [0.5, 1.0, 1.0, 1.0]
    w = [0.5, 1.0, 1.0, 1.5]
    t = simulate(get_schedule("1f1b", 4, 1), Durations(f, i, w))
    assert t.makespan == pytest.approx(sum(f) + sum(i) + sum(w))
    assert t.busy_per_rank == pytest.approx((2.0, 3.0, 3.0, 4.5))
    assert t.bubble == pytest.approx(t.makespan - 4.5)


def test_gpipe_peak_bytes_per_stage() -> None:
    t = simulate(get_schedule("gpipe", 3, 5), EQUAL, activation_bytes=[10.0, 20.0, 30.0])
    assert t.peak_bytes_per_stage == (50.0, 100.0, 150.0)


def test_durations_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"durations\.f"):
        simulate(get_schedule("1f1b", 4, 4), Durations([1.0, 2.0], 1.0, 1.0))
    with pytest.raises(ConfigError, match="negative"):
        simulate(get_schedule("1f1b", 4, 4), Durations(1.0, -1.0, 1.0))


def test_deadlock_names_the_stuck_actions() -> None:
    """Rank 0 wants micro-batch 0's backward before sending micro-batch 1 forward; rank 1 wants micro-batch 1's
    forward first. Each waits on the other: no order can finish them."""
    rows = [
        [Action(0, "F", 0), Action(0, "B", 0), Action(0, "F", 1), Action(0, "B", 1)],
        [Action(1, "F", 1), Action(1, "B", 1), Action(1, "F", 0), Action(1, "B", 0)],
    ]
    s = make_schedule("hand-made", 2, 1, 2, (0, 1), rows)
    with pytest.raises(DeadlockError) as info:
        simulate(s, EQUAL)
    text = str(info.value)
    assert "rank 0 at 0B0 waits for 1B0" in text
    assert "rank 1 at 1F1 waits for 0F1" in text


def test_timeline_intervals_are_ordered_and_non_overlapping() -> None:
    t = simulate(get_schedule("zb-h2", 4, 12), Durations(1.0, 0.8, 0.6), latency=0.05)
    for r in range(4):
        last = 0.0
        for _, start, end in t.intervals(r):
            assert start >= last - 1e-12
            last = end
    assert t.makespan == pytest.approx(max(max(e) for e in t.end))


def test_large_case_runs() -> None:
    """p = 16, v = 4, m = 128 (16,384 actions; 32,768 with split backwards) generates and simulates; its speed
    (generation + first simulation, then later simulations) is printed by benchmarks/bench_timeline.py."""
    p, m, v = 16, 128, 4
    s = get_schedule("interleaved-1f1b", p, m, v)
    assert s.num_actions == p * v * m * 2
    # Megatron's interleaved bubble, (p − 1)/(v·m) of ideal, exactly without latency; hops only add to it.
    assert simulate(s, EQUAL).bubble_fraction_of_ideal == pytest.approx((p - 1) / (v * m))
    assert simulate(s, EQUAL, latency=0.01).bubble_fraction_of_ideal > (p - 1) / (v * m)


@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (4, 3, 16), (8, 2, 16)])
def test_interleaved_zero_bubble_is_a_third_of_interleaved(p: int, v: int, m: int) -> None:
    """ZB-H1's (p−1)(F + I − W) with chunk passes 1/v: (p−1)/(3·v·m) of ideal for equal passes, a third of
    interleaved 1F1B's (p−1)/(v·m); every rank holds v·p chunk-micro-batches = p full stages (torch measured 8
    on every rank at p = 4, v = 2)."""
    t = simulate(get_schedule("interleaved-zb", p, m, v), EQUAL)
    assert t.bubble_fraction_of_ideal == pytest.approx((p - 1) / (3 * v * m))
    assert t.peak_in_flight_per_rank == (v * p,) * p


def test_looped_bfs_holds_every_chunk_microbatch() -> None:
    t = simulate(get_schedule("looped-bfs", 4, 8, 2), EQUAL)
    assert t.peak_in_flight_per_rank == (16,) * 4


def test_a_step_without_a_bubble_reports_none_whatever_the_summation_order() -> None:
    from pplan.schedules.timeline import idle_s

    passes = [0.1, 0.2, 0.3] * 7
    ends = 0.0
    for x in passes:
        ends += x  # what a simulated end time accumulates
    busy = sum(sorted(passes))  # the same passes summed in another order
    assert ends != busy  # rounding differs (the case this guards)
    assert idle_s(ends, busy) == 0.0
    assert idle_s(4.2 + 1e-6, 4.2) == pytest.approx(1e-6)  # a real gap is kept
    assert idle_s(4.2, 4.2 + 1e-6) == pytest.approx(-1e-6)  # and so is a measured inconsistency
