"""The settings record (pplan.plan.settings) against every place a plan's settings are written: `PlanRequest`'s
fields, defaults and choices, `make_plan`, the explain document's plan block (`PlanOut`), the search's mapping of a
configuration to a request (`Candidate.request`), `pplan explain`'s options and the command line a plan prints.

Each check is a function that returns what is wrong, so the last tests can show each one failing on a setting
declared (or a field added) but not mapped."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, get_args

import pytest

from pplan.cli.commandline import explain_command
from pplan.errors import ConfigError
from pplan.explain import _plan_out
from pplan.plan import settings as settings_module
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.plan.settings import SETTING, SETTINGS, Setting
from pplan.profiles.catalog import load_model
from pplan.schedules import schedule_family
from pplan.search.space import Candidate, SearchRequest
from tests.cli_run import run_pplan

DENSE, ROUTED = "llama3-8b", "mixtral-8x7b"
BASE: dict[str, Any] = {"gpus": 16, "global_batch": 32}
"""Llama 3 8B (32 layers) on 16 GPUs, 32 sequences: d = 16, m = 2 with every other setting at its default."""

SAMPLES: dict[str, tuple[str, dict[str, Any], object]] = {
    # setting: (model, the request's changes from BASE, what the explain document's plan block shows)
    "gpus": (DENSE, {"gpus": 32}, 32),
    "global_batch": (DENSE, {"global_batch": 64}, 64),
    "tp": (DENSE, {"tp": 2}, 2),
    "pp": (DENSE, {"pp": 2}, 2),
    "cp": (DENSE, {"cp": 2}, 2),
    "micro_batch": (DENSE, {"micro_batch": 2}, 2),
    "schedule": (DENSE, {"pp": 2, "schedule": "gpipe"}, "gpipe"),
    "recompute": (DENSE, {"recompute": "full"}, "full"),
    "zero_stage": (DENSE, {"zero_stage": 1}, 1),
    "grad_dtype": (DENSE, {"grad_dtype": "bf16"}, "bf16"),
    "recompute_method": (DENSE, {"recompute": "full", "recompute_method": "block", "recompute_layers": 2}, "block"),
    "recompute_layers": (DENSE, {"recompute": "full", "recompute_method": "block", "recompute_layers": 2}, 2),
    "recompute_modules": (
        DENSE, {"recompute": "selective", "recompute_modules": ("core_attn", "mlp")}, ["core_attn", "mlp"]
    ),
    "seq_len": (DENSE, {"seq_len": 4096}, 4096),
    # 8 chunks of 4 layers: m = 32 / 16 = 2 micro-batches, a multiple of p = 2
    "vp": (DENSE, {"pp": 2, "schedule": "interleaved-1f1b", "vp": 4}, 4),
    # 32 layers on 4 ranks, 5 on the first: the other three take (32 − 5) / 3 = 9 each
    "first_stage_layers": (DENSE, {"pp": 4, "first_stage_layers": 5}, [5, 9, 9, 9]),
    "last_stage_layers": (DENSE, {"pp": 4, "last_stage_layers": 5}, [9, 9, 9, 5]),
    "offload_modules": (DENSE, {"offload_modules": ("core_attn",)}, ["core_attn"]),
    "shard_group": (DENSE, {"zero_stage": 1, "shard_group": 8}, 8),
    "reshard_after_forward": (DENSE, {"zero_stage": 3, "reshard_after_forward": False}, False),
    "overlap_p2p_comm": (DENSE, {"overlap_p2p_comm": False}, False),
    "tp_comm_overlap": (DENSE, {"tp": 2, "tp_comm_overlap": True}, True),
    "stack": (DENSE, {"stack": "torchtitan"}, "torchtitan"),
    "ep": (ROUTED, {"ep": 2}, 2),
    "precision": (DENSE, {"precision": "fp8"}, "fp8"),
    "memory_headroom": (DENSE, {"pp": 2, "schedule": "auto", "memory_headroom": 0.1}, None),
    "jitter": (DENSE, {"jitter": 0.01}, None),
    "etp": (ROUTED, {"tp": 2, "ep": 2, "etp": 2}, 2),
    "sequence_parallel": (DENSE, {"tp": 2, "sequence_parallel": False}, False),
    "flash_attention": (DENSE, {"flash_attention": False}, False),
    "activation_model": (DENSE, {"activation_model": "korthikanti"}, "korthikanti"),
    "overlap_grad_reduce": (DENSE, {"overlap_grad_reduce": False}, None),
    "overlap_param_gather": (DENSE, {"overlap_param_gather": False}, None),
    "fp8_param_gather": (DENSE, {"precision": "fp8", "fp8_param_gather": True}, True),
    "fp8_swiglu_input": (ROUTED, {"precision": "fp8", "fp8_swiglu_input": True}, True),
    "moment_dtype": (DENSE, {"moment_dtype": "bf16"}, "bf16"),
    "memory_limit": (DENSE, {"pp": 2, "schedule": "auto", "memory_limit": 4}, None),
    "optimizer_offload_fraction": (DENSE, {"zero_stage": 1, "optimizer_offload_fraction": 0.5}, None),
    "offload_layers": (DENSE, {"pp": 1, "offload_layers": 2}, None),
    "release": (DENSE, {"stack": "megatron-bridge", "release": "26.06"}, "26.06"),
    "moe_dispatcher": (ROUTED, {"ep": 2, "moe_dispatcher": "hybridep"}, "hybridep"),
    "moe_ep_overlap": (ROUTED, {"ep": 2, "moe_ep_overlap": True}, True),
    "cuda_graph_scope": (ROUTED, {"cuda_graph_scope": ("attn", "moe_router")}, ["attn", "moe_router"]),
    "moe_permute_fusion": (ROUTED, {"moe_permute_fusion": True}, True),
    "moe_router_fusion": (ROUTED, {"moe_router_fusion": True}, True),
    "moe_fused_grouped_mlp": (ROUTED, {"moe_fused_grouped_mlp": True}, True),
    "moe_capacity_factor": (ROUTED, {"moe_capacity_factor": 1.5}, None),
    "moe_force_balance": (ROUTED, {"moe_force_balance": True}, True),
    "moe_imbalance": (ROUTED, {"moe_imbalance": 1.2}, None),
}  # fmt: skip
"""One plan per setting with that setting off its default (and what it needs with it), and the value the explain
document shows, written from the request (layer splits worked by hand). A setting that needs others to take effect, or
is a count, needs one here (`sample` makes the rest)."""

PLAN_DERIVED = {"gpus", "schedule", "first_stage_layers", "last_stage_layers"}
"""Settings the plan derives rather than stores (`Plan.gpus` = t·p·d·cp, `Plan.schedule` the family's name, the first
and last stage layers in `Plan.layout`): checked through the explain document."""


# ------------------------------------------------------------------------------------------------------ the checks


def undeclared_fields(
    request_type: type = PlanRequest, settings: tuple[Setting, ...] = SETTINGS
) -> list[str]:
    """Fields of the request type with no declaration, and declarations with no field."""
    fields = {f.name for f in dataclasses.fields(request_type)}
    declared = {s.name for s in settings}
    return sorted(fields ^ declared)


def default_problems(request_type: type = PlanRequest, settings: tuple[Setting, ...] = SETTINGS) -> list[str]:
    """Settings whose declared default or choices are not the request's."""
    problems = []
    hints = typing.get_type_hints(request_type)
    for f in dataclasses.fields(request_type):
        setting = next((s for s in settings if s.name == f.name), None)
        if setting is None:
            continue
        default = None if f.default is dataclasses.MISSING else f.default
        if default != setting.default:
            problems.append(f"{f.name}: default {default!r}, declared {setting.default!r}")
        literal = hints[f.name]
        if typing.get_origin(literal) is tuple:
            literal = get_args(literal)[0]
        choices = get_args(literal) if typing.get_origin(literal) is typing.Literal else ()
        if choices != setting.choices:
            problems.append(f"{f.name}: choices {choices}, declared {setting.choices}")
    return problems


