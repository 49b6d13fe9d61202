"""Finds and reads hardware and model profiles: the only module of pplan that opens a profile file.

A profile reference is a bundled name (`llama3-70b`), a path to a `.toml` file, or, for models, a path to a
Hugging Face `config.json` (any `.json` file). Bundled profiles live in the installed wheel under
`pplan/profiles/{hardware,models}` and, in a source checkout or editable install, in the repository's
top-level `hardware/` and `models/`. Every failure is a one-line `ProfileError` naming the file, the field
and the fix.

Files are bounded before they are parsed: at most `MAX_FILE_BYTES` (1 MiB, read from the stream by pplan.reading; the largest bundled profile is a
few KiB) and at most `MAX_NESTING` (64) levels of brackets, inline tables or dotted-key parts, so no parser
recurses deeply or builds a quadratic structure; and at most `MAX_KEYS` keys once parsed. Paths that cannot be
used (too long, `~user` with no such user, a folder, no permission) are `ProfileError`s naming the path. Every
message is one readable line: what it quotes of the input is escaped and cut (`pplan.profiles.text.shortened`),
and an error names at most `MAX_OTHERS_NAMED` further wrong fields before counting the rest. A model named by a
config.json's folder gets a name made safe to print (`pplan.profiles.text.safe_name`).
"""

from __future__ import annotations

import difflib
import errno
import json
import re
import stat
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pplan.errors import ProfileError
from pplan.profiles.confidence import ConfidenceData
from pplan.profiles.durations import StageDurationsSpec
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.hf_config import model_spec_from_hf_config
from pplan.profiles.kinds import PROFILE_KINDS, ProfileKind
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.problems import spec_problems
from pplan.profiles.text import escaped, safe_name, shortened
from pplan.reading import TooLarge, read_bounded

if sys.version_info >= (3, 11):  # noqa: UP036  the tomli fallback is the contract for older Pythons
    import tomllib
else:  # pragma: no cover - pplan requires 3.11; kept for the tomli fallback the dependencies allow
    import tomli as tomllib

_SpecT = TypeVar("_SpecT", bound=BaseModel)
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")

MAX_FILE_BYTES = 2**20
"""Largest profile, config.json or durations file read (1 MiB)."""
MAX_NESTING = 64
"""Deepest nesting of arrays, tables/objects and dotted-key parts accepted in a file."""
MAX_KEYS = 10_000
"""Most keys (at every level, array members not counted) in one file: a bundled profile has under 100, a Hugging
Face config.json a few hundred."""
MAX_OTHERS_NAMED = 3
"""Further wrong fields an error names before it counts the rest."""
PATH_SHOWN_CHARS = 200
"""Longest path quoted in a message or a model's source."""
_LINE_BREAKS = re.compile(r"(\r?\n|\t)")
_LONG_NUMBER = re.compile(r"\d{4301}")
# The tokens nesting depends on; strings and comments, which may hold any brackets, are matched whole.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_TOML_TOKENS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'  # multi-line basic string
    r"|'''(?:[^']|'(?!''))*'''"  # multi-line literal string
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'  # basic string
    r"|'[^'\n]*'"  # literal string
    r"|#[^\n]*"  # comment
    r"|[\[\]{}.=,\n]",
    re.DOTALL,
)


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
    return _validate(HardwareSpec, _shared_efficiency(_read_toml(path, shown), shown), shown)


