"""The rules a plan request's options obey on their own, before any model is known (counts in range, fractions,
choices, sharding and offload options that need each other, optimizer offload), each a one-line `ConfigError`
naming the command-line flag so the API and the CLI refuse alike; and the canonical orders and one-phrase labels
of the module lists a request holds. `PlanRequest` (pplan.plan.records) applies them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from pplan.errors import ConfigError
from pplan.plan.knobs import (
    DEFAULT_RECOMPUTE_MODULES,
    MOE_OFFLOAD_MODULES,
    CudaGraphScope,
    OffloadModule,
    Recompute,
    RecomputeMethod,
    RecomputeModule,
)
from pplan.profiles.fields import MAX_SEQ

if TYPE_CHECKING:
    from pplan.plan.records import PlanRequest

COUNT_LIMITS: dict[str, int] = {
    "--gpus": 10**7,
    "--global-batch": 10**12,
    "--micro-batch": 10**6,
    "--tp": 10**7,
    "--ep": 10**7,
    "--etp": 10**7,
    "--pp": 10**7,
    "--cp": 10**7,
    "--vp": 10**4,
    "--max-vp": 10**4,
    "--seq-len": MAX_SEQ,
    "--recompute-layers": 10**4,
    "--min-microbatches": 10**12,
    "--top": 10**4,
    "--shard-group": 10**7,
    "--memory-limit": 10**12,
}
"""The largest value each count a plan or a search is asked for may take: beyond any machine, model or batch
that exists, small enough that every figure derived from it stays a finite float (a model has at most 10^4 layers,
so at most 10^4 chunks per rank; sequences as in pplan.profiles.specs)."""


def check_count(field: str, value: int) -> None:
    """One count a user gave: an integer from 1 to `COUNT_LIMITS[field]`, else a ConfigError on `field`."""
    limit = COUNT_LIMITS[field]
    if not 1 <= value <= limit:
        shown = str(value) if abs(value) < 10**15 else f"a {len(str(abs(value)))}-digit number"
        raise ConfigError(
            field, f"must be an integer from 1 to {limit:,}, got {shown}", f"pass {field} in that range"
        )


FRACTION_EXAMPLES = {
    "--jitter": "e.g. --jitter 0.01 for 1 % run-to-run variation per rank",
    "--headroom": "e.g. --headroom 0.1",
}
"""What each fraction flag's refusal suggests."""


def check_fraction(field: str, value: float) -> None:
    """One fraction a user gave: in [0, 1), else a ConfigError on `field` (`FRACTION_EXAMPLES`)."""
    if not 0 <= value < 1:
        raise ConfigError(field, f"must be a fraction in [0, 1), got {value:g}", FRACTION_EXAMPLES[field])


WHOLE_GRAPH_SCOPES = ("full_layer", "full_iteration")
"""CUDA-graph scopes that capture everything of their extent, so name no other scope beside them."""


def check_moe_knobs(scope: tuple[str, ...], capacity_factor: float | None, imbalance: float) -> None:
    """The MoE knobs a user gave: known graph scopes (a whole-layer or whole-step scope alone), a capacity factor
    above 0, an imbalance factor of at least 1; else a ConfigError naming the flag."""
    for item in scope:
        check_choice("--cuda-graph-scope", item, get_args(CudaGraphScope))
    whole = [item for item in scope if item in WHOLE_GRAPH_SCOPES]
    if whole and len(set(scope)) > 1:
        raise ConfigError(
            "--cuda-graph-scope", f"{whole[0]} captures every kernel of its extent, beside {', '.join(scope)}",
            f"use --cuda-graph-scope {whole[0]} alone",
        )  # fmt: skip
    if capacity_factor is not None and not capacity_factor > 0:
        raise ConfigError(
            "--moe-capacity-factor",
            f"must be above 0, got {capacity_factor:g}",
            "e.g. 1.0, or drop it (dropless)",
        )
    if not imbalance >= 1:
        raise ConfigError(
            "--moe-imbalance", f"the busiest rank over the mean is at least 1, got {imbalance:g}", "e.g. 1.1"
        )


def check_choice(field: str, value: str, choices: tuple[str, ...]) -> None:
    """One choice a user gave: one of `choices`, else a ConfigError on `field` listing them."""
    if value not in choices:
        raise ConfigError(field, f"{value!r} is not one of {', '.join(repr(c) for c in choices)}")


