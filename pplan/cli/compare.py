"""`pplan compare A.json B.json`: two `pplan explain --json` reports side by side, every step-time part, the
throughput and the busiest stage's memory with B − A, the settings that moved each term and whether the step
times are tied (pplan.compare, drawn by pplan.render.compare; `--format json` prints `pplan.compare/1`).

Each report is read through the bounded reader (pplan.cli.reading), checked against the exact schema version
`pplan explain` writes, validated with the first error named, then checked for sizes and numbers no plan has
(pplan.compare.report_problem): every refusal one line naming A or B, exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from pplan.cli.app import JsonAliasOpt, PanelledCommand, app, console, format_option, json_text
from pplan.errors import ConfigError

if TYPE_CHECKING:
    from pplan.documents.explain import ExplainReport

MAX_REPORT_BYTES = 16 << 20
"""The largest explain report read (a 128-stage pipeline's report is about 150 KB)."""


CompareFormat = Literal["table", "json"]


def _report(path: Path, which: str) -> ExplainReport:
    from pydantic import ValidationError

    from pplan.cli.reading import read_json
    from pplan.compare import report_problem
    from pplan.documents.base import SCHEMA_KEY, version_of
    from pplan.documents.explain import ExplainReport

    fix = f"pass a file written by `pplan explain ... --json > {which.lower()}.json`"
    data = read_json(path, MAX_REPORT_BYTES, which, fix)
    wanted = version_of(ExplainReport)
    if not isinstance(data, dict):
        raise ConfigError(which, f"{path} is not a JSON object", fix)
    schema = data.get(SCHEMA_KEY)
    if schema != wanted:
        got = f"is {str(schema)[:40]!r}" if schema is not None else "is missing"
        raise ConfigError(which, f"{path}: its {SCHEMA_KEY!r} {got}; compare reads {wanted} reports", fix)
    try:
        report = ExplainReport.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False, include_context=False, include_input=False)[0]
        where = ".".join(str(x) for x in first["loc"])[:80]
        raise ConfigError(
            which, f"{path} is not a pplan explain report ({where}: {first['msg'][:80]})", fix
        ) from None
    problem = report_problem(report)
    if problem is not None:
        raise ConfigError(which, f"{path} holds what no plan has ({problem[:120]})", fix)
    return report


class _CompareCommand(PanelledCommand):
    """The usage line names the two reports as files (typer would write `{A.json} {B.json}`)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return ["[OPTIONS]", "A.json", "B.json"]


@app.command(cls=_CompareCommand)
def compare(
    a: Annotated[
        Path,
        typer.Argument(help="Plan A: a `pplan explain --json` report.", show_default=False, metavar="A.json"),
    ],
    b: Annotated[
        Path,
        typer.Argument(help="Plan B: a `pplan explain --json` report.", show_default=False, metavar="B.json"),
    ],
    output: Annotated[CompareFormat, format_option("pplan.compare/1")] = "table",
    as_json: JsonAliasOpt = False,
) -> None:
    """Two explained plans side by side: every step-time part, throughput and memory term, with B − A, the
    settings that moved each, and whether the step times are tied within A's interval."""
    from pplan.compare import changed_settings, compare_document, compare_terms, cut, tie
    from pplan.render.compare import compare_table

    report_a, report_b = _report(a, "A"), _report(b, "B")
    if as_json or output == "json":
        doc: Any = compare_document(report_a, report_b).model_dump(mode="json", by_alias=True)
        print(json_text(doc))
        return
    console.print(
        compare_table(
            compare_terms(report_a, report_b), cut(report_a), cut(report_b),
            changed_settings(report_a, report_b), tie(report_a, report_b),
        )
    )  # fmt: skip
