"""What every pplan output document shares: the closed, frozen pydantic base (`Out`), the versioned `schema` key
and how to read a document class's version back (`version_of`).

Compatibility: fields are only ever added within a major version; a rename or removal bumps the number.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pplan.docstrings import install as _install_docstrings

_install_docstrings()  # before the models below: their field descriptions, read once per module

SCHEMA_KEY = "schema"
"""The key every document (and every nested schedule block) carries its version string under."""


class Out(BaseModel):
    """Output documents: no keys beyond the documented ones, and every key (the `schema` version included) is
    required in the published JSON Schema (`pplan schema`, serialization mode) unless the field says it is left
    out. Dumped by alias, so `model_dump(mode="json")` is the printed document."""

    model_config = ConfigDict(
        frozen=True,
        use_attribute_docstrings=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        json_schema_serialization_defaults_required=True,
    )


def version_of(document: type[BaseModel]) -> str:
    """The version string a document class prints under "schema" (the default of its `schema` field)."""
    for field in document.model_fields.values():
        if field.alias == SCHEMA_KEY and isinstance(field.default, str):
            return field.default
    raise TypeError(f"{document.__name__} has no {SCHEMA_KEY!r} field")
