"""`recommend`'s engine: enumerate every (t, p, d, v, cp, schedule, b, recompute, ZeRO) for a GPU count and a
global batch, screen them with cached closed forms, then rank the best on simulated timelines.

Two passes, because a full evaluation (explicit schedule, simulated timeline, step time) costs milliseconds and
a large cluster has tens of thousands of configurations:
1. Screening, per candidate a few arithmetic operations over cached parts: parameters per rank, per-layer
   activation bytes and pass times (pplan.passtime, pplan.activations) keyed by (t, cp, b, recompute); stage 0's
   micro-batches in flight and the bubble from the schedule's closed form; gradient sync and the optimizer step
   as in pplan.steptime. Candidates whose screened memory exceeds usable HBM by more than SCREEN_MARGIN are
   rejected here; the rest are ordered by screened throughput.
2. The best screened candidates, SIMULATE_BATCH at a time (until no screened estimate left can reach the top N
   within SCREEN_TOLERANCE), go through `estimate.explain` (the very numbers
   `pplan explain` prints): memory measured off the simulated schedule, step time off the simulated timeline.
   They are ranked by predicted tokens/s; ties go to less peak memory, then to the smaller model replica (t·p·cp).
Every rejected configuration is counted under a reason; the nearest misses on memory are kept.
Sequence parallelism is on whenever t > 1 (it moves the same bytes as the all-reduces it replaces and keeps less
memory, so turning it off is dominated) and flash attention is assumed. Enumeration rules: t divides the attention heads, the key/value heads and the FFN width, and stays inside a node
unless allowed; cp divides the sequence (and t·cp divides it under sequence parallelism); p·v chunks split the
layers evenly, or Llama 3's way with one layer fewer on the first and last chunk; every schedule's rule on m.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from pplan import activations as act
from pplan import closed_forms
from pplan.errors import ConfigError, PplanError
from pplan.estimate import explain_with_run, performance
from pplan.links import all_gather_s, all_reduce_s, dp_group
from pplan.memory import GRAD_BYTES, OPTIMIZER_BYTES, WEIGHT_BYTES
from pplan.params import embedding_params, layer_params, output_params
from pplan.passtime import layer_pass_times, output_pass_times
from pplan.pipeline_sim import PipelineRun
from pplan.plan import GradDtype, Plan, PlanRequest, Recompute, Shape
from pplan.results import ExplainReport
from pplan.schedules import FAMILIES, ScheduleFamily, schedule_family
from pplan.specs import HardwareSpec, ModelSpec
from pplan.steptime import ADAM_BYTES_PER_PARAM

DEFAULT_SCHEDULES = (
    "1f1b",
    "interleaved-1f1b",
    "interleaved-zb",
    "zb-h1",
    "zb-h2",
    "zbv",
    "dualpipev",
    "dualpipe",
)
"""GPipe (same time as 1F1B, more memory) and looped BFS are searched only when asked for."""
MICRO_BATCHES = (1, 2, 4, 8)
CONTEXT_PARALLEL = (1, 2, 4, 8)
SCREEN_MARGIN = 1.10
"""Screened memory may exceed usable HBM by this factor before a candidate is dropped (the closed forms are
approximate; the simulated check that follows is exact)."""
SIMULATE_BATCH = 8
MAX_SIMULATED = 64
"""Hard cap on simulations when the top N is not yet full of distinct configurations."""
SCREEN_TOLERANCE = 0.15
"""Before any candidate is simulated, the screening is taken to understate throughput by up to this much; after,
by the smallest screened / simulated ratio seen. Batches are simulated until the next screened estimate, so
corrected, cannot reach the current top N (or `max_simulated` is reached)."""


@dataclass(frozen=True, slots=True)
class SearchRequest:
    gpus: int
    global_batch: int
    seq_len: int | None = None
    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    vp: int | None = None
    max_vp: int = 8
    micro_batch: int | None = None
    schedules: tuple[str, ...] | None = None
    recompute: tuple[Recompute, ...] = ("none", "selective", "full")
    zero_stages: tuple[int, ...] = (0, 1)
    grad_dtype: GradDtype = "fp32"
    min_microbatches: int = 1
    headroom_fraction: float = 0.0
    """Keep this fraction of usable HBM free on every stage."""
    launcher: str | None = None
    allow_cross_node_tp: bool = False
    top_n: int = 10
    max_simulated: int = 16
    """Once the top N is full, simulate no more than this many in all."""
    split_p2p: bool = True
    """Separate exposed P2P time from the bubble in the shown candidates' breakdowns (one more simulation each;
    the step time is the same either way)."""
    """At most this many screened candidates are simulated."""


@dataclass(frozen=True, slots=True)
class Miss:
    """A configuration rejected for memory, with how far over it was."""

    summary: str
    need_bytes: float
    usable_bytes: float


@dataclass(frozen=True, slots=True)
class Candidate:
    """A configuration that fits, with the full `explain` of it."""

    request: PlanRequest
    report: ExplainReport
    plan: Plan | None = None
    run: PipelineRun | None = None


@dataclass
class SearchResult:
    candidates: list[Candidate]
    rejected: Counter[str] = field(default_factory=Counter)
    closest_misses: list[Miss] = field(default_factory=list)
    enumerated: int = 0
    screened_feasible: int = 0
    simulated: int = 0


@dataclass(frozen=True, slots=True)
class _Screened:
    request: PlanRequest
    tokens_per_s: float
    memory_bytes: float
    replica: int


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _layouts(layers: int, chunks: int) -> list[tuple[int | None, int | None]]:
    """(first, last) chunk layer counts: an even split and/or Llama 3's one-fewer-at-each-end split."""
    out: list[tuple[int | None, int | None]] = []
    if layers % chunks == 0:
        out.append((None, None))
    if chunks >= 3 and (layers + 2) % chunks == 0 and (layers + 2) // chunks >= 2:
        k = (layers + 2) // chunks
        out.append((k - 1, k - 1))
    return out


