"""Published 2024–2026 pre-training runs at their published cuts, predicted (`pplan validate --recent`).

The runs (pplan/validation/recent_runs.json, built by scripts/import_recent_runs.py from each set's source: the
Megatron-Bridge performance summaries 25.09–26.08, NVIDIA's DGX Cloud benchmarks 24.12–25.04.01, NeMo's 24.07 and
25.x summaries and long-context runs, torchtitan's 2025 benchmarks, the DeepSeek-V3 report) are the jobs people plan
now: Llama 3 at 8k–1M tokens, FP8 and MXFP8, mixture-of-experts models, B200 and GB200. Three profile figures were
fitted to their dense rows (`RECENT_FITS`: GB200's BF16 and FP8 GEMM efficiencies, B200's FP8 one; no other public
step times exist for those GPUs); every other figure is out of sample. `leave_one_set_out` refits those three
without each set in turn, so each set is also predicted from fits it took no part in.

Each row becomes a plan from what its source states (cut, batch, sequence, precision, sharding where stated) and
these assumptions, printed per row: the micro-batch, where unstated, is the fastest that fits (as the recipes'
authors tune it); the recompute, where unstated, is the least of none and selective under which pplan's memory model
fits, else none (a run that then does not fit pplan's memory model is marked so: a memory-model miss);
the data-parallel ranks shard the optimizer (ZeRO-1, the recipes' distributed optimizer) unless the
source states FSDP (ZeRO-3); NVIDIA's recipes overlap tensor-parallel communication with GEMMs (Transformer Engine's
userbuffers), torchtitan only where the run is named async TP; layers that do not split evenly over the chunks are
split as `recommend --empty-end-chunks` would first try (`pplan.search.space.layer_splits`). A row pplan cannot express is refused with
one line naming what is missing (a hardware or model profile, a schedule rule).

The published time is the step time as published, or global batch × sequence / (GPUs × tokens/s per GPU); rows
that publish only TFLOP/s per GPU (NeMo's long-context table) are converted with the FLOP count NeMo's and DGX Cloud's
READMEs state: per token 12·L·h²·(1 + g/a + s/h) + 18·L·F·h + 6·V·h (non-causal attention; L layers, h hidden, g
key/value heads, a heads, s sequence, F the MLP width, V the vocabulary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pplan.cost.steptime import step_time
from pplan.errors import PplanError
from pplan.launchers.support import SearchFilter
from pplan.numeric import golden_section_min
from pplan.plan.configuration import make_plan
from pplan.plan.copies import settings_read
from pplan.plan.knobs import Recompute, RecomputeModule
from pplan.plan.records import PlanRequest
from pplan.profiles.confidence import seq_band
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.recommend import recommendations
from pplan.schedules import megatron_family, schedule_family
from pplan.search.knobs import peak_bytes
from pplan.search.space import layer_splits, search_for
from pplan.validation.published import fastest_micro_batch

ModelLoader = Callable[[str], ModelSpec]
HardwareLoader = Callable[[str], HardwareSpec]
UNSTATED_RECOMPUTES: tuple[Recompute, ...] = ("none", "selective")


@dataclass(frozen=True, slots=True)
class RecentRow:
    """One published run: what pplan predicts for it at its published cut, or why it cannot."""

    id: str
    set_name: str
    release: str
    stack: str
    hardware: str
    model: str
    moe: bool
    precision: str
    fp8_recipe: str
    seq_len: int
    uncertain: bool
    published_s: float | None
    predicted_s: float | None = None
    refused: str | None = None
    """One line naming what pplan is missing to express the run (None: predicted)."""
    assumed: tuple[str, ...] = ()
    fits: bool = True
    """Whether the plan fits in pplan's memory model (a published run that does not is a memory-model miss)."""
    label: str = ""
    request: PlanRequest | None = field(default=None, compare=False, repr=False)
    """The plan request predicted (None when refused)."""
    left_out_s: float | None = None
    """The step predicted with the `RECENT_FITS` refitted without this row's set (`leave_one_set_out`; None: not
    computed, or refused)."""

    @property
    def error(self) -> float | None:
        """(predicted − published) / published; None when refused."""
        if self.predicted_s is None or self.published_s is None:
            return None
        return (self.predicted_s - self.published_s) / self.published_s

    @property
    def left_out_error(self) -> float | None:
        """(left-out prediction − published) / published; None when not computed or refused."""
        if self.left_out_s is None or self.published_s is None:
            return None
        return (self.left_out_s - self.published_s) / self.published_s

    @property
    def counted(self) -> bool:
        """Whether the row counts in the fit figures: predicted and not flagged uncertain by the collection."""
        return self.error is not None and not self.uncertain


