"""pplan's Python API: `recommend`, `explain`, `size` and `compare` for a notebook or a script, answering with the
same pydantic documents `--format json` prints (pplan.documents).

Keyword arguments are named as the command's flags, underscored (`--global-batch` is `global_batch=`,
`--zero-stage` is `zero_stage=`, recommend's `--top` is `top=`); a list may be given for a comma list
(`schedule=["1f1b", "zb"]`), a boolean for a switch (`sequence_parallel=False` is `--no-sequence-parallel`). The
keywords are the commands' own option declarations (the plan settings' from pplan.plan.settings via
pplan.cli.signature): each call is parsed and checked by the very parser the command line uses, then answered by
the core functions the command calls, so a call and the command line with the same flags give the same document.
Options that only shape the printed output (tables, files, launcher formats) are not keywords.

Each recommend candidate is a plan for further calls: `explain(candidate)` explains it (its `explain_command`,
parsed as the command line would), with any keyword changing one setting. Bad arguments raise `ArgumentError`, a
`ValueError` naming the keyword.

`size` runs the command itself for its document (printing nothing). The module loads the CLI and the core only
when a function is first called: `import pplan` stays fast (pplan/__init__.py re-exports these lazily).
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pplan.documents.compare import CompareDocument
    from pplan.documents.explain import ExplainReport
    from pplan.documents.recommend import RecommendCandidate, RecommendReport
    from pplan.documents.size import SizeDocument

__all__ = ["ArgumentError", "compare", "explain", "recommend", "size"]

OUTPUT_ONLY: dict[str, frozenset[str]] = {
    "recommend": frozenset({"format", "json", "rank", "pick", "show_commands"}),
    "explain": frozenset({"csv", "svg", "force", "all_stages", "json", "format"}),
    "size": frozenset({"json", "svg", "force"}),
}
"""Each command's options that only shape what it prints or writes: not keywords of the API."""


class ArgumentError(ValueError):
    """A bad argument to a pplan API call: `argument` is the keyword at fault; the message says what to do."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument


def _keyword(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _command(name: str) -> Any:
    """The click command `pplan NAME` runs (built once)."""
    import typer.main

    from pplan.cli import register
    from pplan.cli.app import app

    if name not in _BUILT:
        register([name])
        _BUILT[name] = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]  # a group
    return _BUILT[name]


_BUILT: dict[str, Any] = {}
"""Each command's click command (typer's; typer vendors click, so its classes are typed `Any` here)."""


def keywords(command: str) -> dict[str, Any]:
    """The keywords a command's API function takes, with the (click) option each stands for."""
    from typer.core import TyperOption

    out: dict[str, Any] = {}
    for param in _command(command).params:
        if isinstance(param, TyperOption) and not param.hidden:
            name = _keyword(param.opts[0])
            if name not in OUTPUT_ONLY.get(command, frozenset()):
                out[name] = param
    return out


