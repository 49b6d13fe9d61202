"""The copies of a plan's settings from one record to another, generated once from the declaration
(`pplan.plan.settings`) as code, so that no hand-written call lists the settings keyword by keyword:

- `plan_constructor`: `make_plan`'s last step, `Plan` from the validated `PlanRequest` and what `make_plan` derived
  (each setting's `plan`: copied, or the declared expression);
- `request_constructor`: a search configuration's `PlanRequest` (each setting's `candidate` expression over the
  configuration `c`, the search request `q` and the sequence length), the search's hot path: a plain function
  with one keyword per setting, as fast as the hand-written call it replaces (no comprehension per call);
- `settings_read`: a published run's settings from the mappings that state them (a row, its set's statements and
  assumptions), each value converted to its setting's type.

A setting declared with a field of `PlanRequest` and of `Plan` is copied by all three without another edit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pplan.plan.settings import SETTINGS, Setting

PLAN_ARGS = (
    "req",
    "kind",
    "t",
    "p",
    "v",
    "cp",
    "d",
    "m",
    "seq_len",
    "layout",
    "shard_group",
    "recompute_layers",
)
"""What `make_plan` hands the generated constructor, in order: the request, the schedule family and what it derived
(the names a setting's `plan` expression may read)."""


def _compiled(name: str, source: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """The function `name` defined by `source`, run once in `namespace`."""
    scope = dict(namespace)
    exec(compile(source, f"<pplan.plan.copies:{name}>", "exec"), scope)
    function: Callable[..., Any] = scope[name]
    function.__source__ = source  # type: ignore[attr-defined]  # for a reader, and the tests
    return function


def plan_source(settings: tuple[Setting, ...] = SETTINGS) -> str:
    """The source of `plan_from`: `Plan(...)` with the fields `make_plan` derives for every plan and one keyword
    per stored setting."""
    keywords = ["dp=d", "kind=kind", "num_microbatches=m", "layout=layout"]
    for s in settings:
        if s.plan is not None:
            keywords.append(f"{s.name}={s.plan or 'req.' + s.name}")
    body = ",\n        ".join(keywords)
    return f"def plan_from({', '.join(PLAN_ARGS)}):\n    return Plan(\n        {body},\n    )\n"


def plan_constructor(plan_type: type, helpers: Mapping[str, Any]) -> Callable[..., Any]:
    """`plan_from(*PLAN_ARGS)`, building `plan_type` (`Plan`); `helpers` are the functions the declared
    expressions call (the canonical orders of module lists)."""
    return _compiled("plan_from", plan_source(), {"Plan": plan_type, **helpers})


def request_source(settings: tuple[Setting, ...] = SETTINGS) -> str:
    """The source of `request(c, q, seq_len)`: `PlanRequest(...)` with one keyword per setting a search sets."""
    keywords = [f"{s.name}={s.candidate}" for s in settings if s.candidate is not None]
    body = ",\n        ".join(keywords)
    return f"def request(c, q, seq_len):\n    return PlanRequest(\n        {body},\n    )\n"


def request_constructor(request_type: type, helpers: Mapping[str, Any]) -> Callable[..., Any]:
    """`request(c, q, seq_len)`: the `request_type` (`PlanRequest`) of search configuration `c` under search
    request `q`, to be a method of the configuration's class."""
    return _compiled("request", request_source(), {"PlanRequest": request_type, **helpers})


def _converted(setting: Setting, value: Any) -> Any:
    """A stated value as the setting holds it: a boolean, an integer, a float, a tuple, or lower-case text."""
    default = setting.default
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, tuple):
        return tuple(value)
    if isinstance(default, float) or isinstance(value, float):
        return float(value)
    if isinstance(default, int) or setting.count or (default is None and not isinstance(value, str)):
        return int(value)
    return str(value).lower() if setting.choices else str(value)


def settings_read(*sources: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every setting some source states (by its name, not None), from the first source that does, converted to
    its type; settings in `skip` are the caller's to derive."""
    out: dict[str, Any] = {}
    for s in SETTINGS:
        if s.name in skip:
            continue
        for source in sources:
            value = source.get(s.name)
            if value is not None:
                out[s.name] = _converted(s, value)
                break
    return out
