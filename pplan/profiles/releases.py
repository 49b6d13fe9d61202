"""A software stack's releases as data: which release pplan prices, its software versions, and the knobs its
benchmark recipes run (pplan/profiles/releases.json, written by scripts/import_bridge_recipes.py from each
Megatron-Bridge release's own benchmark harness, NeMo containers 25.09 to 26.08: dispatcher, EP overlap, CUDA-graph
scope, fusions, capacity and balancing, gradient and moment dtypes, FP8 storage, overlaps, recompute).

`--stack megatron-bridge@26.06` (or `--release 26.06`) names a release; without one, a stack that has releases is
priced as its newest. A release's knobs are the defaults of the settings they name where the user leaves them at
their defaults (`release_defaults`): the recipe of the same model, GPU and precision where the release has one, else
the release's most common value over its recipes of the same kind (dense or routed) on that GPU, else on any GPU.
Only stack behaviour is taken from a recipe (`RELEASE_KNOBS`), never the plan's cut, sharding or recompute, which
are the plan's own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from pplan.errors import ConfigError

if TYPE_CHECKING:
    from pplan.plan.knobs import MoeDispatcher

RELEASE_KNOBS: frozenset[str] = frozenset(
    {
        "grad_dtype", "moment_dtype", "fp8_param_gather", "tp_comm_overlap", "overlap_grad_reduce",
        "overlap_param_gather", "cuda_graph_scope", "cross_entropy_fusion", "moe_dispatcher", "moe_ep_overlap",
        "moe_permute_fusion", "moe_router_fusion", "moe_fused_grouped_mlp", "moe_shared_expert_overlap",
        "moe_force_balance", "moe_paged_stash",
    }
)  # fmt: skip
"""The recipe knobs that are the stack's behaviour (what it overlaps, fuses, graphs and how it dispatches and
reduces); a release sets those of them that are plan settings (pplan.plan.settings) where the user does not. Not
the capacity factor: dropping tokens is a training choice, the user's to make."""


@dataclass(frozen=True, slots=True)
class Release:
    """One release of a stack."""

    stack: str
    name: str
    """The release as the stack's users name it (a NeMo container: "26.06")."""
    tag: str
    date: str | None
    megatron_core: str | None
    transformer_engine: str | None
    recipes: Mapping[str, Mapping[str, Any]] = field(repr=False)
    """The knobs of the release's recipe per "model hardware precision" (pplan's names)."""

    @property
    def label(self) -> str:
        """The release in one phrase, with the versions it pins."""
        versions = ", ".join(
            f"{what} {v}"
            for what, v in (("Megatron-Core", self.megatron_core), ("TE", self.transformer_engine))
            if v
        )
        return f"{self.stack} {self.name} ({self.tag}{'; ' + versions if versions else ''})"


@cache
def _table() -> dict[str, tuple[Release, ...]]:
    import json  # the table loads only when a release is asked for: `--help` builds options from the knob names
    from importlib import resources

    text = (resources.files("pplan.profiles") / "releases.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return {
        stack: tuple(
            Release(
                stack,
                r["name"],
                r["tag"],
                r.get("date"),
                r.get("megatron_core"),
                r.get("transformer_engine"),
                r["recipes"],
            )
            for r in rows
        )
        for stack, rows in data["stacks"].items()
    }


def releases(stack: str) -> tuple[Release, ...]:
    """The stack's releases, oldest first (none for a stack pplan has no release data for)."""
    return _table().get(stack, ())


def release_of(stack: str, name: str | None) -> Release | None:
    """The release `name` of `stack`, its newest when `name` is None; None for a stack without release data.
    An unknown name is a one-line ConfigError on `--release` (which `--stack NAME@RELEASE` also sets) listing the
    known ones."""
    known = releases(stack)
    if not known:
        if name is not None:
            raise ConfigError("--release", f"pplan has no releases of {stack}", f"drop {name!r}")
        return None
    if name is None:
        return known[-1]
    for r in known:
        if r.name == name:
            return r
    names = ", ".join(r.name for r in known)
    raise ConfigError("--release", f"{stack} has no release {name!r}", f"use one of {names}")


def _mode(values: Iterable[Any]) -> Any:
    import json

    counted = Counter(json.dumps(v, sort_keys=True) for v in values)
    return json.loads(counted.most_common(1)[0][0]) if counted else None


