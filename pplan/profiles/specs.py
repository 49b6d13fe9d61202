"""Validated descriptions of a model shape and a hardware profile (the boundary of the analytic core).

Profiles arrive as TOML (or a Hugging Face `config.json` for models) and are validated here once; units are in
the field names and are converted to bytes, FLOP/s and seconds exactly once, by the properties below.
Decimal prefixes: GB = 1e9 bytes, GiB = 2**30 bytes, TFLOP/s = 1e12 FLOP/s, µs = 1e-6 s.

Every number is finite and within a stated physical range (in each field's docstring and enforced by its
constraints), read strictly (`true` is not a number, `"8"` is not an integer), so that nothing the analytic
core derives from a profile can overflow, divide by zero or come out negative. `spec_problems` turns a
pydantic `ValidationError` into (field, message, fix) triples for the one-line errors of `pplan.profiles.catalog`.
Every string is printed somewhere, so each is checked too: names (`Name`) and free text (`FreeText`) obey
`pplan.profiles.text`, and none can add a line, an escape sequence or rich markup to output.

A hardware profile's figures must also be physically plausible (`PLAUSIBLE`: a range per field, with the reason
for each bound): a value written in the wrong unit (HBM bandwidth in TB/s, a NIC in Gb/s) is refused naming the
likely unit and the value to write, rather than planned with. And `efficiency.calibrated` holds only where the
profile's figures are those its efficiencies were fitted with (`efficiency.fingerprint`,
`calibration_fingerprint`): a copied profile with other figures, or a flag copied without a fit, loads as not
calibrated.
"""

from __future__ import annotations

import hashlib
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, core_schema

from pplan.errors import ConfigError
from pplan.profiles.text import name_problem, text_problem

GIB = 2**30
GB = 10**9


class SpecRuleError(ValueError):
    """A broken rule of a spec, raised inside pydantic validation; names the field at fault and the fix.

    Pydantic wraps it in a `ValidationError` (as `ctx["error"]`); `spec_problems` unwraps it. `field` is
    relative to the model that raised it ("" for the field the validator is attached to).
    """

    def __init__(self, field: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.fix = fix


@dataclass(frozen=True)
class Floor:
    """The smallest value a positive field accepts (used with `gt=0`, whose message stays for zero and below).

    A positive float can be 1e-300, and a rate that small turns seconds into infinity; the floor is part of
    the field's stated range.
    """

    minimum: float

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: float | None) -> float | None:
        if value is not None and value < self.minimum:
            raise SpecRuleError(
                "", f"{value:g} is below the smallest value accepted, {_number(self.minimum)}", ""
            )
        return value


@dataclass(frozen=True)
class _TextRule:
    """A string field's rule on what it may hold (`pplan.profiles.text`): a name, or a line of free text."""

    name: bool

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        problem = (name_problem if self.name else text_problem)(value)
        if problem is not None:
            raise SpecRuleError("", *problem)
        return value


Name = Annotated[str, _TextRule(name=True)]
"""A name printed in tables, launcher settings, SVG and JSON: one short line of letters, digits and a few marks."""
FreeText = Annotated[str, _TextRule(name=False)]
"""A description or a source: one line of printable text, no `[` or `]`."""


# Physical ranges (each field's docstring repeats its own).
MAX_LAYERS = 10**4
MAX_HIDDEN = 10**6
MAX_FFN = 10**7
MAX_HEADS = 10**5
MAX_VOCAB = 10**8
MAX_SEQ = 10**8
MAX_TFLOPS = 1e7
MAX_GB_PER_S = 1e7
MIN_RATE = 1e-3
"""Smallest TFLOP/s and GB/s accepted (1 GFLOP/s, 1 MB/s)."""
MIN_FRACTION = 1e-9
"""Smallest efficiency accepted: low enough for a fit of CPU measurements against a datacenter GPU's peak
(`pplan bench --calibrate` on a laptop fits about 5e-6 against an H100), high enough to keep every time finite;
`pplan bench --calibrate` refuses fits outside the range."""
MAX_HBM_GIB = 1e5
MAX_LATENCY_US = 1e6
MAX_GPUS_PER_NODE = 1024
MAX_DURATION = 1e12
MAX_STAGES = 10**5

_Strict = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, strict=True)
Tflops = Annotated[float, Field(gt=0, le=MAX_TFLOPS, allow_inf_nan=False), Floor(MIN_RATE)]
GbPerS = Annotated[float, Field(gt=0, le=MAX_GB_PER_S, allow_inf_nan=False), Floor(MIN_RATE)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False), Floor(MIN_FRACTION)]
LatencyUs = Annotated[float, Field(ge=0, le=MAX_LATENCY_US, allow_inf_nan=False)]
Duration = Annotated[float, Field(ge=0, le=MAX_DURATION, allow_inf_nan=False)]

MlpKind = Literal["gelu", "swiglu", "squared-relu"]
NormKind = Literal["layernorm", "rmsnorm"]
PositionKind = Literal["rope", "learned", "alibi", "none"]


_HASHES: dict[int, tuple[BaseModel, int]] = {}
"""Each spec's hash by id, with the spec itself (kept alive, so its id is not reused while cached)."""
_HASHES_LIMIT = 4096


class _Frozen(BaseModel):
    model_config = _Strict

    def __hash__(self) -> int:
        """The hash of the class and every field value (what pydantic hashes for a frozen model), computed once
        per object: specs key every cost cache (a search looks them up hundreds of thousands of times), and
        pydantic's own hash walks every field, nested specs included, on each lookup."""
        got = _HASHES.get(id(self))
        if got is not None and got[0] is self:
            return got[1]
        if len(_HASHES) >= _HASHES_LIMIT:
            _HASHES.clear()
        value = hash((type(self), *self.__dict__.values()))
        _HASHES[id(self)] = (self, value)
        return value


MAX_EXPERTS = 10**5


