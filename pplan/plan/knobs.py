"""The vocabulary of a plan's settings: each knob's choices as a `Literal` type and the defaults that are
choices too (recompute kinds and modules, offload modules, gradient and moment dtypes, the activation and pass
duration models).

It imports nothing but `typing`, so the command line can declare its options (and answer `--help`) without
loading the cost model; `pplan.plan.configuration` validates a plan against these choices.
"""

from __future__ import annotations

from typing import Literal

Recompute = Literal["none", "selective", "full"]
RecomputeMethod = Literal["uniform", "block"]
"""How full recomputation picks its layers (Megatron-LM `--recompute-method`): `uniform` checkpoints every chunk's
layers in groups of N (all recomputed; only each group's input kept), `block` recomputes the first N layers of
every chunk and keeps the rest (`--recompute-num-layers N`)."""
RecomputeModule = Literal[
    "core_attn", "layernorm", "mlp", "moe_act", "mla_up_proj", "moe", "shared_experts"
]  # fmt: skip
"""What selective recomputation re-runs (Megatron-LM `--recompute-modules`, megatron-core 0.16 names and meanings,
`transformer_config.py` `recompute_modules`): the attention core, the norms (their outputs are not kept; MLA's
query and key/value norms too), the dense MLP (`mlp`: only its input is kept; dense layers only: a routed layer's
MLP is `moe`), the routed experts' activation function (`moe_act`: its output is not kept), MLA's up-projections
(`mla_up_proj`: the attention core's q, k and v are not kept), a routed layer's whole MoE block (`moe`: router,
dispatch, experts and combine re-run from its input) and its shared experts alone (`shared_experts`)."""
MODEL_RECOMPUTE_MODULES: dict[str, tuple[str, str]] = {
    "moe_act": ("moe", "a routed (mixture-of-experts) model"),
    "moe": ("moe", "a routed (mixture-of-experts) model"),
    "shared_experts": ("moe", "a routed (mixture-of-experts) model"),
    "mla_up_proj": ("mla", "multi-head latent attention"),
}
"""Modules that exist only in some models: the ModelSpec field that must be set, and what it names."""
DEFAULT_RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = ("core_attn",)
"""Megatron-LM's default for `--recompute-granularity selective` (Korthikanti et al. 2022's selective recompute)."""
OffloadModule = Literal["attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm"]
"""Whose saved inputs fine-grained activation offloading moves to host memory (Megatron-LM
`--offload-modules`, megatron-core 0.16 `transformer_config.py` `offload_modules`), in canonical order: the
attention norm, the QKV projection, the attention core, the output projection, the MLP norm
(pplan.model.activations says which tensors each offloads)."""
MOE_OFFLOAD_MODULES = ("expert_fc1", "moe_act")
"""megatron-core's offload modules for mixture-of-experts layers, which pplan does not model (refused)."""
GradDtype = Literal["bf16", "fp32"]
MomentDtype = Literal["fp32", "bf16"]
"""Adam's first and second moments: FP32 (4 bytes each) or BF16 (2 each)."""
ActivationModel = Literal["itemised", "korthikanti"]
DurationModel = Literal["unit", "analytic"]
"""How the simulator prices a pass: `unit` (every F, B and W one unit, the textbook bubble) or `analytic` (the
cost model's seconds)."""
MoeDispatcher = Literal["alltoall", "allgather", "deepep", "hybridep", "ncclep"]
"""megatron-core's token dispatcher of a routed layer (`--moe-token-dispatcher-type`; the flex dispatcher's backends
`--moe-flex-dispatcher-backend deepep|hybridep`, and NCCL EP, which megatron-core 0.16.1 does not have): NCCL
all-to-all of k copies per token, an all-gather of every token, or one of the deduplicating dispatch kernels
(pplan.cost.moe_dispatch)."""
CudaGraphScope = Literal["attn", "moe_router", "moe_preprocess", "full_layer", "full_iteration"]
"""What CUDA graphs capture (megatron-core's `--cuda-graph-scope` with Transformer Engine graphs: the attention,
the router, the dispatch preprocessing; `full_layer`: every whole layer, the legacy `--enable-cuda-graph`;
`full_iteration`: the whole step, megatron-core 0.18's `--cuda-graph-impl full_iteration`); pplan.cost.host."""
