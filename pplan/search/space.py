"""The search space of `pplan recommend`: what a query asks for (`SearchRequest`), one configuration to try
(`Candidate`), why a configuration is not in the answer (`Rejection`), and the enumeration of every
configuration a query allows.

Enumeration rules (each rejection counted under its reason): t divides the attention heads, the key/value heads
and the FFN width, and stays inside a node unless allowed; cp divides the sequence (and t·cp divides it under
sequence parallelism); t·p·cp divides the GPUs; b·d divides the global batch; p·v chunks split the layers evenly,
or Llama 3's way with one layer fewer on the first and last chunk, or where neither exists with the ends sharing what
⌈L/chunks⌉-layer inner chunks leave (`layer_splits`); every schedule family's rule on m (the
registry's). ZeRO stages and gradient dtypes are axes like the recompute mode: every one asked is tried (by
default ZeRO-0 to 3 and FP32 and BF16 gradients), the launcher keeping those it runs as costed. Full recompute
comes with its partial forms: the first N layers of every chunk, N = 1 up to the largest chunk (`_recompute_options`). Sequence parallelism is on whenever t > 1 (it moves the same bytes as the all-reduces it replaces
and keeps less memory, so turning it off is dominated) and flash attention is assumed. Without a pipeline
(p = 1) every schedule is the same plan, so only the first requested one is tried. Activation offload is an
axis too (`SearchRequest.offload`, by default only no offload): each module set asked is tried with every
recompute policy it can go with (not full recompute of every layer, which keeps nothing to offload).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, get_args

from pplan.errors import ConfigError
from pplan.frozen import changed
from pplan.model.precision import Precision
from pplan.plan.copies import request_constructor
from pplan.plan.knobs import (
    DEFAULT_RECOMPUTE_MODULES,
    CudaGraphScope,
    GradDtype,
    MoeDispatcher,
    OffloadModule,
    Recompute,
    RecomputeMethod,
    RecomputeModule,
)
from pplan.plan.records import PlanRequest
from pplan.plan.rules import (
    canonical_offload,
    check_choice,
    check_count,
    check_fraction,
    check_offload,
    recompute_label,
)
from pplan.plan.settings import SETTINGS
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.stacks import DEFAULT_STACK, StackName
from pplan.schedules import DEFAULT_SCHEDULES, ScheduleFamily, schedule_family, without_pipeline
from pplan.schedules.limits import MAX_PIPELINE_CHUNKS, MAX_PIPELINE_RANKS

GRAD_ORDER: tuple[GradDtype, ...] = ("bf16", "fp32")
"""The order a configuration's gradient dtypes are enumerated in: the FP32 twin waits behind the BF16 one."""
CONTEXT_PARALLEL = (1, 2, 4, 8)
MAX_CHUNK_LAYERS = 10**4
"""More layers than any chunk has (pplan.plan.rules.COUNT_LIMITS): "every layer" in `recompute_cost`."""