class MoeSpec(_Frozen):
    """A mixture-of-experts MLP (`[moe]`): which layers route their tokens to experts and how.

    Layer i (0-based) has the routed MLP when i ≥ `first_dense_layers` and i % `layer_frequency` == 0
    (DeepSeek-V3's `first_k_dense_replace` and `moe_layer_freq`; Megatron-LM's `--moe-layer-freq N`); the
    other layers keep the model's dense MLP of width `ffn_hidden_size`. Each routed expert is an MLP of the
    model's kind (`mlp`) and width `expert_ffn_hidden_size`; a token goes to `top_k` of the `num_experts`
    routed experts, and to every shared expert (one MLP of total width `shared_expert_ffn_hidden_size`).
    The router is one h × E matrix (plus a bias where `router_bias`)."""

    num_experts: int = Field(gt=0, le=MAX_EXPERTS)
    """Routed experts E (1 to 10^5)."""
    top_k: int = Field(gt=0, le=MAX_EXPERTS)
    """Routed experts per token k (1 to num_experts)."""
    expert_ffn_hidden_size: int = Field(gt=0, le=MAX_FFN)
    """Each routed expert's inner width f_e (1 to 10^7; SwiGLU: each of the gate and up projections)."""
    shared_expert_ffn_hidden_size: int = Field(default=0, ge=0, le=MAX_FFN)
    """Total inner width of the shared experts every token also runs (0: none; DeepSeek-V3: 1 × 2048)."""
    first_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    """Leading layers with the dense MLP (0 to 10^4; DeepSeek-V3: 3)."""
    layer_frequency: int = Field(default=1, gt=0, le=MAX_LAYERS)
    """Every k-th layer from the first is routed (1: every layer past the dense ones; 1 to 10^4)."""
    router_bias: bool = False
    """The router has a trained bias (GPT-OSS); DeepSeek-V3's load-balancing bias is a buffer, not trained."""

    @model_validator(mode="after")
    def _check_top_k(self) -> MoeSpec:
        if self.top_k > self.num_experts:
            raise SpecRuleError(
                "top_k",
                f"top_k={self.top_k} is more than num_experts={self.num_experts}",
                "use at most num_experts",
            )
        return self


class MlaSpec(_Frozen):
    """Multi-head latent attention (`[mla]`, DeepSeek-V2/V3, arXiv 2405.04434 §2.1): queries and keys/values
    are projected down to low ranks, normed, and projected up per head; each head's query and key carry
    `qk_nope_head_dim` content dimensions plus `qk_rope_head_dim` rotary ones (the rotary key is one shared
    head, projected with the KV down-projection), and each value `v_head_dim`."""

    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_HIDDEN)
    """Query down-projection rank d_c' (None: queries projected directly from h, as DeepSeek-V2-Lite)."""
    kv_lora_rank: int = Field(gt=0, le=MAX_HIDDEN)
    """Key/value down-projection rank d_c (DeepSeek-V3: 512)."""
    qk_nope_head_dim: int = Field(gt=0, le=MAX_HIDDEN)
    """Per-head query/key content width (DeepSeek-V3: 128)."""
    qk_rope_head_dim: int = Field(gt=0, le=MAX_HIDDEN)
    """Per-head query/key rotary width, shared key head (DeepSeek-V3: 64)."""
    v_head_dim: int = Field(gt=0, le=MAX_HIDDEN)
    """Per-head value width (DeepSeek-V3: 128)."""


SlidingLayers = Literal["all", "alternate"]


class ModelSpec(_Frozen):
    """A decoder-only transformer's shape: everything parameter, FLOP and activation counts need."""

    name: Name
    """Short name, e.g. `llama3-70b` (`pplan.profiles.text`: letters, digits, spaces and `_.+-/(),:@#`)."""
    description: FreeText = ""
    """One line for `pplan profiles`."""
    source: FreeText = ""
    """Where the shape comes from (paper, model card, config file)."""
    num_layers: int = Field(gt=0, le=MAX_LAYERS)
    """Transformer layers L (1 to 10^4)."""
    hidden_size: int = Field(gt=0, le=MAX_HIDDEN)
    """Model width h (1 to 10^6)."""
    num_attention_heads: int = Field(gt=0, le=MAX_HEADS)
    """Query heads a (1 to 10^5)."""
    num_kv_heads: int | None = Field(default=None, gt=0, le=MAX_HEADS)
    """Key/value heads g (grouped-query attention; 1 to 10^5, dividing a); defaults to the query heads."""
    head_dim: int | None = Field(default=None, gt=0, le=MAX_HIDDEN)
    """Per-head width (1 to 10^6); defaults to hidden_size / num_attention_heads."""
    ffn_hidden_size: int = Field(gt=0, le=MAX_FFN)
    """MLP inner width f (1 to 10^7; for SwiGLU: the width of each of the gate and up projections)."""
    mlp: MlpKind
    """MLP kind: `gelu` (two matrices), `swiglu` (three matrices), `squared-relu` (two matrices)."""
    norm: NormKind
    """`layernorm` (weight and bias) or `rmsnorm` (weight only)."""
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    """Vocabulary V as the run uses it (1 to 10^8; Megatron pads GPT-2's 50257 to 51200; Llama 3 uses 128256)."""
    tied_embeddings: bool
    """True when the output layer reuses the input embedding matrix."""
    seq_len: int = Field(gt=0, le=MAX_SEQ)
    """Default training sequence length s (1 to 10^8)."""
    position_embedding: PositionKind = "rope"
    """`learned` adds a max_position_embeddings × h table on the first stage."""
    max_position_embeddings: int | None = Field(default=None, gt=0, le=MAX_SEQ)
    """Rows of a learned position table (1 to 10^8); defaults to seq_len."""
    qkv_bias: bool = False
    """Bias on the query/key/value projections (GPT, Qwen2)."""
    linear_bias: bool = False
    """Bias on the attention output projection and the MLP matrices (GPT)."""
    dropout: bool = False
    """True when the layer applies dropout (GPT-3 does, Llama does not); adds 1-byte masks to the activations."""
    rope_theta: float | None = Field(default=None, gt=0, le=1e12)
    """RoPE base θ of rotary position embeddings (Hugging Face `rope_theta`; Llama 3: 500000); None when the
    profile does not state it. Launcher settings only: no count depends on it."""
    norm_epsilon: float | None = Field(default=None, gt=0, lt=1)
    """The norm's ε (Hugging Face `rms_norm_eps` / `layer_norm_eps`; Llama 3: 1e-5); None when not stated.
    Launcher settings only."""
    qk_norm: bool = False
    """An RMSNorm over each query and key head (Qwen3, OLMo 2): 2·d_h parameters per layer."""
    attention_sinks: bool = False
    """A learned per-head sink logit in the softmax (GPT-OSS): a parameters per layer."""
    sliding_window: int | None = Field(default=None, gt=0, le=MAX_SEQ)
    """Keys each query sees in a sliding-window attention layer (None: full attention everywhere)."""
    sliding_window_layers: SlidingLayers = "all"
    """Which layers use the window: `all`, or `alternate` (layers 0, 2, 4, ... windowed; GPT-OSS)."""
    moe: MoeSpec | None = None
    """The routed MLP (`[moe]`); None for a dense model."""
    mla: MlaSpec | None = None
    """Multi-head latent attention (`[mla]`); None for (grouped-query) multi-head attention."""
    mtp_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    """Multi-token-prediction modules after the last layer (DeepSeek-V3: 1; 0 to 10^4): each adds two norms, a
    2h × h projection and one transformer layer of the last layer's kind, and shares the output layer (Gloeckle
    et al. 2024; DeepSeek-V3 §2.2)."""

    @model_validator(mode="after")
    def _check_heads(self) -> ModelSpec:
        # What the core assumes: g divides a (grouped-query attention, tensor-parallel splits), and the head
        # width is h / a unless given.
        if self.num_kv_heads is not None and self.num_attention_heads % self.num_kv_heads:
            raise SpecRuleError(
                "num_kv_heads",
                f"num_kv_heads={self.num_kv_heads} must divide num_attention_heads={self.num_attention_heads}",
                "use a divisor of num_attention_heads",
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise SpecRuleError(
                "num_attention_heads",
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}",
                "set head_dim explicitly",
            )
        if self.moe is not None and self.moe.first_dense_layers >= self.num_layers:
            raise SpecRuleError(
                "moe.first_dense_layers",
                f"moe.first_dense_layers={self.moe.first_dense_layers} leaves no routed layer of "
                f"num_layers={self.num_layers}",
                "use fewer than num_layers dense layers, or drop [moe]",
            )
        if self.mla is not None and (self.num_kv_heads or self.head_dim):
            raise SpecRuleError(
                "mla", "[mla] sets the attention's head widths; num_kv_heads and head_dim do not apply",
                "drop num_kv_heads and head_dim",
            )  # fmt: skip
        return self

    def is_moe_layer(self, index: int) -> bool:
        """Layer `index` (0-based; the MTP modules continue the count) routes its tokens to experts."""
        moe = self.moe
        if moe is None:
            return False
        index = min(index, self.num_layers - 1)  # an MTP layer is of the last layer's kind
        return index >= moe.first_dense_layers and index % moe.layer_frequency == 0

    def dense_layers_in(self, start: int, count: int) -> int:
        """Of layers start … start+count−1, how many keep the dense MLP in a routed model (0 for a dense model:
        its layers are all of the one kind `model` describes)."""
        if self.moe is None:
            return 0
        return sum(not self.is_moe_layer(i) for i in range(start, start + count))

    @property
    def dense_part(self) -> ModelSpec:
        """The shape of this model's dense-MLP layers (itself for a dense model): per-layer counts of a routed
        model are of its routed layers; its dense layers are counted on this."""
        if self.moe is None:
            return self
        cached = _DENSE_PARTS.get(id(self))
        if cached is not None and cached[0] is self:
            return cached[1]
        dense = self.model_copy(update={"moe": None})
        if len(_DENSE_PARTS) >= _HASHES_LIMIT:
            _DENSE_PARTS.clear()
        _DENSE_PARTS[id(self)] = (self, dense)
        return dense

    @property
    def mtp_layer(self) -> ModelSpec:
        """The shape of a multi-token-prediction module's layer: the last layer's kind."""
        return self if self.is_moe_layer(self.num_layers - 1) else self.dense_part

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def position_rows(self) -> int:
        return self.max_position_embeddings or self.seq_len