def _shared_efficiency(data: dict[str, Any], shown: str) -> dict[str, Any]:
    """`[efficiency] from = "NAME"`: the efficiency figures of the bundled hardware profile NAME, with this
    profile's own `[efficiency]` keys on top. GPUs built on one chip (H100, H200, H800) share the figures fitted
    once to the chip's public runs, so they have one home: the fitted profile's."""
    efficiency = data.get("efficiency")
    if not isinstance(efficiency, dict) or "from" not in efficiency:
        return data
    name = efficiency["from"]
    bundled = _bundled("hardware")
    if not isinstance(name, str) or name not in bundled:
        raise ProfileError(
            f"{shown}: efficiency.from",
            f"names no bundled hardware profile ('{shortened(str(name))}')",
            f"give one of {', '.join(sorted(bundled))}",
        )
    base = _read_toml(bundled[name], _shown_bundled("hardware", bundled[name])).get("efficiency", {})
    if not isinstance(base, dict) or "from" in base:
        raise ProfileError(
            f"{shown}: efficiency.from",
            f"hardware/{name} takes its own figures from another profile",
            "name the profile that states them",
        )
    own = {k: v for k, v in efficiency.items() if k != "from"}
    return {**data, "efficiency": {**base, **own}}


def load_stage_durations(ref: str) -> StageDurationsSpec:
    """Per-stage pass durations from a `.toml` or `.json` file (keys f, b, w, comm)."""
    path = _existing_file(ref, "--durations", "give the path of a .toml or .json file")
    shown = shortened(ref, PATH_SHOWN_CHARS)
    data = _read_json(path, shown) if path.suffix.lower() == ".json" else _read_toml(path, shown)
    return _validate(StageDurationsSpec, data, shown)


def load_published_runs() -> dict[str, Any]:
    """The bundled published training runs (pplan/validation/published_runs.json) that `pplan validate` checks."""
    resource = resources.files("pplan.validation") / "published_runs.json"
    return json.loads(resource.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def load_published_memory() -> dict[str, Any]:
    """The bundled published memory figures (pplan/validation/published_memory.json) that `pplan validate
    --memory` checks."""
    resource = resources.files("pplan.validation") / "published_memory.json"
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
    """The text of a profile file (bundled name or path), as written, but for characters a terminal would act on
    (escape sequences, bidirectional overrides), which are written as their escapes (`\\x1b`, `\\u202e`)."""
    path, shown = _resolve(kind, name)
    text = _read_text(path, shown)
    pieces = _LINE_BREAKS.split(text)  # line ends and tabs, kept as they are, at the odd positions
    return "".join(p if i % 2 or p.isprintable() else escaped(p, markup=False) for i, p in enumerate(pieces))


def bundled_dir(kind: ProfileKind) -> Path | None:
    """The folder bundled profiles of `kind` are read from: the wheel's first, else the source checkout's."""
    _check_kind(kind)
    wheel_dir = resources.files("pplan.profiles") / kind
    if isinstance(wheel_dir, Path) and wheel_dir.is_dir():
        return wheel_dir
    package_dir = Path(__file__).resolve().parents[1]  # pplan/
    checkout = package_dir.parent
    # Only a real source checkout: a bare `site-packages/models` from some other distribution must not count.
    if (checkout / "pyproject.toml").is_file() and (checkout / kind).is_dir():
        return checkout / kind
    return None


def _check_kind(kind: str) -> None:
    if kind not in PROFILE_KINDS:
        raise ProfileError(
            "kind", f"unknown profile kind {kind!r}", f"use one of: {', '.join(PROFILE_KINDS)}"
        )


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
        path = _existing_file(ref, field, "check the path, or give a bundled profile name")
        shown = shortened(ref, PATH_SHOWN_CHARS)
        allowed = {".toml", ".json"} if kind == "models" else {".toml"}
        if path.suffix.lower() not in allowed:
            wanted = (
                "a .toml profile or a Hugging Face config.json" if kind == "models" else "a .toml profile"
            )
            raise ProfileError(field, f"{shown}: not {wanted}", f"give the path of {wanted}")
        return path, shown
    bundled = _bundled(kind)
    if ref not in bundled:
        known = ", ".join(sorted(bundled)) or "none found"
        key = ref.strip().lower()
        starts = [name for name in sorted(bundled) if name.startswith(key)]
        near = list(
            dict.fromkeys([*starts, *difflib.get_close_matches(key, sorted(bundled), n=3, cutoff=0.6)])
        )[:3]
        guess = f"did you mean {' or '.join(near)}? " if near else ""
        files = (
            "a path to a .toml profile or a Hugging Face config.json (e.g. --model path/to/config.json)"
            if kind == "models"
            else "a path to a .toml profile"
        )
        raise ProfileError(
            field,
            f"unknown {field} profile '{shortened(ref)}'",
            f"{guess}use one of: {known}; or give {files}",
        )
    path = bundled[ref]
    return path, _shown_bundled(kind, path)


def _existing_file(ref: str, field: str, fix: str) -> Path:
    """The regular file `ref` names (`~` expanded), or a `ProfileError` naming the path and the fix."""
    shown = shortened(ref, PATH_SHOWN_CHARS)
    try:
        path = Path(ref).expanduser()
    except RuntimeError as err:  # `~user` with no such user, or no home directory
        home = ref.replace("\\", "/").split("/")[0]
        raise ProfileError(
            field,
            f"{shown}: cannot expand {shortened(home)} (no such user or home folder)",
            "write the path out in full",
        ) from err
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError) as err:
        raise ProfileError(field, f"{shown}: no such file", fix) from err
    except ValueError as err:  # an embedded NUL
        raise ProfileError(field, f"{shown}: not a usable path ({err})", "check the path") from err
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            message = f"{shortened(ref)}: path too long"
            raise ProfileError(field, message, "use a shorter path") from err
        raise ProfileError(field, f"{shown}: cannot use the path ({err.strerror})", _fix_for(err)) from err
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise ProfileError(field, f"{shown}: {what}", "give the path of a profile file")
    return path


