"""Copying a slotted dataclass (frozen or not) with some fields changed: `dataclasses.replace` without its
generic bookkeeping (the search copies plans and configurations tens of thousands of times). Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_set = object.__setattr__
_copiers: dict[type, Callable[[Any], Any]] = {}


def _copier(cls: type) -> Callable[[Any], Any]:
    """A function copying every slot of a `cls` instance into a new one, slot by slot in straight-line code (one
    attribute load and store each; about a third of a loop over `__slots__`), made once per class. A class with
    its own `__setattr__` (a frozen dataclass's, which refuses) has each store go through the slot's descriptor
    (`set_<name>`: what `object.__setattr__` finds on the type by name first); any other takes plain attribute
    stores, several times cheaper than either."""
    slots: tuple[str, ...] = cls.__slots__  # type: ignore[attr-defined]
    scope: dict[str, Any] = {"_new": object.__new__, "cls": cls}
    # read off the class, `__setattr__` is the unbound function: object's own unless the class (or a base) defines one
    if cls.__setattr__ is object.__setattr__:  # type: ignore[comparison-overlap]
        body = "".join(f"    new.{name} = obj.{name}\n" for name in slots)
    else:
        body = "".join(f"    set_{name}(new, obj.{name})\n" for name in slots)
        scope.update({f"set_{name}": cls.__dict__[name].__set__ for name in slots})
    source = f"def copy(obj):\n    new = _new(cls)\n{body}    return new\n"
    exec(source, scope)  # slot names are identifiers: Python refuses a class whose __slots__ has another
    copy: Callable[[Any], Any] = scope["copy"]
    return copy


def changed(obj: T, **changes: Any) -> T:
    """A copy of `obj` (a dataclass with `slots=True`, frozen or not) with `changes` applied, its `__post_init__`
    run again (so fields derived there follow the changes), as `dataclasses.replace` does for init fields."""
    new = changed_underived(obj, **changes)
    post = getattr(type(obj), "__post_init__", None)
    if post is not None:
        post(new)
    return new


def changed_underived(obj: T, **changes: Any) -> T:
    """`changed` without running `__post_init__` again: the derived fields are copied as they are. Only for
    `changes` to fields that nothing derived in `__post_init__` reads (the caller's to know, e.g.
    pplan.plan.configuration.with_sharding), so that the copy equals what `changed` would make."""
    cls = type(obj)
    copy = _copiers.get(cls)
    if copy is None:
        copy = _copiers[cls] = _copier(cls)
    new = copy(obj)
    for name, value in changes.items():
        _set(new, name, value)
    return new  # type: ignore[no-any-return]