def nemo_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """FLOPs per token as NeMo's and DGX Cloud's READMEs count them (module docstring)."""
    h, layers = model.hidden_size, model.num_layers
    ffn = model.moe.expert_ffn_hidden_size * model.moe.top_k if model.moe else model.ffn_hidden_size
    heads = model.num_attention_heads
    kv = model.num_kv_heads or heads  # none stated: multi-head attention
    return (
        12 * layers * h * h * (1 + kv / heads + seq_len / h)
        + 18 * layers * ffn * h
        + 6 * model.vocab_size * h
    )


def row_model(row: dict[str, Any], load_model: ModelLoader) -> ModelSpec:
    """The model a row runs: its bundled profile, at the row's layer count where the source states another."""
    model = load_model(row["model"])
    if row["layers"]:
        model = model.model_copy(update={"num_layers": row["layers"]})
    return model


def _published_s(data: dict[str, Any], row: dict[str, Any], model: ModelSpec) -> float | None:
    if "published_step_s" in row:
        return float(row["published_step_s"])
    if data["flops"] != "nemo":
        return None
    flops = nemo_flops_per_token(model, row["seq_len"]) * row["global_batch"] * row["seq_len"]
    return float(flops / (row["gpus"] * row["published_tflops_per_gpu"] * 1e12))


_DERIVED_HERE = frozenset(
    {"vp", "schedule", "recompute", "zero_stage", "tp_comm_overlap", "stack", "release"}
)
"""A recent run's settings `_base_request` derives from what the row states (the schedule from v and DualPipe,
the recompute mode's spellings, ZeRO from FSDP, TP overlap from the stack, the Megatron-Bridge release whose
recipe the run carries); the rest are read by name."""


RECIPE_APPLIED: frozenset[str] = frozenset(
    {
        "zero_stage", "grad_dtype", "moment_dtype", "fp8_param_gather", "recompute", "recompute_modules",
        "moe_dispatcher", "moe_ep_overlap", "cuda_graph_scope", "moe_permute_fusion", "moe_router_fusion",
        "moe_fused_grouped_mlp", "moe_capacity_factor", "moe_force_balance", "offload_layers",
    }
)  # fmt: skip
"""The settings a Megatron-Bridge run takes from its release's recipe (`recipe` in recent_runs.json, written by
scripts/import_bridge_recipes.py from each release's own benchmark harness): those pplan models (the memory they
hold, and what they cost in time: BF16 gradients halve the data-parallel reduce, recomputed modules re-run). The
recipe's other knobs are kept in the data, under the names pplan gives its settings, until pplan prices them.
FP8 primary weights (`fp8_param_gather`) apply to FP8 runs only: the recipes leave the flag set on some BF16
workloads, where Megatron-LM has no FP8 weight to gather."""


def applied_recipe(row: dict[str, Any]) -> dict[str, Any]:
    """The knobs of `row`'s release recipe that pplan applies (`RECIPE_APPLIED`); empty for a run without one.
    Recompute modules come with selective recompute only, and `fp8_param_gather` with FP8 runs only."""
    recipe = row.get("recipe") or {}
    out = {k: v for k, v in recipe.items() if k in RECIPE_APPLIED and v is not None}
    if out.get("recompute") != "selective" or not out.get("recompute_modules"):
        out.pop("recompute_modules", None)
    if row["precision"] == "bf16":
        out.pop("fp8_param_gather", None)
    if not out.get("offload_layers"):
        out.pop("offload_layers", None)
    return out


