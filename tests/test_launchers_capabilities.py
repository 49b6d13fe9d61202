"""The launchers' declarations (pplan.launchers.capabilities): each names every value of each setting once (run,
with its arguments, or refused, with its text), agrees with the schedule registry and the stack maps below it,
declares arguments Megatron-LM's parser has and the writers emit, and is the only place pplan compares launcher
names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

from pplan.launchers.capabilities import (
    BY_NAME,
    DECLARATIONS,
    MEGATRON,
    RANKED,
    TORCHTITAN,
    TORCHTITAN_02,
    LauncherCapabilities,
    RecomputeKind,
    Setting,
    capabilities_of,
    recompute_kind,
)
from pplan.launchers.megatron import megatron_args
from pplan.launchers.megatron_validate import option_table
from pplan.launchers.names import LAUNCHERS
from pplan.launchers.support import RUN_CHECKED, SEARCH_TORCHTITAN_ZERO, request_unsupported_reason
from pplan.launchers.torchtitan import torchtitan_args, torchtitan_overrides
from pplan.model.precision import Precision
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import GradDtype, MomentDtype
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_model
from pplan.profiles.stacks import LAUNCHER_STACKS, launcher_for_stack, stack_for_launcher
from pplan.schedules import FAMILIES

PPLAN = Path(__file__).resolve().parents[1] / "pplan"
DECLARING = {PPLAN / "launchers" / "capabilities.py", PPLAN / "launchers" / "names.py"}
LLAMA = load_model("llama3-8b")

DOMAINS: dict[str, frozenset[Any]] = {
    "precision": frozenset(get_args(Precision)),
    "fp8_param_gather": frozenset({False, True}),
    "fp8_swiglu_input": frozenset({False, True}),
    "tp_comm_overlap": frozenset({False, True}),
    "moment_dtype": frozenset(get_args(MomentDtype)),
    "grad_dtype": frozenset(get_args(GradDtype)),
    "recompute": frozenset(get_args(RecomputeKind)),
    "activation_offload": frozenset({False, True}),
    "zero_stage": frozenset({0, 1, 2, 3}),
    "hybrid_sharding": frozenset({1, 2, 3}),
    "reshard_after_forward": frozenset({False, True}),
}
"""Every value each setting takes (hybrid sharding: the ZeRO stages a shard group goes with)."""


def test_the_declarations_are_the_launcher_names() -> None:
    assert tuple(c.name for c in DECLARATIONS) == LAUNCHERS == tuple(BY_NAME)
    assert RUN_CHECKED == tuple(c.name for c in RANKED) == ("megatron", "torchtitan")
    assert capabilities_of(" TorchTitan@0.2 ") is TORCHTITAN_02
    assert len({c.short for c in RANKED}) == len(RANKED)


@pytest.mark.parametrize("caps", DECLARATIONS, ids=LAUNCHERS)
def test_every_value_of_every_setting_is_run_or_refused_once(caps: LauncherCapabilities) -> None:
    for name, domain in DOMAINS.items():
        setting: Setting[Any] = getattr(caps, name)
        runs, refused = set(setting.runs), set(setting.refused)
        assert not runs & refused, (caps.name, name)
        assert runs | refused == domain, (caps.name, name)
    assert set(caps.float8_config_precisions) <= set(caps.precision.runs)
    assert caps.searched_zero_stages <= set(caps.zero_stage.runs)
    assert bool(caps.searched_zero_reason) == (caps.searched_zero_stages != DOMAINS["zero_stage"])


@pytest.mark.parametrize("caps", DECLARATIONS, ids=LAUNCHERS)
def test_the_schedules_are_the_registrys(caps: LauncherCapabilities) -> None:
    """Each family is run or refused (with its record's texts), as `ScheduleFamily.launchers` says for the
    project."""
    assert set(caps.schedules) | set(caps.schedule_refusals) == set(FAMILIES)
    assert not set(caps.schedules) & set(caps.schedule_refusals)
    assert set(caps.schedules) == {f.name for f in FAMILIES.values() if caps.project in f.launchers}
    for name, refusal in caps.schedule_refusals.items():
        assert refusal.reason == f"{caps.project} cannot run {name}"


@pytest.mark.parametrize("caps", DECLARATIONS, ids=LAUNCHERS)
def test_the_stack_maps_below_agree(caps: LauncherCapabilities) -> None:
    assert launcher_for_stack(caps.stack) == caps.project  # megatron-bridge's stack ranks Megatron-LM's rules
    assert LAUNCHER_STACKS[caps.name.partition("@")[0]] == caps.stack  # Megatron-Bridge: its own stack
    assert stack_for_launcher(caps.name) == caps.stack  # torchtitan@0.2 runs on torchtitan's stack too


@pytest.mark.parametrize(
    ("label", "kind"),
    [
        ("none", "none"),
        ("full", "full"),
        ("full(block 2)", "full(N)"),
        ("full(uniform 4)", "full(N)"),
        ("selective", "selective"),
        ("selective(core_attn+mlp)", "selective"),
    ],
)
def test_recompute_kinds(label: str, kind: str) -> None:
    assert recompute_kind(label) == kind


def _setting_arguments(caps: LauncherCapabilities) -> list[str]:
    out = [a for args in caps.schedules.values() for a in args] + list(caps.layouts)
    for name in DOMAINS:
        setting: Setting[Any] = getattr(caps, name)
        out += [a for args in setting.runs.values() for a in args]
    return out


def test_megatrons_declared_options_are_megatron_lm_options() -> None:
    """Every option the declaration names is one of Megatron-LM's parser (core_v0.16.1's bundled table)."""
    options = {f for o in option_table()["options"] for f in o["flags"]}
    declared = {a for a in _setting_arguments(MEGATRON) if a.startswith("--")}
    assert declared and declared <= options, declared - options


def _contains(args: list[str], part: tuple[str, ...]) -> bool:
    """`part` occurs in `args` in order (other arguments and the plan's values may come between)."""
    it = iter(args)
    return all(token in it for token in part)


MEGATRON_CASES: list[tuple[str, Any, dict[str, Any]]] = [
    *[("precision", p, {"precision": p}) for p in ("bf16", "fp8")],
    *[("grad_dtype", g, {"grad_dtype": g}) for g in ("fp32", "bf16")],
    *[("moment_dtype", m, {"moment_dtype": m}) for m in ("fp32", "bf16")],
    ("tp_comm_overlap", True, {"tp_comm_overlap": True, "tp": 2}),
    *[("zero_stage", z, {"zero_stage": z}) for z in range(4)],
    ("hybrid_sharding", 1, {"zero_stage": 1, "shard_group": 2}),
    ("activation_offload", True, {"offload_modules": ("core_attn",)}),
    *[("recompute", r, {"recompute": r}) for r in ("none", "full", "selective")],
    ("recompute", "full(N)", {"recompute": "full", "recompute_layers": 2, "recompute_method": "block"}),
]


@pytest.mark.parametrize(("setting", "value", "kw"), MEGATRON_CASES, ids=lambda x: str(x))
def test_megatron_writes_the_declared_arguments(setting: str, value: object, kw: dict[str, object]) -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=8, micro_batch=1, global_batch=32, **kw))  # type: ignore[arg-type]
    part = getattr(MEGATRON, setting).runs[value]
    assert _contains(megatron_args(LLAMA, plan), part), (setting, value, part)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_torchtitan_writes_the_declared_recompute(recompute: str) -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=8, micro_batch=1, global_batch=32, recompute=recompute))  # type: ignore[arg-type]
    assert _contains(torchtitan_args(LLAMA, plan), TORCHTITAN.recompute.runs[recompute])
    assert _contains(
        torchtitan_overrides(LLAMA, plan, "0.2").split(), TORCHTITAN_02.recompute.runs[recompute]
    )


