"""Up-front checks of a schedule's rules on p (ranks), v (stages per rank) and m (micro-batches).

Each failure is a `ConfigError` naming the command-line field (`--pp`, `--vp`, `--microbatches`) and the nearest
valid values, so a user can fix the plan in one edit.
"""

from __future__ import annotations

from pplan.errors import ConfigError

PP = "--pp"
VP = "--vp"
MICROBATCHES = "--microbatches"


def need_positive(p: int, m: int) -> None:
    if p < 1:
        raise ConfigError(PP, f"{p} pipeline ranks", "use --pp 1 or more")
    if m < 1:
        raise ConfigError(MICROBATCHES, f"{m} micro-batches", "use --microbatches 1 or more")


def need_v(name: str, v: int | None, allowed: str, default: int) -> int:
    """Resolve v: None → `default`; otherwise it must satisfy `allowed` ("1", "2" or ">=2")."""
    got = default if v is None else v
    ok = {"1": got == 1, "2": got == 2, ">=2": got >= 2}[allowed]
    if not ok:
        want = {
            "1": "--vp 1 (one stage per rank)",
            "2": "--vp 2 (two stages per rank, in a V)",
            ">=2": "--vp 2 or more",
        }
        raise ConfigError(VP, f"{name} cannot run {got} stage(s) per rank", f"use {want[allowed]}")
    return got


def need_m_at_least(name: str, m: int, least: int, why: str) -> None:
    if m < least:
        raise ConfigError(
            MICROBATCHES,
            f"{name} needs at least {least} micro-batches ({why}), got {m}",
            f"use --microbatches {least} or more",
        )


def need_even(name: str, field: str, value: int, why: str) -> None:
    if value % 2:
        lo, hi = value - 1, value + 1
        options = f"{lo} or {hi}" if lo >= 1 else f"{hi}"
        raise ConfigError(field, f"{name} needs an even value ({why}), got {value}", f"use {field} {options}")


def nearest_multiples(m: int, k: int) -> str:
    """'8 or 12' for m=10, k=4: the multiples of k either side of m (only the upper one when the lower is 0)."""
    lo, hi = (m // k) * k, (m // k + 1) * k
    return f"{lo} or {hi}" if lo >= k else f"{hi}"
