"""Turning a logged value's text into a Python value: Python reprs (`None`, `True`, `torch.bfloat16`, lists), YAML
scalars, numbers with thousands separators or in scientific form, and sizes with units (MiB, GiB, GB, bytes)."""

from __future__ import annotations

import ast
import re
from typing import Any

_NUMBER = re.compile(r"^[+-]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_UNITS = {
    "b": 1,
    "bytes": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "kb": 10**3,
    "mb": 2**20,
    "gb": 2**30,
    "tb": 2**40,
}
"""Memory units as logs use them: Megatron's "MB" is MiB (it divides by 1024²) and "GB" in prose is usually GiB."""


def number(text: str) -> float | None:
    """`1,234.5`, `1.25e+03`, `12` as a float; None when not a number."""
    text = text.strip().rstrip(",;|")
    if not _NUMBER.match(text):
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def value(text: str) -> Any:
    """A logged value as Python: None, bools, ints, floats, lists/tuples/dicts, `torch.bfloat16` as "bfloat16",
    anything else as its stripped string (quotes removed)."""
    text = text.strip().rstrip(",")
    low = text.lower()
    if low in ("none", "null", "~", ""):
        return None
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    num = number(text)
    if num is not None and "," not in text:
        return int(num) if num.is_integer() and not re.search(r"[.eE]", text) else num
    if text.startswith("torch."):
        return text[len("torch.") :]
    if text[:1] in "[({'\"":
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text.strip("'\"")
    return text


def size_bytes(amount: str, unit: str) -> int | None:
    """`amount` of `unit` (MiB, GiB, GB, bytes, …) in bytes; None for an unknown unit or a non-number."""
    num = number(amount)
    scale = _UNITS.get(unit.strip().lower())
    if num is None or scale is None:
        return None
    return round(num * scale)


def as_int(got: Any) -> int | None:
    """An integer reading, or None (for a value that is not a whole number)."""
    if isinstance(got, bool):
        return None
    if isinstance(got, int):
        return got
    if isinstance(got, float) and got.is_integer():
        return int(got)
    if isinstance(got, str):
        num = number(got)
        if num is not None and num.is_integer():
            return int(num)
    return None


def as_bool(got: Any) -> bool | None:
    if isinstance(got, bool):
        return got
    if isinstance(got, str):
        low = got.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
    if isinstance(got, int):
        return bool(got)
    return None