def check_layer_offload(req: PlanRequest) -> None:
    """Layer-granular activation offload's rules, each a one-line ConfigError on --offload-layers: a count of
    layers (`N` < the model's layers is checked by `make_plan`, which knows the model); megatron-core's own checks
    (core_v0.16.1 `transformer_config.py` `TransformerConfig.__post_init__`, restated without the file at hand like
    pplan.launchers.megatron_validate's rules): no pipeline parallelism (p = 1) and no activation recomputation
    with CPU offloading; and not with fine-grained offload (--offload-modules), whose combination pplan does not
    model."""
    n = req.offload_layers
    if n < 0:
        raise ConfigError(
            "--offload-layers", f"must be a count of layers, got {n}", "e.g. --offload-layers 20"
        )
    if req.pp != 1:
        raise ConfigError(
            "--offload-layers", f"megatron-core has no CPU offloading under pipeline parallelism (p = {req.pp})",
            "use --pp 1, or drop --offload-layers",
        )  # fmt: skip
    if req.recompute != "none":
        raise ConfigError(
            "--offload-layers", f"megatron-core's CPU offloading does not run with --recompute {req.recompute}",
            "use --recompute none, or drop --offload-layers",
        )  # fmt: skip
    if req.offload_modules:
        raise ConfigError(
            "--offload-layers", "pplan does not model layer offload together with --offload-modules",
            "drop one of them",
        )  # fmt: skip


def check_optimizer_offload(req: PlanRequest) -> None:
    """Optimizer CPU offload's rules, each a one-line ConfigError on --optimizer-offload-fraction: a fraction in
    (0, 1]; ZeRO-1, since megatron-core's `HybridDeviceOptimizer` runs inside its distributed optimizer (the
    precision-aware optimizer it builds on asserts `use_distributed_optimizer`, megatron/core/optimizer/
    optimizer_config.py) and pplan models no other; FP32 moments, since the hybrid optimizer builds its GPU and CPU
    Adams without the precision-aware moment dtypes (megatron/core/optimizer/__init__.py); and FP8 primary weights
    offload only under the delayed-scaling recipe (pplan's `fp8`, not `mxfp8`): Megatron-LM's `validate_args` at
    core_v0.16.1, restated without the file at hand like pplan.launchers.megatron_validate's rules."""
    f = req.optimizer_offload_fraction
    if not 0 < f <= 1:
        raise ConfigError(
            "--optimizer-offload-fraction", f"must be a fraction in (0, 1], got {f:g}",
            "e.g. --optimizer-offload-fraction 0.5, or 0 for none",
        )  # fmt: skip
    if req.zero_stage != 1:
        raise ConfigError(
            "--optimizer-offload-fraction", f"offloads the distributed optimizer's states (ZeRO-1), not "
            f"ZeRO-{req.zero_stage}'s", "add --zero-stage 1, or drop --optimizer-offload-fraction",
        )  # fmt: skip
    if req.moment_dtype != "fp32":
        raise ConfigError(
            "--optimizer-offload-fraction", "megatron-core's hybrid device optimizer keeps Adam's moments in FP32",
            "use --moment-dtype fp32, or drop --optimizer-offload-fraction",
        )  # fmt: skip
    if req.fp8_param_gather and req.precision == "mxfp8":
        raise ConfigError(
            "--optimizer-offload-fraction", "Megatron-LM offloads FP8 primary weights' optimizer only under "
            "delayed scaling (--precision fp8)", "use --precision fp8, or drop --fp8-param-gather",
        )  # fmt: skip


def check_sharding(zero_stage: int, shard_group: int | None, reshard_after_forward: bool) -> None:
    """The sharding options' own rules, each a one-line ConfigError: a shard group is a count and needs ZeRO ≥ 1
    (ZeRO-0 shards nothing); not resharding after the forward needs ZeRO-3 (only ZeRO-3 gathers weights)."""
    if shard_group is not None:
        check_count("--shard-group", shard_group)
        if zero_stage == 0:
            raise ConfigError(
                "--shard-group",
                "ZeRO-0 shards nothing to group",
                "add --zero-stage 1, 2 or 3, or drop --shard-group",
            )
    if not reshard_after_forward and zero_stage != 3:
        raise ConfigError(
            "--no-reshard-after-forward", f"applies to ZeRO-3 (gathered weights), not ZeRO-{zero_stage}",
            "add --zero-stage 3, or drop --no-reshard-after-forward",
        )  # fmt: skip