_DENSE_PARTS: dict[int, tuple[ModelSpec, ModelSpec]] = {}
"""Each routed model's dense-layer shape by id, with the model (kept alive, so its id is not reused)."""


class GpuSpec(_Frozen):
    """One accelerator: datasheet peaks and capacity (never efficiencies)."""

    name: Name
    """Marketing name, e.g. `H100 SXM5 80GB`."""
    peak_bf16_tflops: Tflops
    """Dense BF16 tensor-core peak, TFLOP/s (datasheet, no sparsity; 0.001 to 10^7; plausible: 10 to 20,000)."""
    peak_fp8_tflops: Tflops | None = None
    """Dense FP8 peak, TFLOP/s (0.001 to 10^7; plausible: 20 to 50,000), where the GPU has it."""
    block_scaled_fp8: bool = False
    """Tensor cores that take block-scaled FP8 (MXFP8: one E8M0 scale per 32 elements; Blackwell)."""
    hbm_gib: float = Field(gt=0, le=MAX_HBM_GIB, allow_inf_nan=False)
    """HBM capacity in GiB (0 < x ≤ 10^5; plausible: 4 to 4,096; NVIDIA's "80 GB" parts carry 80 GiB of HBM
    stacks)."""
    hbm_bandwidth_gb_per_s: GbPerS
    """HBM bandwidth, GB/s (0.001 to 10^7; plausible: 100 to 100,000)."""
    sms: int | None = Field(default=None, gt=0, le=100_000)
    """Streaming multiprocessors (datasheet or architecture whitepaper), where known: what a communication kernel
    that runs on some of them takes from a GEMM beside it (pplan.cost.passtime, `tp_comm_overlap`); plausible: 4 to
    4,096."""

    @property
    def hbm_bytes(self) -> int:
        return int(self.hbm_gib * GIB)


MIB = 2**20

RETIRED_MEMORY_FIELDS = {
    "reserve_gib": "memory.context_gib, memory.label_gap_gib and memory.nccl_per_communicator_mib",
    "fragmentation_fraction": "memory.dynamic_fragmentation_fraction (a fraction of the dynamic bytes)",
}
"""Fields of the one-number reserve that named parts replaced, and what replaces each (pplan.cost.usable)."""


