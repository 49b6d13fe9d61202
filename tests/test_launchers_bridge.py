"""Megatron-Bridge output (`--format megatron-bridge`): recipe overrides checked by Megatron-Bridge's own classes.

Fast tier: the overrides' shape (one `key=value` per word, each key once, pasteable as a whole), the plan's values
in them, the named mixed-precision recipe or the `_target_` form, and the refusals. Acceptance tier: every
launcher-panel plan (tests/launcher_panel.py, dense and routed) is fed to Megatron-Bridge 0.3.1's
`ConfigContainer` (`process_config_with_overrides`, then `runtime_config_update`, which validates), in a process
of its own with Transformer Engine and Triton stubbed (tests/bridge_check.py says how); the validated config must
hold the plan's parallelism, batch, recompute, sharding and precision. It skips when `megatron.bridge` is not
installed (CI installs `.[test]` only; `pip install megatron-core==0.16.1 megatron-bridge==0.3.1 --no-deps` plus
the pure-Python packages its configuration code imports, as docs/launcher-settings.md lists them, runs it).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pplan.errors import ConfigError
from pplan.launchers.megatron import megatron_args
from pplan.launchers.megatron_bridge import (
    NAMED_PRECISION,
    bridge_env,
    bridge_override_args,
    bridge_overrides,
    bridge_text,
)
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_model
from pplan.profiles.model_spec import ModelSpec
from tests.cli_run import run_pplan
from tests.launcher_panel import PANEL, ROUTED_PANEL, PanelPlan, panel_model

ROOT = Path(__file__).resolve().parents[1]
LLAMA = load_model("llama3-8b")
QWEN = load_model("qwen3-30b-a3b")


def _plan(model: ModelSpec, **kw: Any) -> Any:
    return make_plan(model, PlanRequest(**kw))


def test_every_word_is_one_override_and_each_key_appears_once() -> None:
    plan = _plan(LLAMA, gpus=16, global_batch=64, tp=2, pp=4, vp=2, schedule="interleaved-1f1b")
    words = bridge_override_args(LLAMA, plan)
    keys = [w.split("=", 1)[0] for w in words]
    assert all("=" in w for w in words) and len(keys) == len(set(keys))
    values = bridge_overrides(LLAMA, plan)
    assert (values["model.tensor_model_parallel_size"], values["model.pipeline_model_parallel_size"]) == (
        2,
        4,
    )
    assert values["model.virtual_pipeline_model_parallel_size"] == 2
    assert values["train.global_batch_size"] == 64 and values["train.micro_batch_size"] == plan.micro_batch
    assert values["model.seq_length"] == values["dataset.sequence_length"] == plan.seq_len


def test_the_block_pastes_whole_into_a_shell_command() -> None:
    """Every line but the last override ends in a continuation; the notes come after it, so bash reads the
    overrides as one command's words."""
    plan = _plan(LLAMA, gpus=16, global_batch=64, tp=2, pp=4, first_stage_layers=0, last_stage_layers=0)
    text = bridge_text(LLAMA, plan)
    lines = text.splitlines()
    overrides = [line for line in lines if not line.startswith("#")]
    assert all(line.endswith(" \\") for line in overrides[:-1]) and not overrides[-1].endswith("\\")
    assert lines.index(overrides[-1]) < min(i for i, line in enumerate(lines) if line.startswith("#"))
    words = shlex.split(" ".join(line.removesuffix("\\") for line in overrides))
    assert words == bridge_override_args(LLAMA, plan)
    layout = [w for w in words if w.startswith("model.pipeline_model_parallel_layout=")]
    chunks = layout[0].split("=", 1)[1].strip('"').split("|")
    assert (
        len(chunks) == 4 and sum(c.count("t") for c in chunks) == LLAMA.num_layers
    )  # 32 layers over 4 stages


