"""`pplan compare A.json B.json`: two `pplan explain --json` reports side by side, every step-time part, the
throughput and the busiest stage's memory with B − A (pplan.compare, drawn by pplan.render.compare)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pplan.cli.app import app, console
from pplan.errors import ConfigError

if TYPE_CHECKING:
    from pplan.documents.explain import ExplainReport

MAX_REPORT_BYTES = 64 << 20
"""The largest explain report read (a 2,048-stage pipeline's report is a few MB)."""


def _report(path: Path, which: str) -> ExplainReport:
    from pydantic import ValidationError

    from pplan.documents.explain import ExplainReport

    fix = f"pass a file written by `pplan explain ... --json > {which.lower()}.json`"
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            raise ConfigError(which, f"{path} is larger than {MAX_REPORT_BYTES >> 20} MB", fix)
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(which, f"cannot read {path}: {err.strerror}", fix) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(which, f"{path} is not JSON ({str(err)[:80]})", fix) from None
    try:
        return ExplainReport.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])[:80]
        raise ConfigError(
            which, f"{path} is not a pplan explain report ({where}: {first['msg'][:80]})", fix
        ) from None


@app.command()
def compare(
    a: Annotated[Path, typer.Argument(help="Plan A: a `pplan explain --json` report.", show_default=False)],
    b: Annotated[Path, typer.Argument(help="Plan B: a `pplan explain --json` report.", show_default=False)],
) -> None:
    """Two explained plans side by side: every step-time part, throughput and memory term, with B − A."""
    from pplan.compare import compare_terms, cut  # the core loads only when a command runs
    from pplan.render.compare import compare_table

    report_a, report_b = _report(a, "A"), _report(b, "B")
    console.print(compare_table(compare_terms(report_a, report_b), cut(report_a), cut(report_b)))
