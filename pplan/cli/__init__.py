"""The command-line interface: the only package that knows typer, terminals and exit codes.

Each command lives in its own module and registers itself on `app`; `main` turns every `PplanError` and every
usage error (unknown option, bad choice) into one line on stderr and exit code 2, never a traceback. Anything
else is a bug: one line naming where it happened and exit code 3, with the traceback only when `PPLAN_DEBUG=1`.
Every line is printed with control characters escaped, so a profile key cannot drive the terminal.
"""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
import traceback

from pplan.cli.app import app, err_console
from pplan.errors import PplanError

COMMAND_MODULES = {
    "recommend": "recommend", "explain": "explain", "schema": "explain", "size": "size", "compare": "compare",
    "profiles": "profiles", "schedule": "schedule", "bubble": "schedule", "bench": "bench", "validate": "validate",
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


EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
DEBUG_ENV = "PPLAN_DEBUG"


def printable(text: str) -> str:
    """`text` on one line with every control or otherwise unprintable character escaped (`\\x1b`, `\\n`)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _where(err: BaseException) -> str:
    """The innermost pplan function the exception passed through, as module:function."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f"{os.sep}pplan{os.sep}" in f.filename]
    if not frames:
        return "pplan"
    frame = frames[-1]
    module = frame.filename.rsplit(f"{os.sep}pplan{os.sep}", 1)[1].removesuffix(".py").replace(os.sep, ".")
    return f"pplan.{module}:{frame.name}"


def _internal_error(err: BaseException) -> None:
    if os.environ.get(DEBUG_ENV) == "1":
        raise err
    print(
        printable(
            f"pplan: internal error in {_where(err)}: {type(err).__name__}: {err}; please report it with this "
            f"command ({DEBUG_ENV}=1 shows the traceback)"
        ),
        file=sys.stderr,
    )
    sys.exit(EXIT_INTERNAL)


def _is_a(err: BaseException, class_name: str) -> bool:
    """Whether `err` derives from a click class of that name (typer vendors click in recent releases)."""
    return any(cls.__name__ == class_name for cls in type(err).__mro__)


def _bad_parameter(err: Exception) -> str:
    """A value typer refused (a choice not among a `Literal`'s, a number that does not parse), worded as the core
    words its own refusals: `--flag: problem`. typer words a choice "Value error, 'x' is not one of 'a', 'b'.";
    the core's `check_choice` says the same, so the API and the CLI refuse alike."""
    param = err.param  # type: ignore[attr-defined]
    long_names = [o for o in param.opts if o.startswith("--")]
    field = long_names[0] if long_names else param.name
    message = " ".join(str(err.message).split()).removeprefix("Value error, ").rstrip(".")  # type: ignore[attr-defined]
    return f"{field}: {message}"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `pplan` console script and `python -m pplan`."""
    register(sys.argv[1:] if argv is None else argv)
    # structures kept between runs (PPLAN_CACHE_DIR=off keeps none); the store touches the disk only when a
    # command first needs a structure, so --help and the commands that simulate nothing never reach it
    importlib.import_module("pplan.cli.cache").install()
    try:
        # outside standalone mode click returns a command's `typer.Exit` code (and 130 for an interrupt) instead
        # of exiting with it: pass it on
        code = app(args=argv, prog_name="pplan", standalone_mode=False)
        if code == EXIT_INTERRUPTED:
            raise KeyboardInterrupt
        if isinstance(code, int) and code:
            sys.exit(code)
    except PplanError as err:
        print(printable(f"pplan: error: {err.one_line()}"), file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second interrupt must not break the exit
        print("pplan: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as err:
        if _is_a(err, "NoArgsIsHelpError"):
            err_console.print(err.ctx.get_help())  # type: ignore[attr-defined]
            sys.exit(0)
        if _is_a(err, "BadParameter") and getattr(err, "param", None) is not None:
            print(printable(f"pplan: error: {_bad_parameter(err)}"), file=sys.stderr)
            sys.exit(EXIT_USAGE)
        if _is_a(err, "ClickException"):
            message = " ".join(err.format_message().split())  # type: ignore[attr-defined]
            print(printable(f"pplan: error: {message}"), file=sys.stderr)
            sys.exit(getattr(err, "exit_code", EXIT_USAGE))
        if _is_a(err, "Abort"):
            sys.exit(1)
        _internal_error(err)


def run() -> None:
    """The `pplan` console script and `python -m pplan`: `main`, the exit handlers, the output flushed, then leave
    without tearing the heap down. Freeing a search's caches object by object at interpreter shutdown took about
    0.4 s of `recommend`'s two-second budget; the operating system frees the process's memory at once."""
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = _exit_status(exc.code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # e.g. a closed pipe: what Python's own exit reports as a failure too
        code = code or 1
    os._exit(code)


def _exit_status(code: object) -> int:
    """The process status `sys.exit(code)` gives: None is 0, an int itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
