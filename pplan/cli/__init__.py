"""The command-line interface: the only package that knows typer, terminals, signals and exit codes.

Each command lives in its own module and registers itself on `app`; `main` turns every `PplanError` and every
usage error (unknown option, bad choice) into one line on stderr and exit code 2, never a traceback. Anything
else is a bug: one line naming where it happened and exit code 3, with the traceback only when `PPLAN_DEBUG=1`.
Every line is printed with control characters escaped, so a profile key cannot drive the terminal.

Exit codes:
- 0: done.
- 1: no answer: nothing fits (`recommend`), or no GPU count meets `--days` or is within `--budget` (`size`).
- 2: a usage error or a refused input or output path: one line `pplan: error: ...`.
- 3: a bug in pplan: one line `pplan: internal error in ...`.
- 4: an output could not be written (a full disk, `ulimit -f`, a closed or read-only descriptor): one line
  `pplan: cannot write DEST: OS error`, DEST being `stdout` or the file's path. An output file keeps what it held
  before; stdout redirected to a file (`> plan.json`, not `>>`) is cut back to what it held before the run.
- 130, 143: interrupted by SIGINT (Ctrl-C) or SIGTERM at any point from pplan's first line on, its imports
  included: one line `pplan: interrupted`, no output file changed or left half-written, stdout cut back as for
  exit 4, the prefetch child and `size`'s workers stopped. (A signal while the interpreter itself is still
  starting, before any pplan code, gets Python's own handling.)
- 141: stdout is a pipe whose reader has gone (`pplan ... | head`): no line, as for a process SIGPIPE ends.

Signals: this module's first act, in the `pplan` process (`run`: the console script, `python -m pplan`), is to
take SIGINT and SIGTERM. While the modules load there is nothing to undo and the process leaves at once; once the
command runs, the first signal unwinds it (`KeyboardInterrupt`: temporary files removed, workers stopped), a
repeat within `REPEAT_GRACE_S` (`timeout` signals the process and then its group) is ignored, and a later one
leaves at once, removing the temporary files still being written (`PENDING`). A process forked without
handlers of its own dies of the signal as if none were set.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from types import FrameType
from typing import NoReturn

EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_OUTPUT = 4
EXIT_INTERRUPTED = 130
EXIT_READER_GONE = 141
INTERRUPTED = "pplan: interrupted"
REPEAT_GRACE_S = 1.0
PENDING: set[str] = set()
"""Temporary files being written (pplan.cli.files, pplan.cli.cache): removed by a signal that ends the run at once."""

_STOPS = (signal.SIGINT, signal.SIGTERM)
_OWNER = os.getpid()
_received: list[tuple[int, float]] = []  # the signal that interrupted the run, and when
_stdout: GuardedOutput | None = None  # the run's stdout (`run`)
_settled: list[int] = []  # the run's exit code, once its outcome is told (`_settle`)
_unwinding = [False]  # whether the first signal unwinds (the command runs) rather than leaves at once


def _say(line: str) -> None:
    """`line` on stderr without Python's streams (safe in a signal handler; nothing when stderr is gone)."""
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode("utf-8", "replace"))


def remove_pending() -> None:
    """Remove the temporary files still named in `PENDING`: a writer an interrupt stopped before its own clean-up
    (each is named there before it exists and taken out once renamed into place)."""
    for path in list(PENDING):
        with contextlib.suppress(OSError):
            os.unlink(path)
        PENDING.discard(path)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """A handler that does nothing: the signals that come after the one being acted on."""


def _leave_now(signum: int) -> NoReturn:
    """End the run at once after a signal: temporary files removed; unless its outcome was told already (then
    that stands, silently), stdout cut back and one line."""
    for number in _STOPS:
        signal.signal(number, _ignore)  # not SIG_IGN: a signal already caught would print a "race condition"
    remove_pending()
    if _settled:
        os._exit(_settled[0])
    if _stdout is not None:
        _stdout.discard()
    _say(INTERRUPTED)
    os._exit(128 + signum)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _OWNER:  # a forked worker that set no handler: its temporary files, the default action
        remove_pending()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if not _received and _unwinding[0] and not _settled:
        _received.append((signum, time.monotonic()))
        raise KeyboardInterrupt
    if _received and time.monotonic() - _received[0][1] < REPEAT_GRACE_S:
        return  # the same interrupt delivered twice: let the first unwind
    _leave_now(_received[0][0] if _received else signum)


def _on_unraisable(info: sys.UnraisableHookArgs) -> None:
    """An interrupt raised where Python can only print it ("Exception ignored in": a weakref callback inside an
    import, a finaliser) leaves at once, silently but for the one line; anything else is reported as Python
    would."""
    if isinstance(info.exc_value, KeyboardInterrupt) and _received:
        _leave_now(_received[0][0])
    sys.__unraisablehook__(info)


