"""Two `pplan explain` reports side by side, term by term (`pplan compare`): the cut of each, every part of the step
time (the report's breakdown), throughput, MFU and bubble, and the memory of each plan's most loaded stage part by
part, with B − A and B / A, so a user sees which terms make one plan faster or leaner than the other.

Reads two `pplan.explain` documents and nothing else: the terms are the documents' own numbers, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def delta(self) -> float:
        return self.b - self.a

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
    return terms