class MemoryReserveSpec(_Frozen):
    """What of the HBM a training job cannot use, as named parts: a plan's usable bytes are HBM − context − label
    gap − NCCL buffers of the communicators it opens (pplan.cost.usable); fragmentation adds to each rank's need."""

    context_gib: float = Field(ge=0, le=MAX_HBM_GIB, allow_inf_nan=False)
    """CUDA context and framework workspaces (cuBLAS, cuDNN, PyTorch) per GPU, GiB (0 to 10^5; plausible: 0 to 16):
    fixed per GPU."""
    label_gap_gib: float = Field(ge=0, le=MAX_HBM_GIB, allow_inf_nan=False)
    """The label capacity (gpu.hbm_gib) minus the total the driver reports to allocations, GiB (0 to 10^5;
    plausible: 0 to 32)."""
    nccl_per_communicator_mib: float = Field(ge=0, le=MAX_HBM_GIB * 1024, allow_inf_nan=False)
    """NCCL buffers one communicator holds on one GPU, MiB (0 to 10^5 GiB; plausible: 0, or 1 to 16,384); times the
    plan's communicators."""
    dynamic_fragmentation_fraction: float = Field(ge=0, lt=1, allow_inf_nan=False)
    """Caching-allocator fragmentation as a fraction of the dynamic bytes (activations in flight, extra buffers,
    the recompute transient, ZeRO-3's gathered weights, the offload buffer; 0 ≤ x < 1); added to each rank's
    need."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_retired_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in RETIRED_MEMORY_FIELDS.items():
                if old in data:
                    raise SpecRuleError(
                        old,
                        f"{old} is no longer read: usable memory is HBM minus named parts",
                        f"replace memory.{old} with {new}",
                    )
        return data

    @property
    def fixed_bytes(self) -> int:
        """What every GPU loses whatever the plan: the context and the label gap."""
        return int((self.context_gib + self.label_gap_gib) * GIB)

    @property
    def nccl_per_communicator_bytes(self) -> int:
        return int(self.nccl_per_communicator_mib * MIB)


class LinkSpec(_Frozen):
    """One link tier in the alpha-beta model: time = latency + bytes / (bandwidth × efficiency)."""

    name: Name
    """E.g. `NVLink 4 (NVSwitch)`, `InfiniBand NDR 400 Gb/s`."""
    bandwidth_gb_per_s: GbPerS
    """Nominal bandwidth per GPU per direction, GB/s (0.001 to 10^7; plausible, by tier: intra-node 5 to 10,000,
    inter-node 1 to 300, host 4 to 5,000; `PLAUSIBLE`)."""
    efficiency: Fraction
    """Achievable fraction of the nominal bandwidth (10^-9 to 1; measured, see the profile's comments)."""
    latency_us: LatencyUs
    """One-way latency per message, µs (0 to 10^6, i.e. at most 1 s; plausible: 0, or 0.1 to 1,000)."""

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gb_per_s * GB

    @property
    def achievable_bytes_per_s(self) -> float:
        return self.bandwidth_gb_per_s * GB * self.efficiency

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6


class EfficiencySpec(_Frozen):
    """Achievable fractions of the datasheet peaks, and fixed costs, that turn FLOPs and bytes into seconds."""

    matmul: Fraction
    """Fraction of the BF16 peak that large GEMMs reach (10^-9 to 1; fitted by `pplan validate`)."""
    attention: Fraction | None = None
    """Fraction of peak the flash-attention core reaches (10^-9 to 1); defaults to 0.8 × matmul (assumed)."""
    attention_cudnn: Fraction | None = None
    """Fraction of the BF16 peak cuDNN's fused attention core reaches (10^-9 to 1), for stacks that run it
    (`pplan.profiles.stacks.Stack.attention_kernel`); None: no rate for this GPU, and those stacks are priced at the
    flash-attention rate."""
    attention_cudnn_fixed_us: LatencyUs = 0.0
    """cuDNN's fused attention: a fixed time per forward core, µs (the backward pays 2.5 times it)."""
    grouped_gemm: Fraction | None = None
    """Fraction of peak the routed experts' grouped GEMMs reach (10^-9 to 1); defaults to matmul (assumed)."""
    fp8_matmul: Fraction | None = None
    """Fraction of the FP8 peak that FP8 GEMMs reach (10^-9 to 1); defaults to matmul (assumed, unfitted)."""
    hbm: Fraction = 0.8
    """Fraction of HBM bandwidth that memory-bound kernels (norms, activations, optimizer) reach (10^-9 to 1)."""
    loss_hbm: Fraction | None = None
    """Fraction of HBM bandwidth the cross-entropy's FP32 kernels over the logits reach (10^-9 to 1): the cast, the
    row max and sum over the vocabulary, exp and the normalisation forward, the scaling and cast backward
    (`pplan.cost.passtime.LOSS_BYTES`); defaults to `hbm`."""
    kernel_overhead_us: LatencyUs = 4.0
    """Fixed cost per kernel (launch, ramp and tail), µs (0 to 10^6; plausible: 0, or 0.1 to 1,000); what makes
    small GEMMs run below peak."""
    calibrated: bool = False
    """True where these figures were fitted to measured runs on this hardware; `explain` says so. Honoured only
    where `fingerprint` is that of the profile's own figures: a loaded profile whose GPU, link or efficiency figures
    differ from those of the fit (a copied profile, an edited figure, a flag with no fit) reads false."""
    fingerprint: Name | None = Field(default=None, max_length=64)
    """The figures the efficiencies were fitted with, hashed (`pplan.profiles.specs.calibration_fingerprint`: the
    GPU's peaks, HBM bandwidth and SMs, the node size, both links and every efficiency figure); written with the fit.
    None: no fit recorded, and the profile is not calibrated."""

    @property
    def loss_hbm_fraction(self) -> float:
        return self.loss_hbm if self.loss_hbm is not None else self.hbm

    @property
    def attention_fraction(self) -> float:
        return self.attention if self.attention is not None else 0.8 * self.matmul

    @property
    def fp8_matmul_fraction(self) -> float:
        return self.fp8_matmul if self.fp8_matmul is not None else self.matmul

    @property
    def grouped_gemm_fraction(self) -> float:
        return self.grouped_gemm if self.grouped_gemm is not None else self.matmul


class PodSpec(_Frozen):
    """Where the network stops being full-bisection: groups of GPUs (pods) inside which the fabric is non-blocking,
    and the oversubscription of the links above them (Llama 3's clusters: 3,072-GPU pods with full bisection and
    1:7 oversubscription above, Dubey et al. 2024 §3.3.1)."""

    gpus: int = Field(gt=0, le=10**9)
    """GPUs per pod (a multiple of the node size)."""
    oversubscription: float = Field(ge=1, le=1000)
    """Down-link : up-link ratio above the pod; a collective whose group spans pods gets 1/this of the inter-node
    bandwidth."""


class PowerSpec(_Frozen):
    """What a node draws at full load, for energy estimates (`pplan size`): the GPUs' board power and the rest of
    the node (CPUs, memory, NICs, switches, fans), from the system's datasheet; facility overhead (PUE) is given
    per run."""

    gpu_watts: float = Field(gt=0, le=100_000)
    """One GPU's board power at full load (the datasheet's maximum TDP), W (plausible: 50 to 10,000)."""
    node_overhead_watts: float = Field(ge=0, le=10_000_000)
    """The node's maximum system power less its GPUs' board power, W (plausible: 0, or 50 to 10^6)."""


class CalibrationSpec(_Frozen):
    """How far the profile's fitted figures are known (`pplan validate --fit` derives every field from the bundled
    public runs on this GPU type): the spread of its errors when each set is left out of the fit, and the envelope
    of the runs it was fitted to. pplan.cost.uncertainty turns them into an interval on every predicted step."""

    runs: int = Field(gt=0, le=100_000)
    """End-to-end runs behind the errors."""
    error_low: float = Field(gt=-1, le=0)
    """10th percentile of (predicted − published) / published over those runs, each predicted with the efficiency
    fitted without its set (leave one set out)."""
    error_high: float = Field(ge=0, lt=10)
    """90th percentile of the same."""
    tp_max: int = Field(gt=0, le=10**9)
    pp_max: int = Field(gt=0, le=10**9)
    cp_max: int = Field(gt=0, le=10**9)
    zero_max: int = Field(ge=0, le=3)
    """The highest ZeRO stage a calibration run used."""
    params_min_b: float = Field(gt=0, le=1e6)
    params_max_b: float = Field(gt=0, le=1e6)
    """Model sizes, billions of parameters."""
    seq_len_min: int = Field(gt=0, le=MAX_SEQ)
    seq_len_max: int = Field(gt=0, le=MAX_SEQ)
    gpus_max: int = Field(gt=0, le=10**9)
    schedules: tuple[Name, ...] = Field(strict=False, max_length=64)
    """Schedule families the runs used (a TOML array)."""
    stacks: tuple[Name, ...] = Field(strict=False, max_length=64)
    """Software stacks the runs were made with (pplan.profiles.stacks)."""
    precisions: tuple[Name, ...] = Field(default=("bf16",), strict=False, max_length=64)
    """GEMM precisions the runs used (a TOML array; bf16, fp8, mxfp8)."""
    routed: bool = False
    """Whether a mixture-of-experts run is among them."""
    ep_max: int = Field(default=1, gt=0, le=10**9)
    """The largest expert-parallel degree a run used."""
    tp_comm_overlap: bool = False
    """Whether a run overlapped its tensor-parallel collectives with its GEMMs (`tp_comm_overlap`)."""


class HardwareSpec(_Frozen):
    """A cluster building block: a node of identical GPUs, the link inside it and the network between nodes."""

    name: Name
    """Short name, e.g. `h100-sxm-80gb`."""
    description: FreeText = ""
    """One line for `pplan profiles`."""
    gpus_per_node: int = Field(gt=0, le=MAX_GPUS_PER_NODE)
    """GPUs sharing the intra-node fabric (NVLink/NVSwitch; 1 to 1024)."""
    gpu: GpuSpec
    memory: MemoryReserveSpec
    intra_node: LinkSpec
    """GPU-to-GPU inside a node."""
    inter_node: LinkSpec
    """GPU-to-GPU across nodes (per GPU: one NIC per GPU on DGX nodes)."""
    efficiency: EfficiencySpec
    pod: PodSpec | None = None
    """Oversubscription above a pod (`[pod]`); None: the inter-node fabric is full-bisection at any size (DGX
    SuperPOD's rail-optimised fat tree)."""
    calibration: CalibrationSpec | None = None
    """The fitted figures' error spread and envelope (`[calibration]`); None where no public run on this GPU type
    was fitted, or where the efficiencies are not calibrated (their figures are not those of the fit), and pplan
    then says every prediction on it is extrapolated."""
    power: PowerSpec | None = None
    """Full-load power per GPU and per node (`[power]`); None: no energy estimate (never guessed)."""
    price_usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=1_000_000)
    """A price per GPU-hour for cost estimates (`pplan size`; --price overrides it); None: no cost (never
    guessed: bundled profiles carry none)."""
    host_link: LinkSpec | None = None
    """GPU to host memory and back (the PCIe link to the CPU), per GPU per direction: what activation offload
    copies over. Every bundled profile states it; a profile without it loads, and a plan that offloads on it is
    refused naming this field (`require_host_link`): no default would be honest across hosts."""

    def require_host_link(self) -> LinkSpec:
        """The host link, or a ConfigError naming `host_link` when the profile has none (activation offload)."""
        if self.host_link is None:
            raise ConfigError(
                "--offload-modules", f"hardware profile {self.name} has no [host_link] section (the GPU-to-host "
                "link activation offload copies over)",
                "add [host_link] with name, bandwidth_gb_per_s, efficiency and latency_us, or drop --offload-modules",
            )  # fmt: skip
        return self.host_link

    @field_validator("efficiency")
    @classmethod
    def _honest_calibration(cls, efficiency: EfficiencySpec, info: ValidationInfo) -> EfficiencySpec:
        """`calibrated` only where the fit's fingerprint is that of this profile's figures (module docstring)."""
        if not efficiency.calibrated:
            return efficiency
        data = info.data
        if not all(key in data for key in ("gpus_per_node", "gpu", "intra_node", "inter_node")):
            return efficiency  # another field is refused: the profile does not load
        own = _fingerprint(
            data["gpus_per_node"], data["gpu"], data["intra_node"], data["inter_node"], efficiency
        )
        if efficiency.fingerprint == own:
            return efficiency
        return efficiency.model_copy(update={"calibrated": False})

    @field_validator("calibration")
    @classmethod
    def _calibration_of_a_fit(
        cls, calibration: CalibrationSpec | None, info: ValidationInfo
    ) -> CalibrationSpec | None:
        """No error band or envelope where the efficiencies are not calibrated: `[calibration]` describes how far the
        fitted figures are known, and a profile whose figures are not the fitted ones (a copy, an edit) has not
        earned it; pplan then says every prediction on it is extrapolated, as for any uncalibrated GPU."""
        efficiency = info.data.get("efficiency")
        if calibration is not None and isinstance(efficiency, EfficiencySpec) and not efficiency.calibrated:
            return None
        return calibration

    @model_validator(mode="after")
    def _check_usable_memory(self) -> HardwareSpec:
        if self.hbm_after_fixed_bytes <= 0:
            fixed = self.memory.context_gib + self.memory.label_gap_gib
            fix = "make memory.context_gib + memory.label_gap_gib less than gpu.hbm_gib"
            # a figure in the wrong unit (a context of 768 "GiB" that is MiB) is the likelier cause: say which
            slips = [
                f"{problem.field}: {problem.fix}"
                for problem in implausible_figures(self)
                if problem.field in ("gpu.hbm_gib", "memory.context_gib", "memory.label_gap_gib")
                and problem.fix.startswith("a value in")
            ]
            raise SpecRuleError(
                "memory.context_gib",
                f"the context and label gap ({fixed:g} GiB) leave no usable HBM of gpu.hbm_gib = "
                f"{self.gpu.hbm_gib:g}",
                f"{fix} ({slips[0]})" if slips else fix,
            )
        return self

    @model_validator(mode="after")
    def _check_plausible(self) -> HardwareSpec:
        # After the usable-memory check: a context larger than the HBM is named as such, not as implausible.
        problems = implausible_figures(self)
        if problems:
            first, *others = problems
            also = f" (also implausible: {', '.join(p.field for p in others)})" if others else ""
            raise SpecRuleError(first.field, first.message + also, first.fix)
        return self

    def with_efficiency(self, **changes: float | bool | None) -> HardwareSpec:
        """This profile with some `efficiency` figures replaced (a fit, a sensitivity probe); nothing else moves.

        `calibrated=True` says the caller has just fitted the figures to this hardware (`pplan bench --calibrate`):
        the new figures' fingerprint is recorded with them, so the profile it writes loads as calibrated."""
        efficiency = self.efficiency.model_copy(update=changes)
        if changes.get("calibrated") is True:
            fingerprint = _fingerprint(
                self.gpus_per_node, self.gpu, self.intra_node, self.inter_node, efficiency
            )
            efficiency = efficiency.model_copy(update={"fingerprint": fingerprint})
        return self.model_copy(update={"efficiency": efficiency})

    @property
    def fitted_to_other_figures(self) -> bool:
        """The efficiencies carry a fit's fingerprint, but of figures other than this profile's (a copied or edited
        profile): why it is not calibrated."""
        fingerprint = self.efficiency.fingerprint
        return fingerprint is not None and fingerprint != calibration_fingerprint(self)

    @property
    def hbm_after_fixed_bytes(self) -> int:
        """HBM minus the parts every GPU loses whatever the plan (context, label gap); a plan's usable bytes
        also lose its NCCL buffers (pplan.cost.usable)."""
        return self.gpu.hbm_bytes - self.memory.fixed_bytes