def _fix_for(err: OSError) -> str:
    if err.errno in (errno.EACCES, errno.EPERM):
        return "check the permissions of the file and its folders"
    return "check the path"


def _read_text(path: Path, shown: str) -> str:
    """The file's text: at most `MAX_FILE_BYTES`, UTF-8."""
    try:
        data = read_bounded(path, MAX_FILE_BYTES)
    except TooLarge:
        raise ProfileError(
            shown,
            f"larger than {MAX_FILE_BYTES // 2**20} MiB, the most pplan reads from a profile",
            "give the profile itself (a few KiB), not some other file",
        ) from None
    except OSError as err:
        raise ProfileError(shown, f"cannot read the file ({err.strerror})", _fix_for(err)) from err
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ProfileError(
            shown, f"not UTF-8 text ({err.reason} at byte {err.start})", "save it as UTF-8"
        ) from err


def _check_nesting(text: str, shown: str, tokens: re.Pattern[str]) -> None:
    """Refuse more than `MAX_NESTING` open brackets, or dotted-key parts in a row, before a parser sees them."""
    if sum(text.count(c) for c in "[{.") <= MAX_NESTING:
        return
    depth = dots = 0
    for match in tokens.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            depth -= 1
        elif token == ".":
            dots += 1
        elif token in ("=", ",", "\n"):
            dots = 0
        if depth > MAX_NESTING or dots >= MAX_NESTING:
            line = text.count("\n", 0, match.start()) + 1
            raise ProfileError(
                f"{shown}: line {line}",
                f"nested more than {MAX_NESTING} levels deep",
                "flatten it; no profile needs more than a few levels",
            )


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    text = _read_text(path, shown)
    _check_nesting(text, shown, _TOML_TOKENS)
    try:
        return _check_keys(tomllib.loads(text), shown)
    except tomllib.TOMLDecodeError as err:
        message = str(err)
        match = _TOML_POSITION.search(message)
        where = "end of file"
        if match:
            message = message[: match.start()]
            where = f"line {match.group(1)}, column {match.group(2)}"
        raise ProfileError(f"{shown}: {where}", f"invalid TOML: {message}", "fix the syntax there") from err
    except ValueError as err:  # int() refusing a number of more than 4,300 digits
        raise _number_too_long(shown, text) from err
    except RecursionError as err:  # a backstop: _check_nesting refuses what nests this deep
        raise _too_deep(shown) from err


