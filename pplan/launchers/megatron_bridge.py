"""Megatron-Bridge output: one validated `Plan` as Hydra-style recipe overrides (`model.tensor_model_parallel_size=4`).

Megatron-Bridge's recipe scripts take `key=value` overrides on the command line and apply them to the recipe's
`ConfigContainer` (`megatron.bridge.training.utils.omegaconf_utils.process_config_with_overrides`, Megatron-Bridge
0.3.1 on megatron-core 0.16.1, the release pplan's Megatron-LM output is checked against); `pretrain()` then runs
`runtime_config_update` (mixed precision, then `ConfigContainer.validate`). The field names are those config
classes': `model.*` the model provider (megatron-core's `TransformerConfig`), `train.*` `TrainingConfig`,
`ddp.*` `DistributedDataParallelConfig`, `optimizer.*` `OptimizerConfig`, `checkpoint.*`, `dataset.*`,
`mixed_precision` one of the named recipes of `megatron.bridge.training.mixed_precision` (or, where the plan
differs from every named recipe, a `MixedPrecisionConfig` built in place with Hydra's `_target_`).

What the overrides say: every setting a recipe may already have set, written out even at its default (a 70B
recipe sets virtual pipelining, a long-context one context parallelism): parallelism (t, p, v or the layer
layout, cp, ep, etp, sequence parallelism), batch (micro and global batch, sequence length), recompute, activation
and layer offload, precision and FP8 weight gathers, gradient reduction dtype, Adam-moment dtype, optimizer CPU
offload, the distributed optimizer or Megatron-FSDP, the overlaps, CUDA graphs and the MoE knobs. The model's
architecture is the recipe's: the overrides are for a recipe of the planned model. Settings Megatron-Bridge
0.3.1 cannot run are refused as Megatron-LM's are (the same megatron-core: `pplan.launchers.capabilities`,
`pplan.launchers.megatron.moe_knob_refusal`).
"""

from __future__ import annotations

import shlex

from pplan.launchers.capabilities import MEGATRON_BRIDGE
from pplan.launchers.megatron import (
    FSDP_STRATEGY,
    MOE_DISPATCHER_ARGS,
    layout_string,
    megatron_env,
    moe_knob_refusal,
)
from pplan.launchers.support import check_supported, plan_summary
from pplan.plan.records import Plan
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.text import escaped

BRIDGE_RELEASE = "0.3.1"
"""The Megatron-Bridge release (PyPI `megatron-bridge`, with `megatron-core` 0.16.1) the output is checked against."""
MIXED_PRECISION_MODULE = "megatron.bridge.training.mixed_precision"
NAMED_PRECISION = {
    "bf16": "bf16_mixed",
    "fp8": "bf16_with_fp8_delayed_scaling_mixed",
    "mxfp8": "bf16_with_mxfp8_mixed",
}
"""The named mixed-precision recipe of each precision (Megatron-Bridge 0.3.1 `training/mixed_precision.py`): BF16;
Transformer Engine's E4M3/E5M2 delayed scaling (`fp8: hybrid`, `fp8_recipe: delayed`, amax history 1024, max);
MXFP8 (`e4m3`, `mxfp8`). Each reduces gradients in FP32, and both FP8 recipes gather weights in FP8."""
_FP8_FIELDS = {
    "bf16": {},
    "fp8": {
        "fp8": "hybrid",
        "fp8_recipe": "delayed",
        "fp8_amax_history_len": "1024",
        "fp8_amax_compute_algo": "max",
    },
    "mxfp8": {"fp8": "e4m3", "fp8_recipe": "mxfp8"},
}
"""The FP8 fields of each named recipe, for the `_target_` form."""


