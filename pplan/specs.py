"""Validated descriptions of a model shape and a hardware profile (the boundary of the analytic core).

Profiles arrive as TOML (or a Hugging Face `config.json` for models) and are validated here once; units are in
the field names and are converted to bytes, FLOP/s and seconds exactly once, by the properties below.
Decimal prefixes: GB = 1e9 bytes, GiB = 2**30 bytes, TFLOP/s = 1e12 FLOP/s, µs = 1e-6 s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

GIB = 2**30
GB = 10**9

MlpKind = Literal["gelu", "swiglu", "squared-relu"]
NormKind = Literal["layernorm", "rmsnorm"]
PositionKind = Literal["rope", "learned", "alibi", "none"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ModelSpec(_Frozen):
    """A decoder-only transformer's shape: everything parameter, FLOP and activation counts need."""

    name: str
    """Short name, e.g. `llama3-70b`."""
    description: str = ""
    """One line for `pplan profiles`."""
    source: str = ""
    """Where the shape comes from (paper, model card, config file)."""
    num_layers: PositiveInt
    """Transformer layers L."""
    hidden_size: PositiveInt
    """Model width h."""
    num_attention_heads: PositiveInt
    """Query heads a."""
    num_kv_heads: PositiveInt | None = None
    """Key/value heads g (grouped-query attention); defaults to the query heads (multi-head attention)."""
    head_dim: PositiveInt | None = None
    """Per-head width; defaults to hidden_size / num_attention_heads."""
    ffn_hidden_size: PositiveInt
    """MLP inner width f (for SwiGLU: the width of each of the gate and up projections)."""
    mlp: MlpKind
    """MLP kind: `gelu` (two matrices), `swiglu` (three matrices), `squared-relu` (two matrices)."""
    norm: NormKind
    """`layernorm` (weight and bias) or `rmsnorm` (weight only)."""
    vocab_size: PositiveInt
    """Vocabulary V as the run uses it (Megatron pads GPT-2's 50257 to 51200; Llama 3 uses 128256 unpadded)."""
    tied_embeddings: bool
    """True when the output layer reuses the input embedding matrix."""
    seq_len: PositiveInt
    """Default training sequence length s."""
    position_embedding: PositionKind = "rope"
    """`learned` adds a max_position_embeddings × h table on the first stage."""
    max_position_embeddings: PositiveInt | None = None
    """Rows of a learned position table; defaults to seq_len."""
    qkv_bias: bool = False
    """Bias on the query/key/value projections (GPT, Qwen2)."""
    linear_bias: bool = False
    """Bias on the attention output projection and the MLP matrices (GPT)."""
    dropout: bool = False
    """True when the layer applies dropout (GPT-3 does, Llama does not); adds 1-byte masks to the activations."""

    @model_validator(mode="after")
    def _check_heads(self) -> ModelSpec:
        if self.num_kv_heads is not None and self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads={self.num_kv_heads} must divide num_attention_heads={self.num_attention_heads}"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}; set head_dim explicitly"
            )
        return self

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def position_rows(self) -> int:
        return self.max_position_embeddings or self.seq_len


class GpuSpec(_Frozen):
    """One accelerator: datasheet peaks and capacity (never efficiencies)."""

    name: str
    """Marketing name, e.g. `H100 SXM5 80GB`."""
    peak_bf16_tflops: PositiveFloat
    """Dense BF16 tensor-core peak, TFLOP/s (datasheet, no sparsity)."""
    peak_fp8_tflops: PositiveFloat | None = None
    """Dense FP8 peak, TFLOP/s, where the GPU has it."""
    hbm_gib: PositiveFloat
    """HBM capacity in GiB (NVIDIA's "80 GB" parts carry 80 GiB of HBM stacks)."""
    hbm_bandwidth_gb_per_s: PositiveFloat
    """HBM bandwidth, GB/s."""

    @property
    def hbm_bytes(self) -> int:
        return int(self.hbm_gib * GIB)


class MemoryReserveSpec(_Frozen):
    """What of the HBM a training job cannot use for weights, states and activations."""

    reserve_gib: float = Field(ge=0)
    """Fixed reserve: CUDA context, NCCL buffers, the gap between the label and what the driver exposes."""
    fragmentation_fraction: float = Field(ge=0, lt=1)
    """Fraction of HBM lost to allocator fragmentation."""


class LinkSpec(_Frozen):
    """One link tier in the alpha-beta model: time = latency + bytes / (bandwidth × efficiency)."""

    name: str
    """E.g. `NVLink 4 (NVSwitch)`, `InfiniBand NDR 400 Gb/s`."""
    bandwidth_gb_per_s: PositiveFloat
    """Nominal bandwidth per GPU per direction, GB/s."""
    efficiency: float = Field(gt=0, le=1)
    """Achievable fraction of the nominal bandwidth (measured, see the profile's comments)."""
    latency_us: float = Field(ge=0)
    """One-way latency per message, µs."""

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

    matmul: float = Field(gt=0, le=1)
    """Fraction of the BF16 peak that large GEMMs reach (fitted by `pplan validate` where calibrated)."""
    attention: float | None = Field(default=None, gt=0, le=1)
    """Fraction of peak the flash-attention core reaches; defaults to 0.8 × matmul (assumed)."""
    hbm: float = Field(default=0.8, gt=0, le=1)
    """Fraction of HBM bandwidth that memory-bound kernels (norms, activations, optimizer) reach."""
    kernel_overhead_us: float = Field(default=4.0, ge=0)
    """Fixed cost per kernel (launch, ramp and tail), µs; what makes small GEMMs run below peak."""
    calibrated: bool = False
    """False until fitted to published runs; `explain` says so."""

    @property
    def attention_fraction(self) -> float:
        return self.attention if self.attention is not None else 0.8 * self.matmul


class HardwareSpec(_Frozen):
    """A cluster building block: a node of identical GPUs, the link inside it and the network between nodes."""

    name: str
    """Short name, e.g. `h100-sxm-80gb`."""
    description: str = ""
    """One line for `pplan profiles`."""
    gpus_per_node: PositiveInt
    """GPUs sharing the intra-node fabric (NVLink/NVSwitch)."""
    gpu: GpuSpec
    memory: MemoryReserveSpec
    intra_node: LinkSpec
    """GPU-to-GPU inside a node."""
    inter_node: LinkSpec
    """GPU-to-GPU across nodes (per GPU: one NIC per GPU on DGX nodes)."""
    efficiency: EfficiencySpec

    @property
    def usable_hbm_bytes(self) -> int:
        """HBM minus the fixed reserve and the fragmentation allowance."""
        total = self.gpu.hbm_bytes
        return int(total - self.memory.reserve_gib * GIB - self.memory.fragmentation_fraction * total)


class StageDurationsSpec(_Frozen):
    """Pass durations for `pplan schedule --durations FILE`, in any one consistent unit.

    Each of f, b, w is one number for every stage or a list with one per (virtual) stage.
    """

    f: NonNegativeFloat | list[NonNegativeFloat] = 1.0
    """Forward."""
    b: NonNegativeFloat | list[NonNegativeFloat] = 1.0
    """Input-gradient backward (Qi et al.'s B; torch's I)."""
    w: NonNegativeFloat | list[NonNegativeFloat] = 1.0
    """Weight-gradient backward."""
    comm: NonNegativeFloat = 0.0
    """Latency of one hop between ranks."""
