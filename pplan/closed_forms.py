"""Published closed forms for each schedule's bubble, shown beside the simulated one for comparison.

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

Micro-batches in flight are not given here: pplan measures them off the explicit schedule (pplan.timeline),
whose tests check them against the published counts.
"""

from __future__ import annotations

from pplan.schedule_kinds import KINDS as KINDS_BY_NAME
from pplan.schedule_kinds import ScheduleKind


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
        return max(
            0.0, (p - 1) * (f + i - 2 * w)
        )  # needs m ≥ 2p − 1 to fill the warm-up (see bubble_fractions)
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
    if kind.name == "zb-h2" and m < 2 * p - 1:  # too few micro-batches for ZB-H2's extra warm-up forwards
        idle = bubble_idle(KINDS_BY_NAME["zb-h1"], p, v, f, i, w)
    ideal = m * (f + i + w)
    return idle / ideal, idle / (ideal + idle)