# --- calibration: which figures a fit was made with ------------------------------------------------------

FINGERPRINTED_GPU = (
    "peak_bf16_tflops",
    "peak_fp8_tflops",
    "block_scaled_fp8",
    "hbm_bandwidth_gb_per_s",
    "sms",
)
"""The GPU figures a fitted step time depends on (capacity and memory reserves set what fits, not how fast)."""
FINGERPRINTED_LINK = ("bandwidth_gb_per_s", "efficiency", "latency_us")
"""The figures of the intra- and inter-node links that the fitted runs' collectives crossed. The host link, a
`[pod]` and the power and price sections are left out: no calibration run offloaded or crossed an oversubscribed
pod (their costs are modelled, never fitted), and neither watts nor dollars enter a step time."""
_NOT_FINGERPRINTED = {"calibrated", "fingerprint"}


def calibration_fingerprint(hardware: HardwareSpec) -> str:
    """The fingerprint `efficiency.fingerprint` must hold for `hardware` to be calibrated: 16 hex digits of the
    SHA-256 of the figures a fit is made with (`FINGERPRINTED_GPU`, `FINGERPRINTED_LINK`, the node size and every
    efficiency figure but `calibrated` and `fingerprint` itself), so changing any of them, or copying the
    efficiencies to another GPU, leaves the fingerprint behind. A fit stamps it (`HardwareSpec.with_efficiency`);
    for a profile re-fitted by hand, the value to write is `calibration_fingerprint(load_hardware(PATH))`."""
    return _fingerprint(
        hardware.gpus_per_node, hardware.gpu, hardware.intra_node, hardware.inter_node, hardware.efficiency
    )


