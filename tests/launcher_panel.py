"""The panel of plans every launcher output is checked on (issue 12): one home, shared by the unit tests of each
launcher and by the acceptance tests that feed the outputs to the launchers' own parsers.

Each entry is a model profile and a `PlanRequest` that `make_plan` accepts; together they cover dense Llama
(RoPE, GQA, SwiGLU, RMSNorm, no biases, untied) and GPT-3 (learned positions, biases, GELU, LayerNorm, tied),
a sequence above GPT-3's position table, t / p / v / cp / d, uneven first and last stages, every ZeRO stage,
BF16 and FP32 gradients, hybrid sharding (a shard group) and ZeRO-3 without resharding after the forward,
every recompute mode (block and uniform N, selective modules), activation offload, overlap switched off, and schedules each launcher runs or refuses.
A launcher either prints settings for an entry or refuses it with a ConfigError naming --launcher; it never
prints settings that its parser rejects.

`ROUTED_PANEL` holds the routed (mixture-of-experts) plans the torchtitan tests check: Qwen3-30B-A3B, GPT-OSS
120B, DeepSeek-V3 as profiled (with its MTP module) and as torchtitan's `deepseek_v3_671b` builds it (`update`: no
MTP module, no stated norm ε), BF16 and FP8, expert parallelism beside FSDP, TP, PP and HSDP, and the plans
torchtitan's expert-parallel mesh or models cannot run (and models it does not ship: Qwen3-235B-A22B, Mixtral),
for either release (0.2.x's rules on etp, pipelines and context parallelism differ: tests/test_launchers_torchtitan.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_model
from pplan.profiles.model_spec import ModelSpec


@dataclass(frozen=True)
class PanelPlan:
    id: str
    model: str
    request: PlanRequest
    update: tuple[tuple[str, object], ...] = ()
    """Fields changed on the loaded profile (a variant of a bundled model); the name gains "-variant"."""


def panel_model(entry: PanelPlan) -> ModelSpec:
    """The entry's model: the bundled profile, with `update` applied."""
    model = load_model(entry.model)
    if not entry.update:
        return model
    changed: ModelSpec = model.model_copy(update={**dict(entry.update), "name": f"{model.name}-variant"})
    return changed


def _p(id: str, model: str, **kw: object) -> PanelPlan:
    return PanelPlan(id, model, PlanRequest(**kw))  # type: ignore[arg-type]


