"""Two `pplan explain` reports side by side, term by term (`pplan compare`): the cut of each, every part of the step
time (the report's breakdown), throughput, MFU and bubble, and the memory of each plan's most loaded stage part by
part, with B − A and B / A, so a user sees which terms make one plan faster or leaner than the other.

Reads two `pplan.explain` documents and nothing else: the terms are the documents' own numbers, unchanged.
Says why: the plan settings that differ (`changed_settings`), for each term that differs the changed settings
that drive it (`DRIVERS`, by the cost model's structure: e.g. the bubble moves with p, v, the schedule and m),
and whether the two step times are tied, B's step lying within A's interval (`tie`). `report_problem` is the
check a report read from a file must pass beyond its schema: positive parallel sizes, finite non-negative
times, throughput and memory, at least one stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pplan.documents.compare import CompareDocument, CompareTermOut, SettingChangeOut, TieOut
from pplan.documents.explain import ExplainReport, StageMemory

GB = 1e9

MEMORY_PARTS = (
    ("weights", "weights_bytes"),
    ("gradients", "grads_bytes"),
    ("optimizer states", "optimizer_bytes"),
    ("FP8 weight copies", "fp8_weight_cache_bytes"),
    ("activations", "activation_bytes"),
    ("model-end buffers", "extra_activation_bytes"),
    ("recompute transient", "recompute_working_bytes"),
    ("gathered weights", "gathered_weights_bytes"),
    ("offload buffers", "offload_buffer_bytes"),
    ("fragmentation", "fragmentation_bytes"),
    ("total", "total_bytes"),
)
"""A stage's memory parts as `StageMemory` names them (label, field); `total` is their sum."""


@dataclass(frozen=True, slots=True)
class Term:
    """One compared quantity: its group (step, throughput or memory), name, unit and both plans' values."""

    group: str
    name: str
    unit: str
    a: float
    b: float
    moved_by: tuple[str, ...] = field(default=())
    """The settings that differ between the plans and drive this term (`DRIVERS`); empty where none does."""

    @property
    def delta(self) -> float:
        return self.b - self.a

    @property
    def differs(self) -> bool:
        """Whether A and B differ beyond rounding (a part summed in another order is not a change)."""
        return not math.isclose(self.a, self.b, rel_tol=1e-9, abs_tol=1e-12)

    @property
    def ratio(self) -> float | None:
        """B / A (None where A is 0)."""
        return self.b / self.a if self.a else None


def cut(report: ExplainReport) -> str:
    """The plan's cut in one line: t, p, v, cp, ep, d, micro-batch, m, schedule, recompute, ZeRO stage."""
    p = report.plan
    return (
        f"t{p.tp} p{p.pp} v{p.vp} cp{p.cp} ep{p.ep} d{p.dp} b{p.micro_batch} m{p.num_microbatches} {p.schedule} "
        f"rc={p.recompute} Z{p.zero_stage} on {report.hardware.name}"
    )


SETTINGS = (
    "model", "hardware", "gpus", "tp", "pp", "dp", "vp", "cp", "ep", "etp", "schedule", "micro_batch",
    "num_microbatches", "global_batch", "seq_len", "recompute", "zero_stage", "grad_dtype", "moment_dtype",
    "precision", "sequence_parallel", "offload_modules", "shard_group", "stack", "overlap_p2p_comm", "release",
    "tp_comm_overlap", "moe_dispatcher", "moe_ep_overlap", "cuda_graph_scope", "moe_permute_fusion",
    "moe_router_fusion", "moe_fused_grouped_mlp", "moe_force_balance",
)  # fmt: skip
"""The settings compared, as the report's plan block names them (model and hardware: their names)."""

