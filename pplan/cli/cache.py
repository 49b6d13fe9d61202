"""The on-disk cache of periodic schedule structures, kept between runs of the `pplan` command.

A search's costliest cold work is splitting schedules into prefix, period and suffix (pplan.schedules.periodic:
one structure per schedule family, p, v and class of m, about a tenth of a second each). A structure is a pure
function of its key and of pplan's code, so the command keeps each one it builds under the cache directory and
reads it back the next time any command needs it: a second `recommend` on a model skips that work. Answers do not
change: the structure read is the one that would be built (each file holds its key, and the directory is named by
a hash of pplan's source files and the Python version, so a changed pplan never reads another's files; the
directories of other versions are removed when a new one is made).

Where: `$PPLAN_CACHE_DIR`, else `$XDG_CACHE_HOME/pplan`, else `~/.cache/pplan`; `PPLAN_CACHE_DIR=off` (or empty)
keeps nothing. A file that cannot be read or holds something else is built again and rewritten; a directory that
cannot be written turns the cache off for the run. Files are written whole (a temporary file renamed over the
name), so concurrent runs never read half a file. The files are Python pickles: like any cache of them, the
directory must be writable by the user alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import re
import shutil
import sys
import tempfile
from functools import cache, cached_property
from pathlib import Path

from pplan.schedules.periodic import STORES, StructureKey
from pplan.schedules.periodic.structure import Structure

CACHE_ENV = "PPLAN_CACHE_DIR"
OFF = frozenset(("", "off", "0", "none", "no"))
PREFIX = "structures-"
_NAME = re.compile(r"[a-z0-9-]+")


def cache_root(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path | None:
    """The cache directory the environment names (module docstring), or None when caching is off."""
    if CACHE_ENV in environ:
        value = environ[CACHE_ENV]
        return None if value.strip().lower() in OFF else Path(value).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pplan"


@cache
def code_version() -> str:
    """A hash of every pplan source file (path and bytes), the Python version and the pickle protocol."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{sys.version_info[:2]} {pickle.HIGHEST_PROTOCOL}".encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class DiskStore:
    """A `pplan.schedules.periodic.StructureStore` on one directory: one pickle file per structure key."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._writable = True

    @cached_property
    def directory(self) -> Path:
        """The directory of this pplan version (hashed on first use: most commands never need a structure)."""
        return self.root / f"{PREFIX}{code_version()}"

    def path(self, key: StructureKey) -> Path | None:
        """The file of `key`, or None for a key whose family name is not a plain name (never: names are
        canonical)."""
        name, p, v, residue = key
        if not _NAME.fullmatch(name):
            return None
        return self.directory / f"{name}.p{p}.v{v}.r{residue}.pickle"

    def has(self, key: StructureKey) -> bool:
        path = self.path(key)
        return path is not None and path.is_file()

    def get(self, key: StructureKey) -> tuple[Structure | None] | None:
        path = self.path(key)
        if path is None:
            return None
        try:
            with path.open("rb") as f:
                kept = pickle.load(f)
        except FileNotFoundError:
            return None
        except Exception:  # unreadable, truncated or from elsewhere: built again, then rewritten
            return None
        if not (isinstance(kept, tuple) and len(kept) == 2 and kept[0] == key):
            return None
        structure = kept[1]
        if structure is not None and not isinstance(structure, Structure):
            return None
        return (structure,)

    def put(self, key: StructureKey, structure: Structure | None) -> None:
        path = self.path(key)
        if path is None or not self._writable:
            return
        temporary: str | None = None
        try:
            if not self.directory.is_dir():
                self.directory.mkdir(parents=True, exist_ok=True)
                self._remove_other_versions()
            with tempfile.NamedTemporaryFile("wb", dir=self.directory, suffix=".tmp", delete=False) as f:
                temporary = f.name
                pickle.dump((key, structure), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        except OSError:
            self._writable = False  # read-only or full: keep nothing more this run
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    def _remove_other_versions(self) -> None:
        """Remove the directories other pplan versions left (best effort)."""
        for other in self.root.glob(f"{PREFIX}*"):
            if other != self.directory and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)


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