@pytest.mark.parametrize("schedule", sorted(TORCHTITAN.schedules))
def test_torchtitan_writes_the_declared_schedule(schedule: str) -> None:
    kind = FAMILIES[schedule]
    vp = {"vp": 2} if kind.fixed_v is None else {}
    req = PlanRequest(gpus=8, pp=2, micro_batch=1, global_batch=64, schedule=schedule, **vp)  # type: ignore[arg-type]
    assert _contains(torchtitan_args(LLAMA, make_plan(LLAMA, req)), TORCHTITAN.schedules[schedule])


def test_a_search_skips_what_torchtitan_runs_only_as_fsdp() -> None:
    req = PlanRequest(gpus=8, micro_batch=1, global_batch=32, zero_stage=1)
    assert request_unsupported_reason("torchtitan", req, 4, LLAMA.num_layers, LLAMA) == SEARCH_TORCHTITAN_ZERO
    assert request_unsupported_reason("megatron", req, 4, LLAMA.num_layers, LLAMA) is None


LAUNCHER_NAMES = frozenset(LAUNCHERS) - {"megatron-bridge"}
"""megatron-bridge is a stack's name too, which the validation data sets compare as one."""


def _compares_a_launcher_name(node: ast.Compare) -> bool:
    for side in (node.left, *node.comparators):
        if isinstance(side, ast.Constant) and side.value in LAUNCHER_NAMES:
            return True
        if isinstance(side, ast.Tuple | ast.List | ast.Set) and any(
            isinstance(e, ast.Constant) and e.value in LAUNCHER_NAMES for e in side.elts
        ):
            return True
    return False


def test_no_launcher_name_is_compared_outside_the_declarations() -> None:
    """What a launcher runs is read off its declaration: no `launcher == "megatron"` anywhere else in pplan."""
    found = []
    for path in sorted(PPLAN.rglob("*.py")):
        if path in DECLARING:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(PPLAN.parent)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Compare) and _compares_a_launcher_name(node)
        ]
    assert not found


def test_the_package_imports_only_the_names() -> None:
    """`import pplan.launchers` (what the command line's `--launcher` choices need) loads no other pplan module."""
    probe = "import sys, pplan.launchers; print(sorted(m for m in sys.modules if m.startswith('pplan')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(["pplan", "pplan.launchers", "pplan.launchers.names"])
