"""Command signatures built from the settings declaration (`pplan.plan.settings`): a command declares the options
that are its own, takes the plan settings as `**settings`, and `with_settings` gives typer the whole signature,
each setting's option made from its declaration (flag, help, panel, type, default); the values come back keyed
by setting name (`explain`) or by the search request's field (`recommend`), ready for `PlanRequest` or
`SearchRequest`. A new setting is one declaration: it appears in both commands' help, at the end of its panel,
and reaches the request without an edit here.

Options appear in `--help` grouped by panel in the order the command lists (`order`); a setting the list does not
name follows the last listed option of its panel.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, TypeVar, get_args

import typer

from pplan.cli.options import PANELS, comma_list, offload_modules, recompute_modules
from pplan.errors import ConfigError
from pplan.plan.settings import NONE, SETTINGS, Concern, Setting
from pplan.profiles.releases import RELEASE_KNOBS

F = TypeVar("F", bound=Callable[..., Any])

TEXT_PARSERS: dict[str, Callable[[Any], tuple[str, ...]]] = {
    "recompute_modules": recompute_modules,
    "offload_modules": offload_modules,
}
"""How a module list's text becomes the core's tuple where it is more than a comma list of its choices (a
canonical order, modules passed on for the core to refuse with its own reason)."""

SEARCHED: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.search is not None)
"""The settings `recommend` takes, in declaration order."""


def _explain_type(s: Setting) -> object:
    """The type of explain's option: declared, or the one its default implies (a module list is text)."""
    if s.cli_type is not None:
        return s.cli_type
    d = s.default
    if isinstance(d, bool | float):
        return type(d)
    if isinstance(d, tuple):
        return str if d else str | None
    if isinstance(d, int):
        return int
    return int | None if d is None else str


def _explain_default(s: Setting) -> object:
    """explain's default for a setting: the declared one, a module list as its text."""
    if isinstance(s.default, tuple):
        return ",".join(s.default) or None
    return s.default


def _parameter(name: str, kind: object, option: Any, default: object) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[kind, option], default=default
    )


def _option(s: Setting, help_text: str | None = None, concern: Concern | None = None) -> Any:
    """A setting's option: a boolean that defaults to true, or that a stack release may set, also takes `--no-…`
    (the explain line of a plan with a release spells each such knob either way)."""
    negatable = isinstance(s.default, bool) and (s.default or s.name in RELEASE_KNOBS)
    flags = f"{s.flag}/--no-{s.flag[2:]}" if negatable else s.flag
    return typer.Option(
        flags, rich_help_panel=PANELS[concern or s.concern], help=help_text or s.help, metavar=s.metavar
    )


def explain_parameters(defaults: Mapping[str, object]) -> list[inspect.Parameter]:
    """One option per setting, named as the setting, with explain's defaults but those in `defaults`."""
    return [
        _parameter(s.name, _explain_type(s), _option(s), defaults.get(s.name, _explain_default(s)))
        for s in SETTINGS
    ]


def search_parameters(
    defaults: Mapping[str, object],
    only: Sequence[str] | None = None,
    panels: Mapping[str, tuple[str, str]] | None = None,
) -> list[inspect.Parameter]:
    """One option per setting recommend takes (those named in `only`, else all), named as its `SearchRequest` field
    (`pplan.plan.settings.Search`): a fixed value (optional), a comma list (text), or explain's option; defaults
    but those in `defaults`; a command of its own gives some (setting name: panel, help) in `panels`."""
    params = []
    for s in SEARCHED:
        if only is not None and s.name not in only:
            continue
        form = s.search
        assert form is not None
        option = _option(s, form.help, form.concern)
        if panels and s.name in panels:
            panel, help_text = panels[s.name]
            option = typer.Option(s.flag, rich_help_panel=panel, help=help_text)
        if form.form == "fix":
            params.append(_parameter(form.field, int | None, option, None))
        elif form.form == "list":
            kind = str if form.default is not None else str | None
            params.append(_parameter(form.field, kind, option, form.default))
        else:
            default = defaults.get(s.name, _explain_default(s))
            params.append(_parameter(form.field, _explain_type(s), option, default))
    return params


def knob_parameters(knobs: Mapping[str, tuple[object, object]]) -> list[inspect.Parameter]:
    """Options a command passes on by name with the settings (`name: (Annotated type and option, default)`)."""
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
        for name, (kind, default) in knobs.items()
    ]


def _panel(param: inspect.Parameter) -> str | None:
    for meta in get_args(param.annotation)[1:]:
        panel = getattr(meta, "rich_help_panel", None)
        if panel is not None:
            return str(panel)
    return None


def _ordered(params: dict[str, inspect.Parameter], order: Sequence[str]) -> list[inspect.Parameter]:
    """`params` in `order`; each one it does not name after the last of its panel (else last)."""
    out = [params[name] for name in order if name in params]
    for name, param in params.items():
        if name in order:
            continue
        panel = _panel(param)
        at = max((k + 1 for k, p in enumerate(out) if _panel(p) == panel), default=len(out))
        out.insert(at, param)
    return out