def release_defaults(
    release: Release, model: str, hardware: str, precision: str, routed: bool
) -> dict[str, Any]:
    """The stack knobs (`RELEASE_KNOBS`) `release` runs for `model` on `hardware` at `precision`: its recipe's
    where it has one, else the most common value over its recipes of the same kind on that GPU, else on any."""
    exact = release.recipes.get(f"{model} {hardware} {precision}")
    if exact is not None:
        return {k: v for k, v in exact.items() if k in RELEASE_KNOBS}
    same_kind = [r for r in release.recipes.values() if ("moe_dispatcher" in r) == routed]
    on_gpu = [r for key, r in release.recipes.items() if key.split()[1] == hardware and r in same_kind]
    pool = on_gpu or same_kind
    keys = sorted({k for r in pool for k in r} & RELEASE_KNOBS)
    return {k: _mode(r[k] for r in pool if k in r) for k in keys}


def release_changes(
    request: Mapping[str, Any], settings: Iterable[str], model: str, hardware: str, routed: bool
) -> dict[str, Any]:
    """The settings among `settings` (the plan settings the user left at their defaults) that the request's stack
    release sets for `model` on `hardware` (`release_defaults`), where the plan can take them: FP8 storage only on
    an FP8 plan below ZeRO-3, tensor-parallel overlap only with t > 1. Empty for a stack without releases."""
    release = release_of(request["stack"], request.get("release"))
    if release is None:
        return {}
    knobs = release_defaults(release, model, hardware, request["precision"], routed)
    out = {
        k: knobs[k] for k in settings if k in knobs and knobs[k] is not None and knobs[k] != request.get(k)
    }
    if request["precision"] == "bf16" or request.get("zero_stage") == 3:
        out.pop("fp8_param_gather", None)
    if request.get("tp", 1) == 1:
        out.pop("tp_comm_overlap", None)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


DISPATCHERS_FROM: Mapping[MoeDispatcher, int] = {"allgather": 0, "alltoall": 0, "deepep": 12, "hybridep": 15}
"""The megatron-core minor version each token dispatcher a Megatron-Bridge release can run arrived in (facts of
the Megatron-LM changelog: DeepEP in the flex dispatcher with 0.12, HybridEP with 0.15); NCCL EP is in no release
pplan has (Megatron-Bridge 0.7.1, NeMo 26.10.01)."""
DEEPEP_ABSENT = frozenset({"26.02"})
"""Releases whose container lacks DeepEP (Megatron-Bridge known issues, NeMo 26.02)."""
DEEPEP_GPUS_NOT = ("GB200", "GB300")
"""GPUs on which Megatron-Bridge skips DeepEP (`apply_flex_dispatcher_backend`: DeepEP only on Ampere, Hopper,
B200 and B300; megatron/bridge/training/flex_dispatcher_backend.py)."""


def core_minor(release: Release) -> int | None:
    """The minor version of the megatron-core a release pins (0.16.1 → 16), None where it states none."""
    import re

    found = re.search(r"\b0\.(\d+)", release.megatron_core or "")
    return int(found.group(1)) if found else None


def dispatcher_missing(release: Release, gpu_name: str, dispatcher: MoeDispatcher) -> str | None:
    """Why `release` does not run `dispatcher` on a GPU named `gpu_name` (a clause naming the source), or None
    where it does (NCCL EP and dispatchers pplan has no arrival for are not judged)."""
    since = DISPATCHERS_FROM.get(dispatcher)
    if since is None:
        return None
    minor = core_minor(release)
    if minor is not None and minor < since:
        return f"its megatron-core 0.{minor} predates {dispatcher} (0.{since}, the Megatron-LM changelog)"
    if dispatcher == "deepep" and release.name in DEEPEP_ABSENT:
        return "its container lacks DeepEP (Megatron-Bridge known issues)"
    if dispatcher == "deepep" and (gpu := next((g for g in DEEPEP_GPUS_NOT if g in gpu_name), None)):
        return (
            f"Megatron-Bridge skips DeepEP on {gpu} (apply_flex_dispatcher_backend: Ampere, Hopper, B200 and B300 "
            "only) and keeps the recipe's dispatcher"
        )
    return None


def release_dispatchers(release: Release, gpu_name: str) -> tuple[MoeDispatcher, ...]:
    """The token dispatchers `release` can run on a GPU named `gpu_name`, in pplan's order of the choices."""
    return tuple(d for d in DISPATCHERS_FROM if dispatcher_missing(release, gpu_name, d) is None)
