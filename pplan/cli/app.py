"""The typer application object, the consoles, JSON output, and the standard streams of a run.

The streams (`guard_streams`, called by `pplan.cli.run` before anything is written): a standard descriptor closed
at start (`>&-`, `2>&-`) is held by /dev/null (read-only for stdout, so a write to it fails rather than vanishing),
so a file the run opens can never land on descriptor 1 or 2 and an error line can never end up in the JSON on
stdout. stdout is wrapped by `GuardedOutput`, which writes the descriptor itself: a failed write (full disk,
`ulimit -f`, a closed descriptor, a reader gone) raises `OutputError` naming "stdout" once, and what the run wrote
there can be cut off again (`discard`) when stdout is a regular file the shell opened for it (`> plan.json`; not
`>>`, whose file others may share). stderr is wrapped by `QuietOutput`: a failed write to it is dropped (there is
nowhere left to say so; the exit code still does).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import os
import stat
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal, TextIO

import typer
import typer.core
from rich.console import Console
from typer.models import CommandFunctionType


class PanelledCommand(typer.core.TyperCommand):
    """Help as plain text that never cuts an option's name at any width: click's layout (each name in full, its
    help wrapped beside it or below it) with the options grouped in their panels (`rich_help_panel`: plan axes,
    search, memory knobs, output, ...), panels in the order their first option is declared."""

    def format_options(self, ctx: Any, formatter: Any) -> None:  # typer's own click types
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        for name, rows in panels.items():
            with formatter.section(name):
                formatter.write_dl(rows)


class _Typer(typer.Typer):
    """Every command gets `PanelledCommand`'s help unless it names its own class."""

    def command(
        self, *args: Any, cls: type[typer.core.TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(*args, cls=cls or PanelledCommand, **kwargs)


app = _Typer(
    name="pplan",
    help="Plan how to cut a transformer across GPUs: tensor, pipeline and data parallelism, schedules, memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _commands() -> None:
    """The group of commands (a callback keeps `pplan COMMAND` a group when only that command is registered:
    pplan.cli.register)."""


TableOrJson = Literal["table", "json"]
"""What a command that prints a document prints: its table(s), or the document as JSON."""


def format_option(document: str, panel: str | None = "Output") -> Any:
    """The `--format table|json` option of a command printing `document` (every such command takes it, and
    `--json` as its alias: `json_alias`)."""
    return typer.Option("--format", rich_help_panel=panel, help=f"table, or json: the {document} document.")


def json_alias(panel: str | None = "Output") -> Any:
    """`--json`, kept on every command as the alias of `--format json`."""
    return typer.Option("--json", rich_help_panel=panel, help="The same as --format json.")


JsonAliasOpt = Annotated[bool, json_alias()]


def asks_json(output: str, as_json: bool) -> bool:
    """Whether `--format` or its alias `--json` asks for the JSON document."""
    return as_json or output == "json"


console = Console()
err_console = Console(stderr=True)


def json_text(doc: Any, ensure_ascii: bool = True) -> str:
    """`doc` as strict JSON (RFC 8259): NaN and infinities are refused here rather than written as the `NaN` /
    `Infinity` tokens that JavaScript's JSON.parse and most launchers reject."""
    return json.dumps(doc, indent=2, allow_nan=False, ensure_ascii=ensure_ascii)


class OutputError(Exception):
    """A write to an output failed: `where` is "stdout" or the file's path, `err` the operating system's error."""

    def __init__(self, where: str, err: OSError) -> None:
        super().__init__(f"cannot write {where}: {err.strerror or err}")
        self.where = where
        self.err = err

    @property
    def reader_gone(self) -> bool:
        """stdout is a pipe whose reader has closed it (`pplan ... | head`): not a failure worth a line."""
        return self.where == "stdout" and self.err.errno == errno.EPIPE


class GuardedOutput:
    """sys.stdout for a run. It writes to the descriptor itself (`os.write` until every byte is taken: Python's own
    buffered writer can drop the rest of a short write, as `ulimit -f` makes, without an error), so a failure
    always raises, as `OutputError` (kept in `error`), and whatever is written from then on is dropped. Text is
    held until `flush`, a newline on a terminal, or `HOLD` characters. `discard` cuts a regular file back to where
    the run began it."""

    HOLD = 1 << 16

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._fd = _descriptor(stream)
        self._tty = _isatty(stream)
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self._errors = getattr(stream, "errors", None) or "strict"
        self._held: list[str] = []
        self._size = 0
        self._start: int | None = None
        self._began = False
        self.error: OutputError | None = None
        self.discarded = False

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # as a text stream refuses them (click probes with b"")
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self.error is not None or self.discarded:
            return len(text)
        if not self._began:
            self._began = True
            self._start = None if self._fd is None else _rewind_point(self._fd)
        self._held.append(text)
        self._size += len(text)
        if self._size >= self.HOLD or (self._tty and "\n" in text):
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self.error is not None or self.discarded or not self._held:
            return
        data = "".join(self._held).encode(self._encoding, self._errors)
        self._held.clear()
        self._size = 0
        try:
            if self._fd is None:  # not a file descriptor (a test's capture): its own writes
                self._stream.write(data.decode(self._encoding, self._errors))
                self._stream.flush()
                return
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as err:
            raise self._failed(err) from err

    def discard(self) -> None:
        """Drop what the run wrote: held text is never written; a regular file (`> plan.json`) is cut back to its
        length before the run's first write."""
        self.discarded = True
        self._held.clear()
        if self._start is not None and self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._start)
                os.lseek(self._fd, self._start, os.SEEK_SET)

    def isatty(self) -> bool:
        return self._tty

    def _failed(self, err: OSError) -> OutputError:
        self.error = OutputError("stdout", err)
        return self.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _descriptor(stream: TextIO) -> int | None:
    try:
        stream.flush()  # anything written before the guard goes first
        return stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


class QuietOutput:
    """sys.stderr for a run: the stream's writes, a failed one dropped."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        with contextlib.suppress(OSError, ValueError):
            self._stream.write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _rewind_point(fd: int) -> int | None:
    """Where the run's output begins in `fd` when it is a regular file not opened to append, else None."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND:
            return None
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return None


def _hold(fd: int, flags: int) -> bool:
    """Open /dev/null on `fd` when it is closed (whether it was)."""
    try:
        os.fstat(fd)
        return False
    except OSError:
        pass
    got = os.open(os.devnull, flags)
    if got != fd:
        os.dup2(got, fd)
        os.close(got)
    return True


def guard_streams() -> GuardedOutput:
    """Hold the closed standard descriptors and wrap sys.stdout and sys.stderr (module docstring); the stdout
    guard."""
    _hold(0, os.O_RDONLY)
    stdout_closed = _hold(1, os.O_RDONLY)  # a write to it fails: output asked for is never silently lost
    stderr_closed = _hold(2, os.O_WRONLY)
    if stdout_closed or sys.stdout is None:
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True)
    if stderr_closed or sys.stderr is None:
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True)
    guard = GuardedOutput(sys.stdout)
    sys.stdout = guard
    sys.stderr = QuietOutput(sys.stderr)
    return guard
