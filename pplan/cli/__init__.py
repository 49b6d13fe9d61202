"""The command-line interface: the only package that knows typer, terminals and exit codes.

Each command lives in its own module and registers itself on `app`; `main` turns every `PplanError` and every
usage error (unknown option, bad choice) into one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

from pplan.cli.app import app, err_console
from pplan.errors import PplanError

# Importing the command modules registers their commands on `app`.
from pplan.cli import bench, explain, profiles, recommend, schedule, validate  # noqa: F401  isort: skip

EXIT_USAGE = 2


def _is_a(err: BaseException, class_name: str) -> bool:
    """Whether `err` derives from a click class of that name (typer vendors click in recent releases)."""
    return any(cls.__name__ == class_name for cls in type(err).__mro__)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `pplan` console script and `python -m pplan`."""
    try:
        app(args=argv, prog_name="pplan", standalone_mode=False)
    except PplanError as err:
        print(f"pplan: error: {err.one_line()}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except Exception as err:
        if _is_a(err, "NoArgsIsHelpError"):
            err_console.print(err.ctx.get_help())  # type: ignore[attr-defined]
            sys.exit(0)
        if _is_a(err, "ClickException"):
            message = " ".join(err.format_message().split())  # type: ignore[attr-defined]
            print(f"pplan: error: {message}", file=sys.stderr)
            sys.exit(getattr(err, "exit_code", EXIT_USAGE))
        if _is_a(err, "Abort"):
            sys.exit(1)
        raise