def sample(setting: Setting) -> tuple[str, dict[str, Any], object] | None:
    """`SAMPLES`' entry, or for a setting that needs no other to take effect, one made from its declaration: a
    boolean flipped, a choice's first other value, shown (where the document shows it under its own name) as
    asked."""
    if setting.name in SAMPLES:
        return SAMPLES[setting.name]
    if isinstance(setting.default, bool):
        value: object = not setting.default
    elif setting.choices and not isinstance(setting.default, tuple):
        value = next(c for c in setting.choices if c != setting.default)
    else:
        return None
    return DENSE, {setting.name: value}, value if setting.shown == setting.name else None


def _request(setting: Setting, request_type: type[PlanRequest] = PlanRequest) -> tuple[str, PlanRequest]:
    found = sample(setting)
    assert found is not None
    model, changes, _ = found
    return model, request_type(**{**BASE, **changes})


def _shown(document: object, path: str) -> object:
    for part in path.split("."):
        document = getattr(document, part)
    return document


def plan_problem(setting: Setting, request_type: type[PlanRequest] = PlanRequest) -> str | None:
    """What is wrong with the sample of `setting` through `make_plan` and the explain document's plan block."""
    found = sample(setting)
    if found is None:
        return f"{setting.name}: no sample (add one to SAMPLES)"
    model, request = _request(setting, request_type)
    plan = make_plan(load_model(model), request)
    value = getattr(request, setting.name)
    if setting.name not in PLAN_DERIVED and getattr(plan, setting.name, None) != value:
        return f"{setting.name}: make_plan gives {getattr(plan, setting.name, None)!r}, asked {value!r}"
    expected = found[2]
    if setting.shown is None:
        return (
            None if expected is None else f"{setting.name}: declared not shown, sample expects {expected!r}"
        )
    try:
        shown = _shown(_plan_out(plan), setting.shown)
    except AttributeError:
        return f"{setting.name}: the explain document has no {setting.shown}"
    return (
        None if shown == expected else f"{setting.name}: the document shows {shown!r}, expected {expected!r}"
    )


