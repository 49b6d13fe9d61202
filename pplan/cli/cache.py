"""The on-disk cache of periodic schedule structures, kept between runs of the `pplan` command.

A search's costliest cold work is splitting schedules into prefix, period and suffix (pplan.schedules.periodic:
one structure per schedule family, p, v and class of m, about a tenth of a second each). A structure is a pure
function of its key and of pplan's code, so the command keeps each one it builds under the cache directory and
reads it back the next time any command needs it: a second `recommend` on a model skips that work. Answers do not
change: the structure read is the one that would be built.

Where: `$PPLAN_CACHE_DIR`, else `$XDG_CACHE_HOME/pplan` when that is an absolute path (the XDG Base Directory
specification says a relative one is invalid and must be ignored), else `~/.cache/pplan`; `PPLAN_CACHE_DIR=off`
(or empty, `0`, `no`, `none`, `false`) keeps nothing.

What it trusts, and what it does not:
- Files hold plain data (JSON: a format name, the key, the structure as nested lists of integers;
  pplan.schedules.periodic.codec, and a SHA-256 of the three), never code: reading one cannot run anything, and
  the reader checks the digest, every value's type and the key before a structure is used. A file that fails any
  check is built again and rewritten.
- The cache directory and this version's directory inside it are created 0700. A directory owned by another user,
  writable by group or others, or inside a directory others may write without the sticky bit (where they could
  swap it) turns the cache off for the run, with one warning line naming the directory and the fix.
- Only regular files are read: a named pipe, a device or a symbolic link at a file's name is skipped without being
  opened.
- Each version's directory (`structures-<hash of pplan's sources>`) holds a marker file, touched on every run that
  uses it. A directory is removed only when it carries that marker, belongs to this user and has not been used for
  `STALE_VERSION_S` (so two pplan versions sharing a root keep their caches); temporary files a killed writer left
  are removed after `STALE_TEMPORARY_S` (a writer that is interrupted, e.g. the prefetch child stopped, removes its
  own at once; only a killed one leaves any). Nothing else in the root is touched.
- Files are written whole (a temporary file renamed over the name), so concurrent runs never read half a file; a
  directory that cannot be written turns the writes off for the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from pplan.cli import PENDING, printable
from pplan.cli.files import temporary_file
from pplan.schedules.periodic import STORES, StructureKey
from pplan.schedules.periodic.codec import structure_from_data, structure_to_data
from pplan.schedules.periodic.structure import Structure

CACHE_ENV = "PPLAN_CACHE_DIR"
OFF = frozenset(("", "off", "0", "none", "no", "false"))
PREFIX = "structures-"
FORMAT = "pplan.structure/2"
MARKER = ".pplan-structure-cache"
"""In every version directory the cache made: only such directories are ever removed."""
STALE_VERSION_S = 30 * 86400.0
STALE_TEMPORARY_S = 600.0
MAX_FILE_BYTES = 64 << 20
_NAME = re.compile(r"[a-z0-9-]+")
_VERSION_DIR = re.compile(re.escape(PREFIX) + r"[0-9a-f]{16}")


def cache_root(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path | None:
    """The cache directory the environment names (module docstring), or None when caching is off."""
    if CACHE_ENV in environ:
        value = environ[CACHE_ENV]
        return None if value.strip().lower() in OFF else Path(value).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    # the XDG Base Directory spec: a relative path is invalid and ignored (it would put a cache under the cwd)
    return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "pplan"


@cache
def code_version() -> str:
    """A hash of every pplan source file (path and bytes), the Python version and the file format."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{sys.version_info[:2]} {FORMAT}".encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def unsafe_reason(path: Path) -> str | None:
    """Why a directory cannot hold this user's cache (None: it can): not a directory, another user's, writable by
    group or others, or in a parent others may write without the sticky bit."""
    try:
        st = path.stat()
        parent = path.resolve().parent.stat()
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return "belongs to another user"
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}; chmod 700 it)"
    if parent.st_mode & 0o002 and not parent.st_mode & stat.S_ISVTX:
        return "lies in a directory anyone may write without the sticky bit"
    return None


def _warn(directory: Path, reason: str) -> None:
    print(
        printable(
            f"pplan: warning: structure cache off for this run: {directory} {reason}; "
            f"set {CACHE_ENV} to a directory of your own (or {CACHE_ENV}=off)"
        ),
        file=sys.stderr,
    )


def _make_private(path: Path) -> None:
    """Create `path` (and its parents as usual) with mode 0700; nothing when it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)


def _regular(path: Path) -> os.stat_result | None:
    """`path`'s own status when it is a regular file (a link, a pipe or a device is not followed or opened)."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