_ALWAYS = ("model", "hardware", "seq_len", "stack", "release")
_HOST = ("cuda_graph_scope", "moe_router_fusion", "moe_permute_fusion")
"""What sets a routed layer's host launches and syncs (pplan.cost.host), in its pass times."""
_MEMORY_STATES = (*_ALWAYS, "tp", "pp", "vp", "ep", "etp", "dp", "cp", "zero_stage", "shard_group")
_PASSES: dict[str, tuple[str, ...]] = {
    "compute": (*_ALWAYS, "tp", "cp", "ep", "etp", "dp", "gpus", "micro_batch", "global_batch", "precision", "pp", "vp",
                "sequence_parallel", *_HOST, "moe_fused_grouped_mlp", "moe_force_balance", "moe_ep_overlap",
                "moe_dispatcher"),
    "ep_comm": (*_ALWAYS, "ep", "etp", "tp", "cp", "micro_batch", "global_batch", "dp", "gpus", "moe_dispatcher",
                "moe_ep_overlap", "moe_force_balance", *_HOST),
    "recompute": (*_ALWAYS, "recompute", "tp", "cp", "micro_batch", "global_batch", "dp", "gpus", "precision"),
    "tp_comm": (*_ALWAYS, "tp", "sequence_parallel", "micro_batch", "cp", "global_batch", "dp", "gpus",
                "tp_comm_overlap", "schedule"),
    "p2p": (*_ALWAYS, "pp", "vp", "schedule", "micro_batch", "num_microbatches", "tp", "cp", "overlap_p2p_comm"),
    "dp_comm": (*_ALWAYS, "dp", "cp", "zero_stage", "grad_dtype", "tp", "pp", "ep", "shard_group", "gpus"),
}  # fmt: skip
"""What sets each part of the busiest rank's passes and what follows them (pplan.cost.steptime)."""
DRIVERS: dict[str, tuple[str, ...]] = {
    **_PASSES,
    # the idle time between passes: the schedule's shape, and every pass's length (the simulated timeline's
    # makespan less the busiest rank's busy time), the gradient reduction overlapped with them included
    "bubble": tuple(dict.fromkeys([*_ALWAYS, "pp", "vp", "schedule", "num_microbatches", "micro_batch", "tp", "cp",
                                   "overlap_p2p_comm", *(n for names in _PASSES.values() for n in names)])),
    "optimizer": (*_ALWAYS, "dp", "cp", "zero_stage", "tp", "pp", "ep", "moment_dtype", "grad_dtype", "shard_group",
                  "gpus"),
    "weights": (*_MEMORY_STATES, "precision"),
    "gradients": (*_MEMORY_STATES, "grad_dtype"),
    "optimizer states": (*_MEMORY_STATES, "moment_dtype"),
    "FP8 weight copies": (*_MEMORY_STATES, "precision"),
    "activations": (*_ALWAYS, "micro_batch", "recompute", "tp", "cp", "pp", "vp", "schedule", "sequence_parallel",
                    "offload_modules", "precision"),
    "model-end buffers": (*_ALWAYS, "micro_batch", "tp", "cp", "pp", "vp", "schedule"),
    "recompute transient": (*_ALWAYS, "recompute", "micro_batch", "tp", "cp"),
    "gathered weights": (*_MEMORY_STATES, "precision"),
    "offload buffers": (*_ALWAYS, "offload_modules", "micro_batch", "tp", "cp"),
    # HBM less the CUDA context and one NCCL buffer per communicator (pplan.cost.usable.communicators)
    "usable": ("hardware", "gpus", "tp", "pp", "dp", "cp", "vp", "schedule", "zero_stage", "shard_group", "model"),
}  # fmt: skip
"""Which settings move each term, read off the cost model's structure; a term not named here (the step time,
throughput, totals) is moved by every changed setting that moves one of its parts."""


def settings(report: ExplainReport) -> dict[str, str]:
    """The report's settings (`SETTINGS`) as printable values."""
    plan = report.plan.model_dump()
    plan["model"], plan["hardware"] = report.model.name, report.hardware.name
    out = {}
    for name in SETTINGS:
        value = plan.get(name)
        out[name] = ",".join(value) or "none" if isinstance(value, list) else str(value)
    return out


def changed_settings(a: ExplainReport, b: ExplainReport) -> dict[str, tuple[str, str]]:
    """The settings whose values differ, with A's and B's."""
    sa, sb = settings(a), settings(b)
    return {name: (sa[name], sb[name]) for name in SETTINGS if sa[name] != sb[name]}


def _moved_by(term: str, changed: dict[str, tuple[str, str]], parts: list[Term]) -> tuple[str, ...]:
    drivers = DRIVERS.get(term)
    if drivers is None:  # a total: what moves any of its parts that moved
        seen = dict.fromkeys(name for part in parts if part.differs for name in part.moved_by)
        return tuple(name for name in changed if name in seen) or tuple(changed)
    return tuple(name for name in changed if name in drivers)


@dataclass(frozen=True, slots=True)
class Tie:
    """Whether B's step time lies within A's interval (the two plans tied at pplan's accuracy)."""

    tied: bool
    a_interval_s: tuple[float, float]
    b_step_s: float


def tie(a: ExplainReport, b: ExplainReport) -> Tie | None:
    """The tie test; None when a report has no step time."""
    if a.performance is None or b.performance is None:
        return None
    low, high = a.performance.step_interval_s
    step = b.performance.step_s
    return Tie(tied=low <= step <= high, a_interval_s=(low, high), b_step_s=step)


