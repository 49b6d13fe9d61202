"""Give each Megatron-Bridge run of pplan/validation/recent_runs.json the settings its release's benchmark recipe
ran with (a development tool, run by hand after scripts/import_recent_runs.py):

    python scripts/import_bridge_recipes.py PATH/TO/bridge-recipes.json

The recipes file holds, per NeMo container release 25.09-26.08, every Megatron-Bridge benchmark workload's
settings as its own harness built them (parallelism, MoE dispatch and overlap, CUDA graphs, fusions, capacity and
balancing, recompute, offload, overlap, sharding, precision, optimizer), and no performance figure. A run is matched
to the workload of its release with its model, GPU, precision and GPU count, and, among several (config variants),
the one whose cut (t, p, cp, ep, v, micro-batch, global batch) is the run's; its settings are written as a `recipe`
object keyed by pplan's setting names (pplan.plan.settings), with the release's software versions. Settings pplan
does not declare (yet) are kept under the names pplan would give them; `pplan.plan.copies.settings_read` reads
only the declared ones. No prose is copied.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RUNS = Path(__file__).resolve().parent.parent / "pplan" / "validation" / "recent_runs.json"
RELEASES = Path(__file__).resolve().parent.parent / "pplan" / "profiles" / "releases.json"

RECIPE_MODELS = {
    "deepseek-v3": "deepseek_v3",
    "qwen3-30b-a3b": "qwen3_30b_a3b",
    "qwen3-235b-a22b": "qwen3_235b_a22b",
    "gpt-oss-120b": "gpt_oss_120b",
    "llama3-8b": "llama3_8b",
    "llama3-70b": "llama3_70b",
    "llama3-405b": "llama31_405b",
}
GPUS = {"gb200-nvl72": "GB200", "b200-180gb": "B200", "h100-sxm-80gb": "H100"}
PRECISIONS = {"bf16": "bf16", "fp8_cs": "fp8", "fp8_mx": "mxfp8"}
"""The recipe precisions pplan prices (current-scaled FP8 as pplan's per-tensor `fp8`); the others are left out."""
FP8_RECIPES = {
    "mx": "fp8_mx",
    "unstated": "fp8_cs",
    "current": "fp8_cs",
    "tensorwise": "fp8_cs",
    "blockwise": "fp8_sc",
}
CUT = (("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("ep", "ep"), ("vp", "vp"), ("micro_batch", "mbs"),
       ("global_batch", "gbs"))  # fmt: skip


def _precision(row: dict[str, Any]) -> str:
    if row["precision"] == "bf16":
        return "bf16"
    if row["precision"] == "mxfp8":
        return "fp8_mx"
    return FP8_RECIPES.get(row.get("fp8_recipe") or "unstated", "fp8_cs")


def _cut_misses(row: dict[str, Any], parallelism: dict[str, Any]) -> int:
    """How many of the run's stated cut figures the workload's differ on (None on either side: not compared)."""
    misses = 0
    for mine, theirs in CUT:
        a, b = row.get(mine), parallelism.get(theirs)
        if a is not None and b is not None and (a or 1) != (b or 1):
            misses += 1
    return misses


def _dispatcher(moe: dict[str, Any]) -> str:
    kind = moe.get("token_dispatcher_type")
    if kind == "flex" or moe.get("enable_deepep (legacy flag)"):
        return str(moe.get("flex_dispatcher_backend") or "deepep")
    return str(kind or "allgather")


def _graph_scope(graph: dict[str, Any]) -> list[str]:
    """The CUDA-graph scopes captured: [] none; ["full_iteration"] one graph of the whole step (megatron-core's
    `cuda_graph_impl` full_iteration or local with that scope); the Transformer Engine scopes (attn, mlp, moe,
    moe_router, moe_preprocess); ["full_layer"] every transformer layer whole (TE with no scope named, or the
    legacy per-layer `enable_cuda_graph` of 25.09)."""
    impl, scope = graph.get("impl"), graph.get("scope")
    if isinstance(scope, str):
        scope = [scope]
    scope = list(scope or [])
    if impl == "full_iteration" or "full_iteration" in scope:
        return ["full_iteration"]
    if graph.get("enable_cuda_graph (legacy flag)") or graph.get("external_cuda_graph (legacy)"):
        return ["full_layer"]
    if impl in (None, "none"):
        return []
    return sorted(s for s in scope if s != "full") or ["full_layer"]


def _grad_reduce_in_fp32(dp: dict[str, Any], prec: dict[str, Any]) -> bool:
    """Whether gradients are reduced in FP32: the mixed-precision config's `grad_reduce_in_fp32` where the recipe
    has one (Megatron-Bridge copies each of its fields onto the DDP config when the run starts,
    `update_config_with_precision_overrides`, so it overrides the DDP config's value the file shows before
    `validate()`), else the DDP config's."""
    if "grad_reduce_in_fp32" in prec and prec["grad_reduce_in_fp32"] is not None:
        return bool(prec["grad_reduce_in_fp32"])
    return bool(dp.get("grad_reduce_in_fp32"))


def knobs(settings: dict[str, Any]) -> dict[str, Any]:
    """A workload's settings under pplan's setting names."""
    moe, graph, rc = (
        settings.get("moe") or {},
        settings.get("cuda_graph") or {},
        settings.get("recompute") or {},
    )
    dp, prec, opt = (
        settings.get("data_parallel") or {},
        settings.get("precision") or {},
        settings.get("optimizer") or {},
    )
    overlap, misc = settings.get("comm_overlap") or {}, settings.get("fusions_and_misc") or {}
    par = settings.get("parallelism") or {}
    fsdp = bool(dp.get("use_megatron_fsdp"))
    out: dict[str, Any] = {
        "zero_stage": 3 if fsdp else (1 if dp.get("use_distributed_optimizer") else 0),
        "grad_dtype": "fp32" if _grad_reduce_in_fp32(dp, prec) else "bf16",
        "moment_dtype": "bf16" if "bfloat16" in str(opt.get("exp_avg_dtype")) else "fp32",
        "fp8_param_gather": bool(prec.get("fp8_param_gather") or prec.get("fp8_param")),
        "tp_comm_overlap": bool(overlap.get("tp_comm_overlap")),
        "overlap_grad_reduce": bool(overlap.get("overlap_grad_reduce")),
        "overlap_param_gather": bool(overlap.get("overlap_param_gather")),
        "sequence_parallel": bool(par.get("sequence_parallel")),
        "recompute": rc.get("granularity") or "none",
        "recompute_modules": list(rc.get("modules") or []),
        "recompute_method": rc.get("method"),
        "recompute_layers": rc.get("num_layers"),
        "offload_modules": list(rc.get("offload_modules") or []),
        "offload_layers": rc.get("cpu_offloading_num_layers") if rc.get("cpu_offloading") else None,
        "cuda_graph_scope": _graph_scope(graph),
        "cross_entropy_fusion": bool(misc.get("cross_entropy_loss_fusion")),
        "manual_gc": bool(misc.get("manual_gc")),
    }
    if moe.get("num_experts"):
        out |= {
            "moe_dispatcher": _dispatcher(moe),
            "moe_ep_overlap": bool(moe.get("a2a_overlap (overlap_moe_expert_parallel_comm)")),
            "moe_permute_fusion": bool(moe.get("permute_fusion")),
            "moe_router_fusion": bool(moe.get("router_fusion")),
            "moe_fused_grouped_mlp": bool(moe.get("te_op_fuser (fused grouped MLP)")),
            "moe_shared_expert_overlap": bool(moe.get("shared_expert_overlap")),
            "moe_force_balance": bool(moe.get("router_force_load_balancing")),
            "moe_capacity_factor": moe.get("expert_capacity_factor"),
            "moe_rank_capacity_factor": moe.get("expert_rank_capacity_factor"),
            "moe_paged_stash": bool(moe.get("paged_stash")),
            "moe_deepep_sms": moe.get("deepep_num_sms"),
            "moe_hybridep_sms": moe.get("hybridep_num_sms"),
        }
    return out


def match(
    row: dict[str, Any], releases: dict[str, dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The release and workload a run ran, or None."""
    release = releases.get(row["release"].removeprefix("Megatron-Bridge ").strip())
    model = RECIPE_MODELS.get(row["model"])
    if release is None or model is None:
        return None
    found = [
        w for w in release["workloads"]
        if w["recipe_id"] == model and w["gpu"] == GPUS.get(row["hardware"]) and w["precision"] == _precision(row)
        and w["num_gpus"] == row["gpus"] and w["settings"] is not None
    ]  # fmt: skip
    if not found:
        return None
    best = min(
        found,
        key=lambda w: (
            _cut_misses(row, w["settings"]["parallelism"]),
            not w["published_in_performance_summary"],
            w["config_variant"] not in (None, "v2", "v1"),
        ),
    )
    return release, best


def release_table(recipes: dict[str, Any]) -> dict[str, Any]:
    """Each release's versions and, per model, GPU and precision pplan has, the knobs of its default workload (the
    published one where there is one, else the default config variant, else the first): what `--stack
    megatron-bridge@RELEASE` defaults to."""
    models = {v: k for k, v in RECIPE_MODELS.items()}
    gpus = {v: k for k, v in GPUS.items()}
    out = []
    for release in recipes["releases"]:
        table: dict[str, dict[str, Any]] = {}
        ranked = sorted(
            (w for w in release["workloads"] if w["settings"] is not None),
            key=lambda w: (
                not w["published_in_performance_summary"],
                w["config_variant"] not in (None, "v2", "v1"),
            ),
        )
        for w in ranked:
            model, gpu, precision = (
                models.get(w["recipe_id"]),
                gpus.get(w["gpu"]),
                PRECISIONS.get(w["precision"]),
            )
            if model and gpu and precision:
                table.setdefault(f"{model} {gpu} {precision}", knobs(w["settings"]))
        versions = release.get("versions") or {}
        out.append({
            "name": release["container"], "tag": release["bridge_tag"], "date": release.get("tag_date"),
            "megatron_core": versions.get("megatron_core") or versions.get("megatron_core_pin"),
            "transformer_engine": versions.get("transformer_engine") or versions.get("te_pin"),
            "recipes": table,
        })  # fmt: skip
    return {
        "about": "Megatron-Bridge releases (NeMo containers) and the knobs each release's benchmark recipe runs per "
        "model, GPU and precision, under pplan's setting names; written by scripts/import_bridge_recipes.py from "
        "each release's own harness (NVIDIA-NeMo/Megatron-Bridge tags v0.1.0rc3 to v0.6.0). Oldest first.",
        "stacks": {"megatron-bridge": out},
    }


def main() -> None:
    recipes = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    releases = {r["container"]: r for r in recipes["releases"]}
    runs = json.loads(RUNS.read_text(encoding="utf-8"))
    matched = unmatched = 0
    for data in runs["sets"]:
        if data["stack"] != "megatron-bridge" or data["name"] != "megatron-bridge-performance-summary":
            continue
        for row in data["rows"]:
            row.pop("recipe", None)
            got = match(row, releases)
            if got is None:
                unmatched += 1
                continue
            release, workload = got
            versions = release.get("versions") or {}
            row["recipe"] = {
                "source": f"{release['bridge_tag']} {workload['source']}",
                "cut_misses": _cut_misses(row, workload["settings"]["parallelism"]),
                "megatron_core": versions.get("megatron_core"),
                "transformer_engine": versions.get("transformer_engine"),
                **knobs(workload["settings"]),
            }
            matched += 1
    RUNS.write_text(json.dumps(runs, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    RELEASES.write_text(
        json.dumps(release_table(recipes), separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"{matched} runs matched to their release's recipe, {unmatched} not")


if __name__ == "__main__":
    main()
