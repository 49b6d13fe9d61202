"""Pipeline schedule names, their aliases, how they place model chunks on ranks, and their rules on p, v and m.

This is the planner's view of a schedule (what `explain` and the search need before any timeline exists):
the canonical name, the model-chunk layout, and the conditions a configuration must meet. Rules:

- gpipe, 1f1b: any m ≥ 1 (with m < p a stage holds at most m micro-batches).
- interleaved-1f1b: v ≥ 2 chunks per rank, loop placement (chunk c on rank c mod p); Megatron-LM's schedule
  groups micro-batches p at a time and needs m to be a multiple of p (Narayanan et al. 2021 §2.2).
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
        ScheduleKind("zb-h1", "Zero Bubble ZB-H1", "loop", 1, True),
        ScheduleKind("zb-h2", "Zero Bubble ZB-H2", "loop", 1, True),
        ScheduleKind("zbv", "Zero Bubble ZB-V", "v", 2, True),
        ScheduleKind("dualpipev", "DualPipeV", "v", 2, True),
        ScheduleKind("dualpipe", "DualPipe (bidirectional)", "dual", 1, True),
    )
}

ALIASES: dict[str, str] = {
    "schedulegpipe": "gpipe",
    "schedule1f1b": "1f1b",
    "pipedream-flush": "1f1b",
    "interleaved1f1b": "interleaved-1f1b",
    "scheduleinterleaved1f1b": "interleaved-1f1b",
    "interleaved": "interleaved-1f1b",
    "zbh1": "zb-h1",
    "zbh2": "zb-h2",
    "zb-v": "zbv",
    "zbvzerobubble": "zbv",
    "schedulezbvzerobubble": "zbv",
    "scheduledualpipev": "dualpipev",
    "dualpipe-v": "dualpipev",
}


def resolve_schedule(name: str) -> ScheduleKind:
    """The schedule named `name` (case-insensitive; torch's class names accepted)."""
    key = name.strip().lower().replace("_", "-")
    key = ALIASES.get(key, ALIASES.get(key.replace("-", ""), key))
    if key not in KINDS:
        known = ", ".join(KINDS)
        raise ConfigError("--schedule", f"unknown schedule {name!r}", f"use one of: {known}")
    return KINDS[key]


def chunks_per_rank(kind: ScheduleKind, vp: int | None) -> int:
    """Model chunks each rank holds (dualpipe: two stage copies, counted by `stages_per_rank`)."""
    if kind.fixed_v is not None:
        if vp is not None and vp != kind.fixed_v:
            raise ConfigError(
                "--vp", f"{kind.name} uses {kind.fixed_v} chunk(s) per rank, got --vp {vp}", "drop --vp"
            )
        return kind.fixed_v
    if vp is None or vp < 2:
        raise ConfigError("--vp", f"{kind.name} needs --vp ≥ 2 chunks per rank", "pass e.g. --vp 2")
    return vp


def _nearest(candidates: list[int], target: int) -> list[int]:
    return sorted(sorted(set(candidates), key=lambda c: (abs(c - target), c))[:2])


def check_microbatches(kind: ScheduleKind, p: int, m: int) -> None:
    """Raise a ConfigError naming the nearest valid m when `m` breaks the schedule's rule for `p` ranks."""
    lo = max(1, m - 4 * p)
    window = list(range(lo, m + 4 * p + 1))
    if kind.name == "interleaved-1f1b" and (m % p or m < p):
        ok = _nearest([c for c in window if c % p == 0 and c >= p], m)
        raise ConfigError(
            "micro-batches",
            f"interleaved-1f1b needs m a multiple of p={p}, got m={m}",
            f"choose a global batch giving m in {ok}",
        )
    if kind.name in ("zb-h1", "zb-h2") and m < p:
        raise ConfigError(
            "micro-batches",
            f"{kind.name} needs m ≥ p={p}, got m={m}",
            f"choose a global batch giving m ≥ {p}",
        )
    if kind.name == "dualpipev" and m < 2 * p:
        raise ConfigError(
            "micro-batches",
            f"dualpipev needs m ≥ 2p={2 * p}, got m={m}",
            f"choose a global batch giving m ≥ {2 * p}",
        )
    if kind.name == "dualpipe":
        if p % 2:
            raise ConfigError(
                "--pp", f"dualpipe needs an even number of ranks, got p={p}", "use an even --pp"
            )
        if m % 2 or m < 2 * p:
            ok = _nearest([c for c in window if c % 2 == 0 and c >= 2 * p], m)
            raise ConfigError(
                "micro-batches",
                f"dualpipe needs m even and ≥ 2p={2 * p}, got m={m}",
                f"choose a global batch giving m in {ok}",
            )