def _fingerprint(
    gpus_per_node: int, gpu: GpuSpec, intra: LinkSpec, inter: LinkSpec, efficiency: EfficiencySpec
) -> str:
    figures: dict[str, object] = {"gpus_per_node": gpus_per_node}
    figures.update({f"gpu.{name}": getattr(gpu, name) for name in FINGERPRINTED_GPU})
    for tier, link in (("intra_node", intra), ("inter_node", inter)):
        figures.update({f"{tier}.{name}": getattr(link, name) for name in FINGERPRINTED_LINK})
    figures.update(
        {
            f"efficiency.{name}": getattr(efficiency, name)
            for name in type(efficiency).model_fields
            if name not in _NOT_FINGERPRINTED
        }
    )
    # None (a figure not stated) is left out, so a new optional figure leaves existing fingerprints as they are.
    text = ";".join(
        f"{key}={_canonical(value)}" for key, value in sorted(figures.items()) if value is not None
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _canonical(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))  # 3350 and 3350.0 are one figure
    return str(value)


# --- physical plausibility of hardware figures -----------------------------------------------------------


@dataclass(frozen=True)
class UnitSlip:
    """A likely wrong unit: a figure written in `unit` is `factor` times the value the field's own unit wants."""

    unit: str
    factor: float


_TB_PER_S = UnitSlip("TB/s", 1e3)
_MB_PER_S = UnitSlip("MB/s", 1e-3)
_GBIT_PER_S = UnitSlip("Gb/s", 1 / 8)
_PFLOPS = UnitSlip("PFLOP/s", 1e3)
_GFLOPS = UnitSlip("GFLOP/s", 1e-3)
_MIB_FOR_GIB = UnitSlip("MiB", 1 / 1024)
_TB_FOR_GIB = UnitSlip("TB", 1e3)  # NVIDIA's "GB" labels are GiB of stacks: "0.141 TB" would be 141
_GIB_FOR_MIB = UnitSlip("GiB", 1024)
_KIB_FOR_MIB = UnitSlip("KiB", 1 / 1024)
_NS = UnitSlip("ns", 1e-3)
_MS = UnitSlip("ms", 1e3)
_S = UnitSlip("s", 1e6)
_KW = UnitSlip("kW", 1e3)


@dataclass(frozen=True)
class Plausible:
    """The physical range of one hardware figure, inclusive, in the field's unit; `zero`: 0 also passes (the
    figure switched off: no latency, no overhead). Wider than any bundled profile, so that GPUs a few generations
    on still pass, and narrow enough that a figure written in a unit `slips` names (1,000× off, 1,024×, or 8× for
    bits against bytes) falls outside it."""

    low: float
    high: float
    unit: str
    what: str
    """Whose figures the range spans ("any GPU's memory bandwidth"), for the message."""
    slips: tuple[UnitSlip, ...] = ()
    zero: bool = False

    def problem(self, field: str, value: float) -> SpecProblem | None:
        """Why `value` is implausible, with the likely unit and the value to write; None if it is plausible."""
        if self.low <= value <= self.high or (self.zero and value == 0):
            return None
        where = "below" if value < self.low else "above"
        span = f"{_figure(self.low)}–{_figure(self.high)} {self.unit}"
        message = (
            f"{_figure(value)} {self.unit} is {where} {self.what} ({'0, or ' if self.zero else ''}{span})"
        )
        for slip in self.slips:
            fixed = value * slip.factor
            if self.low <= fixed <= self.high:
                return SpecProblem(field, message, f"a value in {slip.unit}? write {_plain(fixed)}")
        fix = f"give a number from {_figure(self.low)} to {_figure(self.high)} {self.unit}"
        return SpecProblem(field, message, fix + (" (or 0)" if self.zero else ""))


_LATENCY_SLIPS = (_NS, _MS, _S)
_LINK_SLIPS = (_TB_PER_S, _MB_PER_S, _GBIT_PER_S)

