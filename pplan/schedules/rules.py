"""Up-front checks of a schedule's rules on p (ranks), v (stages per rank) and m (micro-batches).

Each failure is a `ConfigError` naming the command-line field (`--pp`, `--vp`, `--microbatches`) and the nearest
valid values, so a user can fix the plan in one edit.
"""

from __future__ import annotations

from collections.abc import Callable

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


MRule = Callable[[int, int], str | None]
"""A family's rule on m: (p, m) → None when the family runs m micro-batches on p ranks (p, m ≥ 1), else what is
wrong, worded to follow the family's name ("needs at least 8 micro-batches (...), got 7")."""

PRule = Callable[[int], str | None]
"""A family's rule on p alone, worded the same way."""


def any_m(p: int, m: int) -> str | None:
    """The rule of a family that runs every m ≥ 1."""
    return None


def any_p(p: int) -> str | None:
    """The rule of a family that runs on every p ≥ 1."""
    return None


def nearest_valid(value: int, ok: Callable[[int], bool], upto: int) -> tuple[int | None, int | None]:
    """(the largest valid value below `value`, ≥ 1; the smallest above it, ≤ `upto`), None where there is none."""
    lower = next((c for c in range(value - 1, 0, -1) if ok(c)), None)
    upper = next((c for c in range(value + 1, upto + 1) if ok(c)), None)
    return lower, upper


def _options(value: int, ok: Callable[[int], bool], span: int) -> str:
    """'8 or 10', or '8 or more' when nothing below works and everything from 8 to 8 + span does."""
    lower, upper = nearest_valid(value, ok, value + 4 * span + 2)
    if upper is None:
        return f"{lower}" if lower is not None else ""
    if lower is not None:
        return f"{lower} or {upper}"
    if all(ok(c) for c in range(upper, upper + span + 1)):
        return f"{upper} or more"
    return f"{upper}"


def need_p(name: str, p: int, rule: PRule) -> None:
    """Raise a ConfigError on --pp when `rule` refuses p, naming the nearest p it accepts."""
    problem = rule(p)
    if problem is not None:
        options = _options(p, lambda c: rule(c) is None, 4)
        raise ConfigError(PP, f"{name} {problem}", f"use {PP} {options}" if options else f"change {PP}")


def need_m(name: str, p: int, m: int, rule: MRule, note: str = "") -> None:
    """Raise a ConfigError on --microbatches when `rule` refuses m at p, naming the nearest m it accepts."""
    problem = rule(p, m)
    if problem is not None:
        options = _options(m, lambda c: rule(p, c) is None, 2 * p)
        fix = f"use {MICROBATCHES} {options}" if options else f"change {MICROBATCHES}"
        raise ConfigError(MICROBATCHES, f"{name} {problem}", fix + note)