def _take_signals() -> dict[int, object]:
    """Handle SIGINT and SIGTERM here (nothing outside the main thread: there signals cannot be set)."""
    before: dict[int, object] = {}
    with contextlib.suppress(ValueError):
        for number in _STOPS:
            before[number] = signal.signal(number, _on_signal)
    return before


def _is_command() -> bool:
    """Whether this process is the `pplan` command (the console script or `python -m pplan`), not a program that
    imports the package (tests, notebooks), whose signals are left alone."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        return bool(spec.name == "pplan.__main__")
    return bool(sys.argv) and os.path.basename(sys.argv[0]) == "pplan"


_BEFORE = _take_signals()  # before the imports below: an interrupt while they load leaves at once
_UNRAISABLE_BEFORE = sys.unraisablehook
sys.unraisablehook = _on_unraisable

import atexit  # noqa: E402
import importlib  # noqa: E402
import traceback  # noqa: E402

from pplan.cli.app import GuardedOutput, OutputError, app, err_console, guard_streams  # noqa: E402
from pplan.errors import PplanError  # noqa: E402

COMMAND_MODULES = {
    "recommend": "recommend", "explain": "explain", "schema": "explain", "size": "size", "compare": "compare",
    "profiles": "profiles", "schedule": "schedule", "bubble": "schedule", "bench": "bench", "validate": "validate",
    "calibrate": "calibrate",
}  # fmt: skip
"""Each command's module (importing it registers its commands on `app`), in the order `--help` lists them: the
order a user needs them (what to run, one plan, how many GPUs, two plans, the inputs, then the schedules, the
real pipeline and the validation)."""


def register(argv: list[str] | None = None) -> None:
    """Register the commands on `app`: only the module of the command `argv` starts with, when it starts with one
    (a command's start-up then skips the imports of the others: a tenth of a second of `recommend`'s budget),
    otherwise every command (the help, and the message for an unknown command, list them all)."""
    modules = list(dict.fromkeys(COMMAND_MODULES.values()))
    if argv and argv[0] in COMMAND_MODULES:
        modules = [COMMAND_MODULES[argv[0]]]
    for module in modules:
        importlib.import_module(f"pplan.cli.{module}")


DEBUG_ENV = "PPLAN_DEBUG"


def printable(text: str) -> str:
    """`text` on one line with every control or otherwise unprintable character escaped (`\\x1b`, `\\n`)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The folder of the pplan package itself (not any folder named pplan above it: a clone is often called pplan)."""


def _where(err: BaseException) -> str:
    """The innermost pplan function the exception passed through, as module:function."""
    prefix = _PACKAGE_DIR + os.sep
    frames = [
        f for f in traceback.extract_tb(err.__traceback__) if os.path.abspath(f.filename).startswith(prefix)
    ]
    if not frames:
        return "pplan"
    frame = frames[-1]
    module = os.path.abspath(frame.filename).removeprefix(prefix).removesuffix(".py").replace(os.sep, ".")
    return f"pplan.{module}:{frame.name}"


def _internal_error(err: BaseException) -> None:
    if os.environ.get(DEBUG_ENV) == "1":
        raise err
    sys.exit(_settle(EXIT_INTERNAL, _internal_line(err)))


def _internal_line(err: BaseException) -> str:
    return (
        f"pplan: internal error in {_where(err)}: {type(err).__name__}: {err}; please report it with this "
        f"command ({DEBUG_ENV}=1 shows the traceback)"
    )


def _is_a(err: BaseException, class_name: str) -> bool:
    """Whether `err` derives from a click class of that name (typer vendors click in recent releases)."""
    return any(cls.__name__ == class_name for cls in type(err).__mro__)


def _bad_parameter(err: Exception) -> str:
    """A value typer refused (a choice not among a `Literal`'s, a number that does not parse), worded as the core
    words its own refusals: `--flag: problem`. typer words a choice "Value error, 'x' is not one of 'a', 'b'.";
    the core's `check_choice` says the same, so the API and the CLI refuse alike."""
    param = err.param  # type: ignore[attr-defined]
    long_names = [o for o in param.opts if o.startswith("--")]
    field = long_names[0] if long_names else getattr(param, "metavar", None) or param.name
    message = " ".join(str(err.message).split()).removeprefix("Value error, ").rstrip(".")  # type: ignore[attr-defined]
    if not message and _is_a(err, "MissingParameter"):  # click words a missing one with an empty message
        ctx = getattr(err, "ctx", None)
        path = ctx.command_path if ctx is not None else "pplan COMMAND"
        what = "argument" if getattr(param, "param_type_name", "") == "argument" else "option"
        message = f"a required {what} is missing; `{path} --help` shows what it takes"
    return f"{field}: {message or 'not accepted'}"


def main(argv: list[str] | None = None) -> None:
    """Run one command (`argv`, else the process's arguments); leave by `sys.exit` with its exit code."""
    _settled.clear()  # a new run (tests call main in one process)
    register(sys.argv[1:] if argv is None else argv)
    # structures kept between runs (PPLAN_CACHE_DIR=off keeps none); the store touches the disk only when a
    # command first needs a structure, so --help and the commands that simulate nothing never reach it
    importlib.import_module("pplan.cli.cache").install()
    _unwinding[0] = (
        signal.getsignal(signal.SIGINT) is _on_signal
    )  # the command's process: from now on, unwind
    try:
        # outside standalone mode click returns a command's `typer.Exit` code (and 130 for an interrupt) instead
        # of exiting with it: pass it on
        code = app(args=argv, prog_name="pplan", standalone_mode=False)
        if code == EXIT_INTERRUPTED:
            raise KeyboardInterrupt
        if isinstance(code, int) and code:
            sys.exit(code)
    except PplanError as err:
        sys.exit(_settle(EXIT_USAGE, f"pplan: error: {err.one_line()}"))
    except OutputError as err:
        sys.exit(_output_failed(err))
    except KeyboardInterrupt:
        sys.exit(_interrupted())
    except Exception as err:
        if _received:  # a library turned the interrupt into its own error (pydantic-core: SchemaError)
            sys.exit(_interrupted())
        _usage_or_internal(err)


def _usage_or_internal(err: Exception) -> NoReturn:
    """Leave on an exception no command handled: click's usage errors as one line (exit 2), else a bug."""
    if _is_a(err, "NoArgsIsHelpError"):
        _settle(0)
        err_console.print(err.ctx.get_help())  # type: ignore[attr-defined]
        sys.exit(0)
    if _is_a(err, "BadParameter") and getattr(err, "param", None) is not None:
        sys.exit(_settle(EXIT_USAGE, f"pplan: error: {_bad_parameter(err)}"))
    if _is_a(err, "ClickException"):
        message = " ".join(err.format_message().split())  # type: ignore[attr-defined]
        sys.exit(_settle(getattr(err, "exit_code", EXIT_USAGE), f"pplan: error: {message}"))
    if _is_a(err, "Abort"):
        sys.exit(_settle(1))
    _internal_error(err)
    sys.exit(EXIT_INTERNAL)


def _output_failed(err: OutputError) -> int:
    """Report a failed write (stdout cut back to what it held before the run); the exit code."""
    if err.where == "stdout" and _stdout is not None:
        _stdout.discard()
    if err.reader_gone:
        return _settle(EXIT_READER_GONE)
    return _settle(EXIT_OUTPUT, f"pplan: {err}")


def _interrupted() -> int:
    """Report an interrupt (stdout cut back) unless the run's outcome was already told; the exit code."""
    if _settled:
        return _settled[0]
    if _stdout is not None:
        _stdout.discard()
    signum = _received[0][0] if _received else signal.SIGINT
    return _settle(128 + signum, INTERRUPTED)


def _settle(code: int, line: str | None = None) -> int:
    """Fix the run's outcome, once: its exit code and the one line that tells it (printed here). Told already:
    the first outcome stands and nothing more is printed; a signal from now on leaves at once with it."""
    if not _settled:
        _settled.append(code)
        if line is not None:
            print(printable(line), file=sys.stderr)
    return _settled[0]


def run() -> None:
    """The `pplan` console script and `python -m pplan`: the streams guarded, `main`, the exit handlers, the
    output flushed, then leave without tearing the heap down. Freeing a search's caches object by object at
    interpreter shutdown took about 0.4 s of `recommend`'s two-second budget; the operating system frees the
    process's memory at once."""
    global _stdout
    _stdout = guard_streams()
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt:  # a signal while main was already leaving
        code = _interrupted()
    _unwinding[0] = False  # a signal from here on leaves at once
    os._exit(_finish(code))


def _finish(code: int) -> int:
    """Run the exit handlers and flush stdout; the exit code, changed where that write failed or an interrupt
    was swallowed on the way (an import's clean-up can eat a `KeyboardInterrupt`)."""
    atexit._run_exitfuncs()
    remove_pending()
    try:
        sys.stdout.flush()
    except OutputError as err:
        code = _output_failed(err)
    except Exception as err:
        code = _settle(EXIT_INTERNAL, _internal_line(err))
    if _received and not _settled:
        code = _interrupted()
    elif _stdout is not None and _stdout.error is not None and code not in (EXIT_OUTPUT, EXIT_READER_GONE):
        code = _output_failed(_stdout.error)  # a failed write some code swallowed
    sys.stderr.flush()
    return code


def _exit_status(code: object) -> int:
    """The process status `sys.exit(code)` gives: None is 0, an int itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if not _is_command():  # a program importing pplan keeps its own signal handling
    with contextlib.suppress(ValueError, TypeError):
        for _number, _handler in _BEFORE.items():
            signal.signal(_number, _handler)  # type: ignore[arg-type]
    sys.unraisablehook = _UNRAISABLE_BEFORE
