"""What is wrong with a spec's input, as (field, message, fix) triples (`spec_problems`): a pydantic
`ValidationError` turned into the one-line errors of `pplan.profiles.catalog`, each fix read from the field's stated
range or the rule that broke (`pplan.profiles.fields.SpecRuleError`).
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from pplan.profiles.fields import Floor, SpecRuleError, number_text


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec's input: the dotted field (`gpu.hbm_gib`, `f[2]`; "" for the whole spec)."""

    field: str
    message: str
    fix: str


_UNITS = {"_tflops": " TFLOP/s", "_gb_per_s": " GB/s", "_gib": " GiB", "_mib": " MiB", "_us": " µs"}


def spec_problems(
    spec_type: type[BaseModel], err: ValidationError, where: str = "the file"
) -> list[SpecProblem]:
    """What is wrong, first problem first, each with the field, the message and the fix (`where` to fix it)."""
    problems: list[SpecProblem] = []
    for error in err.errors(include_url=False):
        path, info = _walk(spec_type, error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        kind = error["type"]
        allowed = _allowed(info, path[-1] if path else "")
        value = error.get("input")
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, SpecRuleError):
            if cause.field:
                path = [*path, *cause.field.split(".")]
            fix = cause.fix or allowed or f"fix the value in {where}"
        elif kind == "missing":
            fix = f"add {_dotted(path)} to {where}"
        elif kind == "extra_forbidden":
            fix = "remove it or correct its spelling"
        elif kind == "bool_type":
            fix = "write true or false"
        elif kind == "too_long":
            fix = f"give at most {number_text((error.get('ctx') or {}).get('max_length', 0))} values"
        elif isinstance(value, bool) and kind in {"int_type", "float_type"}:
            message = f"expected a number, got {'true' if value else 'false'}"
            fix = allowed or f"fix the value in {where}"
        elif kind in _RANGE_ERRORS and allowed:
            fix = allowed
        else:
            fix = f"fix the value in {where}"
        problems.append(SpecProblem(_dotted(path), message, fix))
    return problems


_RANGE_ERRORS = {
    "int_type",
    "float_type",
    "finite_number",
    "less_than",
    "less_than_equal",
    "greater_than_equal",
}


def _dotted(path: list[str]) -> str:
    return ".".join(path).replace(".[", "[")


def _walk(spec_type: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[list[str], FieldInfo | None]:
    """The user-facing parts of a pydantic error location (no union tags) and the leaf field's info."""
    model: type[BaseModel] | None = spec_type
    info: FieldInfo | None = None
    path: list[str] = []
    for part in loc:
        if isinstance(part, int):
            path.append(f"[{part}]")
        elif model is not None:
            path.append(part)
            info = model.model_fields.get(part)
            model = _section_model(info.annotation if info is not None else None)
            if model is not None:
                info = None
        # else: a union member's tag (`number`, `list`), not something the user wrote
    return path, info


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The spec a field holds (`LinkSpec`, or the `PodSpec` of an optional `PodSpec | None`), else None."""
    for member in (annotation, *get_args(annotation)):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def _allowed(info: FieldInfo | None, name: str) -> str:
    """What to give instead, from the field's stated range ("give a whole number from 1 to 10^4"); "" if none."""
    if info is None:
        return ""
    integer = info.annotation is int or int in get_args(info.annotation)
    low = high = ""
    for item in _metadata(info.metadata, info.annotation):
        if isinstance(item, Gt) and not low:
            bound: Any = item.gt
            low = f"from {number_text(bound + 1)}" if integer else f"above {number_text(bound)}"
        elif isinstance(item, Ge):
            low = f"from {number_text(item.ge)}"
        elif isinstance(item, Floor):
            low = f"from {number_text(item.minimum)}"
        elif isinstance(item, Le):
            high = number_text(item.le)
        elif isinstance(item, Lt):
            high = f"below {number_text(item.lt)}"
    if not high:
        return ""
    unit = next((u for suffix, u in _UNITS.items() if name.endswith(suffix)), "")
    joint = " and at most " if low.startswith("above") else " to "
    return f"give a {'whole ' if integer else ''}number {low}{joint}{high}{unit}"


def _metadata(metadata: list[Any], annotation: Any) -> Iterator[Any]:
    """Constraints on a field, including those inside `Annotated[...]` members of a union or an Optional."""
    yield from metadata
    origin = get_origin(annotation)
    if origin is Annotated:
        for item in get_args(annotation)[1:]:
            yield from item.metadata if isinstance(item, FieldInfo) else (item,)
        yield from _metadata([], get_args(annotation)[0])
    elif origin in (Union, types.UnionType):
        for member in get_args(annotation):
            yield from _metadata([], member)