CUT_KEYS = ("model", "hardware", "gpus", "tp", "pp", "cp", "fsdp", "micro_batch")
"""What makes two runs the same cut for `_cut_offload`: model, GPU, GPU count, axes, FSDP and micro-batch."""


def _cut_offload(collection: dict[str, Any] | None, row: dict[str, Any]) -> int:
    """For a run without a release recipe, the layers the earliest Megatron-Bridge recipe at the same cut
    (`CUT_KEYS`) offloads (`offload_layers`; 0: none does). Megatron-Bridge's first harness (25.09) was ported
    from NeMo 2's performance scripts, and layer offload is what lets a FSDP cut without pipelining hold its
    activations (Llama 3.1 405B on 128 GB200 at t2 p1: 95 of 126 layers)."""
    if "recipe" in row:
        return 0
    found = [
        (other["release"], other["recipe"]["offload_layers"])
        for data in (collection or {}).get("sets", [])
        for other in data["rows"]
        if (other.get("recipe") or {}).get("offload_layers") and all(other[k] == row[k] for k in CUT_KEYS)
    ]
    return min(found)[1] if found else 0


STACK_ASSUMED: dict[str, dict[str, Any]] = {
    "nemo": {"grad_dtype": "bf16", "fp8_param_gather": True},
    "deepseek": {"moment_dtype": "bf16", "fp8_swiglu_input": True, "fp8_param_gather": True},
}
"""What pplan assumes of a run without a release recipe, by its set's stack, printed per row:
- NeMo (DGX Cloud benchmarks, NeMo performance summaries, long-context runs): NeMo 2's performance scripts
  reduce gradients in BF16 (`grad_reduce_in_fp32` False) and their FP8 mixed precision gathers FP8 primary weights
  (`fp8_param_gather`), as every Megatron-Bridge release from 25.09 on does (their harness was ported from those
  scripts; recent_runs.json's recipes: every run reduces in BF16 and every FP8 run gathers FP8 weights);
- DeepSeek-V3 (report §3.3.2–3.3.3, stated): Adam's moments in BF16, the MoE SwiGLU input cached in FP8;
  assumed: FP8 primary weights, as Megatron-Core's DeepSeek-V3 recipes keep them. Gradients stay FP32 (stated).
FP8-only settings are dropped for BF16 runs."""

STACK_RECOMPUTE_MODEL = "deepseek-v3"
"""The model whose stack recipes pplan falls back to when neither none nor selective (core_attn) recompute fits an
unstated run: the earliest Megatron-Bridge recipe for it in the collection (`_recipe_modules`)."""


