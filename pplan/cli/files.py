"""Output files the commands write (`--svg`, `--csv`, `--report`, `--out`): checked first, then written atomically.

`check_outputs` runs before any work and refuses, each as one `ConfigError` naming the flag:
- an output that is also an input of the same command (`--svg` naming the `--durations` file) or another output
  of it (`--csv X --svg X`), compared after following links, so neither can silently clobber the other;
- an existing symbolic link, unless `--force` (then the file the link points to is written, the link kept);
- a folder, or a path whose folder does not exist.

`write_output` writes a whole file or nothing: the text goes to a temporary file in the target's folder, is
flushed and fsync'ed, and only then renamed over the target (`os.replace`, atomic on POSIX and Windows). If the
writer fails part-way (a renderer raising, a full disk, Ctrl-C) the temporary file is removed and an existing
file at the target is left exactly as it was. A device or a pipe (`/dev/null`, a FIFO) is written in place: it
has nothing to replace, and replacing it would put a regular file where the device was.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from pplan.errors import ConfigError

FORCE_FLAG = "--force"
FORCE_HELP = "Write an output even where its path is a symbolic link (the file it points to)."


def _real(path: Path) -> str:
    """`path` with every link followed and made absolute (the file a write would change)."""
    return os.path.realpath(path)


def input_path(ref: str | Path | None) -> Path | None:
    """The file an input option reads, when it names one that exists (bundled profile names are not files)."""
    if ref is None:
        return None
    path = Path(ref)
    with contextlib.suppress(RuntimeError):  # `~nosuchuser/...`: the loader reports it
        path = path.expanduser()
    try:
        return path if path.is_file() else None
    except OSError:  # a name too long to be a path
        return None


def _special(path: Path) -> bool:
    """True for an existing file that is not a regular one: a device (`/dev/null`), a pipe, a socket."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _same_file(a: Path, b: Path) -> bool:
    if _special(a) or _special(b):  # writing twice to /dev/null clobbers nothing
        return False
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links, bind mounts
    except OSError:
        return False


def check_outputs(
    outputs: Mapping[str, Path | None], inputs: Mapping[str, Path | None] | None = None, force: bool = False
) -> None:
    """Refuse outputs that would clobber an input or each other, write through a link without `--force`, or
    cannot be files. `outputs` and `inputs` map each option (e.g. "--svg") to its path, None when not given."""
    given = [(flag, path) for flag, path in outputs.items() if path is not None]
    read = [(flag, path) for flag, path in (inputs or {}).items() if path is not None]
    for k, (flag, path) in enumerate(given):
        for in_flag, in_path in read:
            if _same_file(path, in_path):
                raise ConfigError(
                    flag,
                    f"{path} is also the {in_flag} input",
                    f"write {flag} to another file, not the input",
                )
        for other_flag, other in given[:k]:
            if _same_file(path, other):
                raise ConfigError(
                    flag, f"{path} is also the {other_flag} output", "give each output its own file"
                )
        _check_one(path, flag, force)


def _check_one(path: Path, flag: str, force: bool) -> None:
    try:
        if path.is_symlink() and not force:
            raise ConfigError(
                flag,
                f"{path} is a symbolic link",
                f"pass {FORCE_FLAG} to write the file it points to, or give another path",
            )
        target = Path(_real(path))
        if target.is_dir():
            raise ConfigError(flag, f"{path} is a folder", "give a file name")
        if not target.parent.is_dir():
            raise ConfigError(flag, f"the folder of {path} does not exist", "create it or give another path")
    except OSError as err:
        raise ConfigError(
            flag, f"cannot write {path} ({err.strerror or err})", "give a writable path"
        ) from err


def _mode_for(target: Path) -> int:
    """The permissions the file gets: the existing file's, else what a plain open() would give (0o666 − umask)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_output(path: Path, content: str | Iterable[str], flag: str, force: bool = False) -> None:
    """Write `content` (the whole text, or pieces of it) to `path` atomically, or raise a `ConfigError` on `flag`
    and leave any existing file untouched. A link is written through only with `force` (`check_outputs`)."""
    _check_one(path, flag, force)
    pieces = [content] if isinstance(content, str) else content
    if _special(path):  # a device or a pipe has no folder entry to replace: stream into it
        try:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                for piece in pieces:
                    fh.write(piece)
        except OSError as err:
            raise ConfigError(
                flag, f"cannot write {path} ({err.strerror or err})", "give a writable path"
            ) from err
        return
    target = Path(_real(path))
    tmp: str | None = None
    try:
        # A short name of our own: the target's name plus a suffix could pass the file-name length limit.
        fd, tmp = tempfile.mkstemp(prefix=".pplan-", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            for piece in pieces:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        raise ConfigError(
            flag, f"cannot write {path} ({err.strerror or err})", "give a writable path"
        ) from err
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _sync_folder(target.parent)


def _sync_folder(folder: Path) -> None:
    """Make the rename durable where the platform allows it (best effort: not every system opens folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