class Rejection(StrEnum):
    """Why a configuration is not in the answer; the value is what the report prints."""

    SEQUENCE_SPLIT = "sequence does not split over t·cp"
    GPUS_TCP = "GPUs not a multiple of t·cp"
    GPUS_TPCP = "GPUs not a multiple of t·p·cp"
    STAGES_LAYERS = "more stages than layers"
    PIPELINE_CAP = (
        f"more pipeline ranks or chunks than pplan simulates ({MAX_PIPELINE_RANKS} ranks, "
        f"{MAX_PIPELINE_CHUNKS} chunks)"
    )
    BATCH_SPLIT = "global batch not a multiple of b·d"
    FEW_MICROBATCHES = "fewer micro-batches than --min-microbatches"
    P_RULE = "schedule's rule on p"
    LAYER_SPLIT = "layers do not split into p·v chunks"
    EP_SPLIT = "ep·etp does not divide a stage's t·cp·d ranks"
    M_RULE = "schedule's rule on m"
    LAUNCHER = "the launcher cannot run it"
    EXTRAPOLATED = "outside the calibrated envelope on more axes than --max-extrapolation"
    DOMINATED = "FP32 twin of a BF16 configuration that is out of memory or below the top (not evaluated)"
    HIGHER_STAGE = "ZeRO-2/3 where the stage below fits (never slower; not evaluated)"
    MORE_RECOMPUTE = "more recompute where less fits (never faster; not evaluated)"
    INVALID = "refused by the plan's checks"
    MEMORY = "out of memory"
    BOUND = "slower than the top by a proven bound (not simulated)"
    BELOW_TOP = "ranked below the top"
    EQUIVALENT = (
        "same cut as a shown one: other ZeRO stage, grad dtype or dispatcher, or other b·cp within 0.1 %"
    )


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
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    """What `selective` re-runs (Megatron-LM `--recompute-modules`)."""
    partial_recompute: bool = True
    """With `full` asked: also try full recompute of the first N layers of every chunk (N from 1 up; the search
    evaluates N + 1 only when N is out of memory), as Megatron-LM's `--recompute-method block`."""
    empty_end_chunks: bool = False
    """Also try layer splits whose first or last chunk holds no layer, only the embedding or the output layer and
    loss (`layer_splits`), where no other split of the cut exists."""
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    """ZeRO stages to try (a launcher keeps the ones it runs as costed: pplan.launchers.support)."""
    grad_dtypes: tuple[GradDtype, ...] = ("fp32", "bf16")
    """Gradient dtypes to try: FP32 accumulation and reduction (Megatron's default) or BF16 (`--grad-reduce-in-bf16`,
    NeMo's recipes)."""
    min_microbatches: int = 1
    headroom_fraction: float = 0.0
    """Keep this fraction of usable HBM free on every stage."""
    launcher: str | None = None
    allow_cross_node_tp: bool = False
    top_n: int = 10
    split_p2p: bool = True
    """Separate exposed P2P time from the bubble in the shown candidates' breakdowns (one more simulation each;
    the step time is the same either way)."""
    offload: tuple[tuple[OffloadModule, ...], ...] = ((),)
    """Activation offload module sets to try (`()`: no offload; the default tries only that)."""
    hybrid_sharding: bool = True
    """With ZeRO ≥ 1: also try sharding over the data-parallel GPUs of one node and replicating across nodes (HSDP,
    `node_shard_group`) where full sharding fits: more memory, but the per-micro-batch reduce-scatters and gathers
    stay on NVLink."""
    keep_gathered: bool = True
    """With ZeRO-3: also try keeping the gathered weights from forward to backward (no resharding after forward:
    one gather per micro-batch instead of two) where resharding fits."""
    stack: StackName = DEFAULT_STACK
    """The software stack the plans run on (pplan.profiles.stacks)."""
    release: str | None = None
    """The stack's release priced (pplan.profiles.releases; None: its newest)."""
    tp_comm_overlap: bool = False
    """Plans with t > 1 overlap their tensor-parallel collectives with their GEMMs (the stack's switch)."""
    jitter: float = 0.0
    """The straggler allowance every plan carries (`PlanRequest.jitter`)."""
    max_extrapolation: int | None = None
    """Keep only configurations outside the calibrated envelope on at most this many axes
    (pplan.cost.uncertainty; 0: inside it); None keeps all, marked."""
    prefetch: bool = True
    """Build the schedules' periodic structures ahead on a second core where there is one (pplan.search.prefetch):
    the same answer, sooner."""
    ep: int | None = None
    """Routed models: the expert-parallel degree to use (None: every divisor of the experts that divides a stage's
    t·cp·d ranks); dense models: 1."""
    etp: int | None = None
    """Routed models: the expert tensor-parallel degree to use (None: 1, each expert whole on its rank, and t, each
    expert split like the dense layers, `expert_tensor_options`); dense models: 1."""
    precisions: tuple[Precision, ...] = ("bf16",)
    """GEMM precisions to try (BF16 unless asked: pplan.model.precision)."""
    moe_dispatcher: MoeDispatcher = "alltoall"
    """Routed models: the token dispatcher every plan uses (`PlanRequest.moe_dispatcher`)."""
    moe_dispatchers: tuple[MoeDispatcher, ...] = ()
    """Routed models: the token dispatchers to try (empty: `moe_dispatcher` alone); recommend runs the search once
    per dispatcher and ranks the union (pplan.recommend)."""
    moe_ep_overlap: bool = False
    """Routed models: every plan overlaps its expert all-to-all (`PlanRequest.moe_ep_overlap`)."""
    cuda_graph_scope: tuple[CudaGraphScope, ...] = ()
    """What CUDA graphs capture in every plan (`PlanRequest.cuda_graph_scope`)."""
    moe_permute_fusion: bool = False
    moe_router_fusion: bool = False
    moe_fused_grouped_mlp: bool = False
    moe_capacity_factor: float | None = None
    moe_force_balance: bool = False
    moe_imbalance: float = 1.0
    """The other MoE knobs every plan carries (`PlanRequest`'s fields of the same names)."""

    def __post_init__(self) -> None:
        """Refuse what no plan can have, naming the command-line flag (the API and the CLI refuse alike)."""
        if self.pp is not None and self.pp > MAX_PIPELINE_RANKS:
            raise ConfigError(
                "--pp", f"{self.pp:,} pipeline ranks is over pplan's cap of {MAX_PIPELINE_RANKS}",
                f"use --pp {MAX_PIPELINE_RANKS} or fewer",
            )  # fmt: skip
        for flag, value in (
            ("--gpus", self.gpus), ("--global-batch", self.global_batch), ("--seq-len", self.seq_len),
            ("--tp", self.tp), ("--pp", self.pp), ("--cp", self.cp), ("--vp", self.vp), ("--max-vp", self.max_vp),
            ("--micro-batch", self.micro_batch), ("--min-microbatches", self.min_microbatches), ("--top", self.top_n),
            ("--ep", self.ep), ("--etp", self.etp),
        ):  # fmt: skip
            if value is not None:
                check_count(flag, value)
        check_fraction("--jitter", self.jitter)
        check_fraction("--headroom", self.headroom_fraction)
        if not self.zero_stages or any(z not in (0, 1, 2, 3) for z in self.zero_stages):
            raise ConfigError("--zero-stage", f"stages must be among 0, 1, 2, 3, got {self.zero_stages}",
                              "e.g. --zero-stage 0,1")  # fmt: skip
        if not self.recompute:
            raise ConfigError("--recompute", "no recompute mode to try", "e.g. --recompute none,selective")
        for mode in self.recompute:
            check_choice("--recompute", mode, get_args(Recompute))
        if not self.grad_dtypes:
            raise ConfigError("--grad-dtype", "no gradient dtype to try", "e.g. --grad-dtype fp32,bf16")
        for dtype in self.grad_dtypes:
            check_choice("--grad-dtype", dtype, get_args(GradDtype))
        if not self.recompute_modules:
            raise ConfigError(
                "--recompute-modules", "no module to recompute", "e.g. --recompute-modules core_attn"
            )
        for module in self.recompute_modules:
            check_choice("--recompute-modules", module, get_args(RecomputeModule))
        for name in self.schedules or ():
            schedule_family(name)
        if not self.offload:
            raise ConfigError(
                "--offload-modules", "no offload setting to try", "e.g. --offload-modules qkv_linear"
            )
        for modules in self.offload:
            check_offload(modules, "none", "uniform", None)
        if not self.precisions:
            raise ConfigError("--precision", "no precision to try", "e.g. --precision bf16,fp8")
        for precision in self.precisions:
            check_choice("--precision", precision, get_args(Precision))