def _word(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _argv(command: str, given: Mapping[str, Any]) -> list[str]:
    """`given` keywords as the command's arguments; an unknown keyword raises ArgumentError."""
    options = keywords(command)
    argv: list[str] = []
    for name, value in given.items():
        option = options.get(name)
        if option is None:
            hint = ", ".join(sorted(options))
            raise ArgumentError(name, f"pplan.{command}() takes no such keyword; it takes: {hint}")
        if value is None:
            continue
        if option.is_flag:
            if not isinstance(value, bool):
                raise ArgumentError(name, f"is a switch: pass True or False, got {value!r}")
            if value:
                argv.append(option.opts[0])
            elif option.secondary_opts:
                argv.append(option.secondary_opts[0])
            continue
        if isinstance(value, Sequence) and not isinstance(value, str):
            value = ",".join(_word(v) for v in value)
        argv += [option.opts[0], _word(value)]
    return argv


def _context(command: str, argv: list[str]) -> Any:
    """The command's parsed and converted options (its parser's checks: types, choices), as a click context."""
    from typer import BadParameter

    try:
        return _command(command).make_context(command, list(argv))
    except BadParameter as err:
        opts = getattr(err.param, "opts", None) or [command]
        raise ArgumentError(_keyword(opts[0]), " ".join(err.format_message().split())) from None
    except Exception as err:
        if any(cls.__name__ == "ClickException" for cls in type(err).__mro__):  # a usage error
            raise ArgumentError(command, err.format_message()) from None  # type: ignore[attr-defined]
        raise


@contextlib.contextmanager
def _named() -> Any:
    """pplan's own refusals (`--flag: what; fix`) as ArgumentError naming the keyword."""
    from pplan.errors import PplanError

    try:
        yield
    except PplanError as err:
        text = f"{err.message}; {err.fix}" if err.fix else err.message
        raise ArgumentError(_keyword(err.field.split()[0]), text) from None


def recommend(**kwargs: Any) -> RecommendReport:
    """`pplan recommend --format json`: the ranked plans as the pplan.recommend/2 document. Keywords: the
    command's flags, underscored (e.g. `model="llama3-70b", gpus=256, global_batch=512, schedule=["1f1b"]`).
    Each candidate can be passed on to `explain`."""
    from pplan.cli.recommend import Query
    from pplan.cli.signature import given

    ctx = _context("recommend", _argv("recommend", kwargs))
    params = dict(ctx.params)
    own = {
        k: params.pop(k) for k in ("model", "hardware", "launcher", "include_unrunnable", "max_extrapolation")
    }
    for name in ("output", "as_json", "rank", "pick", "show_commands"):
        params.pop(name, None)
    with _named():
        query = Query(output="json", searched=params, given=given(params, ctx), **own)
        model_spec, _, _, answer = query.answer()
        return query.document(model_spec, answer)


def explain(plan: RecommendCandidate | str | None = None, /, **kwargs: Any) -> ExplainReport:
    """`pplan explain --json`: one plan in full, as the pplan.explain/2 document. `plan`: a recommend candidate
    (or a `pplan explain ...` command line) to start from; keywords (the command's flags, underscored) set or
    change settings."""
    argv: list[str] = []
    if plan is not None:
        line = plan if isinstance(plan, str) else plan.explain_command
        words = shlex.split(line)
        if words[:2] != ["pplan", "explain"]:
            raise ArgumentError("plan", f"is not a `pplan explain` command line: {line[:60]!r}")
        argv = words[2:]
    ctx = _context("explain", argv + _argv("explain", kwargs))
    return _explained(ctx)


def _explained(ctx: Any) -> ExplainReport:
    from pplan.cli.explain import prepared, with_notes
    from pplan.explain import explain_with_run

    p = dict(ctx.params)
    own = {
        k: p.pop(k) for k in ("model", "hardware", "distributed_optimizer", "train_tokens", "pass_durations")
    }
    for name in ("csv", "svg", "force", "all_stages", "as_json", "launcher_format"):
        p.pop(name, None)
    with _named():
        model, hardware, request, notes = prepared(
            ctx,
            own["model"],
            own["hardware"],
            own["distributed_optimizer"],
            own["train_tokens"],
            None,
            p,
        )
        report, _, _ = explain_with_run(model, hardware, request, own["pass_durations"], own["train_tokens"])
    return with_notes(report, notes)


def size(**kwargs: Any) -> SizeDocument:
    """`pplan size --json`: GPUs, time, cost and energy for a token budget, as the pplan.size/1 document.
    Keywords: the command's flags, underscored (e.g. `train_tokens=15e12, hardware=["h100-sxm-80gb"]`)."""
    from typer import Exit

    from pplan.documents.size import SizeDocument

    ctx = _context("size", [*_argv("size", kwargs), "--json"])
    out = io.StringIO()
    # a deadline no count meets leaves with Exit: the document is printed all the same
    with _named(), contextlib.redirect_stdout(out), contextlib.suppress(Exit):
        _command("size").invoke(ctx)
    return SizeDocument.model_validate(json.loads(out.getvalue()))


def compare(
    a: ExplainReport | RecommendCandidate | str, b: ExplainReport | RecommendCandidate | str
) -> CompareDocument:
    """`pplan compare`: the `pplan.compare/1` document `pplan compare A.json B.json --format json` prints: the
    settings that differ, every step-time part, the throughput and the busiest stage's memory of two explained
    plans (`terms`, each with `a`, `b`, `delta`, `ratio` and the settings that moved it) and whether the step times
    are tied within A's interval. A candidate or command line is explained first."""
    from pplan.compare import compare_document
    from pplan.documents.explain import ExplainReport

    def report(x: ExplainReport | RecommendCandidate | str) -> ExplainReport:
        return x if isinstance(x, ExplainReport) else explain(x)

    return compare_document(report(a), report(b))
