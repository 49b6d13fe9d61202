"""The planner's view of each schedule family: how it places model chunks on ranks and whether it splits the
backward; names and rules on p, v and m are the schedule registry's (`pplan.schedules`), surfaced here as errors
on the options a planner user sets (the global batch rather than m). The rules, for reference:

- gpipe, 1f1b: any m ≥ 1 (with m < p a stage holds at most m micro-batches).
- interleaved-1f1b (and interleaved-zb, looped-bfs): v ≥ 2 chunks per rank, loop placement (chunk c on rank
  c mod p); m a multiple of p (Megatron-LM, Narayanan et al. 2021 §2.2) or, beyond that, what torch's rounds rule
  accepts (m divisible by max(1, m // p)).
- zb-h1, zb-h2: Qi et al. 2024 (arXiv 2401.10241) handcrafted schedules, defined for m ≥ p.
- zbv: two chunks per rank in a V (rank r holds chunks r and 2p−1−r), any m ≥ 1 (torch runs m = 1).
- dualpipev: DualPipe folded into a V, two chunks per rank; needs m ≥ 2p (torch's ScheduleDualPipeV).
- dualpipe: bidirectional, p even, rank r holds stage r and stage p−1−r (two copies of the parameters), m even
  and m ≥ 2p (DeepSeek-V3 technical report §3.2.1; the reference implementation's assertion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pplan.errors import ConfigError
from pplan.schedules import Schedule, canonical_name, get_schedule
from pplan.schedules.interleaved import valid_interleaved_m

Placement = Literal["loop", "v", "dual"]


@dataclass(frozen=True, slots=True)
class ScheduleKind:
    """A schedule family's static facts."""

    name: str
    title: str
    placement: Placement
    fixed_v: int | None
    """Chunks per rank the schedule requires (None: the user's --vp, 1 for non-interleaved)."""
    splits_backward: bool
    """True when the backward runs as separate input-gradient and weight-gradient passes."""


KINDS: dict[str, ScheduleKind] = {
    k.name: k
    for k in (
        ScheduleKind("gpipe", "GPipe", "loop", 1, False),
        ScheduleKind("1f1b", "1F1B (PipeDream-Flush)", "loop", 1, False),
        ScheduleKind("interleaved-1f1b", "Interleaved 1F1B", "loop", None, False),
        ScheduleKind("looped-bfs", "Looped BFS", "loop", None, False),
        ScheduleKind("interleaved-zb", "Interleaved zero bubble", "loop", None, True),
        ScheduleKind("zb-h1", "Zero Bubble ZB-H1", "loop", 1, True),
        ScheduleKind("zb-h2", "Zero Bubble ZB-H2", "loop", 1, True),
        ScheduleKind("zbv", "Zero Bubble ZB-V", "v", 2, True),
        ScheduleKind("dualpipev", "DualPipeV", "v", 2, True),
        ScheduleKind("dualpipe", "DualPipe (bidirectional)", "dual", 1, True),
    )
}


def resolve_schedule(name: str) -> ScheduleKind:
    """The schedule named `name` (case-insensitive; torch's class names accepted; see pplan.schedules)."""
    return KINDS[canonical_name(name)]


def chunks_per_rank(kind: ScheduleKind, vp: int | None) -> int:
    """Model chunks each rank holds (dualpipe: its two stage copies count as one chunk of the down pipeline)."""
    if kind.fixed_v is not None:
        if vp is not None and vp != kind.fixed_v:
            raise ConfigError(
                "--vp", f"{kind.name} uses {kind.fixed_v} chunk(s) per rank, got --vp {vp}", "drop --vp"
            )
        return kind.fixed_v
    if vp is None or vp < 2:
        raise ConfigError("--vp", f"{kind.name} needs --vp ≥ 2 chunks per rank", "pass e.g. --vp 2")
    return vp


def m_allowed(kind: ScheduleKind, p: int, m: int) -> bool:
    """Whether the schedule's generator accepts m micro-batches on p ranks (checked without generating it)."""
    if m < 1:
        return False
    if kind.name in ("interleaved-1f1b", "interleaved-zb"):
        return valid_interleaved_m(p, m)
    if kind.name == "dualpipev":
        return m >= 2 * p
    if kind.name == "dualpipe":
        return p % 2 == 0 and m % 2 == 0 and m >= 2 * p
    return True


def schedule_for(kind: ScheduleKind, p: int, v: int, m: int, per_microbatch: int) -> Schedule:
    """The explicit schedule for a plan, or a ConfigError on the global batch with the nearest valid m.

    `per_microbatch` = b·d sequences per micro-batch step, so m ↦ global batch = m·b·d in the suggestion.
    """
    try:
        return get_schedule(kind.name, p, m, None if kind.placement == "dual" else v)
    except ConfigError as err:
        if err.field == "--pp":
            raise
        lower = [c for c in range(m - 1, 0, -1) if m_allowed(kind, p, c)][:1]
        upper = [c for c in range(m + 1, m + 8 * p + 2) if m_allowed(kind, p, c)][:1]
        options = lower + upper
        fix = ", ".join(f"--global-batch {c * per_microbatch} (m={c})" for c in options)
        raise ConfigError(
            "--global-batch",
            f"m = {m} micro-batches breaks {kind.name}'s rule at p={p}: {err.message}",
            f"use {fix}" if fix else err.fix,
        ) from err