class DiskStore:
    """A `pplan.schedules.periodic.StructureStore` on one directory: one JSON file per structure key."""

    def __init__(self, root: Path, warn: bool = True) -> None:
        self.root = root
        self._warns = warn
        self._pid = os.getpid()
        self._writable = True

    @cached_property
    def directory(self) -> Path:
        """The directory of this pplan version (hashed on first use: most commands never need a structure)."""
        return self.root / f"{PREFIX}{code_version()}"

    @cached_property
    def usable(self) -> bool:
        """Whether the cache may be used this run: its directories made (0700) and checked, once per process."""
        try:
            _make_private(self.root)
        except OSError:
            return False  # cannot be made (a file in the way, a read-only parent): nothing kept or read
        if not self._checked(self.root):
            return False
        made = not self.directory.exists()
        try:
            _make_private(self.directory)
            marker = self.directory / MARKER
            if _regular(marker) is None:
                marker.write_text("pplan's schedule structure cache: safe to delete\n", encoding="utf-8")
            os.utime(marker)  # this version is in use
        except OSError:
            self._writable = False
        if not self.directory.is_dir() or not self._checked(self.directory):
            return False
        if made:
            self._remove_stale_versions()
        self._remove_stale_temporaries()
        return True

    def _checked(self, directory: Path) -> bool:
        reason = unsafe_reason(directory)
        if reason is not None and self._warns and os.getpid() == self._pid:  # not again from a forked child
            _warn(directory, reason)
        return reason is None

    def path(self, key: StructureKey) -> Path | None:
        """The file of `key`, or None for a key whose family name is not a plain name (never: names are
        canonical)."""
        name, p, v, residue = key
        if not _NAME.fullmatch(name):
            return None
        return self.directory / f"{name}.p{p}.v{v}.r{residue}.json"

    def has(self, key: StructureKey) -> bool:
        path = self.path(key)
        return path is not None and self.usable and _regular(path) is not None

    def get(self, key: StructureKey) -> tuple[Structure | None] | None:
        path = self.path(key)
        if path is None or not self.usable or _regular(path) is None:
            return None
        try:
            document = _read_json(path)
            if not (
                type(document) is dict
                and document.get("format") == FORMAT
                and document.get("key") == list(key)
                and set(document) == {"format", "key", "structure", "sha256"}
                and document["sha256"] == structure_digest(document["key"], document["structure"])
            ):
                return None
            structure = structure_from_data(document["structure"])
        except (OSError, ValueError, TypeError, RecursionError, MemoryError):
            return None  # unreadable, truncated or from elsewhere: built again, then rewritten
        if structure is not None and (structure.name, structure.p, structure.v) != key[:3]:
            return None
        return (structure,)

    def put(self, key: StructureKey, structure: Structure | None) -> None:
        path = self.path(key)
        if path is None or not self._writable or not self.usable:
            return
        data = structure_to_data(structure)
        document = {
            "format": FORMAT,
            "key": list(key),
            "structure": data,
            "sha256": structure_digest(list(key), data),
        }
        temporary: str | None = None
        try:
            temporary, fd = temporary_file(self.directory)  # named in PENDING before it exists (pplan.cli)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                json.dump(document, f, separators=(",", ":"))
            os.replace(temporary, path)
        except OSError:
            self._writable = False  # read-only or full: keep nothing more this run
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
        except BaseException:  # an interrupt (the prefetch child stopped mid-write): remove it, then unwind
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
            raise
        finally:
            PENDING.discard(temporary or "")

    def _remove_stale_versions(self) -> None:
        """Remove other versions' directories this cache made, this user's, unused for `STALE_VERSION_S`."""
        now = time.time()
        with contextlib.suppress(OSError):
            for other in self.root.iterdir():
                if other == self.directory or not _VERSION_DIR.fullmatch(other.name):
                    continue
                marker = _regular(other / MARKER)
                if (
                    marker is not None
                    and marker.st_uid == os.geteuid()
                    and now - marker.st_mtime > STALE_VERSION_S
                    and not other.is_symlink()
                ):
                    shutil.rmtree(other, ignore_errors=True)

    def _remove_stale_temporaries(self) -> None:
        """Remove the temporary files a writer killed mid-write left (older than `STALE_TEMPORARY_S`)."""
        now = time.time()
        with contextlib.suppress(OSError):
            for leftover in self.directory.glob(".*.tmp"):
                st = _regular(leftover)
                if st is not None and now - st.st_mtime > STALE_TEMPORARY_S:
                    with contextlib.suppress(OSError):
                        leftover.unlink()


def structure_digest(key: Any, data: Any) -> str:
    """SHA-256 of the format, the key and the structure's plain form, as compact JSON: a file whose bytes changed
    since it was written (a flipped bit, a half-copied file, a hand edit) fails it and is built again, even where
    the change still reads as well-typed data that would give another answer."""
    text = json.dumps([FORMAT, key, data], separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _read_json(path: Path) -> Any:
    """The JSON in the regular file `path` (opened without following a link or blocking on a pipe), integers,
    strings, lists, objects and null only."""
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES or st.st_uid != os.geteuid():
            raise ValueError("not a cache file")
        text = f.read(MAX_FILE_BYTES + 1)
    return json.loads(text, parse_float=_refuse, parse_constant=_refuse)


def _refuse(token: str) -> Any:
    raise ValueError(f"unexpected number {token[:20]}")


def install(environ: dict[str, str] | os._Environ[str] = os.environ) -> DiskStore | None:
    """Keep structures under the environment's cache directory for the rest of the process (replacing any store
    installed before); None, and nothing kept, when caching is off."""
    STORES.clear()
    root = cache_root(environ)
    if root is None:
        return None
    store = DiskStore(root)
    STORES.append(store)
    return store
