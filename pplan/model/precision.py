"""What training in FP8 changes, as data: which GEMMs run in FP8, which saved tensors are kept in FP8, and the
extra bytes the FP8 copies of the weights cost.

Precisions (a plan field): `bf16`; `fp8`, Transformer Engine's per-tensor scaled FP8 (E4M3 forward, E5M2
gradients: the `hybrid` format; delayed or current scaling cost the same here) on Hopper and later; `mxfp8`,
block-scaled FP8 (one E8M0 scale per 32 elements, OCP Microscaling) on Blackwell.
- GEMMs in FP8: every Linear of a transformer layer (QKV / MLA projections, output projection, MLP and expert
  matrices) in F, I and W, at the profile's FP8 peak × `efficiency.fp8_matmul`. The attention core (flash
  attention), the router, the embedding and the output layer stay BF16 (Megatron-Core's FP8 recipe wraps the
  layers' Linears only; NeMo and Megatron keep the first and last layers' ends in BF16).
- Saved activations: a Transformer Engine Linear keeps its quantised input for the weight gradient, so each
  Linear's input is kept in 1 byte per element instead of 2 (`FP8_SAVED_INPUTS`; MXFP8 adds one scale byte per
  32 elements); the norms' inputs, the attention core's q, k, v and the activation function's input stay BF16.
- Weights: the BF16 weights stay (Megatron's default, the optimizer's FP32 master copy behind them), and each
  FP8 Linear's weight is also kept quantised for the step: a copy and its transpose on Hopper, whose FP8 GEMMs
  take one layout only (2 bytes per parameter, `WEIGHT_CACHE_BYTES`), the copy alone on Blackwell, whose FP8 GEMMs
  take any layout (1, `ANY_LAYOUT_CACHE_BYTES`), a row-wise and a column-wise copy with their scales under MXFP8
  (2 + 2/32). With FP8 primary weights (`fp8_param_gather`, Megatron-LM's `--fp8-param-gather`) the BF16 copy of
  those weights goes, and the quantised copies are the weights. Under ZeRO-3 (FSDP) no copy lasts the step: the
  weights are sharded, as FP8 primary weights (`PRIMARY_BYTES`) with `fp8_param_gather`, and each layer's
  quantised copies exist while its gathered weights do (pplan.cost.memory).
- Optional, DeepSeek-V3's framework (report §3.3.2): the MoE SwiGLU's input kept in FP8 too (`fp8_swiglu_input`).
- Casts: each FP8 GEMM input is quantised by a memory-bound cast (and transpose) kernel, read 2 bytes and write 2
  per element (`CAST_BYTES`), in the forward for the Linears' inputs and in the backward for their output
  gradients (counted as the same number of elements).
"""

from __future__ import annotations

from typing import Literal

Precision = Literal["bf16", "fp8", "mxfp8"]

FP8_SAVED_INPUTS = frozenset(
    {
        "attention/qkv_input",
        "attention/q_up_input",
        "attention/kv_up_input",
        "attention/proj_input",
        "mlp/fc1_input",
        "mlp/activation_output",
        "moe/experts_input",
        "moe/experts/activation_output",
        "moe/shared_experts/activation_output",
    }
)
"""The itemised saved tensors (pplan.model.activations) that are a Linear's input, kept quantised under FP8."""
FP8_SWIGLU_INPUTS = frozenset({"moe/experts/fc1_output", "moe/shared_experts/fc1_output"})
"""What DeepSeek-V3's framework also keeps in FP8 (report §3.3.2, `fp8_swiglu_input`): the MoE SwiGLU's input."""

FP8_LINEAR_PARAMS = (
    "attention/qkv",
    "attention/q",
    "attention/q_up",
    "attention/q_down",
    "attention/kv_up",
    "attention/kv_down",
    "attention/proj",
    "mlp/fc1",
    "mlp/fc2",
    "moe/experts/",
    "moe/shared_experts/",
)
"""Prefixes of the itemised parameter groups (pplan.model.params) that are FP8 Linears' weights."""

SCALE_BYTES = {"bf16": 0.0, "fp8": 0.0, "mxfp8": 1 / 32}
"""Scale bytes per quantised element: none beyond a per-tensor scalar; one E8M0 byte per 32 under MXFP8."""
WEIGHT_CACHE_BYTES = {"bf16": 0.0, "fp8": 2.0, "mxfp8": 2 + 2 / 32}
"""Bytes per FP8 Linear parameter of the quantised weight copies kept through the step (module docstring), on a GPU
whose FP8 GEMMs take one layout only (Hopper)."""
ANY_LAYOUT_CACHE_BYTES = {"bf16": 0.0, "fp8": 1.0, "mxfp8": 2 + 2 / 32}
"""The same on a GPU whose FP8 GEMMs take any layout (Blackwell, sm_100: Transformer Engine ≥ 2.2's
`is_non_tn_fp8_gemm_supported`, under which a per-tensor-scaled `Float8Tensor` keeps no transpose and serves the
column-wise use from its row-wise data). MXFP8 keeps both copies everywhere: its scales run along one direction."""
PRIMARY_BYTES = {"bf16": 2.0, "fp8": 1.0, "mxfp8": 1 + 1 / 32}
"""Bytes per parameter of an FP8 primary weight's shard under ZeRO-3 (Megatron-FSDP with `fp8_param_gather`):
the row-wise FP8 data (MXFP8: and its scales); the other layout is made from the gathered weight when a layer
runs (Megatron-Bridge's FSDP recipes set `keep_fp8_transpose_cache` False) and freed with it."""


def weight_copy_bytes(precision: Precision, any_layout: bool = False) -> float:
    """Bytes per FP8 Linear parameter of its quantised copies (`WEIGHT_CACHE_BYTES`, or `ANY_LAYOUT_CACHE_BYTES`
    on a GPU whose FP8 GEMMs take any layout)."""
    return (ANY_LAYOUT_CACHE_BYTES if any_layout else WEIGHT_CACHE_BYTES)[precision]


CAST_BYTES = 4
"""HBM bytes per element of a cast to FP8 with its transpose: read 2 (BF16), write 1 + 1."""


def is_fp8_linear(name: str) -> bool:
    """An itemised parameter group that is an FP8 Linear's weight (a layer's, or an MTP module's layer's)."""
    name = name.removeprefix("mtp/")
    return any(name.startswith(p) if p.endswith("/") else name == p for p in FP8_LINEAR_PARAMS)


def saved_bytes_per_element(precision: Precision) -> float:
    """Bytes per element of a Linear's input kept for the backward."""
    return 2.0 if precision == "bf16" else 1.0 + SCALE_BYTES[precision]
