"""pplan.docstrings: the attribute docstrings read once per module are the ones pydantic's own lookup finds, for
every model pplan defines, and they are the fields' descriptions."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from pydantic import BaseModel

import pplan
from pplan import docstrings


def _models() -> list[type[BaseModel]]:
    """Every pydantic model class defined in a pplan module (each module imported first)."""
    for info in pkgutil.walk_packages(pplan.__path__, "pplan."):
        if ".bench" in info.name or info.name.endswith("__main__"):
            continue  # the harness needs torch; the entry point runs the command
        importlib.import_module(info.name)
    seen: list[type[BaseModel]] = []
    stack: list[type[BaseModel]] = [BaseModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("pplan.") and sub not in seen:
                seen.append(sub)
    return seen


def test_the_lookup_is_installed_and_finds_what_pydantic_finds() -> None:
    from pydantic._internal import _fields

    assert _fields.extract_docstrings_from_cls is docstrings.class_docstrings  # type: ignore[attr-defined]
    (original,) = docstrings._ORIGINAL
    models = _models()
    assert len(models) > 40
    described = 0
    for cls in models:
        mine = docstrings.class_docstrings(cls)
        assert mine == original(cls, use_inspect=True), cls.__qualname__
        for name, text in mine.items():
            field = cls.model_fields.get(name)
            if field is not None and field.description is not None:
                described += 1
                assert field.description == text or name not in cls.__annotations__, (cls.__qualname__, name)
    assert described > 300


def test_a_class_it_cannot_place_is_left_to_pydantic() -> None:
    """A model defined inside a function has no place in its module's tree: pydantic's own lookup describes it."""

    def make() -> type[BaseModel]:
        from pplan.documents.base import Out

        class Local(Out):
            size: int
            """How big."""

        return Local

    assert make().model_fields["size"].description == "How big."


def test_a_visitor_that_skips_class_statements_still_finds_the_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pydantic 2.14's visitor skips any ClassDef it is asked to visit (nested classes' attributes are not the
    outer class's) and visits a class's statements itself; under it every description was lost (a fresh venv
    installs 2.14: `pplan schema` then described nothing). The lookup visits the class's statements."""
    import ast

    from pydantic._internal import _docs_extraction

    from pplan.documents.compare import TieOut

    class SkipsClasses(_docs_extraction.DocstringVisitor):
        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            return None

    monkeypatch.setattr(_docs_extraction, "DocstringVisitor", SkipsClasses)
    found = docstrings.class_docstrings(TieOut)
    assert set(found) == {"tied", "a_interval_s", "b_step_s"}
    assert found["b_step_s"] == "B's predicted step time, seconds."
