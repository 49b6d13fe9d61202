"""What one benchmark case is: the schedule, the scaled-down model, the timings and how torch runs it.

`BenchConfig` is checked here, before any process starts: the schedule through pplan's registry (so a bad name,
p, v or m gives the registry's `ConfigError`), the sizes, and whether torch can run it. `scaled_model` shrinks a
model profile to a width a CPU can run while keeping its shape (norm, MLP kind, grouped-query ratio, FFN ratio,
biases); the FLOPs pplan counts for the benchmark blocks come from that scaled `ModelSpec`.

Which runtime executes a schedule: torch's own class where torch has one (GPipe, 1F1B, Interleaved1F1B,
LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV), and pplan's action lists exported as torch's
compute-only CSV and loaded into `_PipelineScheduleRuntime` otherwise (ZB-H1, ZB-H2), or for any schedule with
`runtime="csv"`. Pure: no torch import (`require_torch` imports it only to say whether it is there).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property

from pplan.bench.choices import DType, Mode, Runtime
from pplan.errors import ConfigError
from pplan.profiles.catalog import load_model
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import Schedule, canonical_name, get_schedule, schedule_family, to_torch_csv
from pplan.schedules.auto import AUTO_NAME, auto_schedule

HEAD_DIM = 16
"""Width of one attention head in the scaled-down blocks."""

DTYPE_BYTES = {"float32": 4, "bfloat16": 2}

INSTALL_HINT = 'pip install "pplan[bench]"'


def require_torch() -> None:
    """Raise a one-line `ConfigError` unless torch and torch.distributed.pipelining can be imported."""
    try:
        importlib.import_module("torch")
        importlib.import_module("torch.distributed.pipelining")
    except ImportError as err:
        raise ConfigError(
            "torch", f"pplan bench needs PyTorch with torch.distributed.pipelining ({err})", INSTALL_HINT
        ) from err


@dataclass(frozen=True, slots=True)
class BlockShape:
    """The scaled-down transformer layer the compute mode builds (see `scaled_model`)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    mlp: str
    norm: str
    qkv_bias: bool
    linear_bias: bool