def test_a_layout_string_places_the_mtp_modules_before_the_loss() -> None:
    """megatron-core 0.16.1 asserts the layout holds exactly mtp_num_layers `m` entries, after every decoder
    layer; pplan costs DeepSeek-V3's one MTP module on the output's stage, so the last chunk ends in `mL`."""
    dsv3 = load_model("deepseek-v3")
    plan = _plan(
        dsv3, gpus=512, global_batch=512, tp=2, pp=4, vp=2, schedule="interleaved-1f1b", first_stage_layers=6,
        last_stage_layers=7, ep=16, zero_stage=1,
    )  # fmt: skip
    layout = str(bridge_overrides(dsv3, plan)["model.pipeline_model_parallel_layout"]).strip('"').split("|")
    assert layout[-1].endswith("m" * dsv3.mtp_layers + "L") and dsv3.mtp_layers == 1
    assert "".join(layout).count("m") == dsv3.mtp_layers and "".join(layout).count("t") == dsv3.num_layers
    assert f"--pipeline-model-parallel-layout {'|'.join(layout)}" in " ".join(megatron_args(dsv3, plan))


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        ({}, "bf16_mixed"),
        ({"precision": "fp8", "fp8_param_gather": True}, "bf16_with_fp8_delayed_scaling_mixed"),
        ({"precision": "fp8"}, None),  # the named FP8 recipe gathers weights in FP8: the plan does not
        ({"grad_dtype": "bf16"}, None),  # every named recipe reduces gradients in FP32
    ],
)
def test_the_named_precision_recipe_only_where_it_is_the_plan(kw: dict[str, Any], named: str | None) -> None:
    plan = _plan(LLAMA, gpus=8, global_batch=32, **kw)
    value = bridge_override_args(LLAMA, plan)[-1].removeprefix("mixed_precision=")
    if named is not None:
        assert value == named == NAMED_PRECISION[plan.precision]
    else:
        assert value.startswith("{_target_:megatron.bridge.training.mixed_precision.MixedPrecisionConfig,")
        assert f"grad_reduce_in_fp32:{'true' if plan.grad_dtype == 'fp32' else 'false'}" in value


def test_moe_knobs_are_written_and_what_megatron_core_lacks_is_refused() -> None:
    plan = _plan(QWEN, gpus=16, global_batch=64, ep=8, zero_stage=3, moe_dispatcher="hybridep")
    values = bridge_overrides(QWEN, plan)
    assert values["model.expert_model_parallel_size"] == 8
    assert (values["model.moe_token_dispatcher_type"], values["model.moe_flex_dispatcher_backend"]) == (
        "flex", "hybridep",
    )  # fmt: skip
    assert values["ddp.data_parallel_sharding_strategy"] == "optim_grads_params"
    refused = _plan(QWEN, gpus=16, global_batch=64, ep=8, moe_dispatcher="ncclep")
    with pytest.raises(ConfigError, match="ncclep"):
        bridge_overrides(QWEN, refused)


def test_the_cli_prints_it_and_refuses_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    ok = run_pplan(
        capsys, "explain", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--tp", "2",
        "--format", "megatron-bridge",
    )  # fmt: skip
    assert ok.code == 0, ok.err
    assert "model.tensor_model_parallel_size=2 \\" in ok.out
    bad = run_pplan(
        capsys, "explain", "--model", "llama3-70b", "--gpus", "256", "--global-batch", "256", "--tp", "8", "--pp",
        "4", "--schedule", "zbv", "--format", "megatron-bridge",
    )  # fmt: skip
    assert bad.code == 2 and "Traceback" not in bad.err
    assert len(bad.err.strip().splitlines()) == 1 and "zbv" in bad.err


# ------------------------------------------------------------------------------------------- acceptance tier


