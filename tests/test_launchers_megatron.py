"""Megatron-LM output on the launcher panel: every plan is refused on --launcher or gives arguments that
Megatron's parser (built from its option table) and `validate_args`' rules accept, and that Megatron reads back
as the plan and the model: parallel sizes, batch, layer split, memory settings and every architecture feature.
The expected values come from the `ModelSpec` and the `PlanRequest`, not from pplan's Megatron writer."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pplan.errors import ConfigError
from pplan.launchers.megatron import megatron_args, megatron_env, megatron_notes, megatron_text
from pplan.launchers.megatron_validate import (
    RULES,
    MegatronArgumentError,
    layers_per_virtual_stage,
    option_table,
    padded_vocab_size,
    validate_megatron,
)
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_model
from pplan.profiles.model_spec import ModelSpec
from tests.launcher_panel import PANEL, PanelPlan

# Entries Megatron-LM refuses, and why: only 1F1B and interleaved 1F1B run (schedules.py), and a sharded plan
# overlapping the parameter gather but not the gradient reduction is an assertion of validate_args.
REFUSED = {
    "70b-zbv": "megatron cannot run zbv",
    "70b-dualpipev": "megatron cannot run dualpipev",
    "70b-gpipe": "megatron cannot run gpipe",
    "70b-zb-h1": "megatron cannot run zb-h1",
    "70b-no-overlap": "--overlap-param-gather needs --overlap-grad-reduce",
    "70b-hsdp-zero3": "no hybrid sharding for Megatron-FSDP",
    "8b-zero3-no-reshard": "Megatron-FSDP reshards after every forward",
}
POSITION_TYPE = {"rope": "rope", "learned": "learned_absolute"}
NORM = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
FSDP = {2: "optim_grads", 3: "optim_grads_params"}


def _expected_split(entry: PanelPlan, model: ModelSpec) -> list[int]:
    """Decoder layers per virtual stage in model order, from the request alone."""
    req = entry.request
    chunks = req.pp * (req.vp or 1)
    edges = [x for x in (req.first_stage_layers, req.last_stage_layers) if x is not None]
    k = (model.num_layers - sum(edges)) // (chunks - len(edges))
    first = req.first_stage_layers if req.first_stage_layers is not None else k
    last = req.last_stage_layers if req.last_stage_layers is not None else k
    return [first, *[k] * (chunks - 2), last] if chunks > 1 else [model.num_layers]


def _check_plan_values(entry: PanelPlan, model: ModelSpec, ns: argparse.Namespace) -> None:
    req = entry.request
    d = req.gpus // (req.tp * req.pp * req.cp)
    assert (ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size, ns.context_parallel_size) == (
        req.tp,
        req.pp,
        req.cp,
    )
    assert ns.data_parallel_size == d
    assert (ns.virtual_pipeline_model_parallel_size or 1) == (req.vp or 1)
    assert ns.micro_batch_size == req.micro_batch and ns.global_batch_size == req.global_batch
    assert ns.num_micro_batches == req.global_batch // (req.micro_batch * d)
    assert ns.sequence_parallel == (req.sequence_parallel and req.tp > 1)
    if req.pp > 1:
        assert layers_per_virtual_stage(ns) == _expected_split(entry, model)
    # recompute
    if req.recompute == "none":
        assert ns.recompute_granularity is None
    elif req.recompute == "selective":
        assert ns.recompute_granularity == "selective" and ns.recompute_num_layers is None
        assert sorted(ns.recompute_modules) == sorted(req.recompute_modules)
    else:
        assert (ns.recompute_granularity, ns.recompute_method, ns.recompute_num_layers) == (
            "full",
            req.recompute_method,
            req.recompute_layers or 1,
        )
    # memory settings
    assert ns.grad_reduce_in_bf16 == (req.grad_dtype == "bf16")
    assert ns.use_distributed_optimizer == (req.zero_stage >= 1)
    assert ns.use_megatron_fsdp == (req.zero_stage >= 2)
    d = req.gpus // (req.tp * req.pp * req.cp)
    instances = d * req.cp // req.shard_group if req.shard_group else 1
    assert ns.num_distributed_optimizer_instances == instances  # hybrid sharding: one instance per replica
    if req.zero_stage >= 2:
        assert ns.data_parallel_sharding_strategy == FSDP[req.zero_stage]
        assert ns.ckpt_format == "fsdp_dtensor"
    assert ns.overlap_grad_reduce == req.overlap_grad_reduce
    assert ns.overlap_param_gather == (req.overlap_param_gather and req.zero_stage >= 1)
    # the model
    seq = req.seq_len or model.seq_len
    assert ns.seq_length == seq and ns.max_position_embeddings >= seq
    if model.position_embedding == "learned":
        assert ns.max_position_embeddings == max(seq, model.position_rows)
    assert ns.position_embedding_type == POSITION_TYPE[model.position_embedding]
    # the RoPE base and the norm's epsilon: the profile's where it states them, else Megatron's defaults
    if model.position_embedding == "rope":
        assert ns.rotary_base == (model.rope_theta if model.rope_theta is not None else 10000)
    assert ns.layernorm_epsilon == (model.norm_epsilon if model.norm_epsilon is not None else 1e-5)
    assert (ns.num_layers, ns.hidden_size, ns.ffn_hidden_size, ns.num_attention_heads) == (
        model.num_layers,
        model.hidden_size,
        model.ffn_hidden_size,
        model.num_attention_heads,
    )
    groups = ns.num_query_groups if ns.group_query_attention else ns.num_attention_heads
    assert groups == model.kv_heads and ns.kv_channels == model.head_size
    assert ns.add_bias_linear == model.linear_bias
    assert (ns.add_bias_linear or ns.add_qkv_bias) == model.qkv_bias
    assert (ns.hidden_dropout > 0, ns.attention_dropout > 0) == (model.dropout, model.dropout)
    assert ns.normalization == NORM[model.norm]
    assert ns.swiglu == (model.mlp == "swiglu") and ns.squared_relu == (model.mlp == "squared-relu")
    assert ns.untie_embeddings_and_output_weights == (not model.tied_embeddings)
    assert padded_vocab_size(model.vocab_size, ns) == model.vocab_size
    assert ns.bf16 and not ns.fp16


@pytest.mark.parametrize("entry", PANEL, ids=[e.id for e in PANEL])
def test_panel_entry_is_refused_or_valid_and_the_plan(entry: PanelPlan) -> None:
    model = load_model(entry.model)
    plan = make_plan(model, entry.request)
    if entry.id in REFUSED:
        with pytest.raises(ConfigError) as err:
            megatron_args(model, plan)
        assert err.value.field == "--launcher" and REFUSED[entry.id] in str(err.value)
        return
    args = megatron_args(model, plan)
    check = validate_megatron(args, plan.gpus, megatron_env(plan))
    assert check.failures == ()
    _check_plan_values(entry, model, check.namespace)


def test_panel_covers_refusals_and_outputs() -> None:
    ids = {e.id for e in PANEL}
    assert set(REFUSED) <= ids and len(ids - set(REFUSED)) >= 15


# ----------------------------------------------------------------------------------------- the validator


LLAMA70 = load_model("llama3-70b")
GPT3 = load_model("gpt3-175b")
_GOOD = [
    "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "4",
    "--micro-batch-size", "1", "--global-batch-size", "64",
    "--num-layers", "80", "--hidden-size", "8192", "--num-attention-heads", "64",
    "--seq-length", "8192", "--max-position-embeddings", "8192", "--bf16",
]  # fmt: skip
_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def test_validator_accepts_a_plain_run() -> None:
    check = validate_megatron(_GOOD, 64, _ENV)
    assert check.failures == ()
    assert check.namespace.data_parallel_size == 2 and check.namespace.num_micro_batches == 32


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--virtual-pipeline-model-parallel-size", "2"], "unrecognized arguments"),
        (["--normalization", "BatchNorm"], "invalid choice"),
        (["--num-layers", "eighty"], "invalid int value"),
        (["--recompute-granularity", "some"], "invalid choice"),
        (["--num-lay", "80"], "unrecognized arguments"),  # Megatron's parser takes no abbreviations
    ],
)
def test_parser_refuses_as_megatrons_argparse_would(extra: list[str], message: str) -> None:
    with pytest.raises(MegatronArgumentError, match=message):
        validate_megatron(_GOOD + extra, 64, _ENV)


@pytest.mark.parametrize(
    ("extra", "world", "env", "rule"),
    [
        (["--max-position-embeddings", "2048"], 64, _ENV, "position table covers the sequence"),
        (
            ["--overlap-param-gather", "--use-distributed-optimizer"],
            64,
            _ENV,
            "param-gather overlap needs grad",
        ),
        (["--overlap-param-gather", "--overlap-grad-reduce"], 64, _ENV, "needs sharded parameters"),
        ([], 64, {}, "tensor/context parallel connections"),
        ([], 48, _ENV, "world size"),
        (["--global-batch-size", "63"], 64, _ENV, "global batch"),
        (["--num-virtual-stages-per-pipeline-rank", "3"], 64, _ENV, "layers per rank and virtual stages"),
        (
            ["--num-virtual-stages-per-pipeline-rank", "2", "--global-batch-size", "6"],
            64,
            _ENV,
            "micro-batch",
        ),
        (["--recompute-granularity", "full"], 64, _ENV, "recompute settings"),
        (["--recompute-granularity", "selective", "--recompute-num-layers", "1"], 64, _ENV, "recompute"),
        (
            ["--fine-grained-activation-offloading", "--offload-modules", "attn_proj"],
            64,
            _ENV,
            "offload modules",
        ),
        (["--fine-grained-activation-offloading", "--offload-modules", "mlp"], 64, _ENV, "offload modules"),
        (["--fine-grained-activation-offloading"], 64, _ENV, "offload modules"),
        (
            ["--fine-grained-activation-offloading", "--offload-modules", "core_attn", "attn_proj"],
            64,
            _ENV,
            None,
        ),
        (["--group-query-attention", "--num-query-groups", "3"], 64, _ENV, "query groups"),
        (["--decoder-first-pipeline-num-layers", "7"], 64, _ENV, "uneven pipeline split"),
        (["--pipeline-model-parallel-layout", "Ettt|ttt|tt|ttL"], 64, _ENV, "layout string"),
        (["--use-megatron-fsdp", "--use-distributed-optimizer"], 64, {}, "Megatron-FSDP checkpoint format"),
        (["--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"], 64, _ENV, "Megatron-FSDP connections"),
        (["--swiglu", "--squared-relu"], 64, _ENV, "one MLP activation"),
        (["--disable-bias-linear"], 64, _ENV, None),  # bias-GELU fusion switched off with the biases
        (["--squared-relu"], 64, _ENV, "bias-activation fusion"),
    ],
)
def test_validator_catches_planted_mistakes(
    extra: list[str], world: int, env: dict[str, str], rule: str | None
) -> None:
    failures = validate_megatron(_GOOD + extra, world, env).failures
    if rule is None:
        assert failures == ()
    else:
        assert any(f.startswith(rule) or rule in f.split(":")[0] for f in failures), failures


def test_rules_cite_their_sources() -> None:
    assert len({r.name for r in RULES}) == len(RULES)
    for rule in RULES:
        assert "core_v0.16.1" in rule.source and ".py" in rule.source and rule.message


def test_option_table_is_the_published_one() -> None:
    table = option_table()
    assert table["source"].startswith("NVIDIA/Megatron-LM tag core_v0.16.1, megatron/training/arguments.py")
    assert table["count"] == len(table["options"]) == 651
    flags = [f for o in table["options"] for f in o["flags"]]
    assert len(flags) == len(set(flags)) and all(f.startswith("--") for f in flags)
    assert len({o["dest"] for o in table["options"]}) <= len(table["options"])


# ------------------------------------------------------------------------------------------ the output


def _plan(model: ModelSpec, **kw: object) -> Plan:
    return make_plan(model, PlanRequest(**kw))  # type: ignore[arg-type]


def test_learned_table_grows_to_the_sequence_with_a_note() -> None:
    plan = make_plan(GPT3, next(e for e in PANEL if e.id == "gpt3-seq4096").request)
    args = megatron_args(GPT3, plan)
    assert args[args.index("--max-position-embeddings") + 1] == "4096"
    grown = [n for n in megatron_notes(GPT3, plan) if "position table grown" in n]
    assert grown and f"{(4096 - 2048) * 12288:,}" in grown[0]


def test_environment_line_for_tensor_parallelism() -> None:
    text = megatron_text(LLAMA70, _plan(LLAMA70, gpus=64, global_batch=64, tp=8, pp=4))
    assert "# environment: export CUDA_DEVICE_MAX_CONNECTIONS=1" in text
    llama8 = load_model("llama3-8b")
    text = megatron_text(llama8, _plan(llama8, gpus=8, global_batch=64))
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in text
    fsdp = _plan(llama8, gpus=16, global_batch=64, tp=2, zero_stage=3)
    assert megatron_env(fsdp) == {}
    assert "leave CUDA_DEVICE_MAX_CONNECTIONS unset" in megatron_text(llama8, fsdp)


def test_vocabulary_padding_is_said_and_avoided_where_it_can_be() -> None:
    plan = _plan(LLAMA70, gpus=64, global_batch=64, tp=8, pp=4)
    args = megatron_args(LLAMA70, plan)
    # 128256 is not a multiple of 128 × 8 = 1024 (Megatron would build 129024 rows); 32 × 8 = 256 divides it
    assert args[args.index("--make-vocab-size-divisible-by") + 1] == "32"
    assert any("128256 rows" in n for n in megatron_notes(LLAMA70, plan))
    odd = LLAMA70.model_copy(update={"vocab_size": 50257})
    notes = megatron_notes(odd, plan)
    assert "--make-vocab-size-divisible-by" not in megatron_args(odd, plan)
    assert any("51200 rows" in n and "more than pplan costed" in n for n in notes)


def test_models_megatron_cannot_build_are_refused() -> None:
    plan = _plan(LLAMA70, gpus=64, global_batch=64, tp=8, pp=4)
    for update in ({"position_embedding": "alibi"}, {"linear_bias": True, "qkv_bias": False}):
        with pytest.raises(ConfigError) as err:
            megatron_args(LLAMA70.model_copy(update=update), plan)
        assert err.value.field == "--launcher"


def test_squared_relu_and_qkv_bias_are_flags() -> None:
    plan = _plan(LLAMA70, gpus=64, global_batch=64, tp=8, pp=4)
    model = LLAMA70.model_copy(update={"mlp": "squared-relu", "qkv_bias": True})
    args = megatron_args(model, plan)
    check = validate_megatron(args, 64, _ENV)
    assert check.failures == ()
    assert (
        check.namespace.squared_relu and check.namespace.add_qkv_bias and not check.namespace.add_bias_linear
    )


# ----------------------------------------------------------------------------- megatron-core, for real

MEGATRON_CORE = "megatron-core==0.16.1"
_CORE_FIELDS = (
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "sequence_parallel",
    "virtual_pipeline_model_parallel_size", "pipeline_model_parallel_layout", "microbatch_group_size_per_vp_stage",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "hidden_dropout", "attention_dropout", "add_bias_linear", "add_qkv_bias", "normalization", "layernorm_epsilon",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "bf16", "fp16",
)  # fmt: skip
_CORE_SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
import torch.nn.functional as F
from megatron.core.distributed import DistributedDataParallelConfig
from megatron.core.transformer.transformer_block import get_num_layers_to_build
from megatron.core.transformer.transformer_config import TransformerConfig

out = {}
for case in json.load(sys.stdin):
    a = case["args"]
    kw = {k: a[k] for k in case["fields"]}
    # megatron/training/arguments.py core_transformer_config_from_args: the renamed and derived fields
    kw.update(
        num_layers_in_first_pipeline_stage=a["decoder_first_pipeline_num_layers"],
        num_layers_in_last_pipeline_stage=a["decoder_last_pipeline_num_layers"],
        num_query_groups=a["num_query_groups"] if a["group_query_attention"] else None,
        batch_p2p_comm=not a["overlap_p2p_comm"],
        params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
    )
    if a["swiglu"]:
        kw.update(activation_func=F.silu, gated_linear_unit=True, bias_activation_fusion=a["bias_swiglu_fusion"])
    else:
        kw.update(bias_activation_fusion=a["bias_gelu_fusion"])
    if a["squared_relu"]:
        kw.update(activation_func=lambda x: torch.pow(F.relu(x), 2))
    try:
        config = TransformerConfig(**kw)
        DistributedDataParallelConfig(
            grad_reduce_in_fp32=not a["grad_reduce_in_bf16"], overlap_grad_reduce=a["overlap_grad_reduce"],
            overlap_param_gather=a["overlap_param_gather"], use_distributed_optimizer=a["use_distributed_optimizer"],
            use_megatron_fsdp=a["use_megatron_fsdp"],
            data_parallel_sharding_strategy=a["data_parallel_sharding_strategy"],
        )
        p, v = config.pipeline_model_parallel_size, config.virtual_pipeline_model_parallel_size
        layout = config.pipeline_model_parallel_layout
        split = []
        for vp in range(v or 1):
            for r in range(p):
                if layout is not None:
                    split.append(sum(1 for x in layout.layout[r][vp] if x.name == "decoder"))
                else:
                    split.append(get_num_layers_to_build(config, vp_stage=vp if v else None, pp_rank=r))
        out[case["id"]] = {"split": split, "kv_channels": config.kv_channels,
                           "num_query_groups": config.num_query_groups, "ffn": config.ffn_hidden_size}
    except Exception as e:
        out[case["id"]] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""


def _megatron_core_site(tmp_path: Path) -> Path:
    """megatron-core 0.16.1 installed (without dependencies: torch is the interpreter's) into a folder of its own,
    from PyPI (pip's cache) or from the wheel named by PPLAN_MEGATRON_CORE_WHEEL (offline runs)."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    source = os.environ.get("PPLAN_MEGATRON_CORE_WHEEL") or MEGATRON_CORE
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), source]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"cannot install {MEGATRON_CORE}: {done.stderr.strip()[-300:]}")
    return site


@pytest.mark.acceptance  # installs megatron-core and imports it: about 15 s
def test_megatron_core_builds_every_panel_config(tmp_path: Path) -> None:
    """megatron-core's own TransformerConfig (its __post_init__ rules) accepts each panel output, translated as
    Megatron-LM's core_transformer_config_from_args does, and its get_num_layers_to_build gives pplan's split."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch")
    site = _megatron_core_site(tmp_path)
    cases, expected = [], {}
    for entry in PANEL:
        if entry.id in REFUSED:
            continue
        model = load_model(entry.model)
        plan = make_plan(model, entry.request)
        ns = validate_megatron(megatron_args(model, plan), plan.gpus, megatron_env(plan)).namespace
        cases.append({"id": entry.id, "fields": list(_CORE_FIELDS), "args": vars(ns)})
        expected[entry.id] = {
            "split": [c.layers for c in plan.layout.chunks],
            "kv_channels": model.head_size,
            "num_query_groups": model.kv_heads,
            "ffn": model.ffn_hidden_size,
        }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _CORE_SCRIPT],
        input=json.dumps(cases, default=str),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == expected
