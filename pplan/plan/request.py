"""What a user asks of one plan, checked on its own (`PlanRequest`: counts in range, known choices, options that
need each other), before any model is known; `make_plan` (pplan.plan.configuration) then checks it against the
model and the schedule. Each refusal is one `ConfigError` naming the command-line flag, so the API and the CLI
refuse alike. Also the canonical orders and one-phrase labels of the module lists a request holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from pplan.errors import ConfigError
from pplan.model.precision import Precision
from pplan.plan.knobs import (
    DEFAULT_RECOMPUTE_MODULES,
    MOE_OFFLOAD_MODULES,
    ActivationModel,
    GradDtype,
    MomentDtype,
    OffloadModule,
    Recompute,
    RecomputeMethod,
    RecomputeModule,
)
from pplan.plan.settings import SETTING, SETTINGS
from pplan.profiles.fields import MAX_SEQ
from pplan.profiles.stacks import DEFAULT_STACK, StackName

_COUNTS: tuple[tuple[str, str], ...] = tuple((s.name, s.flag) for s in SETTINGS if s.count)
"""(field, flag) of each count a request holds (pplan.plan.settings)."""


_CHOICE_CHECKS: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple(
    (s.name, s.flag, s.choices) for s in SETTINGS if s.choices and not isinstance(s.default, tuple)
)
"""(field, flag, choices) of each one-value choice `PlanRequest` checks. Read off each Literal type once
(pplan.plan.settings): `get_args` on every request was a tenth of a search that filters by launcher, which makes a
request per configuration. Lists of choices are checked item by item (the offload modules by `check_offload`)."""


_RECOMPUTE_MODULES = SETTING["recompute_modules"].choices


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What a user asks for; `make_plan` validates it and derives the rest."""

    gpus: int
    global_batch: int
    micro_batch: int = 1
    tp: int = 1
    pp: int = 1
    vp: int | None = None
    cp: int = 1
    schedule: str = "1f1b"
    seq_len: int | None = None
    recompute: Recompute = "none"
    recompute_layers: int | None = None
    """Full recompute only: N of `recompute_method` (None: every layer, one checkpoint each)."""
    recompute_method: RecomputeMethod = "uniform"
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    """Selective recompute only: the modules re-run."""
    sequence_parallel: bool = True
    flash_attention: bool = True
    zero_stage: int = 0
    grad_dtype: GradDtype = "fp32"
    activation_model: ActivationModel = "itemised"
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    offload_modules: tuple[OffloadModule, ...] = ()
    """Activation offload to host memory: the modules whose saved inputs are offloaded (empty: off)."""
    shard_group: int | None = None
    """ZeRO ≥ 1: GPUs S each sharded state is divided over (hybrid sharding, HSDP: S must divide d·cp; the states
    are replicated across the (d·cp)/S shard groups); None: shard over all d·cp data-parallel GPUs."""
    reshard_after_forward: bool = True
    """ZeRO-3 only: free each unit's gathered weights after its forward and gather them again for its backward
    (FSDP2's `reshard_after_forward=True`); False keeps the rank's gathered weights from forward to backward."""
    stack: StackName = DEFAULT_STACK
    """The software stack the plan runs on (pplan.profiles.stacks): what it overlaps, how far it is calibrated."""
    overlap_p2p_comm: bool = True
    """Megatron's interleaved schedule overlaps its pipeline sends with the next chunk's passes (megatron-core's
    default; `--no-overlap-p2p-communication` turns it off and the sends block, pplan.profiles.stacks)."""
    tp_comm_overlap: bool = False
    """Overlap every tensor-parallel collective with the GEMM it feeds or follows (megatron-core's
    `--tp-comm-overlap`, torchtitan's async TP; needs sequence parallelism; pplan.profiles.stacks)."""
    ep: int = 1
    """Expert parallel (routed models): the routed experts are split, whole, over ep ranks; Megatron folds them
    onto the data- and context-parallel ranks (expert data parallel = t·cp·d / (ep·etp))."""
    etp: int = 1
    """Expert tensor parallel (routed models): each expert's matrices split over etp ranks."""
    precision: Precision = "bf16"
    """GEMM precision of the layers' Linears: bf16, fp8 (per-tensor scaled, Hopper on) or mxfp8 (Blackwell);
    pplan.model.precision says what each changes."""
    fp8_param_gather: bool = False
    """FP8 plans: the FP8 Linears' weights are kept only in FP8 (with their transpose), no BF16 copy (Megatron-LM's
    `--fp8-param-gather`)."""
    fp8_swiglu_input: bool = False
    """FP8 plans, routed models: the experts' SwiGLU input (fc1 output) is also kept in FP8 for the backward, as
    DeepSeek-V3's own framework does (report §3.3.2); no launcher pplan writes for has it."""
    moment_dtype: MomentDtype = "fp32"
    """Adam's two moments in FP32 (12 bytes of optimizer state per parameter) or BF16 (8; DeepSeek-V3 §3.3.2;
    Megatron-LM's `--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`)."""
    memory_limit: int | None = None
    """`--schedule auto` only: K, the most micro-batches in flight on a stage (pplan.schedules.auto); None: the
    most whose activations fit in each rank's usable memory after everything else (pplan.cost.autoplan)."""
    memory_headroom: float = 0.0
    """`--schedule auto` with a derived limit: the fraction of usable memory the limit leaves free (recommend's
    --headroom)."""
    jitter: float = 0.0
    """The coefficient of variation of each rank's work per step (clocks, thermals, the host, the network): the
    step waits for the slowest of its GPUs (pplan.cost.steptime `jitter_s`); 0, the default, adds nothing."""
    optimizer_offload_fraction: float = 0.0
    """ZeRO-1: the fraction f of each rank's optimizer states (FP32 master weights, Adam's moments) that live in host
    memory and are updated by the CPU (megatron-core 0.16 `HybridDeviceOptimizer`, Megatron-LM
    `--optimizer-cpu-offload --optimizer-offload-fraction f`); 0, the default, offloads none."""

    @property
    def recompute_label(self) -> str:
        """The recompute policy in one phrase (`recompute_label`)."""
        return recompute_label(
            self.recompute, self.recompute_layers, self.recompute_method, self.recompute_modules
        )

    def __post_init__(self) -> None:
        """Refuse what no plan can have, naming the command-line flag (the API and the CLI refuse alike); what
        depends on the model (divisibility, layers) is `make_plan`'s."""
        for name, flag in _COUNTS:
            value = getattr(self, name)
            if value is not None and not 1 <= value <= COUNT_LIMITS[flag]:
                check_count(flag, value)
        check_fraction("--jitter", self.jitter)
        check_fraction("--headroom", self.memory_headroom)
        if self.zero_stage not in (0, 1, 2, 3):
            raise ConfigError(
                "--zero-stage", f"must be 0, 1, 2 or 3, got {self.zero_stage}", "pick one of 0-3"
            )
        if not self.recompute_modules:
            raise ConfigError(
                "--recompute-modules", "no module to recompute", "e.g. --recompute-modules core_attn"
            )
        for name, flag, choices in _CHOICE_CHECKS:
            if getattr(self, name) not in choices:
                check_choice(flag, getattr(self, name), choices)
        for module in self.recompute_modules:
            check_choice("--recompute-modules", module, _RECOMPUTE_MODULES)
        if self.recompute_layers is not None and self.recompute != "full":
            raise ConfigError(
                "--recompute-layers", f"applies to full recompute, not --recompute {self.recompute}",
                "add --recompute full, or drop --recompute-layers",
            )  # fmt: skip
        if self.recompute_method != "uniform" and self.recompute_layers is None:
            raise ConfigError(
                "--recompute-method", f"{self.recompute_method} needs a layer count",
                "add --recompute-layers N (e.g. 2), or drop --recompute-method",
            )  # fmt: skip
        if tuple(self.recompute_modules) != DEFAULT_RECOMPUTE_MODULES and self.recompute != "selective":
            raise ConfigError(
                "--recompute-modules", f"applies to selective recompute, not --recompute {self.recompute}",
                "add --recompute selective, or drop --recompute-modules",
            )  # fmt: skip
        check_sharding(self.zero_stage, self.shard_group, self.reshard_after_forward)
        for flag, on in (
            ("--fp8-param-gather", self.fp8_param_gather),
            ("--fp8-swiglu-input", self.fp8_swiglu_input),
        ):
            if on and self.precision == "bf16":
                raise ConfigError(flag, "applies to FP8 plans", "add --precision fp8, or drop it")
        if self.fp8_param_gather and self.zero_stage == 3:
            raise ConfigError(
                "--fp8-param-gather", "pplan models FP8 primary weights with ZeRO 0-2 only",
                "use --zero-stage 1 or 2, or drop --fp8-param-gather",
            )  # fmt: skip
        check_offload(
            self.offload_modules, self.recompute, self.recompute_method, self.recompute_layers,
            self.recompute_modules,
        )  # fmt: skip
        if self.optimizer_offload_fraction:
            check_optimizer_offload(self)


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


def check_choice(field: str, value: str, choices: tuple[str, ...]) -> None:
    """One choice a user gave: one of `choices`, else a ConfigError on `field` listing them."""
    if value not in choices:
        raise ConfigError(field, f"{value!r} is not one of {', '.join(repr(c) for c in choices)}")


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