_SAME_QUESTION = tuple(
    (s.name, s.search.field)
    for s in SETTINGS
    if s.search is not None and s.search.form == "same" and s.concern in ("query", "stack")
)
"""The settings that pose a search's question on a stack (GPUs, batch, sequence, the stack and its switches): the
same in a plan's request and in the search for its peers (pplan.plan.settings)."""


def search_for(req: PlanRequest, **knobs: Any) -> SearchRequest:
    """The search for the plans that answer `req`'s question on `req`'s stack, at `req`'s GEMM precision, with the
    search `knobs` given (a launcher, how many to rank)."""
    same = {field: getattr(req, name) for name, field in _SAME_QUESTION}
    return SearchRequest(**same, precisions=(req.precision,), **knobs)


@dataclass(slots=True)
class Candidate:
    """One configuration of the search space (validated by the enumeration's rules).

    Read-only once made, but not a frozen dataclass (as `Cut`): a frozen `__init__` stores each of the 22 fields
    through `object.__setattr__`, about ten times a plain store, and the search makes ~12,000 cells a query. Not
    hashable (configurations are keyed by their `order` and sharding choices)."""

    family: ScheduleFamily
    t: int
    p: int
    cp: int
    d: int
    v: int
    b: int
    m: int
    first_layers: int | None
    last_layers: int | None
    recompute: Recompute
    zero: int
    grad_dtype: GradDtype = "fp32"
    recompute_layers: int | None = None
    """Full recompute of the first N layers of every chunk (Megatron-LM's block method); None: every layer."""
    most_layers: int = 1
    """Layers of the largest chunk (N runs from 1 to one short of it)."""
    order: tuple[int, ...] = ()
    """Its place in the enumeration order (t, cp, p, b, schedule asked, v, layer split, offload set asked,
    recompute asked, N, ZeRO, gradient dtype): the last tie-breaker, the same whether the search made it eagerly
    or on demand."""
    offload_modules: tuple[OffloadModule, ...] = ()
    """Activation offload: the modules whose saved inputs go to host memory (empty: none)."""
    shard_group: int | None = None
    """ZeRO ≥ 1 with hybrid sharding: the S GPUs each state is sharded over (None: all d·cp)."""
    reshard: bool = True
    """ZeRO-3: gathered weights freed after each unit's forward (False: kept until its backward)."""
    ep: int = 1
    """Routed models: the expert-parallel degree."""
    precision: Precision = "bf16"
    """The Linears' GEMM precision."""
    etp: int = 1
    """Routed models: the expert tensor-parallel degree."""

    def partial(self, n: int, rc_index: int) -> Candidate:
        """This configuration recomputing the first `n` layers of every chunk (`rc_index`: where `full` is in the
        recompute modes asked)."""
        order = (*self.order[:-4], rc_index, n, *self.order[-2:])
        return changed(self, recompute="full", recompute_layers=n, order=order)

    def more_recompute(self) -> Candidate | None:
        """The same configuration recomputing the first N + 1 layers of every chunk (None past the largest N)."""
        n = self.recompute_layers
        if n is None or n + 1 >= self.most_layers:
            return None
        return self.partial(n + 1, self.order[-4])

    @property
    def recompute_cost(self) -> int:
        """Orders a cut's recompute policies by what they re-run: none, selective (the attention core), the first
        N layers of every chunk, every layer (a tie-breaker, and the search's waiting chain)."""
        if self.recompute == "none":
            return 0
        if self.recompute == "selective":
            return 1
        return 1 + (self.recompute_layers or MAX_CHUNK_LAYERS)

    @property
    def recompute_label(self) -> str:
        method: RecomputeMethod = "block" if self.recompute_layers else "uniform"
        return recompute_label(self.recompute, self.recompute_layers, method, DEFAULT_RECOMPUTE_MODULES)

    @property
    def replica(self) -> int:
        """GPUs of one model replica, t·p·cp (the smaller wins a tie)."""
        return self.t * self.p * self.cp

    def request(self, q: SearchRequest, seq_len: int) -> PlanRequest:
        """The `PlanRequest` of this configuration under search request `q` at sequence length `seq_len`: one
        keyword per setting the search sets, generated from the settings declaration (pplan.plan.copies) and
        put in this method's place below the class."""
        raise NotImplementedError

    @property
    def sharding_order(self) -> tuple[int, int]:
        """Full sharding before hybrid, resharding before keeping the gathered weights (a tie-breaker)."""
        return int(self.shard_group is not None), int(not self.reshard)

    def summary(self) -> str:
        v = f" v={self.v}" if self.family.fixed_v is None else ""
        trim = f" layers {self.first_layers}/…/{self.last_layers}" if self.first_layers is not None else ""
        ep = (f" ep={self.ep}" if self.ep > 1 else "") + (f" etp={self.etp}" if self.etp > 1 else "")
        return (
            f"t={self.t} p={self.p}{v} cp={self.cp}{ep} {self.family.name}{trim} b={self.b} m={self.m} "
            f"recompute={self.recompute_label} zero={self.zero} grads={self.grad_dtype}"
            + (f" offload={'+'.join(self.offload_modules)}" if self.offload_modules else "")
            + (f" shard-group={self.shard_group}" if self.shard_group is not None else "")
            + ("" if self.reshard else " keep-gathered")
            + (f" precision={self.precision}" if self.precision != "bf16" else "")
        )