# One plan per line, so the panel reads as a table.
# fmt: off
PANEL: tuple[PanelPlan, ...] = (
    _p("8b-t1-d8", "llama3-8b", gpus=8, global_batch=128),
    _p("8b-t8", "llama3-8b", gpus=8, global_batch=64, tp=8),
    _p("8b-t1-cp2-bf16", "llama3-8b", gpus=8, global_batch=128, cp=2, grad_dtype="bf16"),
    _p("8b-t2-p4-uneven", "llama3-8b", gpus=16, global_batch=64, tp=2, pp=4, first_stage_layers=7, last_stage_layers=7),
    _p("8b-t2-p4-empty-ends", "llama3-8b", gpus=16, global_batch=64, tp=2, pp=4, first_stage_layers=0, last_stage_layers=0),
    _p("405b-t8-p16-v8-empty-ends", "llama3-405b", gpus=8192, global_batch=2048, tp=8, pp=16, vp=8, schedule="interleaved-1f1b", zero_stage=1, first_stage_layers=0, last_stage_layers=0),
    _p("8b-zero2", "llama3-8b", gpus=16, global_batch=64, tp=2, zero_stage=2),
    _p("8b-zero3-selective", "llama3-8b", gpus=16, global_batch=64, recompute="selective", zero_stage=3),
    _p("70b-t8-p4-1f1b", "llama3-70b", gpus=2048, global_batch=1024, tp=8, pp=4),
    _p("70b-t4-p4-v2", "llama3-70b", gpus=64, global_batch=128, tp=4, pp=4, vp=2, schedule="interleaved-1f1b", recompute="selective", zero_stage=1),
    _p("70b-t8-p8-v5-full", "llama3-70b", gpus=512, global_batch=512, tp=8, pp=8, vp=5, schedule="interleaved-1f1b", recompute="full", zero_stage=1, grad_dtype="bf16"),
    _p("70b-t8-p2-cp2", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=2, cp=2, zero_stage=1),
    _p("70b-no-overlap", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, zero_stage=1, overlap_grad_reduce=False),
    _p("70b-no-overlap-gather", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, zero_stage=1, overlap_param_gather=False),
    _p("70b-zbv", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, schedule="zbv"),
    _p("70b-dualpipev", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, schedule="dualpipev"),
    _p("70b-gpipe", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, schedule="gpipe", recompute="full"),
    _p("70b-block-3", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, recompute="full", recompute_method="block", recompute_layers=3, zero_stage=1),
    _p("70b-v2-uniform-2", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, vp=2, schedule="interleaved-1f1b", recompute="full", recompute_layers=2),
    _p("70b-selective-mlp-norm", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, recompute="selective", recompute_modules=("layernorm", "mlp"), zero_stage=1),
    _p("70b-offload", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, zero_stage=1, offload_modules=("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")),
    _p("70b-zb-h1", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, schedule="zb-h1"),
    _p("405b-t8-p16-v2", "llama3-405b", gpus=8192, global_batch=2048, tp=8, pp=16, vp=2, schedule="interleaved-1f1b", recompute="full", zero_stage=1, first_stage_layers=3, last_stage_layers=3),
    _p("405b-t8-p9-cp2-v7-bf16", "llama3-405b", gpus=576, global_batch=252, tp=8, pp=9, vp=7, cp=2, schedule="interleaved-1f1b", zero_stage=1, grad_dtype="bf16"),
    _p("405b-t8-p16-zero2", "llama3-405b", gpus=8192, global_batch=2048, tp=8, pp=16, zero_stage=2, first_stage_layers=7, last_stage_layers=7),
    _p("gpt3-t8-p16", "gpt3-175b", gpus=1024, global_batch=1536, tp=8, pp=16, recompute="full", zero_stage=1),
    _p("gpt3-seq4096", "gpt3-175b", gpus=1024, global_batch=1536, tp=8, pp=16, seq_len=4096, recompute="selective", zero_stage=1),
    _p("gpt3-t8-p8-v3-fp32", "gpt3-175b", gpus=512, global_batch=512, tp=8, pp=8, vp=3, schedule="interleaved-1f1b", recompute="full"),
    _p("gpt-1.7b-d32", "gpt-1.7b", gpus=32, global_batch=512),
    _p("70b-hsdp-zero3", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, zero_stage=3, shard_group=4),
    _p("70b-hsdp-zero1", "llama3-70b", gpus=256, global_batch=256, tp=8, pp=4, zero_stage=1, shard_group=2),
    _p("8b-zero3-no-reshard", "llama3-8b", gpus=16, global_batch=64, tp=2, pp=2, zero_stage=3, reshard_after_forward=False),
)
# fmt: on

# DeepSeek-V3 as torchtitan 0.3.0's deepseek_v3_671b builds it: no MTP module, RMSNorm's default ε (not stated).
_NO_MTP: tuple[tuple[str, object], ...] = (("mtp_layers", 0), ("norm_epsilon", None))


def _r(id: str, model: str, update: tuple[tuple[str, object], ...] = (), **kw: object) -> PanelPlan:
    return PanelPlan(id, model, PlanRequest(**kw), update)  # type: ignore[arg-type]


