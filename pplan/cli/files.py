"""Output files the commands write (`--svg`, `--csv`, `--report`, `--out`): checked first, then written atomically.

`check_outputs` runs before any work and refuses, each as one `ConfigError` naming the flag (exit code 2):
- an output that is also an input of the same command (`--svg` naming the `--durations` file) or another output
  of it (`--csv X --svg X`), compared after following links, so neither can silently clobber the other;
- an existing symbolic link, unless `--force`; even then only a link to a file in the link's own folder (its file
  is written, the link kept), or to a terminal, a pipe or a character device (written in place): never one that
  leads elsewhere, such as `/dev/stdout` or `/dev/stderr` when the shell redirected them to a file
  (`2>> build.log` must not be replaced);
- a file the user made read-only (no write permission), which a rename would silently replace;
- a file with other hard links, which a rename would break off (the other names would keep the old text): remove
  the other links or write elsewhere;
- a block device, a folder, or a path whose folder does not exist;
- a folder that cannot take the file: a temporary file is created there and removed (`_probe`), so a folder
  without write permission or on a read-only file system is found before any long work, not after it.

`write_output` writes a whole file or nothing: the text goes to a temporary file in the target's folder
(registered in `pplan.cli.PENDING` before it exists, so even a second Ctrl-C removes it), is flushed and fsync'ed,
and only then renamed over the target (`os.replace`, atomic on POSIX and Windows). If the writer fails part-way
(a renderer raising, a full disk, `ulimit -f`, Ctrl-C) the temporary file is removed and an existing file at the
target is left exactly as it was; a failed write is an `OutputError` (one line `pplan: cannot write PATH: OS
error`, exit code 4). A terminal, a pipe or a character device (`/dev/null`, a FIFO) is written in place, opened
without truncation: it has nothing to replace, and replacing it would put a regular file where it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from pplan.cli import PENDING
from pplan.cli.app import OutputError
from pplan.errors import ConfigError

FORCE_FLAG = "--force"
FORCE_HELP = (
    "Write an output even where its path is a symbolic link: to a file in the same folder (that file is "
    "written), or to a terminal or pipe."
)


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
    for flag, path in given:  # after the clashes: two names of one file are that, before a hard link
        _check_one(path, flag, force)
        _probe(path, flag)


def _probe(path: Path, flag: str) -> None:
    """Create and remove a temporary file where the output will be written, so a folder that cannot take it (no
    write permission, a read-only or full file system) is found before any long work rather than after it."""
    if _special(path):
        return
    folder = Path(_real(path)).parent
    try:
        name, fd = temporary_file(folder)
    except OSError as err:
        raise ConfigError(
            flag, f"cannot write in the folder of {path} ({err.strerror or err})", "give a writable path"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    PENDING.discard(name)


def _check_one(path: Path, flag: str, force: bool) -> None:
    try:
        if path.is_symlink():
            if not force:
                raise ConfigError(
                    flag,
                    f"{path} is a symbolic link",
                    f"pass {FORCE_FLAG} to write the file it points to, or give another path",
                )
            _check_link(path, flag)
        target = Path(_real(path))
        if target.is_dir():
            raise ConfigError(flag, f"{path} is a folder", "give a file name")
        if not target.parent.is_dir():
            raise ConfigError(flag, f"the folder of {path} does not exist", "create it or give another path")
        _check_existing(path, flag)
    except OSError as err:
        raise ConfigError(
            flag, f"cannot write {path} ({err.strerror or err})", "give a writable path"
        ) from err


def _check_link(path: Path, flag: str) -> None:
    """Refuse a link (written with `--force`) that leads out of its own folder to anything but a terminal, a pipe
    or a character device."""
    if _special(path):
        return
    target = _real(path)
    if os.path.dirname(target) != _real(path.parent):
        raise ConfigError(
            flag,
            f"{path} is a symbolic link to {target}, outside its own folder",
            f"{FORCE_FLAG} writes only through a link to a file beside it: give that file's own path",
        )


def _check_existing(path: Path, flag: str) -> None:
    """Refuse an existing target a write would wrongly replace: a block device, a read-only file, a file with
    other hard links."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if stat.S_ISBLK(st.st_mode):
        raise ConfigError(flag, f"{path} is a block device", "give a file name")
    if not stat.S_ISREG(st.st_mode):
        return
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise ConfigError(
            flag,
            f"{path} is read-only",
            "make it writable (chmod u+w) if it may be replaced, or give another path",
        )
    if st.st_nlink > 1:
        raise ConfigError(
            flag,
            f"{path} has {st.st_nlink - 1} other hard link{'s' * (st.st_nlink > 2)}, which replacing it would "
            "break (they would keep the old contents)",
            "remove the other links, or give another path",
        )


def _mode_for(target: Path) -> int:
    """The permissions the file gets: the existing file's, else what a plain open() would give (0o666 − umask)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_output(path: Path, content: str | Iterable[str], flag: str, force: bool = False) -> None:
    """Write `content` (the whole text, or pieces of it) to `path` atomically; raise a `ConfigError` on `flag` for
    a path refused (`check_outputs`) and an `OutputError` for a failed write, leaving any existing file
    untouched."""
    _check_one(path, flag, force)
    pieces = [content] if isinstance(content, str) else content
    if _special(path):  # a terminal, a pipe, a device: no folder entry to replace, nothing to truncate
        try:
            fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                for piece in pieces:
                    fh.write(piece)
        except OSError as err:
            raise OutputError(str(path), err) from err
        return
    target = Path(_real(path))
    tmp: str | None = None
    try:
        tmp, fd = temporary_file(target.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            for piece in pieces:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
        PENDING.discard(tmp)
        tmp = None
    except OSError as err:
        raise OutputError(str(path), err) from err
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            PENDING.discard(tmp)
    _sync_folder(target.parent)


def temporary_file(folder: Path) -> tuple[str, int]:
    """A new temporary file in `folder` (a short name of our own: the target's name plus a suffix could pass the
    file-name length limit), named in `PENDING` before it exists; its name and an open descriptor."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = os.path.join(folder, f".pplan-{os.urandom(6).hex()}.tmp")
        PENDING.add(name)
        try:
            return name, os.open(name, flags, 0o600)
        except FileExistsError:
            PENDING.discard(name)
        except BaseException:  # an interrupt, perhaps after the file was made: our own name, so removed
            with contextlib.suppress(OSError):
                os.unlink(name)
            PENDING.discard(name)
            raise
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


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
