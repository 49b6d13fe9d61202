"""Finds and reads hardware and model profiles: the only module of pplan that opens a profile file.

A profile reference is a bundled name (`llama3-70b`), a path to a `.toml` file, or, for models, a path to a
Hugging Face `config.json` (any `.json` file). Bundled profiles live in the installed wheel under
`pplan/profiles/{hardware,models}` and, in a source checkout or editable install, in the repository's
top-level `hardware/` and `models/`. Every failure is a one-line `ProfileError` naming the file, the field
and the fix.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from pplan.errors import ProfileError
from pplan.hf_config import model_spec_from_hf_config
from pplan.specs import HardwareSpec, ModelSpec, StageDurationsSpec

if sys.version_info >= (3, 11):  # noqa: UP036  the tomli fallback is the contract for older Pythons
    import tomllib
else:  # pragma: no cover - pplan requires 3.11; kept for the tomli fallback the dependencies allow
    import tomli as tomllib

ProfileKind = Literal["hardware", "models"]
KINDS: tuple[ProfileKind, ...] = get_args(ProfileKind)

_SpecT = TypeVar("_SpecT", bound=BaseModel)
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


@dataclass(frozen=True)
class ProfileEntry:
    """One bundled profile: its name (the file stem), its one-line description and where it lies."""

    name: str
    description: str
    path: Path


def load_model(ref: str) -> ModelSpec:
    """A validated model shape from a bundled name, a `.toml` path or a Hugging Face `config.json` path."""
    path, shown = _resolve("models", ref)
    if path.suffix.lower() == ".json":
        return _model_from_hf_json(path, shown)
    return _validate(ModelSpec, _read_toml(path, shown), shown)


def load_hardware(ref: str) -> HardwareSpec:
    """A validated hardware profile from a bundled name or a `.toml` path."""
    path, shown = _resolve("hardware", ref)
    return _validate(HardwareSpec, _read_toml(path, shown), shown)


def load_stage_durations(ref: str) -> StageDurationsSpec:
    """Per-stage pass durations from a `.toml` or `.json` file (keys f, b, w, comm)."""
    path = Path(ref).expanduser()
    if not path.is_file():
        raise ProfileError("--durations", f"{ref}: no such file", "give the path of a .toml or .json file")
    data = _read_json(path, ref) if path.suffix.lower() == ".json" else _read_toml(path, ref)
    return _validate(StageDurationsSpec, data, ref)


def load_published_runs() -> dict[str, Any]:
    """The bundled published training runs (pplan/data/published_runs.json) that `pplan validate` checks."""
    resource = resources.files("pplan") / "data" / "published_runs.json"
    return json.loads(resource.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def list_profiles(kind: ProfileKind) -> list[ProfileEntry]:
    """The bundled profiles of one kind, sorted by name."""
    entries = []
    for name, path in sorted(_bundled(kind).items()):
        data = _read_toml(path, _shown_bundled(kind, path))
        description = data.get("description", "")
        entries.append(ProfileEntry(name=name, description=str(description), path=path))
    return entries


def profile_source(kind: ProfileKind, name: str) -> str:
    """The text of a profile file (bundled name or path), as written."""
    path, shown = _resolve(kind, name)
    return _read_text(path, shown)


def bundled_dir(kind: ProfileKind) -> Path | None:
    """The folder bundled profiles of `kind` are read from: the wheel's first, else the source checkout's."""
    _check_kind(kind)
    wheel_dir = resources.files("pplan") / "profiles" / kind
    if isinstance(wheel_dir, Path) and wheel_dir.is_dir():
        return wheel_dir
    package_dir = Path(__file__).resolve().parent
    checkout = package_dir.parent
    # Only a real source checkout: a bare `site-packages/models` from some other distribution must not count.
    if (checkout / "pyproject.toml").is_file() and (checkout / kind).is_dir():
        return checkout / kind
    return None


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ProfileError("kind", f"unknown profile kind {kind!r}", f"use one of: {', '.join(KINDS)}")


def _bundled(kind: ProfileKind) -> dict[str, Path]:
    folder = bundled_dir(kind)
    if folder is None:
        return {}
    return {path.stem: path for path in folder.glob("*.toml") if path.is_file()}


def _shown_bundled(kind: ProfileKind, path: Path) -> str:
    return f"{kind}/{path.name}"


def _looks_like_path(ref: str) -> bool:
    return "/" in ref or "\\" in ref or Path(ref).suffix.lower() in {".toml", ".json"}


def _resolve(kind: ProfileKind, ref: str) -> tuple[Path, str]:
    """The file `ref` names and how to show it in messages."""
    _check_kind(kind)
    field = "model" if kind == "models" else "hardware"
    if not ref.strip():
        raise ProfileError(field, "empty profile name", f"give a bundled name (see `pplan profiles {kind}`)")
    if _looks_like_path(ref):
        path = Path(ref).expanduser()
        if not path.exists():
            raise ProfileError(
                field, f"{ref}: no such file", "check the path, or give a bundled profile name"
            )
        if not path.is_file():
            raise ProfileError(field, f"{ref}: not a file", "give the path of a profile file")
        allowed = {".toml", ".json"} if kind == "models" else {".toml"}
        if path.suffix.lower() not in allowed:
            wanted = (
                "a .toml profile or a Hugging Face config.json" if kind == "models" else "a .toml profile"
            )
            raise ProfileError(field, f"{ref}: not {wanted}", f"give the path of {wanted}")
        return path, ref
    bundled = _bundled(kind)
    if ref not in bundled:
        known = ", ".join(sorted(bundled)) or "none found"
        raise ProfileError(
            field, f"unknown {field} profile {ref!r}", f"use one of: {known}; or give a path to a .toml file"
        )
    path = bundled[ref]
    return path, _shown_bundled(kind, path)


def _read_text(path: Path, shown: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ProfileError(
            shown, f"not UTF-8 text ({err.reason} at byte {err.start})", "save it as UTF-8"
        ) from err
    except OSError as err:
        raise ProfileError(shown, f"cannot read the file ({err.strerror})", "check the path") from err


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    text = _read_text(path, shown)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        message = str(err)
        match = _TOML_POSITION.search(message)
        where = "end of file"
        if match:
            message = message[: match.start()]
            where = f"line {match.group(1)}, column {match.group(2)}"
        raise ProfileError(f"{shown}: {where}", f"invalid TOML: {message}", "fix the syntax there") from err


def _read_json(path: Path, shown: str) -> dict[str, Any]:
    text = _read_text(path, shown)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ProfileError(
            f"{shown}: line {err.lineno}, column {err.colno}",
            f"invalid JSON: {err.msg}",
            "fix the syntax there",
        ) from err
    if not isinstance(data, dict):
        raise ProfileError(shown, "the JSON is not an object", "give a Hugging Face config.json")
    return data


def _model_from_hf_json(path: Path, shown: str) -> ModelSpec:
    config = _read_json(path, shown)
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    try:
        spec = model_spec_from_hf_config(config, name or path.stem)
    except ProfileError as err:
        raise ProfileError(f"{shown}: {err.field}", err.message, err.fix) from err
    return spec.model_copy(update={"source": f"{shown}: {spec.source}"})


def _validate(spec_type: type[_SpecT], data: dict[str, Any], shown: str) -> _SpecT:
    try:
        return spec_type.model_validate(data)
    except ValidationError as err:
        raise _validation_error(err, shown) from err


def _validation_error(err: ValidationError, shown: str) -> ProfileError:
    """One line for a pydantic error: the file, the first bad field's dotted path, its message, the fix."""
    errors = err.errors(include_url=False)
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if len(errors) > 1:
        others = ", ".join(".".join(str(p) for p in e["loc"]) or "(whole profile)" for e in errors[1:])
        message += f" (also wrong: {others})"
    if first["type"] == "missing":
        fix = f"add {loc} to the file"
    elif first["type"] == "extra_forbidden":
        fix = "remove it or correct its spelling"
    else:
        fix = "fix the value in the file"
    return ProfileError(f"{shown}: {loc}" if loc else shown, message, fix)