def with_settings(settings: list[inspect.Parameter], order: Sequence[str]) -> Callable[[F], F]:
    """Give a command taking `**settings` the signature typer reads: its own options and `settings`, in help
    order. typer calls it with every option by name; the settings land in the `**` mapping."""

    def wrap(command: F) -> F:
        own = inspect.signature(command, eval_str=True).parameters.values()
        params = {
            p.name: p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p.kind != p.VAR_KEYWORD
        }
        params |= {p.name: p for p in settings}
        command.__signature__ = inspect.Signature(_ordered(params, order))  # type: ignore[attr-defined]
        return command

    return wrap


def _text(s: Setting, value: Any) -> Any:
    """A module list's text as the core's tuple (other values as they are)."""
    if not isinstance(s.default, tuple):
        return value
    if isinstance(value, str) and value.strip().lower() == NONE:
        return ()
    parse = TEXT_PARSERS.get(s.name)
    if parse is not None:
        return parse(value)
    return comma_list(s.flag, value, s.choices) or ()


def _stack_release(out: dict[str, Any], stack: str, release: str) -> None:
    """`--stack NAME@RELEASE` as the stack and its release (one of the two spellings, not both)."""
    value = out.get(stack)
    if isinstance(value, str) and "@" in value:
        name, _, named = value.partition("@")
        if not name or not named:
            raise ConfigError(
                "--stack", f"{value!r} is not NAME@RELEASE", "e.g. --stack megatron-bridge@26.06"
            )
        if out.get(release) not in (None, named):
            raise ConfigError("--release", f"conflicts with --stack {value}", "give the release once")
        out[stack], out[release] = name or None, named or None


def request_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """explain's setting options as `PlanRequest`'s keywords."""
    out = {s.name: _text(s, values[s.name]) for s in SETTINGS}
    _stack_release(out, "stack", "release")
    return out


def search_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The setting options among `values` (keyed by `SearchRequest` field, as `search_parameters` names them) as
    `SearchRequest`'s keywords; a list not given is left to the request's default."""
    out: dict[str, Any] = {}
    for s in SEARCHED:
        form = s.search
        assert form is not None
        if form.field not in values:
            continue
        value = values[form.field]
        if form.form == "list":
            items = comma_list(s.flag, value, form.item_choices(s))
            if items is not None:
                out[form.field] = tuple(int(x) for x in items) if isinstance(s.default, int) else items
        elif form.form == "also":
            out[form.field] = ((), _text(s, value)) if value else ((),)
        else:
            out[form.field] = _text(s, value)
    _stack_release(out, "stack", "release")
    return out


def release_search_changes(
    values: Mapping[str, Any], given: Iterable[str], model: str, hardware: str, routed: bool
) -> dict[str, Any]:
    """What a search's stack release sets (`release_defaults`) among its one-value settings (`SearchRequest` fields
    of the `same` form: dispatcher, EP overlap, CUDA-graph scope, fusions, TP overlap) the user did not give
    (`given`, by field; a setting the command has no option for is never given). `values` holds the query's `stack`, `release` and
    `precisions`; with several precisions, only the knobs their recipes agree on. Empty without a release."""
    from pplan.profiles.releases import release_defaults, release_of

    release = release_of(values["stack"], values.get("release")) if values.get("release") else None
    if release is None:
        return {}
    precisions = values.get("precisions") or ("bf16",)
    recipes = [release_defaults(release, model, hardware, p, routed) for p in precisions]
    told = set(given)
    out: dict[str, Any] = {}
    for s in SETTINGS:
        form = s.search
        one_value = form is not None and (form.form == "same" or s.name in RELEASE_LIST_KNOBS)
        if form is None or not one_value or s.name not in RELEASE_KNOBS or form.field in told:
            continue
        found = [r.get(s.name) for r in recipes]
        if found[0] is None or any(f != found[0] for f in found):
            continue
        value = tuple(found[0]) if isinstance(found[0], list) else found[0]
        if form.form == "list":
            value = (value,)
        if value != values.get(form.field, s.default):
            out[form.field] = value
    return out


RELEASE_LIST_KNOBS = frozenset({"moe_dispatcher"})
"""Release knobs recommend takes as a list (`--moe-dispatcher a,b`) that a search not given one prices at one value:
a named release sets it to its recipe's."""


def given(params: dict[str, Any], ctx: Any) -> frozenset[str]:
    """The names among `params` the command line (or the Python API's keywords) set, from the command context's
    parameter sources (a default is not given)."""
    return frozenset(
        name
        for name in params
        if (source := ctx.get_parameter_source(name)) is not None and source.name != "DEFAULT"
    )