def report_problem(report: ExplainReport) -> str | None:
    """What makes a well-formed report unusable (module docstring), as "field: problem"; None when nothing."""
    plan = report.plan
    for name in ("tp", "pp", "dp", "vp", "cp", "ep", "etp", "micro_batch", "num_microbatches", "global_batch",
                 "gpus", "seq_len"):  # fmt: skip
        if getattr(plan, name) < 1:
            return f"plan.{name}: {getattr(plan, name)} is not a positive size"
    if not report.memory.stages:
        return "memory.stages: no stage"
    numbers: list[tuple[str, float]] = [
        ("pipeline.bubble_fraction_of_step", report.pipeline.bubble_fraction_of_step)
    ]
    for k, stage in enumerate(report.memory.stages):
        numbers.append((f"memory.stages.{k}.params", stage.params))
        numbers.append((f"memory.stages.{k}.in_flight_microbatches", stage.in_flight_microbatches))
    perf = report.performance
    if perf is not None:
        numbers += [("performance.step_s", perf.step_s), ("performance.tokens_per_s", perf.tokens_per_s),
                    ("performance.mfu", perf.mfu)]  # fmt: skip
        numbers += [(f"performance.step_interval_s.{k}", x) for k, x in enumerate(perf.step_interval_s)]
        numbers += [(f"performance.breakdown_s.{name}", x) for name, x in perf.breakdown_s.items()]
    for where, value in numbers:
        if not (math.isfinite(value) and value >= 0):
            return f"{where}: {value!r} is not a finite, non-negative number"
    if perf is not None and not perf.step_s > 0:
        return "performance.step_s: a step takes some time"
    return None


def _busiest(report: ExplainReport) -> StageMemory:
    return max(report.memory.stages, key=lambda s: s.total_bytes)


def compare_terms(a: ExplainReport, b: ExplainReport) -> list[Term]:
    """Every compared term, step-time parts first (in A's breakdown order, then B's own), then throughput, then
    the memory of each plan's most loaded stage (which may be a different rank in each)."""
    terms: list[Term] = []
    if a.performance is not None and b.performance is not None:
        pa, pb = a.performance, b.performance
        parts = list(dict.fromkeys([*pa.breakdown_s, *pb.breakdown_s]))
        terms += [
            Term("step", name, "s", pa.breakdown_s.get(name, 0.0), pb.breakdown_s.get(name, 0.0))
            for name in parts
        ]
        terms.append(Term("step", "step time", "s", pa.step_s, pb.step_s))
        terms += [
            Term("throughput", "tokens/s", "tokens/s", pa.tokens_per_s, pb.tokens_per_s),
            Term("throughput", "MFU (model FLOPs / peak)", "%", 100 * pa.mfu, 100 * pb.mfu),
        ]
    bubble_a, bubble_b = a.pipeline.bubble_fraction_of_step, b.pipeline.bubble_fraction_of_step
    terms.append(Term("throughput", "bubble (idle / step)", "%", 100 * bubble_a, 100 * bubble_b))
    sa, sb = _busiest(a), _busiest(b)
    terms += [
        Term("memory", label, "GB", getattr(sa, f) / GB, getattr(sb, f) / GB) for label, f in MEMORY_PARTS
    ]
    terms.append(Term("memory", "usable", "GB", a.memory.usable_bytes / GB, b.memory.usable_bytes / GB))
    return _with_causes(terms, changed_settings(a, b), stage_moved=sa.stage != sb.stage)


_STAGE_LOAD = tuple(dict.fromkeys(n for label, _ in MEMORY_PARTS if label in DRIVERS for n in DRIVERS[label]))
"""What sets a stage's memory, and so which stage is the most loaded."""


def _with_causes(
    terms: list[Term], changed: dict[str, tuple[str, str]], stage_moved: bool = False
) -> list[Term]:
    """Each differing term with the changed settings that drive it; totals after their parts. Where the most
    loaded stage is another rank in B (`stage_moved`), each memory part is that of another stage: what moved the
    load from one rank to the other moved it too."""
    out: list[Term] = []
    for term in terms:
        if not term.differs:
            out.append(term)
            continue
        parts = [t for t in out if t.group == term.group and t.name in DRIVERS]
        moved = _moved_by(term.name, changed, parts)
        if stage_moved and term.group == "memory" and term.name != "usable":
            moved = tuple(dict.fromkeys([*moved, *(n for n in changed if n in _STAGE_LOAD)]))
        out.append(Term(term.group, term.name, term.unit, term.a, term.b, moved))
    return out


def compare_document(a: ExplainReport, b: ExplainReport) -> CompareDocument:
    """The `pplan.compare/1` document of two reports."""

    tied = tie(a, b)
    return CompareDocument(
        a=cut(a),
        b=cut(b),
        changed=[SettingChangeOut(setting=k, a=va, b=vb) for k, (va, vb) in changed_settings(a, b).items()],
        terms=[
            CompareTermOut(
                group=t.group,
                name=t.name,
                unit=t.unit,
                a=t.a,
                b=t.b,
                delta=t.delta,
                ratio=t.ratio,
                moved_by=list(t.moved_by),
            )
            for t in compare_terms(a, b)
        ],
        tie=TieOut(tied=tied.tied, a_interval_s=tied.a_interval_s, b_step_s=tied.b_step_s) if tied else None,
    )