def shape_of(model: ModelSpec) -> dict[str, Any]:
    """The model's shape for tests/bridge_check.py's model provider."""
    moe = model.moe
    return {
        "num_layers": model.num_layers, "hidden_size": model.hidden_size, "ffn_hidden_size": model.ffn_hidden_size,
        "heads": model.num_attention_heads, "kv_heads": model.kv_heads, "head_size": model.head_size,
        "seq_len": model.seq_len, "vocab_size": model.vocab_size,
        "norm": "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm", "swiglu": model.mlp == "swiglu",
        "position": {"rope": "rope", "learned": "learned_absolute"}.get(model.position_embedding, "none"),
        "linear_bias": model.linear_bias, "qkv_bias": model.qkv_bias, "tied": model.tied_embeddings,
        "qk_norm": model.qk_norm, "mla": model.mla is not None, "mtp_layers": model.mtp_layers,
        "experts": moe.num_experts if moe else 0, "top_k": moe.top_k if moe else 0,
        "expert_ffn": moe.expert_ffn_hidden_size if moe else 0,
        "shared_ffn": moe.shared_expert_ffn_hidden_size if moe else 0,
        "moe_layer_freq": [int(model.is_moe_layer(i)) for i in range(model.num_layers)] if moe else 1,
    }  # fmt: skip


def _bridge_installed() -> bool:
    try:
        return importlib.util.find_spec("megatron.bridge") is not None
    except ModuleNotFoundError:
        return False


def _expected(model: ModelSpec, plan: Any) -> dict[str, Any]:
    routed = {}
    if model.moe is not None:
        dispatcher = {"deepep": "flex", "hybridep": "flex"}.get(plan.moe_dispatcher, plan.moe_dispatcher)
        routed = {"ep": plan.ep, "etp": plan.etp, "dispatcher": dispatcher}
    fp8 = {"bf16": None, "fp8": "hybrid", "mxfp8": "e4m3"}[plan.precision]
    return routed | {
        "fp8": fp8,
        "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "dp": plan.dp, "micro_batch": plan.micro_batch,
        "global_batch": plan.global_batch, "seq_len": plan.seq_len, "data_seq_len": plan.seq_len,
        "distributed_optimizer": plan.zero_stage >= 1, "fsdp": plan.zero_stage >= 2,
        "grad_reduce_in_fp32": plan.grad_dtype == "fp32", "fp8_param_gather": plan.fp8_param_gather,
        "recompute_granularity": None if plan.recompute == "none" else plan.recompute,
    }  # fmt: skip


# fmt: off
KNOBS: tuple[PanelPlan, ...] = (
    PanelPlan("qwen3-knobs", "qwen3-30b-a3b", PlanRequest(
        gpus=16, global_batch=64, ep=8, zero_stage=1, moe_dispatcher="hybridep", moe_ep_overlap=True,
        cuda_graph_scope=("attn", "moe_router", "moe_preprocess"), moe_permute_fusion=True, moe_router_fusion=True,
        moe_capacity_factor=1.0, moe_force_balance=True, precision="fp8", fp8_param_gather=True)),
    PanelPlan("qwen3-mxfp8-deepep", "qwen3-30b-a3b", PlanRequest(
        gpus=16, global_batch=64, ep=8, zero_stage=1, moe_dispatcher="deepep", precision="mxfp8",
        fp8_param_gather=True, grad_dtype="bf16")),
    PanelPlan("8b-moments-offload-tpoverlap", "llama3-8b", PlanRequest(
        gpus=16, global_batch=64, tp=2, zero_stage=1, moment_dtype="bf16", tp_comm_overlap=True)),
    PanelPlan("8b-optimizer-offload", "llama3-8b", PlanRequest(
        gpus=16, global_batch=64, tp=2, zero_stage=1, optimizer_offload_fraction=0.5)),
)
"""Settings the launcher panel leaves at their defaults: the MoE knobs, FP8 and MXFP8 with gathers, BF16 moments,
TP overlap, optimizer CPU offload."""
# fmt: on