Candidate.request = request_constructor(  # type: ignore[method-assign]
    PlanRequest, {"DEFAULT_RECOMPUTE_MODULES": DEFAULT_RECOMPUTE_MODULES}
)


def node_shard_group(t: int, d: int, cp: int, gpus_per_node: int) -> int | None:
    """The hybrid-sharding group the search tries: the data-parallel GPUs of one node, S = GPUs per node / t (the
    d·cp group's members sit t apart, so S of them fill a node), when 2 ≤ S < d·cp and S divides d·cp; else None.
    `explain --shard-group` costs any S."""
    if gpus_per_node % t:
        return None
    s = gpus_per_node // t
    return s if 2 <= s < d * cp and (d * cp) % s == 0 else None


def group_successors(c: Candidate, req: SearchRequest) -> list[Candidate]:
    """A hybrid-sharded configuration's successors over the same shard group, tried when it is out of memory: the
    next ZeRO stage, and selective recompute after none. Their fully sharded bases may wait forever behind a
    configuration that fits, yet within the node they can beat it (never the same group's predecessor: it is out
    of memory)."""
    if c.shard_group is None or not c.reshard:
        return []
    o, out = c.order, []
    if c.zero + 1 in req.zero_stages:
        out.append(changed(c, zero=c.zero + 1, order=(*o[:-2], c.zero + 1, o[-1])))
    if c.recompute == "none" and "selective" in req.recompute:
        rc = req.recompute.index("selective")
        out.append(changed(c, recompute="selective", order=(*o[:-4], rc, MAX_CHUNK_LAYERS, *o[-2:])))
    return out


