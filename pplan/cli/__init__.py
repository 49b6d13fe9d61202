"""The command-line interface: the only package that knows typer, terminals and exit codes.

Each command lives in its own module and registers itself on `app`; `main` turns every `PplanError` (and
pydantic's validation errors) into one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

from pplan.cli.app import app
from pplan.errors import PplanError

# Importing the command modules registers their commands on `app`.
from pplan.cli import explain, profiles  # noqa: E402,F401  isort: skip

EXIT_USAGE = 2


def main() -> None:
    """Entry point of the `pplan` console script and `python -m pplan`."""
    try:
        app(standalone_mode=False)
    except PplanError as err:
        print(f"pplan: error: {err.one_line()}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except SystemExit:
        raise
    except Exception as err:  # typer/click usage errors arrive here in non-standalone mode
        import click

        if isinstance(err, click.exceptions.Abort):
            sys.exit(1)
        if isinstance(err, click.ClickException):
            err.show()
            sys.exit(err.exit_code)
        raise
