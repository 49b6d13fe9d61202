"""Runs Megatron-Bridge's own config classes on pplan's overrides, in a process of its own (tests/test_launchers_bridge.py).

Reads JSON cases on stdin (a model's shape, the world size and the override words) and prints one JSON result per
case: the values the validated `ConfigContainer` holds, or the error Megatron-Bridge raised. Per case it builds the
base of Megatron-Bridge 0.3.1's pre-training recipes (`recipes.common._pretrain_common`), a model provider of the
planned shape (`GPTModelProvider`; `DeepSeekV3ModelProvider` for MLA), applies the overrides as a recipe script does
(`process_config_with_overrides`) and runs `runtime_config_update`, the step `pretrain()` runs first (the named
mixed-precision recipe's setup, then `ConfigContainer.validate`).

STUB: Transformer Engine (`transformer_engine`, a CUDA build), Triton (`triton`) and the Energon data loader
(`megatron.energon`, not needed to build a config) are not installed on CPU; every
module under those names is a stand-in whose attributes are empty classes, with a `transformer-engine` 2.11.0
distribution record so megatron-core's version checks pass. No kernel runs: only the configuration code. `FusedAdam` keeps
Transformer Engine 2.x's precision-aware arguments (megatron-core checks them by name), and
`torch.cuda.get_device_properties` answers with the planned GPU's name and compute capability (`DEVICE`), which
Megatron-Bridge checks DeepEP and HybridEP against. It runs in its own process so the stand-ins reach no other test.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import types
from typing import Any

DEVICE = ("NVIDIA H100 80GB HBM3", 9, 0)
"""The GPU the device query answers with unless a case names one (pplan's default hardware, H100 SXM)."""
STUBBED = ("transformer_engine", "triton", "megatron.energon")


def _stub_class(name: str) -> type:
    """An empty class standing in for any name, subscriptable as the generic classes it replaces are."""
    return _StubClass(
        name, (), {"__init__": lambda self, *a, **k: None, "__class_getitem__": classmethod(lambda c, _: c)}
    )


class _StubClass(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        sub = _stub_class(name)
        setattr(cls, name, sub)
        return sub


class _FusedAdam:
    """Transformer Engine 2.x's FusedAdam signature: megatron-core checks its precision-aware arguments by name."""

    def __init__(
        self,
        params: Any,
        master_weight_dtype: Any = None,
        exp_avg_dtype: Any = None,
        exp_avg_sq_dtype: Any = None,
        use_decoupled_grad: bool = False,
        **kw: Any,
    ) -> None:
        return None


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        sub = _FusedAdam if name == "FusedAdam" else _stub_class(name)
        setattr(self, name, sub)
        return sub


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if any(name == p or name.startswith(p + ".") for p in STUBBED):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "2.11.0"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def answer_device_queries(name: str, major: int, minor: int) -> None:
    """torch.cuda's device query answered as the planned GPU would (Megatron-Bridge checks DeepEP and HybridEP
    against it): the only CUDA call the configuration code makes."""
    import torch

    props = types.SimpleNamespace(name=name, major=major, minor=minor)
    query = "get_device_properties"  # replaced by name: typed as returning torch's own properties object
    setattr(torch.cuda, query, lambda device=None: props)


def install_stub() -> None:
    record = tempfile.mkdtemp()
    info = os.path.join(record, "transformer_engine-2.11.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: transformer-engine\nVersion: 2.11.0\n")
    sys.path.append(record)
    sys.meta_path.insert(0, _StubFinder())


def _bridge(module: str) -> Any:
    """A Megatron-Bridge module (imported by name: it has no type information)."""
    return importlib.import_module(f"megatron.bridge.{module}")


def _provider(shape: dict[str, Any]) -> Any:
    import torch.nn.functional as F

    if shape.get("mla"):
        return _bridge("models.deepseek").DeepSeekV3ModelProvider(
            num_layers=shape["num_layers"],
            mtp_num_layers=shape["mtp_layers"] or None,
            seq_length=shape["seq_len"],
        )
    kw: dict[str, Any] = dict(
        num_layers=shape["num_layers"], hidden_size=shape["hidden_size"], ffn_hidden_size=shape["ffn_hidden_size"],
        num_attention_heads=shape["heads"], num_query_groups=shape["kv_heads"], kv_channels=shape["head_size"],
        seq_length=shape["seq_len"], vocab_size=shape["vocab_size"], normalization=shape["norm"],
        gated_linear_unit=shape["swiglu"], activation_func=F.silu if shape["swiglu"] else F.gelu,
        position_embedding_type=shape["position"], add_bias_linear=shape["linear_bias"],
        add_qkv_bias=shape["qkv_bias"], share_embeddings_and_output_weights=shape["tied"],
        qk_layernorm=shape["qk_norm"], hidden_dropout=0.0, attention_dropout=0.0,
    )  # fmt: skip
    if shape.get("experts"):
        kw |= dict(
            num_moe_experts=shape["experts"], moe_router_topk=shape["top_k"],
            moe_ffn_hidden_size=shape["expert_ffn"], moe_layer_freq=shape["moe_layer_freq"],
            moe_shared_expert_intermediate_size=shape["shared_ffn"] or None,
        )  # fmt: skip
    return _bridge("models.gpt_provider").GPTModelProvider(**kw)


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    _pretrain_common = _bridge("recipes.common")._pretrain_common
    runtime_config_update = _bridge("training.config").runtime_config_update
    process_config_with_overrides = _bridge("training.utils.omegaconf_utils").process_config_with_overrides

    answer_device_queries(*case.get("device", DEVICE))
    os.environ["WORLD_SIZE"] = str(case["world_size"])
    for key in ("NVTE_CPU_OFFLOAD_V1", "CUDA_DEVICE_MAX_CONNECTIONS"):
        os.environ.pop(key, None)
    os.environ.update(case.get("env", {}))  # the environment pplan's notes say to export
    cfg = _pretrain_common()
    cfg.model = _provider(case["shape"])
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.vocab_size = case["shape"]["vocab_size"]
    cfg.checkpoint.save = cfg.checkpoint.load = None
    try:
        cfg = process_config_with_overrides(cfg, cli_overrides=case["overrides"])
        runtime_config_update(cfg)
    except BaseException as err:  # what Megatron-Bridge or megatron-core refuses: reported, not raised
        import traceback

        return {"error": f"{type(err).__name__}: {err}"[:400], "where": traceback.format_exc()[-1500:]}
    m = cfg.model
    return {
        "tp": m.tensor_model_parallel_size, "pp": m.pipeline_model_parallel_size,
        "vp": m.virtual_pipeline_model_parallel_size, "cp": m.context_parallel_size,
        "ep": m.expert_model_parallel_size, "etp": m.expert_tensor_parallel_size, "dp": cfg.data_parallel_size,
        "sequence_parallel": m.sequence_parallel, "micro_batch": cfg.train.micro_batch_size,
        "global_batch": cfg.train.global_batch_size, "seq_len": m.seq_length, "data_seq_len": cfg.dataset.seq_length,
        "recompute_granularity": m.recompute_granularity, "recompute_method": m.recompute_method,
        "recompute_num_layers": m.recompute_num_layers, "recompute_modules": m.recompute_modules,
        "distributed_optimizer": cfg.ddp.use_distributed_optimizer, "fsdp": cfg.ddp.use_megatron_fsdp,
        "sharding": cfg.ddp.data_parallel_sharding_strategy,
        "optimizer_instances": cfg.ddp.num_distributed_optimizer_instances,
        "grad_reduce_in_fp32": cfg.ddp.grad_reduce_in_fp32, "fp8": m.fp8, "fp8_recipe": m.fp8_recipe,
        "fp8_param_gather": bool(getattr(cfg.ddp, "fp8_param_gather", cfg.mixed_precision.fp8_param_gather)), "bf16": m.bf16,
        "exp_avg_dtype": str(cfg.optimizer.exp_avg_dtype), "overlap_grad_reduce": cfg.ddp.overlap_grad_reduce,
        "overlap_param_gather": cfg.ddp.overlap_param_gather, "layout": str(m.pipeline_model_parallel_layout),
        "first_stage_layers": m.num_layers_in_first_pipeline_stage,
        "last_stage_layers": m.num_layers_in_last_pipeline_stage,
        "dispatcher": getattr(m, "moe_token_dispatcher_type", None), "offload_modules": m.offload_modules,
    }  # fmt: skip


def main() -> None:
    install_stub()
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    cases = json.load(sys.stdin)
    print(json.dumps([run_case(c) for c in cases]))


if __name__ == "__main__":
    main()
