"""Copying a frozen, slotted dataclass with some fields changed: `dataclasses.replace` without its generic
bookkeeping (the search copies plans and configurations tens of thousands of times). Pure."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_set = object.__setattr__


def changed(obj: T, **changes: Any) -> T:
    """A copy of `obj` (a frozen dataclass with `slots=True`) with `changes` applied, its `__post_init__` run again
    (so fields derived there follow the changes), as `dataclasses.replace` does for init fields."""
    cls = type(obj)
    new = object.__new__(cls)
    for name in cls.__slots__:  # type: ignore[attr-defined]
        _set(new, name, changes[name] if name in changes else getattr(obj, name))
    post = getattr(cls, "__post_init__", None)
    if post is not None:
        post(new)
    return new