PLAUSIBLE: dict[str, Plausible] = {
    # A100's 312 is the lowest bundled peak, GB200's 2,500 the highest; 20,000 leaves 8× for generations to come.
    # Nothing under 10 TFLOP/s trains a transformer (a T4 has 65 FP16): a Blackwell's "2.5 PFLOP/s" written as
    # 2.5 falls below, its GFLOP/s above.
    "gpu.peak_bf16_tflops": Plausible(10, 20_000, "TFLOP/s", "any GPU's dense BF16 peak", (_PFLOPS, _GFLOPS)),
    # H100's 1,979 is the lowest bundled FP8 peak, GB200's 5,000 the highest: 50,000 is 10× that.
    "gpu.peak_fp8_tflops": Plausible(20, 50_000, "TFLOP/s", "any GPU's dense FP8 peak", (_PFLOPS, _GFLOPS)),
    # A100 40GB's 40 GiB is the least bundled, GB200's 186 the most; a GPU one trains on has 8 GiB or more, and a
    # 1 TB package (announced for 2027) fits under 4,096 four times. 80 GiB written in MiB (81,920) lies above.
    "gpu.hbm_gib": Plausible(4, 4_096, "GiB", "any GPU's memory", (_MIB_FOR_GIB, _TB_FOR_GIB)),
    # A100 40GB's 1,555 GB/s is the lowest bundled HBM, B200's 8,000 the highest: 100,000 is 12× that. The floor
    # of 100 admits GDDR cards (an L4's 300 GB/s) and still catches a TB/s figure (4.8 for 4,800).
    "gpu.hbm_bandwidth_gb_per_s": Plausible(
        100, 100_000, "GB/s", "any GPU's memory bandwidth", (_TB_PER_S, _MB_PER_S)
    ),
    # A100's 108 and H100's 132 SMs are the bundled ones, a B200 has 148; 4,096 is a wide margin for counts.
    "gpu.sms": Plausible(4, 4_096, "SMs", "any GPU's streaming multiprocessor count"),
    # Bundled: 0.75 GiB (a CUDA context and framework workspaces, under 1 GiB measured); 16 GiB is 20× that, and a
    # figure in MiB (768) lies above.
    "memory.context_gib": Plausible(0, 16, "GiB", "any CUDA context and workspaces", (_MIB_FOR_GIB,)),
    # Bundled: 0.41 to 2.0 GiB (about 1 % of the label); 32 GiB covers 1 % of a 3 TiB GPU; 850 MiB lies above.
    "memory.label_gap_gib": Plausible(0, 32, "GiB", "any label-to-usable gap", (_MIB_FOR_GIB,)),
    # Bundled: 294 MiB (16 channels × 2 connections × 9.2 MiB); 16,384 MiB (16 GiB) is 55× that; under 1 MiB is
    # less than one channel's LL buffer: a figure in GiB (0.29) or KiB (301,056).
    "memory.nccl_per_communicator_mib": Plausible(
        1, 16_384, "MiB", "any NCCL communicator's buffers", (_GIB_FOR_MIB, _KIB_FOR_MIB), zero=True
    ),
    # NVLink per GPU per direction: H800's 200 GB/s is the lowest bundled, NVLink 5's 900 the highest; 10,000 is
    # 11× that. 5 GB/s admits PCIe-only nodes (Gen3 x16: 16 GB/s); NVLink 5 written as "0.9 TB/s" falls below.
    "intra_node.bandwidth_gb_per_s": Plausible(5, 10_000, "GB/s", "any intra-node link", _LINK_SLIPS),
    # NICs per GPU per direction: HDR's 25 GB/s is the lowest bundled, NDR's 50 the highest; 300 (2.4 Tb/s) is 1.5×
    # the 1.6 Tb/s NICs announced next. NICs are sold in Gb/s: NDR written as 400 (or XDR as 800) lies above.
    # 1 GB/s is under 10 GbE.
    "inter_node.bandwidth_gb_per_s": Plausible(
        1, 300, "GB/s", "any network link per GPU", (_GBIT_PER_S, _TB_PER_S, _MB_PER_S)
    ),
    # PCIe Gen4 x16's 32 GB/s is the lowest bundled host link, NVLink-C2C's 225 the highest; 4 GB/s is a Gen3 x4.
    "host_link.bandwidth_gb_per_s": Plausible(4, 5_000, "GB/s", "any GPU-to-host link", _LINK_SLIPS),
    # Bundled: 3 to 10 µs per message. Under 0.1 µs is faster than any NIC or NVSwitch hop; over 1 ms is a WAN.
    # 0 switches latency off. A figure in ns (3,000) lies above, one in ms (0.003) or seconds (3e-6) below.
    "intra_node.latency_us": Plausible(0.1, 1_000, "µs", "any link's latency", _LATENCY_SLIPS, zero=True),
    "inter_node.latency_us": Plausible(0.1, 1_000, "µs", "any link's latency", _LATENCY_SLIPS, zero=True),
    "host_link.latency_us": Plausible(0.1, 1_000, "µs", "any link's latency", _LATENCY_SLIPS, zero=True),
    # Bundled: 4 µs per kernel and cuDNN attention's 41.4 µs per forward; a kernel launch takes a few µs, and
    # 1 ms per kernel would be a stalled GPU. A figure in ns (4,000) lies above.
    "efficiency.kernel_overhead_us": Plausible(
        0.1, 1_000, "µs", "any kernel's fixed cost", _LATENCY_SLIPS, zero=True
    ),
    "efficiency.attention_cudnn_fixed_us": Plausible(
        0.1, 1_000, "µs", "any kernel's fixed cost", _LATENCY_SLIPS, zero=True
    ),
    # A100's 400 W is the lowest bundled board power, B200's 1,000 W the highest; 10,000 W is 10× that, and 50 W is
    # under any datacenter card (an L4 draws 72). "0.7 kW" written as 0.7 falls below.
    "power.gpu_watts": Plausible(50, 10_000, "W", "any GPU's board power", (_KW,)),
    # Bundled: 3,300 to 6,300 W per node besides its GPUs; 1 MW covers a rack-scale node of hundreds of GPUs. 0
    # counts the GPUs only; under 50 W no node's CPUs, NICs and fans draw: a figure in kW (4.6) falls below.
    "power.node_overhead_watts": Plausible(
        50, 1_000_000, "W", "any node's power besides its GPUs", (_KW,), zero=True
    ),
}
"""Physical range of each hardware figure, by its dotted field; every bundled profile passes (tested), and the
comment above each says where its bounds come from. Fractions (efficiencies) need none: their hard range, 0 to 1,
already refuses a percentage."""

_GBIT_IN_NAME = re.compile(r"(\d+(?:\.\d+)?)\s*Gb/s")