def sharding_variants(c: Candidate, req: SearchRequest, gpus_per_node: int) -> list[Candidate]:
    """`c` with one more memory-hungry sharding choice: hybrid sharding within a node (from full sharding,
    resharding), and for ZeRO-3 the gathered weights kept (from resharding). Each keeps more bytes on every rank
    than `c`, except that keeping a rank's gathered weights can cost less than the two-unit prefetch buffer on a
    rank with at most two units (pplan.cost.memory.plan_gathered_weights_bytes): the search checks that case."""
    out = []
    if c.zero >= 1 and c.shard_group is None and c.reshard and req.hybrid_sharding:
        s = node_shard_group(c.t, c.d, c.cp, gpus_per_node)
        if s is not None:
            out.append(changed(c, shard_group=s))
    if c.zero == 3 and c.reshard and req.keep_gathered:
        out.append(changed(c, reshard=False))
    return out


def divisors(n: int) -> list[int]:
    """Divisors of n in increasing order, by trial division up to √n."""
    small, large = [], []
    k = 1
    while k * k <= n:
        if n % k == 0:
            small.append(k)
            if k * k != n:
                large.append(n // k)
        k += 1
    return small + large[::-1]


def layer_splits(layers: int, chunks: int, empty_ends: bool = False) -> list[tuple[int | None, int | None]]:
    """(first, last) chunk layer counts: an even split and/or Llama 3's one-fewer-at-each-end split (Megatron's
    split with the embedding and the loss each counted as a layer, `--account-for-embedding-in-pipeline-split`
    and `--account-for-loss-in-pipeline-split`); where neither exists, the inner chunks take ⌈L/chunks⌉ layers
    each and the first and last share the rest, the first the larger half (DeepSeek-V3's 61 layers on 16 stages:
    3, 4, …, 4, 2; Megatron-LM's `--decoder-first/last-pipeline-num-layers`), each end keeping a layer. With
    `empty_ends` an end chunk may hold none, only the embedding or the output layer and loss: Llama 3.1 405B's
    126 layers on 128 chunks, 0, 1, …, 1, 0; DeepSeek-V3's 61 on 32, 1, 2, …, 2, 0
    (`SearchRequest.empty_end_chunks`: more cuts to search, so off by default)."""
    out: list[tuple[int | None, int | None]] = []
    least = 0 if empty_ends else 1
    if layers % chunks == 0:
        out.append((None, None))
    if chunks >= 3 and (layers + 2) % chunks == 0 and (layers + 2) // chunks >= least + 1:
        k = (layers + 2) // chunks
        out.append((k - 1, k - 1))
    if not out and 2 <= chunks <= layers:
        k = -(-layers // chunks)
        rest = layers - (chunks - 2) * k
        first, last = -(-rest // 2), rest // 2
        if least <= last <= first <= k:
            out.append((first, last))
    return out


def most_layers(layers: int, chunks: int, first: int | None, last: int | None) -> int:
    """Layers of the largest chunk of a split (`layer_splits`)."""
    if first is None or last is None:
        return layers // chunks
    inner = (layers - first - last) // (chunks - 2) if chunks > 2 else 0
    return max(first, last, inner)


def _v_options(fam: ScheduleFamily, req: SearchRequest, layers: int, p: int) -> list[int]:
    if fam.fixed_v is not None:
        return [fam.fixed_v] if req.vp in (None, fam.fixed_v) else []
    if req.vp is not None:
        return [req.vp] if req.vp >= 2 else []
    most = (layers + 2 if req.empty_end_chunks else layers) // p
    return [
        v for v in range(2, min(req.max_vp, most) + 1) if layer_splits(layers, p * v, req.empty_end_chunks)
    ]


def tensor_parallel_options(model: ModelSpec, hw: HardwareSpec, req: SearchRequest) -> list[int]:
    heads, kv, ffn = model.num_attention_heads, model.kv_heads, model.ffn_hidden_size
    widths = f"the heads ({heads}), KV heads ({kv}) and FFN ({ffn})"
    if model.dense_layers_in(0, model.num_layers) == 0:
        # no dense MLP (every layer routed): its width splits nothing (pplan.plan.configuration)
        ffn, widths = heads, f"the heads ({heads}) and KV heads ({kv})"
    if req.tp is not None:
        if heads % req.tp or kv % req.tp or ffn % req.tp:
            raise ConfigError("--tp", f"t={req.tp} does not divide {widths}", "choose t dividing them all")
        return [req.tp]
    return [t for t in divisors(math.gcd(heads, kv, ffn)) if t <= hw.gpus_per_node or req.allow_cross_node_tp]


@dataclass(slots=True)
class Cut:
    """One way to cut the model (t, p, cp, d, v, b, schedule, layer split, offload set) with the lattice of options
    tried on it: recompute modes (`options`: index asked, mode, N), ZeRO stages and gradient dtypes, in
    enumeration order (recompute outermost, gradient dtype innermost). `cell(i)` is its i-th configuration, built
    only when asked (the search builds most cuts' few first cells only).

    Read-only once made, but not a frozen dataclass: a frozen `__init__` stores each field through
    `object.__setattr__`, about ten times the plain stores, and a search makes every cut its launcher may run
    (48,472 of DeepSeek-V3's 168,334 on 2,048 GPUs) while it makes only a few of their cells. The enumeration
    makes each layout once at b = m = 0 and each micro-batch size's cut from it (`at`). Not hashable (nothing
    keys on a cut)."""

    family: ScheduleFamily
    t: int
    p: int
    cp: int
    d: int
    v: int
    b: int
    m: int
    first_layers: int | None
    last_layers: int | None
    most_layers: int
    prefix: tuple[int, ...]
    """(t, cp, p, b, schedule asked, v, layer split, offload set asked, ep, etp, precision asked): the head of every
    cell's `order`."""
    offload: tuple[OffloadModule, ...]
    options: tuple[tuple[int, Recompute, int | None], ...]
    zeros: tuple[int, ...]
    grads: tuple[GradDtype, ...]
    ep: int = 1
    precision: Precision = "bf16"
    etp: int = 1

    def __len__(self) -> int:
        return len(self.options) * len(self.zeros) * len(self.grads)

    @property
    def pattern(self) -> tuple[object, ...]:
        """The lattice's shape: cuts with the same pattern order their cells alike."""
        return self.options, self.zeros, self.grads, self.family.tuned

    def choices(self, i: int) -> tuple[int, Recompute, int | None, int, GradDtype]:
        """The i-th cell's (recompute index asked, recompute, N, ZeRO stage, gradient dtype), without the cell."""
        rest, g = divmod(i, len(self.grads))
        o, z = divmod(rest, len(self.zeros))
        rc_index, recompute, n = self.options[o]
        return rc_index, recompute, n, self.zeros[z], self.grads[g]

    def at(self, b: int, m: int) -> Cut:
        """This cut with micro-batch size b and m micro-batches (`enumerate_cuts` makes each b's from b = 0)."""
        prefix = self.prefix
        return Cut(
            self.family, self.t, self.p, self.cp, self.d, self.v, b, m, self.first_layers, self.last_layers,
            self.most_layers, (*prefix[:3], b, *prefix[4:]), self.offload, self.options, self.zeros, self.grads,
            self.ep, self.precision, self.etp,
        )  # fmt: skip

    def cell(self, i: int) -> Candidate:
        rc_index, recompute, n, zero, grads = self.choices(i)
        order = (*self.prefix, rc_index, n or MAX_CHUNK_LAYERS, zero, GRAD_ORDER.index(grads))
        return Candidate(
            self.family, self.t, self.p, self.cp, self.d, self.v, self.b, self.m, self.first_layers,
            self.last_layers, recompute, zero, grads, n, self.most_layers, order, self.offload,
            ep=self.ep, precision=self.precision, etp=self.etp,
        )  # fmt: skip


def enumerate_candidates(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    seq: int,
    rejected: Counter[Rejection],
    every_partial: bool = True,
) -> Iterator[Candidate]:
    """Every configuration the query allows, in a fixed order; the ones broken by a rule counted in `rejected`.
    Each cell of a cut is followed by its sharding variants (`sharding_variants`, and theirs).
    `every_partial=False` yields no partial recompute when `none` is asked too, and only N = 1 otherwise: the search
    makes the least N that may fit when no recompute (or N − 1) is out of memory (`pplan.search.Query.least_partial`)."""
    for cut in enumerate_cuts(model, hw, req, seq, rejected, every_partial):
        for i in range(len(cut)):
            cell = cut.cell(i)
            yield cell
            more = sharding_variants(cell, req, hw.gpus_per_node)
            while more:
                variant = more.pop(0)
                yield variant
                more += sharding_variants(variant, req, hw.gpus_per_node)


def enumerate_cuts(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    seq: int,
    rejected: Counter[Rejection],
    every_partial: bool = True,
) -> Iterator[Cut]:
    """`enumerate_candidates` a cut at a time: every cell of every cut, in the same order."""
    for layout, b, m in enumerate_layouts(model, hw, req, seq, rejected, every_partial):
        yield layout.at(b, m)


def enumerate_layouts(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    seq: int,
    rejected: Counter[Rejection],
    every_partial: bool = True,
) -> Iterator[tuple[Cut, int, int]]:
    """`enumerate_cuts` as (the cut at b = m = 0, b, m): the same object for every b of a layout, so that what does
    not read b is asked of it once (the cut is `layout.at(b, m)`)."""
    for layouts, b, m in enumerate_layout_groups(model, hw, req, seq, rejected, every_partial):
        for layout in layouts:
            yield layout, b, m


def enumerate_layout_groups(
    model: ModelSpec,
    hw: HardwareSpec,
    req: SearchRequest,
    seq: int,
    rejected: Counter[Rejection],
    every_partial: bool = True,
) -> Iterator[tuple[list[Cut], int, int]]:
    """`enumerate_layouts` a group at a time: (the layouts of one (t, cp, p, d), schedule family and v, b, m), the
    same list object for every b, in enumeration order. Its layouts share their family, p and m (what a launcher's
    rule on m reads), so a search asks that once per group (pplan.search.engine)."""
    families = [schedule_family(n) for n in (req.schedules or DEFAULT_SCHEDULES)]
    cps = [req.cp] if req.cp is not None else list(CONTEXT_PARALLEL)
    grads = tuple(sorted(req.grad_dtypes, key=GRAD_ORDER.index))  # BF16 first: pplan.search
    for t in tensor_parallel_options(model, hw, req):
        for cp in cps:
            if seq % cp or (t > 1 and (seq // cp) % t):
                rejected[Rejection.SEQUENCE_SPLIT] += 1
                continue
            if req.gpus % (t * cp):
                rejected[Rejection.GPUS_TCP] += 1
                continue
            for p in [req.pp] if req.pp is not None else divisors(req.gpus // (t * cp)):
                if req.gpus % (t * cp * p):
                    rejected[Rejection.GPUS_TPCP] += 1
                    continue
                if p > model.num_layers:
                    rejected[Rejection.STAGES_LAYERS] += 1
                    continue
                if p > MAX_PIPELINE_RANKS:  # explain would refuse it (pplan.schedules.limits)
                    rejected[Rejection.PIPELINE_CAP] += 1
                    continue
                d = req.gpus // (t * cp * p)
                # ascending: pplan.search chains the stages; nothing to shard over without data parallelism
                zeros = tuple(
                    z for z in sorted(req.zero_stages) if not (z and d * cp == 1 and 0 in req.zero_stages)
                )
                if req.global_batch % d:  # no micro-batch splits the batch over d replicas
                    rejected[Rejection.BATCH_SPLIT] += 1
                    continue
                layouts = _pipelines(model, req, families, (t, cp, p, d), zeros, grads, every_partial)
                for b in (
                    [req.micro_batch] if req.micro_batch is not None else divisors(req.global_batch // d)
                ):
                    if req.global_batch % (b * d):
                        rejected[Rejection.BATCH_SPLIT] += 1
                        continue
                    m = req.global_batch // (b * d)
                    if m < req.min_microbatches:
                        rejected[Rejection.FEW_MICROBATCHES] += 1
                        continue
                    for item in layouts:
                        if isinstance(item, Rejection):
                            rejected[item] += 1
                        elif p > 1 and item[0].m_problem(p, m) is not None:
                            rejected[Rejection.M_RULE] += 1
                        else:
                            rejected[Rejection.EP_SPLIT] += item[2]
                            yield item[1], b, m


Layouts = list[Rejection | tuple[ScheduleFamily, list[Cut], int]]
"""What `_pipelines` finds of a (t, cp, p, d), in enumeration order: each rejection, and each schedule family's
and v's cuts with the expert splits they leave out (both only where the family's rule on m passes)."""


def _pipelines(
    model: ModelSpec,
    req: SearchRequest,
    families: list[ScheduleFamily],
    dims: tuple[int, int, int, int],
    zeros: tuple[int, ...],
    grads: tuple[GradDtype, ...],
    every_partial: bool,
) -> Layouts:
    """The cuts of (t, cp, p, d) at b = m = 0 (each micro-batch size's are these with its b and m), and the rules
    that break the others, in enumeration order: none of it reads b."""
    t, cp, p, d = dims
    layers = model.num_layers
    eps = expert_parallel_options(model, req, t * cp * d)
    if not eps:
        return [Rejection.EP_SPLIT]
    out: Layouts = []
    expert_splits = [(ep, expert_tensor_options(model, req, t, ep, t * cp * d)) for ep in eps]
    offloads = [canonical_offload(offload) for offload in req.offload]
    for fam_index, fam in enumerate(families if p > 1 else families[:1]):
        fam_here = fam if p > 1 else without_pipeline()
        for v in _v_options(fam, req, layers, p) if p > 1 else [1]:
            if p > 1 and fam.p_problem(p) is not None:
                out.append(Rejection.P_RULE)
                continue
            n_chunks = p if fam.placement == "dual" else p * v
            if n_chunks > MAX_PIPELINE_CHUNKS:
                out.append(Rejection.PIPELINE_CAP)
                continue
            splits = layer_splits(layers, n_chunks, req.empty_end_chunks) if p > 1 else [(None, None)]
            if not splits:
                out.append(Rejection.LAYER_SPLIT)
                continue
            cuts: list[Cut] = []
            no_etp = 0
            for split, (first, last) in enumerate(splits):
                most = most_layers(layers, n_chunks, first, last)
                options = _recompute_options(req, most, every_partial)
                for off_index, offload in enumerate(offloads):
                    kept = tuple(
                        (rc_index, recompute, n)
                        for rc_index, (recompute, n) in options
                        if not (offload and recompute == "full" and n is None)
                    )  # every layer a checkpoint: nothing to offload (PlanRequest refuses it)
                    for ep, etps in expert_splits:
                        no_etp += not etps
                        for etp in etps:
                            for prec_index, precision in enumerate(req.precisions):
                                cuts.append(Cut(
                                    fam_here, t, p, cp, d, v, 0, 0, first, last, most,
                                    (t, cp, p, 0, fam_index, v, split, off_index, ep, etp, prec_index), offload,
                                    kept, zeros, grads, ep, precision, etp,
                                ))  # fmt: skip
            out.append((fam, cuts, no_etp))
    return out


def expert_parallel_options(model: ModelSpec, req: SearchRequest, stage_ranks: int) -> list[int]:
    """The expert-parallel degrees tried: for a routed model every divisor of its experts that divides a stage's
    t·cp·d ranks (megatron-core folds ep onto them), or the one asked; 1 for a dense model."""
    if model.moe is None:
        return [1]
    if req.ep is not None:  # it divides the experts (`top_configurations` checks it)
        return [req.ep] if stage_ranks % req.ep == 0 else []
    return [e for e in divisors(model.moe.num_experts) if stage_ranks % e == 0]


def expert_tensor_options(
    model: ModelSpec, req: SearchRequest, t: int, ep: int, stage_ranks: int
) -> list[int]:
    """The expert tensor-parallel degrees tried with tensor parallelism t and expert parallelism ep: 1 (each expert
    whole on its rank, as DeepSeek-V3's and Megatron's MoE recipes run) and t (each expert split over the t ranks
    like the dense layers: megatron-core's default, `--expert-tensor-parallel-size` unset), or the one asked; those
    dividing the experts' width with ep·etp dividing a stage's t·cp·d ranks (`check_expert_split`). 1 for a dense
    model."""
    if model.moe is None:
        return [1]
    asked = [req.etp] if req.etp is not None else sorted({1, t})
    width = model.moe.expert_ffn_hidden_size
    return [e for e in asked if width % e == 0 and stage_ranks % (ep * e) == 0]


def _recompute_options(
    req: SearchRequest, most_layers: int, every_partial: bool
) -> list[tuple[int, tuple[Recompute, int | None]]]:
    """(index asked, (mode, N)) in the order asked; `full` preceded by the first 1, 2, … N layers of every chunk
    (block), up to one layer short of the largest chunk (N = all is plain full recompute); unless `every_partial`,
    none when `none` is asked (the search makes them on demand) and N = 1 otherwise."""
    out: list[tuple[int, tuple[Recompute, int | None]]] = []
    for i, mode in enumerate(req.recompute):
        if mode == "full" and req.partial_recompute and (every_partial or "none" not in req.recompute):
            last = most_layers if every_partial else min(2, most_layers)
            out += [(i, ("full", n)) for n in range(1, last)]
        out.append((i, (mode, None)))
    return out