def _read_json(path: Path, shown: str) -> dict[str, Any]:
    text = _read_text(path, shown)
    _check_nesting(text, shown, _JSON_TOKENS)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ProfileError(
            f"{shown}: line {err.lineno}, column {err.colno}",
            f"invalid JSON: {err.msg}",
            "fix the syntax there",
        ) from err
    except ValueError as err:  # int() refusing a number of more than 4,300 digits
        raise _number_too_long(shown, text) from err
    except RecursionError as err:  # a backstop: _check_nesting refuses what nests this deep
        raise _too_deep(shown) from err
    if not isinstance(data, dict):
        raise ProfileError(shown, "the JSON is not an object", "give a Hugging Face config.json")
    return _check_keys(data, shown)


def _check_keys(data: dict[str, Any], shown: str) -> dict[str, Any]:
    """`data`, or a `ProfileError` when it holds more than `MAX_KEYS` keys at all levels (counted without
    recursion: `_check_nesting` bounds the depth, this the breadth)."""
    count = 0
    pending: list[Any] = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            count += len(value)
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    if count > MAX_KEYS:
        raise ProfileError(
            shown,
            f"holds {count:,} keys, more than the {MAX_KEYS:,} pplan reads from one file",
            "give the profile itself (a bundled one has under 100 keys), not some other file",
        )
    return data


def _number_too_long(shown: str, text: str) -> ProfileError:
    long = _LONG_NUMBER.search(text)
    return ProfileError(
        f"{shown}: line {text.count(chr(10), 0, long.start()) + 1}" if long else shown,
        "a number has more digits than Python reads (4,300)",
        "write the number within its field's range",
    )


def _too_deep(shown: str) -> ProfileError:
    return ProfileError(
        shown, "nested too deeply to read", "flatten it; no profile needs more than a few levels"
    )


def _model_from_hf_json(path: Path, shown: str) -> ModelSpec:
    config = _read_json(path, shown)
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    try:
        spec = model_spec_from_hf_config(config, safe_name(name or path.stem))
    except ProfileError as err:
        raise ProfileError(f"{shown}: {err.field}", err.message, err.fix) from err
    return spec.model_copy(update={"source": f"{escaped(shown)}: {spec.source}"})


def _validate(spec_type: type[_SpecT], data: dict[str, Any], shown: str) -> _SpecT:
    try:
        return spec_type.model_validate(data)
    except ValidationError as err:
        raise _validation_error(spec_type, err, shown) from err
    except RecursionError as err:  # a backstop: files are depth-checked before parsing
        raise _too_deep(shown) from err


def _validation_error(spec_type: type[BaseModel], err: ValidationError, shown: str) -> ProfileError:
    """One line for a pydantic error: the file, the first bad field's dotted path, its message, the fix; then
    the next `MAX_OTHERS_NAMED` wrong fields and how many more (each field quoted short: a key can be long)."""
    first, *others = spec_problems(spec_type, err)
    message = first.message
    if others:
        named = ", ".join(shortened(p.field) or "(whole profile)" for p in others[:MAX_OTHERS_NAMED])
        more = len(others) - MAX_OTHERS_NAMED
        message += f" (also wrong: {named}{f' and {more:,} more' if more > 0 else ''})"
    field = shortened(first.field)
    return ProfileError(f"{shown}: {field}" if field else shown, message, first.fix)


def load_recent_runs() -> dict[str, Any]:
    """The bundled 2024–2026 published runs (pplan/validation/recent_runs.json) that `pplan validate --recent`
    predicts."""
    resource = resources.files("pplan.validation") / "recent_runs.json"
    return json.loads(resource.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@cache
def load_confidence() -> ConfidenceData:
    """The bundled confidence data (pplan/validation/confidence_bands.json, pplan.validation.bands): the runs
    `pplan validate` scores with their errors, the bands per axis and the envelope per hardware. Read once."""
    resource = resources.files("pplan.validation") / "confidence_bands.json"
    return ConfidenceData.model_validate_json(resource.read_text(encoding="utf-8"))