def implausible_figures(hardware: HardwareSpec) -> list[SpecProblem]:
    """Every figure of `hardware` outside its `PLAUSIBLE` range, in the table's order; then every link whose
    bandwidth is the Gb/s figure of its own name (`InfiniBand NDR 400 Gb/s` at 400 GB/s: bits read as bytes)."""
    problems: list[SpecProblem] = []
    for field, bound in PLAUSIBLE.items():
        value: Any = hardware
        for part in field.split("."):
            value = getattr(value, part, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            problem = bound.problem(field, value)
            if problem is not None:
                problems.append(problem)
    flagged = {problem.field for problem in problems}
    for tier in ("intra_node", "inter_node", "host_link"):
        link = getattr(hardware, tier)
        field = f"{tier}.bandwidth_gb_per_s"
        named = _GBIT_IN_NAME.search(link.name) if link is not None else None
        if (
            link is None
            or named is None
            or field in flagged
            or float(named.group(1)) != link.bandwidth_gb_per_s
        ):
            continue
        problems.append(
            SpecProblem(
                field,
                f"{_figure(link.bandwidth_gb_per_s)} GB/s is the {named.group(0)} of the link's name "
                f"({link.name!r}) in bits, not bytes",
                f"a value in Gb/s? write {_plain(link.bandwidth_gb_per_s / 8)}",
            )
        )
    return problems


def _figure(value: float) -> str:
    """A figure for a message: 4.8; 100,000; 3e-06."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}"


def _plain(value: float) -> str:
    """A figure to write into a TOML file: 4800; 0.75; 56.25."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _number_or_list(value: object) -> str:
    return "list" if isinstance(value, list) else "number"


DurationOrList = Annotated[
    Annotated[Duration, Tag("number")] | Annotated[list[Duration], Field(max_length=MAX_STAGES), Tag("list")],
    Discriminator(_number_or_list),
]


class StageDurationsSpec(_Frozen):
    """Pass durations for `pplan schedule --durations FILE`, in any one consistent unit.

    Each of f, b, w is one number for every stage or a list with one per (virtual) stage (at most 10^5); every
    number is finite, 0 to 10^12, and not all of f, b, w are zero.
    """

    f: DurationOrList = 1.0
    """Forward."""
    b: DurationOrList = 1.0
    """Input-gradient backward (Qi et al.'s B; torch's I)."""
    w: DurationOrList = 1.0
    """Weight-gradient backward."""
    comm: Duration = 0.0
    """Latency of one hop between ranks."""

    @model_validator(mode="after")
    def _check_some_work(self) -> StageDurationsSpec:
        values = [x for v in (self.f, self.b, self.w) for x in (v if isinstance(v, list) else [v])]
        if values and not any(values):
            raise SpecRuleError(
                "f", "every duration of f, b and w is zero", "give some pass a positive duration"
            )
        return self


# --- turning a ValidationError into (field, message, fix) ------------------------------------------------


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec's input: the dotted field (`gpu.hbm_gib`, `f[2]`; "" for the whole spec)."""

    field: str
    message: str
    fix: str


_UNITS = {"_tflops": " TFLOP/s", "_gb_per_s": " GB/s", "_gib": " GiB", "_mib": " MiB", "_us": " µs"}


def spec_problems(
    spec_type: type[BaseModel], err: ValidationError, where: str = "the file"
) -> list[SpecProblem]:
    """What is wrong, first problem first, each with the field, the message and the fix (`where` to fix it)."""
    problems: list[SpecProblem] = []
    for error in err.errors(include_url=False):
        path, info = _walk(spec_type, error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        kind = error["type"]
        allowed = _allowed(info, path[-1] if path else "")
        value = error.get("input")
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, SpecRuleError):
            if cause.field:
                path = [*path, *cause.field.split(".")]
            fix = cause.fix or allowed or f"fix the value in {where}"
        elif kind == "missing":
            fix = f"add {_dotted(path)} to {where}"
        elif kind == "extra_forbidden":
            fix = "remove it or correct its spelling"
        elif kind == "bool_type":
            fix = "write true or false"
        elif kind == "too_long":
            fix = f"give at most {_number((error.get('ctx') or {}).get('max_length', 0))} values"
        elif isinstance(value, bool) and kind in {"int_type", "float_type"}:
            message = f"expected a number, got {'true' if value else 'false'}"
            fix = allowed or f"fix the value in {where}"
        elif kind in _RANGE_ERRORS and allowed:
            fix = allowed
        else:
            fix = f"fix the value in {where}"
        problems.append(SpecProblem(_dotted(path), message, fix))
    return problems


_RANGE_ERRORS = {
    "int_type",
    "float_type",
    "finite_number",
    "less_than",
    "less_than_equal",
    "greater_than_equal",
}


def _dotted(path: list[str]) -> str:
    return ".".join(path).replace(".[", "[")


def _walk(spec_type: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[list[str], FieldInfo | None]:
    """The user-facing parts of a pydantic error location (no union tags) and the leaf field's info."""
    model: type[BaseModel] | None = spec_type
    info: FieldInfo | None = None
    path: list[str] = []
    for part in loc:
        if isinstance(part, int):
            path.append(f"[{part}]")
        elif model is not None:
            path.append(part)
            info = model.model_fields.get(part)
            model = _section_model(info.annotation if info is not None else None)
            if model is not None:
                info = None
        # else: a union member's tag (`number`, `list`), not something the user wrote
    return path, info


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The spec a field holds (`LinkSpec`, or the `PodSpec` of an optional `PodSpec | None`), else None."""
    for member in (annotation, *get_args(annotation)):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def _allowed(info: FieldInfo | None, name: str) -> str:
    """What to give instead, from the field's stated range ("give a whole number from 1 to 10^4"); "" if none."""
    if info is None:
        return ""
    integer = info.annotation is int or int in get_args(info.annotation)
    low = high = ""
    for item in _metadata(info.metadata, info.annotation):
        if isinstance(item, Gt) and not low:
            bound: Any = item.gt
            low = f"from {_number(bound + 1)}" if integer else f"above {_number(bound)}"
        elif isinstance(item, Ge):
            low = f"from {_number(item.ge)}"
        elif isinstance(item, Floor):
            low = f"from {_number(item.minimum)}"
        elif isinstance(item, Le):
            high = _number(item.le)
        elif isinstance(item, Lt):
            high = f"below {_number(item.lt)}"
    if not high:
        return ""
    unit = next((u for suffix, u in _UNITS.items() if name.endswith(suffix)), "")
    joint = " and at most " if low.startswith("above") else " to "
    return f"give a {'whole ' if integer else ''}number {low}{joint}{high}{unit}"


def _metadata(metadata: list[Any], annotation: Any) -> Iterator[Any]:
    """Constraints on a field, including those inside `Annotated[...]` members of a union or an Optional."""
    yield from metadata
    origin = get_origin(annotation)
    if origin is Annotated:
        for item in get_args(annotation)[1:]:
            yield from item.metadata if isinstance(item, FieldInfo) else (item,)
        yield from _metadata([], get_args(annotation)[0])
    elif origin in (Union, types.UnionType):
        for member in get_args(annotation):
            yield from _metadata([], member)


def _number(value: Any) -> str:
    """1,024; 10^7; 0.001."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        value = int(value)
    if isinstance(value, int):
        text = str(abs(value))
        if len(text) > 4 and text[0] == "1" and not text[1:].strip("0"):
            return f"10^{len(text) - 1}"
        return f"{value:,}"
    return f"{value:g}"