@pytest.mark.acceptance
@pytest.mark.skipif(
    not _bridge_installed(), reason="megatron-bridge is not installed (CI installs .[test] only)"
)
def test_the_panel_passes_megatron_bridges_own_validation() -> None:
    entries: list[tuple[PanelPlan, Any, Any]] = []
    refused: dict[str, str] = {}
    for entry in (*PANEL, *ROUTED_PANEL, *KNOBS):
        model = panel_model(entry)
        plan = make_plan(model, entry.request)
        try:
            words = bridge_override_args(model, plan)
        except ConfigError as err:
            refused[entry.id] = str(err)
            continue
        entries.append(
            (
                entry,
                plan,
                {
                    "world_size": plan.gpus,
                    "shape": shape_of(model),
                    "overrides": words,
                    "env": bridge_env(plan),
                },
            )
        )
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "bridge_check.py")],
        input=json.dumps([case for _, _, case in entries]), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    failures = {}
    for (entry, plan, _), got in zip(entries, results, strict=True):
        if "error" in got:
            failures[entry.id] = got["error"]
            continue
        expected = _expected(panel_model(entry), plan)
        differ = {k: (got[k], v) for k, v in expected.items() if got[k] != v}
        if differ:
            failures[entry.id] = str(differ)
    print(f"{len(entries)} plans validated, {len(refused)} refused: {refused}")
    assert not failures, failures
    assert len(entries) + len(refused) == len(PANEL) + len(ROUTED_PANEL) + len(KNOBS)
    assert not {entry.id for entry in KNOBS} & set(refused)
    assert all("--launcher" in reason or "--moe" in reason for reason in refused.values())


def _readme_panel() -> Any:
    """docs/recommend.md's panel of recommend queries (README: "its speed on a panel of queries"), as
    benchmarks/bench_recommend.py declares it."""
    path = ROOT / "benchmarks" / "bench_recommend.py"
    spec = importlib.util.spec_from_file_location("bench_recommend", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_recommend"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module.PANEL


READMES_TOP = 3
"""Plans checked per query of the README's panel: the top three Megatron-Bridge runs."""


@pytest.mark.acceptance
@pytest.mark.skipif(
    not _bridge_installed(), reason="megatron-bridge is not installed (CI installs .[test] only)"
)
def test_the_readme_panels_plans_pass_megatron_bridges_own_validation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each query of the README's panel, searched for what Megatron-Bridge runs (`--launcher megatron-bridge`,
    its torchtitan/Megatron-LM launcher filters dropped: the same query then), top three: each plan's
    `explain --format megatron-bridge` block, pasted as a shell would split it, passes Megatron-Bridge's
    validation with the plan's values."""
    cases, expected, refused = [], [], {}
    seen = set()
    for query in _readme_panel():
        args = [a for a in query.args() if a not in ("--launcher", query.launcher)]
        if tuple(args) in seen:
            continue
        seen.add(tuple(args))
        found = run_pplan(
            capsys, "recommend", *args, "--launcher", "megatron-bridge", "--top", str(READMES_TOP),
            "--format", "json",
        )  # fmt: skip
        assert found.code == 0, (query.label, found.err)
        model = load_model(query.model)
        for candidate in found.json()["candidates"]:
            explain = shlex.split(candidate["explain_command"])[1:]
            out = run_pplan(capsys, *explain, "--format", "megatron-bridge")
            plan = candidate["plan"]
            if out.code != 0:
                refused[f"{query.label} #{candidate['rank']}"] = out.err.strip()
                continue
            lines = [line for line in out.out.splitlines() if line.strip() and not line.startswith("#")]
            words = shlex.split(" ".join(line.removesuffix("\\") for line in lines))
            env = dict(
                line.removeprefix("# environment: export ").split(" ")[0].split("=", 1)
                for line in out.out.splitlines()
                if line.startswith("# environment: export ")
            )
            cases.append(
                {"world_size": plan["gpus"], "shape": shape_of(model), "overrides": words, "env": env}
            )
            expected.append((f"{query.label} #{candidate['rank']}", plan))
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "bridge_check.py")],
        input=json.dumps(cases), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    failures = {}
    for (name, plan), got in zip(expected, results, strict=True):
        if "error" in got:
            failures[name] = got["error"]
            continue
        want = {k: plan[k] for k in ("tp", "pp", "cp", "dp", "micro_batch", "global_batch", "seq_len")}
        differ = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        if differ:
            failures[name] = str(differ)
    print(f"README panel: {len(cases)} plans validated, {len(refused)} refused: {refused}")
    assert not failures, failures
    assert not refused  # what a search for Megatron-Bridge ranks, it writes
