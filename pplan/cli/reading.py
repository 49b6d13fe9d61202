"""Reading a JSON document a user hands a command (`pplan compare`'s explain reports): one bounded reader.

`read_bounded` reads through pplan.reading (at most the cap plus one byte from the stream itself, never trusting
the file's size as `stat` reports it), so an endless or huge input costs at most the cap in memory before it is
refused. `parse_json` then checks the text before and while the
parser builds anything:
- at most `MAX_DEPTH` nested brackets (counted outside strings, before parsing: the parser recurses per level);
- at most `MAX_VALUES` values in all (commas and brackets outside strings bound it, counted before parsing), so a
  list of millions of numbers is refused before it is built, and the schema's validation, which builds one error
  per wrong element, never sees more than that many;
- at most `MAX_LIST_ITEMS` items in any one list;
- integers of at most `MAX_INTEGER_DIGITS` digits, floats written in at most `MAX_NUMBER_CHARS` characters and
  finite (no `NaN`, `Infinity`, nor a literal such as `1e400` that overflows to infinity).
Every refusal is a `ConfigError` naming the input (one line, exit code 2).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

from pplan import reading
from pplan.errors import ConfigError

MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_LIST_ITEMS = 10_000
MAX_INTEGER_DIGITS = 20
MAX_NUMBER_CHARS = 40

_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def read_bounded(path: Path, cap_bytes: int, which: str, fix: str) -> bytes:
    """At most `cap_bytes` of `path`'s bytes, read from the stream (pplan.reading); more is refused without reading
    on."""
    try:
        return reading.read_bounded(path, cap_bytes)
    except reading.TooLarge:
        raise ConfigError(
            which, f"{path} is larger than {cap_bytes >> 20} MB, the most pplan reads here", fix
        ) from None
    except (OSError, ValueError) as err:
        raise ConfigError(which, f"cannot read {path}: {_why(err)}", fix) from None


def _why(err: BaseException) -> str:
    return (err.strerror if isinstance(err, OSError) else None) or str(err)[:80]


class _Refused(ValueError):
    """A number the parser's hooks refuse."""


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-')):,} digits (at most {MAX_INTEGER_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number written in {len(text):,} characters (at most {MAX_NUMBER_CHARS})")
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{text[:MAX_NUMBER_CHARS]}, beyond a float's range")
    return value


def _constant(text: str) -> Any:
    raise _Refused(f"{text}, which JSON does not allow as a number")


def parse_json(data: bytes, which: str, shown: str, fix: str) -> Any:
    """The JSON value in `data`, within the limits of the module docstring; `which` names the input in a
    refusal, `shown` the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(which, f"{shown} is not UTF-8 text (byte {err.start})", fix) from None
    bare = _STRINGS.sub(b'""', data)
    brackets = bare.translate(None, _NOT_BRACKETS)
    if (
        MAX_DEPTH < len(brackets) <= 2 * MAX_VALUES + 2
        and max(itertools.accumulate(map(_STEP.__getitem__, brackets))) > MAX_DEPTH
    ):
        raise ConfigError(which, f"{shown} nests more than {MAX_DEPTH} levels deep", fix)
    values = bare.count(b",") + bare.count(b"[") + bare.count(b"{") + 1
    if values > MAX_VALUES:
        raise ConfigError(which, f"{shown} holds more than {MAX_VALUES:,} values", fix)
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except _Refused as err:
        raise ConfigError(which, f"{shown} holds {err}", fix) from None
    except json.JSONDecodeError as err:
        raise ConfigError(
            which, f"{shown} is not JSON ({err.msg} at line {err.lineno}, column {err.colno})", fix
        ) from None
    except (ValueError, RecursionError) as err:  # a backstop: the checks above refuse these first
        raise ConfigError(which, f"{shown} cannot be read as JSON ({type(err).__name__})", fix) from None
    longest = _longest_list(value)
    if longest > MAX_LIST_ITEMS:
        raise ConfigError(which, f"{shown} has a list of {longest:,} items (at most {MAX_LIST_ITEMS:,})", fix)
    return value


def _longest_list(value: Any) -> int:
    """The most items in any one list within `value` (walked without recursion)."""
    longest = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            longest = max(longest, len(item))
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return longest


def read_json(path: Path, cap_bytes: int, which: str, fix: str) -> Any:
    """`read_bounded` then `parse_json`."""
    return parse_json(read_bounded(path, cap_bytes, which, fix), which, str(path), fix)
