"""Published closed forms for each schedule: micro-batches in flight per rank and chunk, and the bubble.

These hold for uniform stages and free communication; the schedule simulator measures the same quantities off
an explicit timeline and is tested against them. Durations F (forward), I (input-gradient backward, Qi et al.'s
B) and W (weight-gradient backward) are per stage; a full backward is I + W.

Bubble, as idle time per rank (fraction of ideal = idle / (m·(F+I+W)); fraction of step = idle / (ideal + idle)):
- GPipe, 1F1B: (p−1)(F+I+W) (Narayanan et al. 2021 §2.2: (p−1)/m of ideal);
- interleaved 1F1B: (p−1)(F+I+W)/v (ibid.; Llama 3 §3.3.2 writes (PP−1)/(V·M));
- ZB-H1: (p−1)(F+I−W); ZB-H2: (p−1)(F+I−2W), floored at 0 (Qi et al. 2024, Table 2);
- ZB-V: (p−1)(F+I−2W)/2 with each chunk half a stage, floored at 0 (≈ 0 when F = I = W; Qi et al. 2024 §5);
- DualPipe: (p/2 − 1)(F&B + B − 3W) with B = I + W the full backward and F&B = F + B when a forward and a
  backward are not overlapped (DeepSeek-V3 report Table 2); DualPipeV on p ranks is DualPipe on 2p half-stages:
  (p − 1)(F&B + B − 3W)/2.

Micro-batches in flight (forward done, backward not yet): GPipe m on every rank; 1F1B and ZB-H1 min(p − r, m)
on rank r; ZB-H2 min(2(p − r) − 1, m); interleaved 1F1B follows Megatron-LM's warm-up of 2(p − r − 1) + (v − 1)·p
chunk forwards plus the first steady-state forward, in groups of p micro-batches per chunk; ZB-V p chunk-passes
per chunk (Qi et al.: 1F1B's peak p·M_B in half-stage units); DualPipe(V) p + 1 in all (DeepSeek-V3 Table 2).
"""

from __future__ import annotations

from pplan.schedule_kinds import ScheduleKind


def interleaved_warmup_counts(p: int, v: int, m: int, rank: int) -> tuple[int, ...]:
    """Chunk micro-batches in flight per local chunk at rank `rank`'s peak under Megatron's interleaved 1F1B.

    Forward k on a rank runs local chunk (k // p) mod v; the peak is reached after the warm-up forwards
    2(p − r − 1) + (v − 1)·p plus one steady-state forward, capped at the m·v forwards that exist.
    """
    forwards = min(2 * (p - rank - 1) + (v - 1) * p + 1, m * v)
    counts = [0] * v
    for k in range(forwards):
        counts[(k // p) % v] += 1
    return tuple(counts)


def in_flight_chunk_microbatches(kind: ScheduleKind, p: int, v: int, m: int) -> tuple[tuple[int, ...], ...]:
    """Per rank, per local chunk (in the layout's order): micro-batches whose activations are held at the peak."""
    name = kind.name
    if name == "gpipe":
        return tuple((m,) for _ in range(p))
    if name in ("1f1b", "zb-h1"):
        return tuple((min(p - r, m),) for r in range(p))
    if name == "zb-h2":
        return tuple((min(2 * (p - r) - 1, m),) for r in range(p))
    if name == "interleaved-1f1b":
        return tuple(interleaved_warmup_counts(p, v, m, r) for r in range(p))
    if name == "zbv":
        return tuple((min(p, m), min(p, m)) for _ in range(p))
    # dualpipe / dualpipev: p + 1 micro-batches in all, split over the rank's two chunks
    total = min(p + 1, m)
    return tuple((total - total // 2, total // 2) for _ in range(p))


def bubble_idle(kind: ScheduleKind, p: int, v: int, f: float = 1.0, i: float = 1.0, w: float = 1.0) -> float:
    """Idle time per rank per step (same unit as f, i, w), uniform stages, free communication."""
    name = kind.name
    if name in ("gpipe", "1f1b"):
        return (p - 1) * (f + i + w)
    if name == "interleaved-1f1b":
        return (p - 1) * (f + i + w) / v
    if name == "zb-h1":
        return max(0.0, (p - 1) * (f + i - w))
    if name == "zb-h2":
        return max(0.0, (p - 1) * (f + i - 2 * w))
    if name == "zbv":
        return max(0.0, (p - 1) * (f + i - 2 * w) / 2)
    full_b = i + w
    per_pair = (f + full_b) + full_b - 3 * w
    if name == "dualpipe":
        return max(0.0, (p / 2 - 1) * per_pair)
    return max(0.0, (p - 1) * per_pair / 2)  # dualpipev


def bubble_fractions(
    kind: ScheduleKind, p: int, v: int, m: int, f: float = 1.0, i: float = 1.0, w: float = 1.0
) -> tuple[float, float]:
    """(idle / ideal, idle / step) from `bubble_idle`, ideal = m·(F + I + W) per rank."""
    idle = bubble_idle(kind, p, v, f, i, w)
    ideal = m * (f + i + w)
    return idle / ideal, idle / (ideal + idle)