def _search_requests() -> list[PlanRequest]:
    """Requests the search makes from two configurations whose every searched value is off its default: a full
    recompute of 2 layers per chunk, interleaved, ZeRO-3 with hybrid sharding, FP8, experts split; and a selective
    recompute under the automatic schedule (which takes the search's headroom)."""
    query = SearchRequest(
        gpus=64, global_batch=128, recompute_modules=("core_attn", "mlp"), stack="megatron-bridge", release="26.06",
        tp_comm_overlap=True, jitter=0.01, headroom_fraction=0.1, moe_dispatcher="hybridep", moe_ep_overlap=True,
        cuda_graph_scope=("full_iteration",), moe_permute_fusion=True, moe_router_fusion=True,
        moe_fused_grouped_mlp=True, moe_capacity_factor=1.5, moe_force_balance=True, moe_imbalance=1.2,
    )  # fmt: skip
    full = Candidate(
        schedule_family("interleaved-1f1b"), 2, 2, 2, 8, 2, 2, 4, 5, 7, "full", 3, "bf16", 2, 8,
        offload_modules=("core_attn",), shard_group=4, reshard=False, ep=2, precision="fp8", etp=2,
    )  # fmt: skip
    selective = Candidate(schedule_family("auto"), 2, 2, 1, 16, 1, 1, 8, None, None, "selective", 0)
    return [full.request(query, 4096), selective.request(query, 4096)]


def search_problems(settings: tuple[Setting, ...] = SETTINGS) -> list[str]:
    """Settings the search varies or copies (`searched`: cut, query) that no request of `_search_requests` sets off
    its default, and settings it leaves at their defaults (fixed) that one sets."""
    requests = _search_requests()
    problems = []
    for s in settings:
        values = [getattr(r, s.name, s.default) for r in requests]
        moved = any(v != s.default for v in values)
        if s.searched != "fixed" and not moved:
            problems.append(
                f"{s.name}: declared searched ({s.searched}) but Candidate.request leaves the default"
            )
        if s.searched == "fixed" and moved:
            problems.append(f"{s.name}: declared fixed but Candidate.request sets {values}")
    return problems


def read_back(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, line: str
) -> PlanRequest | str:
    """The request `pplan explain` builds from the command line `line`, or the error it prints."""
    seen: list[PlanRequest] = []

    def capture(**kwargs: Any) -> PlanRequest:
        seen.append(PlanRequest(**kwargs))
        raise ConfigError("read back", "stop here")

    monkeypatch.setattr("pplan.plan.records.PlanRequest", capture)
    result = run_pplan(capsys, *line.split()[1:])
    monkeypatch.undo()
    return seen[0] if seen else result.err.strip()


# ------------------------------------------------------------------------------------------------------- the tests


def test_every_request_field_is_declared_once_with_its_default_and_choices() -> None:
    assert undeclared_fields() == []
    assert default_problems() == []
    assert len(SETTING) == len(SETTINGS)


def test_every_setting_has_a_sample() -> None:
    """Each setting has a sample written by hand, or needs none (a boolean or a choice alone takes effect)."""
    assert not set(SAMPLES) - set(SETTING)
    assert [s.name for s in SETTINGS if sample(s) is None] == []


@pytest.mark.parametrize("name", list(SETTING))
def test_make_plan_and_the_explain_document_carry_the_setting(name: str) -> None:
    assert plan_problem(SETTING[name]) is None


def test_the_search_maps_what_it_searches_and_leaves_the_rest() -> None:
    assert search_problems() == []