def recompute_label(
    mode: Recompute, layers: int | None, method: RecomputeMethod, modules: tuple[RecomputeModule, ...]
) -> str:
    """The recompute policy in one phrase: `none`, `selective`, `selective(core_attn+mlp)`, `full`,
    `full(block 2)`, `full(uniform 4)` (default modules and one layer per checkpoint are left unsaid)."""
    if mode == "selective" and tuple(modules) != DEFAULT_RECOMPUTE_MODULES:
        return f"selective({'+'.join(canonical_modules(modules))})"
    if mode == "full" and layers is not None and (method == "block" or layers > 1):
        return f"full({method} {layers})"
    return mode


def canonical_offload(modules: tuple[OffloadModule, ...]) -> tuple[OffloadModule, ...]:
    """The offload modules once each, in the order `OffloadModule` lists them."""
    return tuple(m for m in get_args(OffloadModule) if m in modules)


OFFLOAD_DROPPED_BY_RECOMPUTE: dict[str, tuple[str, ...]] = {"layernorm": ("qkv_linear",)}
"""Offload modules whose every offloaded tensor a selectively recomputed module already drops: `layernorm`
recompute discards the attention norm's output, which is what `qkv_linear` offloads (pplan.model.activations)."""


def check_offload(
    modules: tuple[str, ...],
    recompute: str,
    method: str,
    recompute_layers: int | None,
    recompute_modules: tuple[str, ...] = (),
) -> None:
    """The offload rules, each a one-line ConfigError on --offload-modules: known modules only (the MoE ones
    refused: pplan does not itemise what they offload); `attn_proj` needs `core_attn` (megatron-core 0.16
    `transformer_config.py` raises it: the projection's input is the attention core's output, which the core's
    backward needs); nothing a recompute policy already drops (offloading it would move bytes for no memory):
    full recompute of every layer (uniform) keeps only checkpoint inputs, and `layernorm` recompute drops what
    `qkv_linear` offloads. Full recompute by blocks offloads from the layers it keeps whole."""
    for module in modules:
        if module in MOE_OFFLOAD_MODULES:
            raise ConfigError(
                "--offload-modules", f"{module} offloads mixture-of-experts inputs, which pplan's offload model does not itemise",
                f"drop {module} (offload one of {', '.join(get_args(OffloadModule))})",
            )  # fmt: skip
        check_choice("--offload-modules", module, get_args(OffloadModule))
    if not modules:
        return
    if "attn_proj" in modules and "core_attn" not in modules:
        raise ConfigError(
            "--offload-modules", "attn_proj needs core_attn: its input is the attention core's output, which the "
            "core's backward keeps on the GPU (megatron-core raises the same)", "add core_attn, or drop attn_proj",
        )  # fmt: skip
    if recompute == "full" and method != "block":
        what = "every layer" if recompute_layers in (None, 1) else f"groups of {recompute_layers} layers"
        raise ConfigError(
            "--offload-modules", f"full recompute of {what} keeps only checkpoint inputs: nothing left to offload",
            "use --recompute-method block --recompute-layers N (the other layers offload), or drop --offload-modules",
        )  # fmt: skip
    if recompute == "selective":
        for rc in recompute_modules:
            for module in OFFLOAD_DROPPED_BY_RECOMPUTE.get(rc, ()):
                if module in modules:
                    raise ConfigError(
                        "--offload-modules", f"{module} offloads what --recompute-modules {rc} already drops",
                        f"drop {module} from --offload-modules, or {rc} from --recompute-modules",
                    )  # fmt: skip


def canonical_modules(modules: tuple[RecomputeModule, ...]) -> tuple[RecomputeModule, ...]:
    """The modules once each, in the order `RecomputeModule` lists them."""
    return tuple(m for m in get_args(RecomputeModule) if m in modules)


def ep_overlap_refusal(ep: int, p: int, v: int, recompute: str, dispatcher: str) -> str | None:
    """Why megatron-core cannot overlap the expert all-to-all (`--overlap-moe-expert-parallel-comm`) on this cut,
    or None where it can. Its TransformerConfig checks (megatron-core 0.16, transformer_config.py): expert
    parallelism (ep > 1); with p > 1 an interleaved schedule (a virtual pipeline size); the alltoall or flex
    dispatcher (not allgather); no full recomputation."""
    if ep <= 1:
        return "needs expert parallelism (ep > 1)"
    if p > 1 and v <= 1:
        return "needs an interleaved schedule (v > 1) when p > 1"
    if dispatcher == "allgather":
        return "needs the alltoall or a flex dispatcher, not allgather"
    if recompute == "full":
        return "cannot run with full recomputation"
    return None