def _stack_assumed(data: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """`STACK_ASSUMED` for `row`'s set, less what its precision has no use for."""
    out = dict(STACK_ASSUMED.get(data["stack"], {}))
    if row["precision"] == "bf16":
        out = {k: v for k, v in out.items() if not k.startswith("fp8_")}
    if not row["moe"]:
        out.pop("fp8_swiglu_input", None)
    return out


def _base_request(data: dict[str, Any], row: dict[str, Any]) -> tuple[PlanRequest, list[str]]:
    """The request from what the row states, with the assumptions that need no model (module docstring)."""
    assumed = []
    vp = row["vp"]
    family = schedule_family("dualpipe") if row["dualpipe"] else megatron_family(vp)
    nvidia = data["stack"] in ("nemo", "megatron-bridge")
    tp_overlap = row["tp"] > 1 and (nvidia or row["async_tp"])
    if tp_overlap:
        assumed.append("TP overlap" if nvidia else "async TP")
    recipe = applied_recipe(row)
    zero = 3 if row["fsdp"] else 1
    if row["fsdp"] is None:
        zero = recipe.get("zero_stage", zero)
        if "zero_stage" not in recipe:
            assumed.append("ZeRO-1")
    recompute: Recompute = "none"
    modules: dict[str, Any] = {}
    if row["recompute"] in ("full", "selective"):
        recompute = row["recompute"]
    elif row["recompute"] == "rmsnorm":  # DeepSeek-V3: RMSNorm and MLA's up-projections recomputed
        recompute, modules = "selective", {"recompute_modules": ("layernorm", "mla_up_proj")}
    elif row["recompute"] is None and "recompute" in recipe:  # the recipe states it
        recompute = recipe["recompute"]
        if "recompute_modules" in recipe:
            modules = {"recompute_modules": tuple(recipe["recompute_modules"])}
    stated = row | {"micro_batch": row["micro_batch"] or None, "etp": row["etp"] or None}  # 0: not stated
    if recipe:
        assumed.append("its release's recipe: " + ", ".join(f"{k} {v}" for k, v in sorted(recipe.items())))
    stack = {} if recipe else _stack_assumed(data, row)
    if stack:
        assumed.append(
            f"{data['stack']}'s recipes: " + ", ".join(f"{k} {v}" for k, v in sorted(stack.items()))
        )
    req = PlanRequest(
        **settings_read(stated, recipe, stack, skip=_DERIVED_HERE | {"recompute_modules"}) | modules,
        vp=vp if family.fixed_v is None and vp and vp > 1 else None,
        schedule=family.name, recompute=recompute, zero_stage=zero, tp_comm_overlap=tp_overlap, stack=data["pplan_stack"],
        release=row["release"].removeprefix("Megatron-Bridge ") if "recipe" in row else None,
    )  # fmt: skip
    return req, assumed


def recompute_stated(row: dict[str, Any]) -> bool:
    """Whether the run's source or its release's recipe states its recompute (else pplan picks the least that
    fits, `_least_recompute`)."""
    return row["recompute"] is not None or "recompute" in applied_recipe(row)


def _recipe_modules(collection: dict[str, Any] | None, model: str) -> tuple[RecomputeModule, ...] | None:
    """The recompute modules of the earliest Megatron-Bridge release recipe for `model` in `collection` that
    recomputes selectively (None: none does)."""
    found = [
        (row["release"], tuple(row["recipe"]["recompute_modules"]))
        for data in (collection or {}).get("sets", [])
        for row in data["rows"]
        if row["model"] == model and (row.get("recipe") or {}).get("recompute_modules")
    ]
    return min(found)[1] if found else None


def _layer_split(model: ModelSpec, req: PlanRequest, assumed: list[str]) -> PlanRequest:
    """`req` where its layers do not split evenly over its chunks: the first split `recommend --empty-end-chunks` would try
    (`pplan.search.space.layer_splits`: Megatron's with the embedding and the loss counted as layers where that
    divides, else the inner chunks at ⌈L/chunks⌉ and the ends sharing the rest)."""
    family = schedule_family(req.schedule)
    chunks = req.pp * (family.fixed_v or req.vp or 1)
    splits = layer_splits(model.num_layers, chunks, empty_ends=True)
    if not splits or splits[0] == (None, None):
        return req  # even, or none: make_plan refuses it, naming the rule
    first, last = splits[0]
    assumed.append(f"layers {first}…{last} at the ends")
    return replace(req, first_stage_layers=first, last_stage_layers=last)


def _least_recompute(
    model: ModelSpec,
    hardware: HardwareSpec,
    req: PlanRequest,
    stated: bool,
    assumed: list[str],
    stack_modules: tuple[RecomputeModule, ...] | None = None,
) -> tuple[PlanRequest, bool]:
    """`req` with the least recompute that fits when the row states none (none, else selective: the recipes are
    tuned for speed, and full recompute costs a third more compute, so a run whose source states none is not
    taken to run it; last, where given, selective recompute of the modules the stack's own recipes for the model
    re-run, `stack_modules`), and whether it fits."""
    options = [req] if stated else [replace(req, recompute=r) for r in UNSTATED_RECOMPUTES]
    if not stated and stack_modules:
        options.append(replace(req, recompute="selective", recompute_modules=stack_modules))
    for option in options:
        memory = peak_bytes(model, hardware, option)
        if memory is not None and memory[0] <= memory[1]:
            if not stated:
                assumed.append(f"recompute {option.recompute_label}")
            return option, True
    if not stated:
        assumed.append(f"recompute {req.recompute}")
    return req, False


def predict_row(
    data: dict[str, Any],
    row: dict[str, Any],
    load_model: ModelLoader,
    load_hardware: HardwareLoader,
    collection: dict[str, Any] | None = None,
) -> RecentRow:
    """One row predicted at its published cut, or refused with the missing feature (module docstring); the
    `collection` it belongs to gives the stack's recompute modules for a model (`_recipe_modules`)."""
    head = RecentRow(
        id=row["id"], set_name=data["name"], release=row["release"], stack=data["stack"],
        hardware=row["hardware"] or row["hardware_published"], model=row["model"] or row["model_published"],
        moe=row["moe"], precision=row["precision"], fp8_recipe=row["fp8_recipe"], seq_len=row["seq_len"],
        uncertain=row["uncertain"], published_s=None,
    )  # fmt: skip
    if row["hardware"] is None:
        return replace(head, refused=f"no hardware profile for the {row['hardware_published']}")
    if row["model"] is None:
        return replace(head, refused=f"no bundled model profile for {row['model_published']}")
    model = row_model(row, load_model)
    hardware = load_hardware(row["hardware"])
    published = _published_s(data, row, model)
    head = replace(head, published_s=published)
    if published is None:
        return replace(
            head, refused="published as TFLOP/s per GPU only, under a FLOP count pplan does not state"
        )
    try:
        req, assumed = _base_request(data, row)
        req = _layer_split(model, req, assumed)
        modules = _recipe_modules(collection, row["model"]) if row["model"] == STACK_RECOMPUTE_MODEL else None
        stated = recompute_stated(row)
        offload = 0 if row["recompute"] not in (None, "none") else _cut_offload(collection, row)
        if offload:  # the recipe's recompute with it: none (megatron-core offloads no recomputed layer)
            req, stated = replace(req, recompute="none", offload_layers=offload), True
            assumed.append(
                f"offload_layers {offload}, recompute none: the earliest Megatron-Bridge recipe at this cut"
            )
        req, fits = _least_recompute(model, hardware, req, stated, assumed, modules)
        if row["micro_batch"] is None:
            req = fastest_micro_batch(model, hardware, req)
            assumed.append(f"b{req.micro_batch} (fastest)")
        plan = make_plan(model, req)
        predicted = step_time(model, hardware, plan).step_s
    except PplanError as err:
        return replace(head, refused=err.one_line())
    label = f"t{plan.tp} p{plan.pp} v{plan.vp} cp{plan.cp} ep{plan.ep} d{plan.dp} b{plan.micro_batch} m{plan.num_microbatches}"
    return replace(head, predicted_s=predicted, assumed=tuple(assumed), fits=fits, label=label, request=req)


def predict_all(
    collection: dict[str, Any], load_model: ModelLoader, load_hardware: HardwareLoader
) -> tuple[RecentRow, ...]:
    """Every row of every set, in the file's order."""
    return tuple(
        predict_row(data, row, load_model, load_hardware, collection)
        for data in collection["sets"]
        for row in data["rows"]
    )


AXES: dict[str, Callable[[RecentRow], str]] = {
    "set": lambda r: r.set_name,
    "sequence": lambda r: seq_band(r.seq_len),
    "precision": lambda r: r.precision if r.precision != "fp8" else f"fp8 ({r.fp8_recipe})",
    "routing": lambda r: "MoE" if r.moe else "dense",
    "hardware": lambda r: r.hardware,
    "stack": lambda r: r.stack,
    "release": lambda r: r.release,
}
"""How the report groups the rows: each axis names a row's group."""


@dataclass(frozen=True, slots=True)
class Group:
    """The fit figures of the counted rows of one group on one axis (`RecentRow.counted`)."""

    axis: str
    name: str
    rows: int
    counted: int
    refused: int
    mape: float | None
    mean_error: float | None
    worst: float | None
    within_15: int
    left_out_mape: float | None = None
    """The same figures with each set's rows predicted from fits made without it (`leave_one_set_out`)."""
    left_out_mean_error: float | None = None
    left_out_worst: float | None = None
    left_out_within_15: int = 0


def _figures(errors: list[float]) -> tuple[float | None, float | None, float | None, int]:
    """Mean absolute error, signed mean, worst |error| and the count within 15 % (None for an empty list)."""
    if not errors:
        return None, None, None, 0
    return (
        sum(map(abs, errors)) / len(errors),
        sum(errors) / len(errors),
        max(map(abs, errors)),
        sum(abs(e) <= 0.15 for e in errors),
    )


def group(rows: Iterable[RecentRow], axis: str) -> tuple[Group, ...]:
    """The rows grouped on `axis`, each group's figures (mean absolute error, signed mean, worst |error|, rows
    within 15 %), in sample and left out (`leave_one_set_out`, where the rows carry it)."""
    by: dict[str, list[RecentRow]] = {}
    for row in rows:
        by.setdefault(AXES[axis](row), []).append(row)
    out = []
    for name, members in by.items():
        counted = [r for r in members if r.counted]
        mape, mean, worst, within = _figures([r.error for r in counted if r.error is not None])
        lo_mape, lo_mean, lo_worst, lo_within = _figures(
            [r.left_out_error for r in counted if r.left_out_error is not None]
        )
        out.append(
            Group(
                axis=axis, name=name, rows=len(members), counted=len(counted),
                refused=sum(r.refused is not None for r in members),
                mape=mape, mean_error=mean, worst=worst, within_15=within,
                left_out_mape=lo_mape, left_out_mean_error=lo_mean, left_out_worst=lo_worst,
                left_out_within_15=lo_within,
            )
        )  # fmt: skip
    return tuple(out)


FIT_FIELDS: dict[str, tuple[str, ...]] = {"matmul": ("bf16",), "fp8_matmul": ("fp8", "mxfp8")}
"""Which efficiency the dense runs of each precision calibrate: BF16 GEMMs, and FP8 GEMMs (MXFP8's block-scaled
ones included) with the BF16 figure held."""


RECENT_FITS: tuple[tuple[str, str], ...] = (
    ("gb200-nvl72", "matmul"),
    ("gb200-nvl72", "fp8_matmul"),
    ("b200-180gb", "fp8_matmul"),
)
"""The profile efficiencies fitted to this collection (no other public step times exist for Blackwell GPUs), in fit
order: a GPU's FP8 figure after its BF16 one, with that held. Every other figure is predicted out of sample."""


def _fit_rows(
    collection: dict[str, Any], hardware: str, precisions: tuple[str, ...], leave_out: str | None
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (set, row) pairs a fit uses: dense runs on `hardware` in `precisions`, not flagged uncertain, outside
    the set `leave_out`. Routed models are left out: their dispatch and grouped GEMMs are not yet modelled as the
    stacks run them, and would pull a GEMM efficiency toward what those misses need."""
    return [
        (data, row)
        for data in collection["sets"]
        if data["name"] != leave_out
        for row in data["rows"]
        if row["hardware"] == hardware
        and row["precision"] in precisions
        and not row["moe"]
        and not row["uncertain"]
    ]


def fit_recent(
    collection: dict[str, Any],
    load_model: ModelLoader,
    load_hardware: HardwareLoader,
    hardware: str,
    field: str,
    leave_out: str | None = None,
    lo: float = 0.2,
    hi: float = 0.95,
    tol: float = 1e-3,
) -> tuple[float, int] | None:
    """The efficiency `field` of `hardware` minimising the mean over the collection's sets of each set's mean
    absolute error on its dense runs of the field's precisions (`FIT_FIELDS`; golden-section search to `tol`, as
    pplan.validation.published.fit_efficiency), with the set `leave_out` left out; and the rows it used. None when
    no row is left to fit. Each row's plan is the one `predict_row` builds with `load_hardware`'s profile (its
    micro-batch, recompute and layer split do not depend on the fitted figure): only the step time is re-priced."""
    pairs = _fit_rows(collection, hardware, FIT_FIELDS[field], leave_out)
    base = load_hardware(hardware)
    priced = []
    for data, row in pairs:
        got = predict_row(data, row, load_model, load_hardware, collection)
        if got.request is not None and got.published_s is not None:
            model = row_model(row, load_model)
            priced.append((data["name"], model, make_plan(model, got.request), got.published_s))
    if not priced:
        return None

    def cost(x: float) -> float:
        tuned = base.with_efficiency(**{field: x})
        by_set: dict[str, list[float]] = {}
        for name, model, plan, published in priced:
            error = step_time(model, tuned, plan).step_s / published - 1
            by_set.setdefault(name, []).append(abs(error))
        return sum(sum(e) / len(e) for e in by_set.values()) / len(by_set)

    return golden_section_min(cost, lo, hi, tol), len(pairs)


def _refitted_without(
    collection: dict[str, Any],
    data: dict[str, Any],
    load_model: ModelLoader,
    load_hardware: HardwareLoader,
) -> HardwareLoader | None:
    """`load_hardware` with the `RECENT_FITS` of every GPU the set `data` has a counted dense run on refitted
    without it (in fit order, the earlier refits held); None when the set touches no fit."""
    tuned: dict[str, HardwareSpec] = {}

    def loader(hw: str) -> HardwareSpec:
        return tuned[hw] if hw in tuned else load_hardware(hw)

    for hw, fit_field in RECENT_FITS:
        if any(r["hardware"] == hw and not r["moe"] and not r["uncertain"] for r in data["rows"]):
            fitted = fit_recent(collection, load_model, loader, hw, fit_field, leave_out=data["name"])
            if fitted is not None:
                tuned[hw] = loader(hw).with_efficiency(**{fit_field: fitted[0]})
    return loader if tuned else None


def leave_one_set_out(
    collection: dict[str, Any],
    rows: Sequence[RecentRow],
    load_model: ModelLoader,
    load_hardware: HardwareLoader,
) -> tuple[RecentRow, ...]:
    """`rows` (`predict_all`'s, in its order) each with `left_out_s`: predicted with the `RECENT_FITS` refitted
    without the row's own set. A set with no counted dense run on a fitted GPU keeps its in-sample prediction."""
    out: list[RecentRow] = []
    for data in collection["sets"]:
        members = rows[len(out) : len(out) + len(data["rows"])]
        loader = _refitted_without(collection, data, load_model, load_hardware)
        for row, member in zip(data["rows"], members, strict=True):
            assert row["id"] == member.id, "rows must be predict_all's, in its order"
            again = predict_row(data, row, load_model, loader, collection) if loader else member
            out.append(replace(member, left_out_s=again.predicted_s))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PublishedRank:
    """Where a published cut stands in `recommend` for its own model, hardware, GPUs, batch and sequence, among
    the plans its launcher runs on its stack."""

    published_tokens_per_s: float
    best_tokens_per_s: float
    best: str
    rank: int | None
    """1-based rank of the published cut among the top candidates (None: below them)."""
    best_request: PlanRequest | None = field(default=None, compare=False, repr=False)
    """The search's best plan, as a request `explain` (and `pplan compare`) can take."""

    @property
    def gap(self) -> float:
        """1 − published / best tokens per second (negative: the published cut beats the search's best)."""
        return 1 - self.published_tokens_per_s / self.best_tokens_per_s


def rank_published(
    model: ModelSpec, hardware: HardwareSpec, req: PlanRequest, launcher: str, top_n: int = 50
) -> PublishedRank | None:
    """`recommend` on the published cut's own model, hardware, GPUs, batch, sequence, GEMM precision, stack and TP
    overlap, restricted to `launcher`; the published cut's rank by pplan's predicted tokens/s. None when the search
    finds nothing."""

    found = recommendations(
        model,
        hardware,
        search_for(req, launcher=launcher, top_n=top_n),
        launcher=SearchFilter(launcher, model, req.tp_comm_overlap),
    )
    tokens = [c.report.performance.tokens_per_s for c in found.candidates if c.report.performance]
    if not tokens:
        return None
    published = (
        req.global_batch
        * (req.seq_len or model.seq_len)
        / step_time(model, hardware, make_plan(model, req)).step_s
    )
    faster = sum(t > published for t in tokens)
    top = found.candidates[0].request
    best = f"t{top.tp} p{top.pp} v{top.vp or 1} cp{top.cp} ep{top.ep} b{top.micro_batch} {top.schedule}"
    return PublishedRank(published, tokens[0], best, faster + 1 if faster < len(tokens) else None, top)