@pytest.mark.parametrize("name", list(SETTING))
def test_the_explain_command_line_reads_back_as_the_request(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    model, request = _request(SETTING[name])
    line = explain_command(model, "h100-sxm-80gb", request)
    setting = SETTING[name]
    if setting.is_printed(request):
        assert setting.spelled(getattr(request, name)) in line
    assert read_back(capsys, monkeypatch, line) == request


def test_explain_options_take_the_declared_defaults() -> None:
    """`pplan explain`'s options default to the request's defaults, except the example it states (t = 8, p = 4 and
    the query: pplan.cli.explain.EXAMPLE_OPTIONS)."""
    import typer.main

    from pplan.cli.app import app
    from pplan.cli.explain import EXAMPLE_OPTIONS

    command = typer.main.get_command(app).commands["explain"]  # type: ignore[attr-defined]
    by_flag = {opt: p for p in command.params for opt in p.opts}
    for s in SETTINGS:
        param = by_flag[s.flag]
        if param.name in EXAMPLE_OPTIONS or s.name in (
            "stack",
            "recompute_modules",
            "offload_modules",
            "cuda_graph_scope",
        ):
            continue  # the stack defaults to the launcher's; module lists are parsed from text
        assert param.default == s.default, s.name


# ------------------------------------------------------------------------------- each check fails on a new setting


@dataclasses.dataclass(frozen=True, slots=True)
class _WithDummy(PlanRequest):
    dummy_knob: int = 0


DUMMY = Setting(
    "dummy_knob", "memory", 0, "--dummy-knob", "A knob nothing maps.", "dummy_knob", "c.dummy_knob"
)


def test_a_field_added_without_a_declaration_fails() -> None:
    assert undeclared_fields(_WithDummy) == ["dummy_knob"]
    assert undeclared_fields(PlanRequest, (*SETTINGS, DUMMY)) == ["dummy_knob"]


def test_a_setting_declared_but_not_mapped_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert plan_problem(DUMMY) == "dummy_knob: no sample (add one to SAMPLES)"
    monkeypatch.setitem(SAMPLES, "dummy_knob", (DENSE, {"dummy_knob": 1}, 1))
    assert plan_problem(DUMMY, _WithDummy) == "dummy_knob: make_plan gives None, asked 1"
    monkeypatch.undo()
    assert search_problems((*SETTINGS, DUMMY)) == [
        "dummy_knob: declared searched (cut) but Candidate.request leaves the default"
    ]
    monkeypatch.setattr(settings_module, "SETTINGS", (*SETTINGS, DUMMY))
    monkeypatch.setattr("pplan.cli.commandline.SETTINGS", (*SETTINGS, DUMMY))
    request = _WithDummy(gpus=16, global_batch=32, dummy_knob=1)
    line = explain_command(DENSE, "h100-sxm-80gb", request)
    assert line.endswith("--dummy-knob 1")
    monkeypatch.undo()
    assert "--dummy-knob" in str(read_back(capsys, monkeypatch, line))  # explain has no such option


def test_plan_fields_are_the_settings_or_derived() -> None:
    """`Plan` holds the settings (less those it derives) and what it derives from them: a new plan field is one or
    the other."""
    derived = {"dp", "kind", "num_microbatches", "layout", "shape"}
    settings = set(SETTING) - PLAN_DERIVED
    assert {f.name for f in dataclasses.fields(Plan)} == settings | derived


def test_every_concern_has_settings_and_a_help_panel() -> None:
    from pplan.cli.options import PANELS
    from pplan.plan.settings import CONCERNS

    assert set(PANELS) == set(CONCERNS) == {s.concern for s in SETTINGS}


def test_a_declared_setting_is_carried_by_the_generated_copies() -> None:
    """The copies are generated from the declaration: a new setting reaches `Plan` (copied, or by its declared
    expression), a search configuration's request and a published run's request without another edit."""
    from pplan.plan.copies import plan_source, request_source, settings_read

    derived = dataclasses.replace(DUMMY, plan="req.dummy_knob * 2")
    assert "dummy_knob=req.dummy_knob,\n" in plan_source((*SETTINGS, DUMMY))
    assert "dummy_knob=req.dummy_knob * 2,\n" in plan_source((*SETTINGS, derived))
    assert "dummy_knob=c.dummy_knob,\n" in request_source((*SETTINGS, DUMMY))
    assert "dummy_knob" not in plan_source() + request_source()
    # a published row states settings by name, as text or JSON values; the first source that states one wins
    read = settings_read(
        {"tp": "2", "precision": "FP8", "ep": None}, {"ep": 4, "tp": 8, "sequence_parallel": 0}
    )
    assert read == {"tp": 2, "precision": "fp8", "ep": 4, "sequence_parallel": False}


def test_a_search_for_a_plan_asks_its_question_on_its_stack() -> None:
    """`search_for`: the GPUs, batch, sequence, stack and TP overlap of the request, its precision, and the knobs."""
    from pplan.search.space import search_for

    req = PlanRequest(gpus=64, global_batch=128, tp=2, seq_len=4096, stack="torchtitan", tp_comm_overlap=True,
                      precision="fp8", jitter=0.01)  # fmt: skip
    got = search_for(req, top_n=3)
    assert (got.gpus, got.global_batch, got.seq_len, got.stack) == (64, 128, 4096, "torchtitan")
    assert got.tp_comm_overlap and got.precisions == ("fp8",) and got.top_n == 3
    assert got.tp is None and got.jitter == 0.0  # the cut and the model's allowances are the search's own