def _v_options(kind: ScheduleFamily, req: SearchRequest, layers: int, p: int) -> list[int]:
    if kind.fixed_v is not None:
        return [kind.fixed_v] if req.vp in (None, kind.fixed_v) else []
    if req.vp is not None:
        return [req.vp] if req.vp >= 2 else []
    return [v for v in range(2, req.max_vp + 1) if _layouts(layers, p * v)]


class _Screen:
    """Cached parts of the screening estimate for one model on one hardware profile."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, seq_len: int) -> None:
        self.model, self.hw, self.seq_len = model, hw, seq_len
        self.usable = hw.usable_hbm_bytes
        self.layer_params = layer_params(model)
        self.emb_params = embedding_params(model)

    @lru_cache(maxsize=4096)  # noqa: B019  (one instance per search)
    def layer(
        self, t: int, cp: int, b: int, recompute: Recompute
    ) -> tuple[float, float, float, int, int, int, int]:
        """(F, I, W seconds per layer, activation bytes per layer, embedding and output ends bytes, working)."""
        shape = Shape(t, cp, self.seq_len, b, t > 1, True, recompute, "itemised")
        times = layer_pass_times(self.model, self.hw, shape)
        return (
            times.f_s,
            times.i_s,
            times.w_s,
            act.layer_activations(self.model, shape).total_bytes,
            act.embedding_end(self.model, shape).total_bytes,
            act.output_end(self.model, shape).total_bytes,
            act.recompute_working_bytes(self.model, shape),
        )

    @lru_cache(maxsize=1024)  # noqa: B019
    def output(self, t: int, cp: int, b: int) -> float:
        shape = Shape(t, cp, self.seq_len, b, t > 1, True, "none", "itemised")
        return output_pass_times(self.model, self.hw, shape).f_s * 3

    @lru_cache(maxsize=256)  # noqa: B019
    def params(self, t: int, p: int) -> tuple[float, float, float]:
        """Per-GPU parameters: one layer, the embedding end, the output end."""
        layer = sum(i.per_tp_rank(t) for i in self.layer_params)
        emb = sum(i.per_tp_rank(t) for i in self.emb_params)
        out = sum(i.per_tp_rank(t) for i in output_params(self.model, pipeline_parallel=p > 1))
        return layer, emb, out


def search(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    progress: Callable[[int, int], None] | None = None,
    launcher_reason: Callable[[str, PlanRequest, int], str | None] | None = None,
) -> SearchResult:
    """Every feasible configuration's rank, the top `req.top_n` fully explained, and why the rest failed.

    `launcher_reason(launcher, request, m)` returns why a launcher cannot run a plan (None when it can).
    """
    seq = req.seq_len or model.seq_len
    result = SearchResult(candidates=[])
    screen = _Screen(model, hw, seq)
    screened: list[_Screened] = []
    misses: list[Miss] = []
    for item in _enumerate(model, hw, req, seq, result.rejected):
        result.enumerated += 1
        kind, t, p, cp, d, v, b, m, first, last, recompute, zero = item
        plan_req = PlanRequest(
            gpus=req.gpus, global_batch=req.global_batch, micro_batch=b, tp=t, pp=p, vp=v if kind.fixed_v is None else None,
            cp=cp, schedule=kind.name, seq_len=seq, recompute=recompute, zero_stage=zero, grad_dtype=req.grad_dtype,
            first_stage_layers=first, last_stage_layers=last,
        )  # fmt: skip
        if req.launcher and launcher_reason is not None:
            why = launcher_reason(req.launcher, plan_req, m)
            if why:
                result.rejected[why] += 1
                continue
        est = _estimate(screen, kind, t, p, cp, d, v, b, m, first, recompute, zero, req)
        tokens_per_s, mem = est
        if mem > screen.usable * (1 - req.headroom_fraction) * SCREEN_MARGIN:
            result.rejected["out of memory (screened)"] += 1
            misses.append(Miss(_summary(plan_req, m), mem, screen.usable))
            continue
        screened.append(_Screened(plan_req, tokens_per_s, mem, t * p * cp))
    result.screened_feasible = len(screened)
    screened.sort(key=lambda c: (-c.tokens_per_s, c.memory_bytes, c.replica))
    accepted: list[Candidate] = []
    ratio_floor = 1 - SCREEN_TOLERANCE
    limit = min(len(screened), MAX_SIMULATED)
    for start in range(0, limit, SIMULATE_BATCH):
        distinct = _distinct(accepted, req.top_n)
        if len(distinct) >= req.top_n:
            kth = min(c.report.performance.tokens_per_s for c in distinct if c.report.performance)
            if start >= req.max_simulated or screened[start].tokens_per_s / ratio_floor < kth:
                break  # nothing left could reach the top, judged by the screening's smallest overestimate so far
        for cand in screened[start : min(start + SIMULATE_BATCH, limit)]:
            result.simulated += 1
            if progress:
                progress(result.simulated, limit)
            try:
                report, plan, run = explain_with_run(
                    model, hw, cand.request, with_sensitivity=False, split_p2p=False
                )
            except PplanError as err:
                result.rejected[f"invalid: {err.field}"] += 1
                continue
            floor = report.memory.usable_bytes * req.headroom_fraction
            worst = min(report.memory.stages, key=lambda s: s.headroom_bytes)
            if worst.headroom_bytes < floor:
                result.rejected["out of memory (simulated)"] += 1
                misses.append(
                    Miss(
                        _summary(cand.request, report.plan.num_microbatches),
                        worst.total_bytes + floor,
                        report.memory.usable_bytes,
                    )
                )
                continue
            accepted.append(Candidate(cand.request, report, plan, run))
            if report.performance:
                ratio_floor = min(ratio_floor, cand.tokens_per_s / report.performance.tokens_per_s)
    result.rejected["not simulated (screened lower)"] += len(screened) - result.simulated
    shown = _distinct(accepted, req.top_n)
    for ranked in accepted:
        if any(ranked is kept for kept in shown):
            continue
        if any(_equivalent(ranked, kept) for kept in shown):
            result.rejected["same as a shown one but for b·cp (equal throughput)"] += 1
        else:
            result.rejected["ranked below the top"] += 1
    # The shown few get the full breakdown (exposed P2P separated from the bubble): one more simulation each.
    result.candidates = [_with_p2p_split(model, hw, c) for c in shown] if req.split_p2p else shown
    misses.sort(key=lambda x: (x.need_bytes / x.usable_bytes, x.summary))
    nearest: list[Miss] = []
    for miss in misses:  # one line per distinct shortfall, not every b / cp variant of it
        if all(abs(miss.need_bytes - kept.need_bytes) > 0.005 * kept.need_bytes for kept in nearest):
            nearest.append(miss)
        if len(nearest) == 5:
            break
    result.closest_misses = nearest
    if result.rejected.get("not simulated (screened lower)") == 0:
        del result.rejected["not simulated (screened lower)"]
    if result.rejected.get("ranked below the top") == 0:
        del result.rejected["ranked below the top"]
    return result


def _with_p2p_split(model: ModelSpec, hw: HardwareSpec, c: Candidate) -> Candidate:
    assert c.plan is not None and c.run is not None
    perf = performance(model, hw, c.plan, c.run, with_sensitivity=False, split_p2p=True)
    return Candidate(c.request, c.report.model_copy(update={"performance": perf}))


def _distinct(accepted: list[Candidate], n: int) -> list[Candidate]:
    """The best `n` by rank, skipping any equivalent to a better one already taken."""
    out: list[Candidate] = []
    for cand in sorted(accepted, key=_rank_key):
        if len(out) == n:
            break
        if not any(_equivalent(cand, kept) for kept in out):
            out.append(cand)
    return out


def _equivalent(a: Candidate, b: Candidate) -> bool:
    """Same cut and schedule, throughput within 0.1 %: only how b, cp and d share the batch differs."""
    pa, pb = a.report.plan, b.report.plan
    same = (pa.tp, pa.pp, pa.vp, pa.schedule, pa.recompute, pa.zero_stage, pa.layers_per_chunk) == (
        pb.tp,
        pb.pp,
        pb.vp,
        pb.schedule,
        pb.recompute,
        pb.zero_stage,
        pb.layers_per_chunk,
    )
    ta, tb = a.report.performance, b.report.performance
    return (
        same
        and ta is not None
        and tb is not None
        and abs(ta.tokens_per_s - tb.tokens_per_s) <= 1e-3 * tb.tokens_per_s
    )


def _rank_key(c: Candidate) -> tuple[float, float, int]:
    r = c.report
    perf = r.performance
    assert perf is not None
    peak = max(s.total_bytes for s in r.memory.stages)
    return (-perf.tokens_per_s, peak, r.plan.tp * r.plan.pp * r.plan.cp)


def _summary(r: PlanRequest, m: int) -> str:
    v = f" v={r.vp}" if r.vp else ""
    return (
        f"t={r.tp} p={r.pp}{v} cp={r.cp} {r.schedule} b={r.micro_batch} m={m} recompute={r.recompute} "
        f"zero={r.zero_stage}"
    )


def _estimate(
    screen: _Screen,
    kind: ScheduleFamily,
    t: int,
    p: int,
    cp: int,
    d: int,
    v: int,
    b: int,
    m: int,
    first: int | None,
    recompute: Recompute,
    zero: int,
    req: SearchRequest,
) -> tuple[float, float]:
    """(screened tokens/s, screened peak bytes on the most loaded rank)."""
    model, hw = screen.model, screen.hw
    f, i, w, act_layer, emb_b, out_b, working = screen.layer(t, cp, b, recompute)
    layer_p, emb_p, out_p = screen.params(t, p)
    layers = model.num_layers
    dual = kind.placement == "dual"
    rank_layers = (2 if dual else 1) * layers / p
    first_rank_layers = rank_layers if first is None else rank_layers - 1
    ends_p = emb_p + (out_p if kind.placement in ("v", "dual") or p == 1 else 0)
    params0 = first_rank_layers * layer_p + ends_p
    params_max = max(params0, rank_layers * layer_p + (out_p if kind.placement == "loop" and p > 1 else 0))
    n = d * cp
    grad = GRAD_BYTES[req.grad_dtype]
    per_param = (
        (WEIGHT_BYTES / n if zero >= 3 else WEIGHT_BYTES)
        + (grad / n if zero >= 2 else grad)
        + (OPTIMIZER_BYTES / n if zero >= 1 else OPTIMIZER_BYTES)
    )
    stage_layers = layers / p
    in_flight = kind.in_flight(p, v, m)
    ends_act = emb_b + (out_b if kind.placement in ("v", "dual") or p == 1 else 0)
    gathered = 2 * layer_p * WEIGHT_BYTES if zero >= 3 else 0.0  # FSDP: running + prefetched layer
    mem = (
        params_max * per_param
        + in_flight * stage_layers * act_layer
        + in_flight * ends_act
        + working
        + gathered
    )

    out_t = screen.output(t, cp, b)
    stage_f, stage_i, stage_w = stage_layers * f, stage_layers * i, stage_layers * w
    per_mb = stage_f + stage_i + stage_w
    # The rank holding the output layer and loss sets the pace (one layer fewer when the ends are trimmed);
    # DualPipe spreads the loss over its two end ranks, half the micro-batches each.
    out_rank = per_mb - (f + i + w if first is not None else 0.0) + (out_t / 2 if dual else out_t)
    compute = m * max(per_mb, out_rank) if p > 1 else m * (per_mb + out_t)
    idle = 0.0
    if p > 1:
        fraction, _ = closed_forms.bubble_fractions(kind, p, v, m, stage_f, stage_i, stage_w)
        idle = fraction * m * per_mb
    link = dp_group(t, cp, d).link(hw)
    grads = params_max * grad
    sync = all_reduce_s(link, grads, n) if zero == 0 else all_gather_s(link, grads, n)
    window = stage_i + stage_w
    dp_s = max(0.0, sync - window)
    shard = params_max / n if zero >= 1 else params_max
    opt = shard * (ADAM_BYTES_PER_PARAM + grad) / (hw.gpu.hbm_bandwidth_gb_per_s * 1e9 * hw.efficiency.hbm)
    step = compute + idle + dp_s + opt
    return req.global_batch * screen.seq_len / step, mem


def _enumerate(
    model: ModelSpec, hw: HardwareSpec, req: SearchRequest, seq: int, rejected: Counter[str]
) -> Iterator[
    tuple[ScheduleFamily, int, int, int, int, int, int, int, int | None, int | None, Recompute, int]
]:
    names = req.schedules or DEFAULT_SCHEDULES
    kinds = [schedule_family(n) for n in names]
    heads, kv, ffn = model.num_attention_heads, model.kv_heads, model.ffn_hidden_size
    tps = (
        [req.tp]
        if req.tp
        else [
            t for t in _divisors(math.gcd(heads, kv, ffn)) if t <= hw.gpus_per_node or req.allow_cross_node_tp
        ]
    )
    if req.tp and (heads % req.tp or kv % req.tp or ffn % req.tp):
        raise ConfigError("--tp", f"t={req.tp} does not divide the heads ({heads}), KV heads ({kv}) and FFN ({ffn})",
                          "choose t dividing all three")  # fmt: skip
    cps = [req.cp] if req.cp else list(CONTEXT_PARALLEL)
    bs = [req.micro_batch] if req.micro_batch else list(MICRO_BATCHES)
    zeros = req.zero_stages
    for t in tps:
        for cp in cps:
            if seq % cp or (t > 1 and (seq // cp) % t):
                rejected["sequence does not split over t·cp"] += 1
                continue
            if req.gpus % (t * cp):
                rejected["GPUs not a multiple of t·cp"] += 1
                continue
            for p in [req.pp] if req.pp else _divisors(req.gpus // (t * cp)):
                if req.gpus % (t * cp * p):
                    rejected["GPUs not a multiple of t·p·cp"] += 1
                    continue
                if p > model.num_layers:
                    rejected["more stages than layers"] += 1
                    continue
                d = req.gpus // (t * cp * p)
                for b in bs:
                    if req.global_batch % (b * d):
                        rejected["global batch not a multiple of b·d"] += 1
                        continue
                    m = req.global_batch // (b * d)
                    if m < req.min_microbatches:
                        rejected[f"fewer than {req.min_microbatches} micro-batches"] += 1
                        continue
                    for kind in kinds:
                        if p == 1 and kind.name != kinds[0].name:
                            continue  # without a pipeline every schedule is the same plan
                        for v in _v_options(kind, req, model.num_layers, p) if p > 1 else [1]:
                            if kind.placement == "dual" and p % 2:
                                rejected[f"{kind.name}: needs an even p"] += 1
                                continue
                            n_chunks = p if kind.placement == "dual" else p * v
                            layouts = _layouts(model.num_layers, n_chunks) if p > 1 else [(None, None)]
                            if not layouts:
                                rejected["layers do not split into p·v chunks"] += 1
                                continue
                            if p > 1 and kind.m_problem(p, m) is not None:
                                rejected[f"{kind.name}: rule on m"] += 1
                                continue
                            for first, last in layouts:
                                for recompute in req.recompute:
                                    for zero in zeros:
                                        if zero and d * cp == 1:
                                            continue  # nothing to shard over
                                        k = kind if p > 1 else FAMILIES["1f1b"]
                                        yield (
                                            k,
                                            t,
                                            p,
                                            cp,
                                            d,
                                            v if p > 1 else 1,
                                            b,
                                            m,
                                            first,
                                            last,
                                            recompute,
                                            zero,
                                        )