def _value(value: object) -> str:
    """A Python value as a Hydra override value: null, true/false, numbers, bare words, lists."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


def _named_precision_fits(plan: Plan) -> bool:
    return plan.grad_dtype == "fp32" and (plan.precision == "bf16" or plan.fp8_param_gather)


def _mixed_precision(plan: Plan) -> str:
    """`mixed_precision`: the named recipe where it is the plan, else a `MixedPrecisionConfig` with the plan's
    gradient dtype and FP8 weight gathers (the named recipes' setup overwrites `ddp.grad_reduce_in_fp32` and
    `model.fp8_param_gather`, so those cannot be overridden one by one)."""
    if _named_precision_fits(plan):
        return NAMED_PRECISION[plan.precision]
    bf16 = "{_target_:torch.bfloat16,_call_:false}"
    fields = {
        "_target_": f"{MIXED_PRECISION_MODULE}.MixedPrecisionConfig",
        "bf16": "true",
        "params_dtype": bf16,
        "pipeline_dtype": bf16,
        "autocast_enabled": "false",
        "grad_reduce_in_fp32": _value(plan.grad_dtype == "fp32"),
        **_FP8_FIELDS[plan.precision],
    }
    if plan.precision != "bf16":
        fields["fp8_param_gather"] = _value(plan.fp8_param_gather)
        if plan.precision == "mxfp8":  # MixedPrecisionConfig.finalize asserts it with MXFP8 gathers
            fields["reuse_grad_buf_for_mxfp8_param_ag"] = _value(plan.fp8_param_gather)
    return "{" + ",".join(f"{k}:{v}" for k, v in fields.items()) + "}"


def _pipeline(plan: Plan, mtp_layers: int) -> dict[str, object]:
    """Virtual stages, or first/last stage layer counts, or the whole layout string (megatron-core 0.16.1
    `transformer_config.py`), as `pplan.launchers.megatron` chooses between the equivalent flags."""
    out: dict[str, object] = {
        "model.virtual_pipeline_model_parallel_size": None,
        "model.num_layers_in_first_pipeline_stage": None,
        "model.num_layers_in_last_pipeline_stage": None,
        "model.pipeline_model_parallel_layout": None,
    }
    if plan.pp == 1:
        return out
    chunks = plan.layout.chunks
    if len({c.layers for c in chunks}) == 1:
        out["model.virtual_pipeline_model_parallel_size"] = plan.vp if plan.vp > 1 else None
        return out
    if plan.vp > 1 or any(c.layers == 0 for c in chunks):
        out["model.pipeline_model_parallel_layout"] = f'"{layout_string(plan, mtp_layers)}"'
        return out
    inner = chunks[1:-1]
    if not inner or chunks[0].layers != inner[0].layers:
        out["model.num_layers_in_first_pipeline_stage"] = chunks[0].layers
    if inner and chunks[-1].layers != inner[0].layers:
        out["model.num_layers_in_last_pipeline_stage"] = chunks[-1].layers
    return out


def _recompute(plan: Plan) -> dict[str, object]:
    out: dict[str, object] = {
        "model.recompute_granularity": None,
        "model.recompute_method": None,
        "model.recompute_num_layers": None,
        "model.recompute_modules": None,
    }
    if plan.recompute == "full":
        out["model.recompute_granularity"] = "full"
        out["model.recompute_method"] = plan.recompute_method
        out["model.recompute_num_layers"] = plan.recompute_layers or 1
    elif plan.recompute == "selective":
        out["model.recompute_granularity"] = "selective"
        out["model.recompute_modules"] = list(plan.recompute_modules)
    out["model.fine_grained_activation_offloading"] = bool(plan.offload_modules)
    out["model.offload_modules"] = list(plan.offload_modules) if plan.offload_modules else None
    out["model.cpu_offloading"] = bool(plan.offload_layers)
    out["model.cpu_offloading_num_layers"] = plan.offload_layers
    return out


def _sharding_and_optimizer(plan: Plan) -> dict[str, object]:
    sharded = plan.zero_stage >= 1
    fsdp = plan.zero_stage >= 2
    out: dict[str, object] = {
        "ddp.use_distributed_optimizer": sharded,
        "optimizer.use_distributed_optimizer": sharded,
        "ddp.use_megatron_fsdp": fsdp,
        "ddp.data_parallel_sharding_strategy": FSDP_STRATEGY[plan.zero_stage] if fsdp else "no_shard",
        "ddp.num_distributed_optimizer_instances": plan.shard_replicas if plan.shard_group is not None else 1,
        "ddp.overlap_grad_reduce": plan.overlap_grad_reduce,
        "ddp.overlap_param_gather": plan.overlap_param_gather and sharded,
    }
    if fsdp:  # ConfigContainer.validate: Megatron-FSDP saves and loads only fsdp_dtensor checkpoints
        out["checkpoint.ckpt_format"] = "fsdp_dtensor"
        out["model.gradient_accumulation_fusion"] = False
    moments = "torch.bfloat16" if plan.moment_dtype == "bf16" else "torch.float32"
    out["optimizer.use_precision_aware_optimizer"] = (
        plan.moment_dtype == "bf16" or plan.optimizer_offload_fraction > 0
    )
    out["optimizer.exp_avg_dtype"] = moments
    out["optimizer.exp_avg_sq_dtype"] = moments
    out["optimizer.optimizer_cpu_offload"] = plan.optimizer_offload_fraction > 0
    if plan.optimizer_offload_fraction:
        out["optimizer.optimizer_offload_fraction"] = plan.optimizer_offload_fraction
    return out


def _experts(model: ModelSpec, plan: Plan) -> dict[str, object]:
    """The MoE knobs (megatron-core 0.16.1 `TransformerConfig` fields, as `pplan.launchers.megatron` writes their
    flags) and CUDA graphs."""
    scope = plan.cuda_graph_scope
    out: dict[str, object] = {
        "model.cuda_graph_impl": "local"
        if "full_layer" in scope
        else "transformer_engine"
        if scope
        else "none",
        "model.cuda_graph_scope": [s for s in scope if s != "full_layer"],
    }
    if model.moe is None:
        return out
    refusal = moe_knob_refusal(plan)
    if refusal is not None:
        raise refusal
    dispatcher = MOE_DISPATCHER_ARGS[plan.moe_dispatcher]
    out |= {
        "model.expert_model_parallel_size": plan.ep,
        "model.expert_tensor_parallel_size": plan.etp,
        "model.moe_token_dispatcher_type": dispatcher[1],
        "model.moe_flex_dispatcher_backend": dispatcher[3] if len(dispatcher) > 2 else "deepep",
        "model.overlap_moe_expert_parallel_comm": plan.moe_ep_overlap,
        "model.moe_grouped_gemm": True,
        "model.moe_permute_fusion": plan.moe_permute_fusion,
        "model.moe_router_fusion": plan.moe_router_fusion,
        "model.moe_expert_capacity_factor": plan.moe_capacity_factor,
        "model.moe_router_force_load_balancing": plan.moe_force_balance,
    }
    return out


def bridge_overrides(model: ModelSpec, plan: Plan) -> dict[str, object]:
    """The overrides for `plan`, field path to value (Python values; `bridge_override_args` spells them).

    Raises a ConfigError naming `--launcher` when Megatron-Bridge cannot run the plan.
    """
    check_supported(MEGATRON_BRIDGE.name, plan, model)
    out: dict[str, object] = {
        "model.tensor_model_parallel_size": plan.tp,
        "model.pipeline_model_parallel_size": plan.pp,
        **_pipeline(plan, model.mtp_layers),
        "model.context_parallel_size": plan.cp,
        "model.sequence_parallel": plan.sequence_parallel,
        "train.micro_batch_size": plan.micro_batch,
        "train.global_batch_size": plan.global_batch,
        "model.seq_length": plan.seq_len,
        "dataset.sequence_length": plan.seq_len,  # GPTDatasetConfig`s field (`seq_length` is a property)
        **_recompute(plan),
        **_sharding_and_optimizer(plan),
        "model.tp_comm_overlap": plan.tp_comm_overlap,
        "model.overlap_p2p_comm": plan.kind.name == "interleaved-1f1b" and plan.overlap_p2p_comm,
        **_experts(model, plan),
    }
    return out


def bridge_override_args(model: ModelSpec, plan: Plan) -> list[str]:
    """The overrides as command-line words (`key=value`), the mixed precision last."""
    words = [f"{key}={_value(value)}" for key, value in bridge_overrides(model, plan).items()]
    return [*words, f"mixed_precision={_mixed_precision(plan)}"]


def bridge_env(plan: Plan) -> dict[str, str]:
    """Environment variables the run needs: `CUDA_DEVICE_MAX_CONNECTIONS=1` as for Megatron-LM
    (`pplan.launchers.megatron.megatron_env`), and `NVTE_CPU_OFFLOAD_V1=1` with activation offload (megatron-core
    0.16.1's `TransformerConfig` refuses fine-grained offloading under Transformer Engine 2.10 or later without it)."""
    env = megatron_env(plan)
    if plan.offload_modules:
        env["NVTE_CPU_OFFLOAD_V1"] = "1"
    return env


def bridge_notes(model: ModelSpec, plan: Plan) -> list[str]:
    """What the overrides do not say, as `#` lines (printed after the last override, so the block pastes whole)."""
    notes = [
        f"# Megatron-Bridge {BRIDGE_RELEASE} recipe overrides from pplan: "
        f"{escaped(plan_summary(model, plan), markup=False)}",
        f"# launch on {plan.gpus} GPUs in all (the world size; Megatron-Bridge derives d = {plan.dp} from it); "
        "the model's architecture, tokenizer and data are the recipe's",
    ]
    notes += [f"# environment: export {k}={v}" for k, v in bridge_env(plan).items()]
    if not _named_precision_fits(plan):
        notes.append(
            f"# mixed_precision: {NAMED_PRECISION[plan.precision]}'s settings with the plan's gradient dtype "
            f"({plan.grad_dtype}) and FP8 weight gathers ({'on' if plan.fp8_param_gather else 'off'})"
        )
    return notes


def bridge_text(model: ModelSpec, plan: Plan) -> str:
    """The overrides as a shell fragment to paste after the recipe script: one per line, shell-quoted, then the
    notes (bash ends the command at the last override's line, so the comments after it are harmless)."""
    words = [f"    {shlex.quote(w)}" for w in bridge_override_args(model, plan)]
    lines = [f"{w} \\" for w in words[:-1]] + words[-1:]
    return "\n".join([*lines, *bridge_notes(model, plan)]) + "\n"
