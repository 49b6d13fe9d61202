"""The problem the auto scheduler solves, checked and frozen (`check_problem` → `Problem`): p ranks, m
micro-batches, per-stage pass times, hop latencies and the memory limit K_s per stage (capped at m); the list
encoding the builder, the search and the safeguards share (one code 3·micro-batch + kind per pass: `CODE_F`,
`CODE_I`, `CODE_W`); and the memory limit on lists: a list's peak in flight per stage (`peak_per_stage`, +1 at F,
−1 after W) and whether it `fits` min(K_s, m)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pplan.errors import ConfigError
from pplan.schedules.actions import Kind

CODE_F, CODE_I, CODE_W = 0, 1, 2
"""A pass's kind in a list code (3·micro-batch + kind)."""
KIND: tuple[Kind, Kind, Kind] = ("F", "I", "W")
INF = math.inf


@dataclass(frozen=True, slots=True)
class Problem:
    """The checked inputs: p ranks, m micro-batches, cap[r] = min(K_r, m), per-stage times in seconds, and the
    p×p hop latencies (0 on the diagonal), also per receiving rank r: `lat_f_in[r]` for an F's activation from
    r − 1, `lat_i_in[r]` for an I's gradient from r + 1 (0 where there is no such rank)."""

    p: int
    m: int
    cap: tuple[int, ...]
    f: tuple[float, ...]
    i: tuple[float, ...]
    w: tuple[float, ...]
    latency: tuple[tuple[float, ...], ...]
    lat_f_in: tuple[float, ...]
    lat_i_in: tuple[float, ...]


def _per_stage(name: str, value: Sequence[float] | float, p: int) -> tuple[float, ...]:
    """One time per stage from a number or a sequence of p numbers, each finite and ≥ 0, or a ConfigError."""
    try:
        if isinstance(value, str):
            raise TypeError(value)
        values = (float(value),) * p if isinstance(value, int | float) else tuple(float(x) for x in value)
    except (TypeError, ValueError):
        raise ConfigError(
            name, f"is {value!r}", f"give seconds: one number, or one per stage ({p})"
        ) from None
    if len(values) != p:
        raise ConfigError(name, f"has {len(values)} values for {p} stages", f"give one number, or {p}")
    if any(not math.isfinite(x) or x < 0 for x in values):
        raise ConfigError(name, "has a negative or non-finite time", "use finite times ≥ 0 seconds")
    return values


def check_problem(
    p: int,
    m: int,
    memory_limit: int | Sequence[int],
    f: Sequence[float] | float,
    i: Sequence[float] | float,
    w: Sequence[float] | float,
    latency_s: float | Sequence[Sequence[float]],
) -> Problem:
    """Check the inputs of `auto_schedule` (ConfigError naming the field) and freeze them."""
    p, m = _count("p", p), _count("m", m)
    caps = _memory_limits(memory_limit, p)
    lat = _latencies(latency_s, p)
    return Problem(
        p,
        m,
        tuple(min(k, m) for k in caps),
        _per_stage("f", f, p),
        _per_stage("i", i, p),
        _per_stage("w", w, p),
        lat,
        tuple(lat[r - 1][r] if r else 0.0 for r in range(p)),
        tuple(lat[r + 1][r] if r < p - 1 else 0.0 for r in range(p)),
    )


def _memory_limits(value: object, p: int) -> tuple[int, ...]:
    """One K per stage from an integer or a sequence of p integers, each ≥ 1 (no bools), or a ConfigError."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return (_count("memory_limit", value),) * p
    values = tuple(value)
    if len(values) != p:
        raise ConfigError(
            "memory_limit", f"has {len(values)} values for {p} stages", f"give one integer, or {p}"
        )
    for s, k in enumerate(values):
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ConfigError(
                "memory_limit", f"is {k!r} for stage {s}", "use integers ≥ 1 (micro-batches in flight)"
            )
    return tuple(int(k) for k in values)


def _latencies(value: object, p: int) -> tuple[tuple[float, ...], ...]:
    """The p×p hop latencies (row = sending rank, column = receiving rank; 0 on the diagonal) from one number
    or a p×p matrix of numbers, each off the diagonal finite and ≥ 0 (the diagonal is ignored), or a
    ConfigError."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        try:
            lat = float(value)  # type: ignore[arg-type]  # anything float() takes; the rest is refused here
        except (TypeError, ValueError):
            lat = math.nan
        if not math.isfinite(lat) or lat < 0:
            raise ConfigError("latency_s", f"is {value!r}", "use a finite latency ≥ 0 seconds")
        return tuple(tuple(0.0 if a == b else lat for b in range(p)) for a in range(p))
    fix = f"give one number, or a {p}×{p} matrix (row = sending rank, column = receiving rank)"
    try:
        raw = tuple(value)
        if any(isinstance(row, str) for row in raw):
            raise TypeError(value)
        rows = tuple(tuple(float(x) for x in row) for row in raw)
    except (TypeError, ValueError):
        raise ConfigError("latency_s", f"is {value!r}", fix) from None
    if len(rows) != p:
        raise ConfigError("latency_s", f"has {len(rows)} rows for {p} ranks", fix)
    for a, row in enumerate(rows):
        if len(row) != p:
            raise ConfigError("latency_s", f"has {len(row)} entries in row {a} for {p} ranks", fix)
    if any(not math.isfinite(x) or x < 0 for a, row in enumerate(rows) for b, x in enumerate(row) if a != b):
        raise ConfigError(
            "latency_s", "has a negative or non-finite latency", "use finite latencies ≥ 0 seconds"
        )
    return tuple(tuple(0.0 if a == b else x for b, x in enumerate(row)) for a, row in enumerate(rows))


def _count(name: str, value: object) -> int:
    """An integer ≥ 1 (any `numbers.Integral` but a bool), or a ConfigError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(name, f"is {value!r}", f"use an integer {name} ≥ 1")
    return int(value)


def latency_matrix(prob: Problem) -> list[list[float]]:
    """λ[a][b] between different ranks, 0 on the diagonal (the form `bounds.makespan_lower_bound` takes)."""
    return [list(row) for row in prob.latency]


def peak_per_stage(rows: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Per stage (= rank), the most micro-batches in flight walking its list: +1 at F, −1 after W."""
    peaks = []
    for row in rows:
        cur = top = 0
        for code in row:
            kind = code % 3
            if kind == CODE_F:
                cur += 1
                top = max(top, cur)
            elif kind == CODE_W:
                cur -= 1
        peaks.append(top)
    return tuple(peaks)


def fits(peaks: Sequence[int], prob: Problem) -> bool:
    """Whether every stage's peak in flight is within its own cap min(K_s, m)."""
    return all(x <= cap for x, cap in zip(peaks, prob.cap, strict=True))
