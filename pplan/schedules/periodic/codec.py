"""A `Structure` as plain data and back: nested lists of ints and strings, with the reader checking every value.

What the on-disk structure cache (pplan.cli.cache) writes and reads. Plain data cannot run code when read, unlike a
pickle, and the reader rebuilds a structure only from values of the types its fields declare: each field of each
dataclass in turn, each element of each list, integers as integers (never a bool, a float or a string), with the
lengths fixed types state. Anything else raises `ValueError`, and the caller builds the structure instead.

The form: a dataclass is the list of its fields' values in declaration order; a tuple, list or frozenset is a list
(a frozenset sorted, so one structure has one form); `Rules` is its stage placement and chains, from which it is
rebuilt (its tables are derived); None is null.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from pplan.schedules.periodic.direct import Rules
from pplan.schedules.periodic.structure import Structure

Decoder = Callable[[Any], Any]
Encoder = Callable[[Any], Any]


def structure_to_data(structure: Structure | None) -> Any:
    """The plain form of `structure` (None for a key with no structure)."""
    return None if structure is None else _encoder(Structure)(structure)


def structure_from_data(data: Any) -> Structure | None:
    """The structure `data` describes; `ValueError` when it is not exactly the form `structure_to_data` gives."""
    if data is None:
        return None
    got = _decoder(Structure)(data)
    assert isinstance(got, Structure)
    return got


def _chains(rules: Rules) -> list[list[int]]:
    """The chains of stages a micro-batch passes, read back from the rules' links."""
    out = []
    for start, prev in enumerate(rules.prev_stage):
        if prev >= 0:
            continue
        chain = [start]
        while rules.next_stage[chain[-1]] >= 0:
            chain.append(rules.next_stage[chain[-1]])
        out.append(chain)
    return out


def _encode_rules(rules: Rules) -> Any:
    return [list(rules.placement), _chains(rules)]


def _decode_rules(data: Any) -> Rules:
    placement, chains = _decoder(tuple[tuple[int, ...], tuple[tuple[int, ...], ...]])(data)
    n = len(placement)
    if not n or any(not 0 <= s < n for chain in chains for s in chain) or min(placement) < 0:
        raise ValueError("rules: a stage out of range")
    if sorted(s for chain in chains for s in chain) != list(range(n)):
        raise ValueError("rules: the chains do not hold every stage once")
    return Rules(placement, chains)


def _int(x: Any) -> int:
    if type(x) is not int:
        raise ValueError(f"expected an integer, got {type(x).__name__}")
    return x


def _str(x: Any) -> str:
    if type(x) is not str:
        raise ValueError(f"expected a string, got {type(x).__name__}")
    return x


def _bool(x: Any) -> bool:
    if type(x) is not bool:
        raise ValueError(f"expected true or false, got {type(x).__name__}")
    return x


def _none(x: Any) -> None:
    if x is not None:
        raise ValueError(f"expected null, got {type(x).__name__}")
    return None


def _list(x: Any, length: int | None = None) -> list[Any]:
    if type(x) is not list or (length is not None and len(x) != length):
        raise ValueError("expected a list" + ("" if length is None else f" of {length}"))
    return x


def _ints(x: Any) -> list[int]:
    """A list of integers, checked in one pass (the bulk of a structure)."""
    if type(x) is not list or not set(map(type, x)) <= {int}:
        raise ValueError("expected a list of integers")
    return x


@cache
def _decoder(hint: Any) -> Decoder:
    """The reader of one declared type (built once per type)."""
    if hint is int:
        return _int
    if hint is str:
        return _str
    if hint is bool:
        return _bool
    if hint is type(None):
        return _none
    if hint is Rules:
        return _decode_rules
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _dataclass_decoder(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        options = [_decoder(a) for a in args]

        def union(x: Any) -> Any:
            for option in options:
                try:
                    return option(x)
                except ValueError:
                    continue
            raise ValueError(f"expected one of {hint}")

        return union
    if origin in (tuple, list, frozenset):
        return _container_decoder(origin, args)
    raise TypeError(f"no plain form for {hint!r}")  # a new field type: add its form here


def _container_decoder(origin: type, args: tuple[Any, ...]) -> Decoder:
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # fixed length
        if all(a is int for a in args):  # e.g. a play-list entry: checked in one pass
            length = len(args)

            def ints(x: Any) -> tuple[int, ...]:
                if len(_ints(x)) != length:
                    raise ValueError(f"expected a list of {length}")
                return tuple(x)

            return ints
        parts = [_decoder(a) for a in args]

        def fixed(x: Any) -> tuple[Any, ...]:
            return tuple(part(e) for part, e in zip(parts, _list(x, len(parts)), strict=True))

        return fixed
    element = args[0]
    make: Callable[[Any], Any] = origin
    if element is int:
        return lambda x: make(_ints(x))
    inner = _decoder(element)
    return lambda x: make(map(inner, _list(x)))


def _dataclass_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    parts = [_decoder(hints[name]) for name in fields]

    def decode(x: Any) -> Any:
        values = _list(x, len(parts))
        return cls(*(part(v) for part, v in zip(parts, values, strict=True)))

    return decode


@cache
def _encoder(hint: Any) -> Encoder:
    """The writer of one declared type (built once per type)."""
    if hint in (int, str, bool, type(None)):
        return lambda x: x
    if hint is Rules:
        return _encode_rules
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        named = [(f.name, _encoder(hints[f.name])) for f in dataclasses.fields(hint)]
        return lambda x: [part(getattr(x, name)) for name, part in named]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        by_type = {typing.get_origin(a) or a: _encoder(a) for a in args}
        return lambda x: by_type[type(x)](x)
    if origin is frozenset:
        return lambda x: sorted(x)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        parts = [_encoder(a) for a in args]
        return lambda x: [part(e) for part, e in zip(parts, x, strict=True)]
    if origin in (tuple, list):
        if args[0] is int:
            return list
        inner = _encoder(args[0])
        return lambda x: [inner(e) for e in x]
    raise TypeError(f"no plain form for {hint!r}")
