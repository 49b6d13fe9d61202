"""What every profile spec shares (pplan.profiles.model_spec, hardware_spec, durations): the frozen, strict
pydantic base (`FrozenSpec`), the rule error a validator raises (`SpecRuleError`), the checked field types (`Name`,
`FreeText`, `Tflops`, `GbPerS`, `Fraction`, `LatencyUs`, the `Floor` of a positive figure) and the physical ranges.

Profiles arrive as TOML (or a Hugging Face `config.json` for models) and are validated once; units are in the field
names and are converted to bytes, FLOP/s and seconds exactly once, by the specs' properties. Decimal prefixes:
GB = 1e9 bytes, GiB = 2**30 bytes, MiB = 2**20 bytes, TFLOP/s = 1e12 FLOP/s, µs = 1e-6 s.

Every number is finite and within a stated physical range (in each field's docstring and enforced by its
constraints), read strictly (`true` is not a number, `"8"` is not an integer), so that nothing the analytic core
derives from a profile can overflow, divide by zero or come out negative. Every string is printed somewhere, so
each is checked too: names (`Name`) and free text (`FreeText`) obey `pplan.profiles.text`, and none can add a
line, an escape sequence or rich markup to output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from pplan.docstrings import install as _install_docstrings
from pplan.profiles.text import name_problem, text_problem

_install_docstrings()  # before the models below: their field descriptions, read once per module

GIB = 2**30
GB = 10**9
MIB = 2**20


class SpecRuleError(ValueError):
    """A broken rule of a spec, raised inside pydantic validation; names the field at fault and the fix.

    Pydantic wraps it in a `ValidationError` (as `ctx["error"]`); `spec_problems` unwraps it. `field` is
    relative to the model that raised it ("" for the field the validator is attached to).
    """

    def __init__(self, field: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.fix = fix


@dataclass(frozen=True)
class Floor:
    """The smallest value a positive field accepts (used with `gt=0`, whose message stays for zero and below).

    A positive float can be 1e-300, and a rate that small turns seconds into infinity; the floor is part of
    the field's stated range.
    """

    minimum: float

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: float | None) -> float | None:
        if value is not None and value < self.minimum:
            raise SpecRuleError(
                "", f"{value:g} is below the smallest value accepted, {number_text(self.minimum)}", ""
            )
        return value


@dataclass(frozen=True)
class _TextRule:
    """A string field's rule on what it may hold (`pplan.profiles.text`): a name, or a line of free text."""

    name: bool

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        problem = (name_problem if self.name else text_problem)(value)
        if problem is not None:
            raise SpecRuleError("", *problem)
        return value


Name = Annotated[str, _TextRule(name=True)]
"""A name printed in tables, launcher settings, SVG and JSON: one short line of letters, digits and a few marks."""
FreeText = Annotated[str, _TextRule(name=False)]
"""A description or a source: one line of printable text, no `[` or `]`."""


# Physical ranges (each field's docstring repeats its own).
MAX_LAYERS = 10**4
MAX_HIDDEN = 10**6
MAX_FFN = 10**7
MAX_HEADS = 10**5
MAX_VOCAB = 10**8
MAX_SEQ = 10**8
MAX_TFLOPS = 1e7
MAX_GB_PER_S = 1e7
MIN_RATE = 1e-3
"""Smallest TFLOP/s and GB/s accepted (1 GFLOP/s, 1 MB/s)."""
MIN_FRACTION = 1e-9
"""Smallest efficiency accepted: low enough for a fit of CPU measurements against a datacenter GPU's peak
(`pplan bench --calibrate` on a laptop fits about 5e-6 against an H100), high enough to keep every time finite;
`pplan bench --calibrate` refuses fits outside the range."""
MAX_HBM_GIB = 1e5
MAX_LATENCY_US = 1e6
MAX_GPUS_PER_NODE = 1024

_Strict = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, strict=True)
Tflops = Annotated[float, Field(gt=0, le=MAX_TFLOPS, allow_inf_nan=False), Floor(MIN_RATE)]
GbPerS = Annotated[float, Field(gt=0, le=MAX_GB_PER_S, allow_inf_nan=False), Floor(MIN_RATE)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False), Floor(MIN_FRACTION)]
LatencyUs = Annotated[float, Field(ge=0, le=MAX_LATENCY_US, allow_inf_nan=False)]


_HASHES: dict[int, tuple[BaseModel, int]] = {}
"""Each spec's hash by id, with the spec itself (kept alive, so its id is not reused while cached)."""
SPEC_CACHE_LIMIT = 4096


class FrozenSpec(BaseModel):
    """A profile spec: strict, closed and frozen, hashed once per object."""

    model_config = _Strict

    def __hash__(self) -> int:
        """The hash of the class and every field value (what pydantic hashes for a frozen model), computed once
        per object: specs key every cost cache (a search looks them up hundreds of thousands of times), and
        pydantic's own hash walks every field, nested specs included, on each lookup."""
        got = _HASHES.get(id(self))
        if got is not None and got[0] is self:
            return got[1]
        if len(_HASHES) >= SPEC_CACHE_LIMIT:
            _HASHES.clear()
        value = hash((type(self), *self.__dict__.values()))
        _HASHES[id(self)] = (self, value)
        return value


def number_text(value: Any) -> str:
    """A bound or a count for a message: 1,024; 10^7; 0.001."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        value = int(value)
    if isinstance(value, int):
        text = str(abs(value))
        if len(text) > 4 and text[0] == "1" and not text[1:].strip("0"):
            return f"10^{len(text) - 1}"
        return f"{value:,}"
    return f"{value:g}"