# fmt: off
ROUTED_PANEL: tuple[PanelPlan, ...] = (
    _r("qwen3-30b-ep8-fsdp", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=1, pp=1, ep=8, zero_stage=3),
    _r("qwen3-30b-t2-p2-ep4", "qwen3-30b-a3b", gpus=32, global_batch=64, tp=2, pp=2, ep=4, zero_stage=3, recompute="full"),
    _r("qwen3-30b-t2-etp2", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=2, pp=1, etp=2, zero_stage=3),
    _r("qwen3-30b-hsdp-ep8", "qwen3-30b-a3b", gpus=32, global_batch=64, tp=2, pp=1, ep=8, zero_stage=3, shard_group=4),
    _r("qwen3-30b-zero0-t2-ep2", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=2, pp=1, ep=2, etp=1),
    _r("qwen3-30b-zero0-ep8", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=1, pp=1, ep=8),
    _r("qwen3-30b-t2-etp1", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=2, pp=1, zero_stage=3),
    _r("qwen3-30b-ep4-etp2", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=2, pp=1, ep=4, etp=2, zero_stage=3),
    _r("qwen3-30b-fp8", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=1, pp=1, ep=8, zero_stage=3, precision="fp8"),
    _r("qwen3-30b-dualpipev-ep4", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=1, pp=2, ep=4, zero_stage=3, schedule="dualpipev"),
    _r("qwen3-30b-dualpipev-ep1", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=1, pp=2, zero_stage=3, schedule="dualpipev"),
    _r("oss-120b-t2-p2-ep4", "gpt-oss-120b", gpus=64, global_batch=64, tp=2, pp=2, ep=4, zero_stage=3),
    _r("oss-120b-cp2", "gpt-oss-120b", gpus=64, global_batch=64, tp=2, pp=2, cp=2, ep=4, zero_stage=3),
    _r("dsv3-torchtitan-p8-v2-ep32", "deepseek-v3", _NO_MTP, gpus=1024, global_batch=1024, tp=1, pp=8, vp=2, schedule="interleaved-1f1b", first_stage_layers=3, last_stage_layers=2, ep=32, zero_stage=3, recompute="full"),
    _r("dsv3-torchtitan-fp8-t2-ep16", "deepseek-v3", _NO_MTP, gpus=512, global_batch=512, tp=2, pp=4, first_stage_layers=13, last_stage_layers=16, ep=16, zero_stage=3, recompute="full", precision="fp8"),
    _r("dsv3-torchtitan-mxfp8", "deepseek-v3", _NO_MTP, gpus=512, global_batch=512, tp=2, pp=4, first_stage_layers=13, last_stage_layers=16, ep=16, zero_stage=3, recompute="full", precision="mxfp8"),
    _r("dsv3-mtp", "deepseek-v3", gpus=512, global_batch=512, tp=2, pp=4, first_stage_layers=13, last_stage_layers=16, ep=16, zero_stage=3, recompute="full"),
    _r("qwen3-235b", "qwen3-235b-a22b", gpus=128, global_batch=128, tp=2, pp=2, ep=8, zero_stage=3),
    _r("mixtral-8x7b", "mixtral-8x7b", gpus=64, global_batch=64, tp=2, pp=1, ep=8, zero_stage=3),
    _r("oss-120b-t2-ep8", "gpt-oss-120b", gpus=32, global_batch=64, tp=2, pp=1, ep=8, zero_stage=3),
    _r("oss-120b-p1-cp2", "gpt-oss-120b", gpus=32, global_batch=64, tp=2, pp=1, cp=2, ep=4, zero_stage=3),
    _r("qwen3-30b-cp2-ep4", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=1, pp=1, cp=2, ep=4, zero_stage=3),
    _r("qwen3-30b-t4-ep2-etp2", "qwen3-30b-a3b", gpus=16, global_batch=64, tp=4, pp=1, ep=2, etp=2, zero_stage=3),
    _r("qwen3-30b-hsdp-ep8-etp2", "qwen3-30b-a3b", gpus=32, global_batch=64, tp=2, pp=1, ep=8, etp=2, zero_stage=3, shard_group=4),
    _r("dsv3-torchtitan-cp2", "deepseek-v3", _NO_MTP, gpus=512, global_batch=512, tp=2, pp=4, cp=2, first_stage_layers=13, last_stage_layers=16, ep=16, zero_stage=3, recompute="full"),
    _r("dsv3-dualpipev-ep32", "deepseek-v3", _NO_MTP, gpus=1024, global_batch=2048, tp=1, pp=8, schedule="dualpipev", first_stage_layers=3, last_stage_layers=2, ep=32, zero_stage=3),
    _r("dsv3-dualpipev-ep32-ac", "deepseek-v3", _NO_MTP, gpus=1024, global_batch=2048, tp=1, pp=8, schedule="dualpipev", first_stage_layers=3, last_stage_layers=2, ep=32, zero_stage=3, recompute="full"),
)
# fmt: on
