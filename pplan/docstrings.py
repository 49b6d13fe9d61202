"""Attribute docstrings of pplan's pydantic models, read once per module (start-up time).

pplan's models take each field's description from the string under it (pydantic's `use_attribute_docstrings`:
the JSON Schemas `pplan schema` prints and `pplan profiles` describe every key with them). pydantic finds a class's
source by walking the frames of its creation and tokenising the module from the class's first line, once per
class: about a sixth of `pplan recommend`'s start-up for the ~50 models it loads. Here a module is parsed once and
every class of it (nested ones by qualified name) looked up in that tree; the docstrings are found by pydantic's own
visitor, so what each class gets is the same. A class this cannot place (defined inside a function, in a module
without source, or a name defined twice in one module) is left to pydantic's own lookup.

`install` puts the lookup in place of pydantic's (its private `_fields.extract_docstrings_from_cls`, pydantic 2.12
to 2.14); a pydantic without it keeps its own, so the docstrings are the same either way
(tests/test_docstrings.py compares the two over every model).
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

_ORIGINAL: list[Callable[..., dict[str, str]]] = []


@cache
def _module_classes(module_name: str) -> dict[str, ast.ClassDef | None]:
    """Every class statement of a module by qualified name (None for a name defined more than once); empty when the
    module has no readable source."""
    module = sys.modules.get(module_name)
    try:
        tree = ast.parse(inspect.getsource(module)) if module is not None else None
    except (OSError, TypeError, SyntaxError):
        tree = None
    found: dict[str, ast.ClassDef | None] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                name = prefix + node.name
                found[name] = None if name in found else node
                walk(node.body, name + ".")

    if tree is not None:
        walk(tree.body, "")
    return found


def class_docstrings(cls: type[Any], use_inspect: bool = False) -> dict[str, str]:
    """The attribute docstrings of `cls`, as pydantic's `extract_docstrings_from_cls` gives them."""
    from pydantic._internal._docs_extraction import DocstringVisitor

    node = _module_classes(cls.__module__).get(cls.__qualname__) if "<" not in cls.__qualname__ else None
    if node is None:
        return _ORIGINAL[0](cls, use_inspect=use_inspect)
    visitor = DocstringVisitor()
    visitor.generic_visit(node)  # the class's own statements: pydantic 2.14's visitor skips a ClassDef it visits
    return visitor.attrs


def install() -> None:
    """Use `class_docstrings` for the models created from now on (once; nothing where pydantic has no such hook)."""
    if _ORIGINAL:
        return
    try:
        from pydantic._internal import _docs_extraction, _fields
    except ImportError:  # pragma: no cover - another pydantic layout: its own lookup stays
        return
    original = getattr(_fields, "extract_docstrings_from_cls", None)
    if original is None or not hasattr(_docs_extraction, "DocstringVisitor"):
        return
    _ORIGINAL.append(original)
    _fields.extract_docstrings_from_cls = class_docstrings  # type: ignore[attr-defined]