def scaled_model(model: ModelSpec, hidden: int, seq_len: int, num_layers: int) -> ModelSpec:
    """`model` shrunk to width `hidden`: heads of HEAD_DIM (at most the profile's count, grouped-query ratio
    kept where it fits), FFN width in the profile's ratio to h (a multiple of 8), `num_layers` layers, sequence
    `seq_len`. Norm, MLP kind and biases are the profile's; no dropout (the benchmark's layers have none, so
    the pipeline's gradients can be compared with a reference exactly), and no position embedding or QK-norm,
    which they do not run either (so pplan costs no rotary embedding for them)."""
    if hidden < HEAD_DIM or hidden % HEAD_DIM:
        raise ConfigError(
            "--hidden", f"must be a positive multiple of {HEAD_DIM}, got {hidden}", "e.g. --hidden 64"
        )
    group = model.num_attention_heads // model.kv_heads
    target = min(model.num_attention_heads, hidden // HEAD_DIM)
    if group <= target:
        kv = target // group
        heads = kv * group
    else:
        kv, heads = 1, target
    ffn = max(8, round(hidden * model.ffn_hidden_size / model.hidden_size / 8) * 8)
    return model.model_copy(
        update={
            "name": f"{model.name}-bench-h{hidden}",
            "description": f"{model.name} scaled to h={hidden} for pplan bench",
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": kv,
            "head_dim": HEAD_DIM,
            "ffn_hidden_size": ffn,
            "num_layers": num_layers,
            "seq_len": seq_len,
            "max_position_embeddings": seq_len,
            "dropout": False,
            "position_embedding": "none",  # the benchmark's layers (pplan.bench.blocks) rotate nothing
            "qk_norm": False,  # nor norm their heads
        }
    )


def block_shape(model: ModelSpec) -> BlockShape:
    """The layer shape of a (scaled) model profile."""
    return BlockShape(
        hidden=model.hidden_size,
        heads=model.num_attention_heads,
        kv_heads=model.kv_heads,
        head_dim=model.head_size,
        ffn=model.ffn_hidden_size,
        mlp=model.mlp,
        norm=model.norm,
        qkv_bias=model.qkv_bias,
        linear_bias=model.linear_bias,
    )


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark case. Times in milliseconds; `f_ms`, `i_ms`, `w_ms` are per virtual stage (sleep mode)."""

    schedule: str
    pp: int
    microbatches: int
    vp: int | None = None
    mode: Mode = "sleep"
    runtime: Runtime = "auto"
    model: str = "gpt-1.7b"
    hidden: int = 64
    seq_len: int = 16
    micro_batch: int = 2
    layers_per_stage: int = 1
    f_ms: float = 6.0
    i_ms: float = 6.0
    w_ms: float = 6.0
    steps: int = 3
    warmup: int = 1
    dtype: DType = "float32"
    seed: int = 0
    timeout_s: float = 120.0
    memory_limit: int | None = None
    """The auto schedule only: micro-batches each stage may hold in flight (None: p, pplan.schedules.auto)."""

    def __post_init__(self) -> None:
        auto = self.schedule.strip().lower() == AUTO_NAME
        object.__setattr__(self, "schedule", AUTO_NAME if auto else canonical_name(self.schedule))
        if self.memory_limit is not None and not auto:
            raise ConfigError(
                "--memory-limit", f"only the auto schedule takes a memory limit, not {self.schedule}",
                "drop --memory-limit",
            )  # fmt: skip
        if auto and self.vp not in (None, 1):
            raise ConfigError(
                "--vp", f"the auto schedule runs one stage per rank, got --vp {self.vp}", "drop --vp"
            )
        for flag, value in (("--f-ms", self.f_ms), ("--i-ms", self.i_ms), ("--w-ms", self.w_ms)):
            if value < 0:
                raise ConfigError(flag, f"must be ≥ 0, got {value:g}", f"pass {flag} 0 or more")
        for flag, count, least in (
            ("--steps", self.steps, 1),
            ("--warmup", self.warmup, 1),
            ("--seq-len", self.seq_len, 1),
            ("--micro-batch", self.micro_batch, 1),
            ("--layers-per-stage", self.layers_per_stage, 1),
        ):
            if count < least:
                raise ConfigError(flag, f"must be ≥ {least}, got {count}", f"pass {flag} {least} or more")
        if self.timeout_s <= 0:
            raise ConfigError("--timeout", f"must be > 0, got {self.timeout_s:g}", "e.g. --timeout 120")
        if self.pp < 2:
            raise ConfigError(
                "--pp", f"a pipeline benchmark needs at least 2 ranks, got {self.pp}", "use --pp 2 or more"
            )
        sched = self.plan  # the registry's rules on p, v and m
        if self.uses_csv:
            to_torch_csv(sched)  # refuses schedules torch's runtime cannot express (bidirectional DualPipe)
        elif self.family_torch_class == "Schedule1F1B" and self.microbatches < self.pp:
            raise ConfigError(
                "--microbatches",
                f"torch's Schedule1F1B needs at least p = {self.pp} micro-batches, got {self.microbatches}",
                f"use --microbatches {self.pp} or more, or --runtime csv (pplan's 1F1B lists take any m)",
            )
        elif self.runtime == "torch" and self.family_torch_class is None:
            raise ConfigError(
                "--runtime",
                f"torch has no class for {self.schedule}",
                "use --runtime csv (pplan's lists through torch's runtime) or auto",
            )
        if self.mode == "compute":
            self.model_spec  # noqa: B018  load and scale the profile now, so a bad --model fails here

    @cached_property
    def plan(self) -> Schedule:
        """pplan's schedule for this case (the registry's `ConfigError` for a bad p, v or m). The auto schedule is
        built for the sleep times under the memory limit (in compute mode, for equal times: the passes' own are
        measured only by the run)."""
        if self.schedule == AUTO_NAME:
            f, i, w = (self.f_ms, self.i_ms, self.w_ms) if self.mode == "sleep" else (1.0, 1.0, 1.0)
            limit = self.pp if self.memory_limit is None else self.memory_limit
            return auto_schedule(self.pp, self.microbatches, limit, f, i, w).schedule
        return get_schedule(self.schedule, self.pp, self.microbatches, self.vp)

    @property
    def num_stages(self) -> int:
        return self.plan.num_stages

    @property
    def family_torch_class(self) -> str | None:
        """The torch.distributed.pipelining class that runs the schedule's family (the registry's), or None."""
        return None if self.schedule == AUTO_NAME else schedule_family(self.schedule).torch_class

    @property
    def uses_csv(self) -> bool:
        """True when pplan's own action lists run (through torch's CSV loader), not a torch class."""
        return self.runtime == "csv" or (self.runtime == "auto" and self.family_torch_class is None)

    @property
    def torch_class(self) -> str | None:
        """The torch class this case runs, or None when it runs pplan's lists (`uses_csv`)."""
        return None if self.uses_csv else self.family_torch_class

    @property
    def runner(self) -> str:
        """How torch runs it, in words: the class name, or `_PipelineScheduleRuntime + pplan CSV`."""
        return self.torch_class or "_PipelineScheduleRuntime + pplan CSV"

    @cached_property
    def model_spec(self) -> ModelSpec:
        """The profile scaled down to the benchmark's width and length (one layer per block)."""
        return scaled_model(
            load_model(self.model), self.hidden, self.seq_len, self.num_stages * self.layers_per_stage
        )

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def batch(self) -> int:
        """Rows of the whole step's batch: m micro-batches of `micro_batch` sequences."""
        return self.microbatches * self.micro_batch

    def message_bytes(self) -> int:
        """Bytes of one activation or gradient crossing a stage boundary: b·s·h elements (pplan.cost.comm's P2P
        message, s·b·h·bytes, at this run's dtype)."""
        return self.micro_batch * self.seq_len * self.hidden * self.dtype_bytes

    def describe(self) -> str:
        v = f", v={self.plan.v}" if self.plan.v > 1 else ""
        if self.mode == "sleep":
            what = f"sleep blocks F {self.f_ms:g} / I {self.i_ms:g} / W {self.w_ms:g} ms per stage"
        else:
            what = f"{self.model_spec.name}, {self.layers_per_stage} layer(s) per stage, {self.dtype}"
        return (
            f"{self.schedule} p={self.pp}{v} m={self.microbatches} ({self.runner}); {what}; "
            f"b={self.micro_batch} s={self.seq_len} h={self.hidden}"
        )
