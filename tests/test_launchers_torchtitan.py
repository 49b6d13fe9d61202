"""torchtitan output on the launcher panel, for both releases pplan writes: 0.3.x arguments (`torchtitan`) and the
0.2.x TOML (`torchtitan@0.2`). Every entry is refused on --launcher with its reason, or its settings are the plan.

Fast tier: the output's shape and names (typed from torchtitan 0.3.0's `torchtitan/config/configs.py` and
`torchtitan/distributed/activation_checkpoint.py`, and 0.2.2's `torchtitan/config/job_config.py`), the values,
the refusals and the version selection. Acceptance tier: torchtitan's own config parser reads every output (one
throwaway venv per release, one subprocess for the whole panel) and the parsed values, and torchtitan's own
pipeline split, equal the plan. The expected values come from the `PlanRequest` and the `ModelSpec`, not from
pplan's torchtitan writer.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pplan.errors import ConfigError
from pplan.launchers import launcher_text
from pplan.launchers.support import (
    LAUNCHERS,
    request_unsupported_reason,
    torchtitan_version,
    unsupported_reason,
)
from pplan.launchers.torchtitan import data_parallel_degrees, torchtitan_args
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_model
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import schedule_family
from tests.cli_run import run_pplan
from tests.launcher_panel import PANEL, ROUTED_PANEL, PanelPlan, panel_model

VERSIONS = {"torchtitan": "0.3", "torchtitan@0.2": "0.2"}
SELECTIVE = "torchtitan: no attention-core recompute (pplan's selective)"
NO_MODEL = "torchtitan ships no configuration for this model"
PARTIAL = "torchtitan: full recompute of every layer only"
# Entries torchtitan cannot run, and why (the same in both releases): ZB-H1 is no torch class, pplan's selective
# recompute (the attention core only) is no torchtitan mode, torchtitan has no activation offload, and torchtitan
# ships no GPT model.
BF16_GRADS = "torchtitan: gradients reduced in FP32 only"
REFUSED = {
    "8b-zero3-selective": SELECTIVE,
    "70b-t4-p4-v2": SELECTIVE,
    "70b-zb-h1": "torchtitan cannot run zb-h1",
    "gpt3-t8-p16": NO_MODEL,
    "gpt3-seq4096": NO_MODEL,
    "gpt3-t8-p8-v3-fp32": NO_MODEL,
    "gpt-1.7b-d32": NO_MODEL,
    "8b-t1-cp2-bf16": BF16_GRADS,
    "70b-t8-p8-v5-full": BF16_GRADS,
    "405b-t8-p9-cp2-v7-bf16": BF16_GRADS,
    "70b-block-3": PARTIAL,
    "70b-v2-uniform-2": PARTIAL,
    "70b-selective-mlp-norm": SELECTIVE,
    "70b-offload": "torchtitan: no activation offload",
}
# torch.distributed.pipelining's class names (PyTorch 2.13 schedules.py, `get_schedule_class`) per pplan schedule.
TORCH_SCHEDULE = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved-1f1b": "Interleaved1F1B",
    "looped-bfs": "LoopedBFS",
    "interleaved-zb": "InterleavedZeroBubble",
    "zbv": "ZBVZeroBubble",
    "dualpipev": "DualPipeV",
}
# torchtitan 0.3.0 names (torchtitan/config/configs.py: ParallelismConfig, TrainingConfig), values and switches.
TT03_VALUES = {
    "parallelism": {
        "data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
        "context_parallel_degree", "pipeline_parallel_degree", "pipeline_parallel_schedule",
        "pipeline_parallel_microbatch_size", "pipeline_parallel_layers_per_stage",
        "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
        "fsdp_reshard_after_forward", "expert_parallel_degree",
    },
    "training": {"local_batch_size", "global_batch_size", "seq_len"},
}  # fmt: skip
TT03_SWITCHES = {
    "--parallelism.enable_sequence_parallel",
    "--parallelism.no_enable_sequence_parallel",
    "--training.disable_cuda_graphs",
}
# ActivationCheckpointingConfig's subcommands (activation_checkpoint.py) that pplan's modes map to.
TT03_AC = {"full": "activation-checkpoint:full", "none": "activation-checkpoint:none"}
# torchtitan 0.3.0 config functions (torchtitan/models/llama3/config_registry.py) and 0.2.2 flavors.
LLAMA3 = {
    "llama3-8b": ("llama3_8b", "8B"),
    "llama3-70b": ("llama3_70b", "70B"),
    "llama3-405b": ("llama3_405b", "405B"),
}
# What each release's parser reads pplan's recompute modes back as: the 0.3.x policy class, the 0.2.x mode.
AC_READ_BACK: dict[str, dict[str, str | None]] = {
    "0.3": {"full": "FullAC", "none": None},
    "0.2": {"full": "full", "none": "none"},
}
LLAMA3_ROPE_THETA = 500000  # Llama 3 Herd of Models (arXiv 2407.21783) Table 3: RoPE base frequency


def _runnable() -> list[PanelPlan]:
    return [e for e in PANEL if e.id not in REFUSED]


def _expected(entry: PanelPlan) -> dict[str, Any]:
    """What torchtitan must read back, from the request and the model profile alone."""
    model = panel_model(entry)
    req = entry.request
    d = req.gpus // (req.tp * req.pp * req.cp)
    m = req.global_batch // (req.micro_batch * d)
    family = schedule_family(req.schedule)
    v = family.fixed_v or req.vp or 1
    chunks = req.pp * v
    split: list[int] = []
    if req.pp > 1:
        edges = [x for x in (req.first_stage_layers, req.last_stage_layers) if x is not None]
        k = (model.num_layers - sum(edges)) // (chunks - len(edges))
        first = req.first_stage_layers if req.first_stage_layers is not None else k
        last = req.last_stage_layers if req.last_stage_layers is not None else k
        split = [first, *[k] * (chunks - 2), last]
    return {
        "model": model, "d": d, "m": m, "v": v, "split": split, "seq_len": req.seq_len or model.seq_len,
        "schedule": TORCH_SCHEDULE.get(family.name), "recompute": req.recompute,
    }  # fmt: skip


def _text(launcher: str, entry: PanelPlan) -> str:
    model = panel_model(entry)
    return launcher_text(launcher, model, make_plan(model, entry.request))


def _parse_03(text: str) -> tuple[dict[str, str], set[str], str]:
    """(`--section.field` → value, switches, AC subcommand) from the printed 0.3.x arguments."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    args = shlex.split(body.replace("\\\n", " "))
    values: dict[str, str] = {}
    switches: set[str] = set()
    i = 0
    while i < len(args) - 1:
        if args[i] in TT03_SWITCHES:
            switches.add(args[i])
            i += 1
        else:
            assert args[i].startswith("--") and args[i] not in values, args[i]
            values[args[i]] = args[i + 1]
            i += 2
    return values, switches, args[-1]


def _check_values(entry: PanelPlan, version: str, got: dict[str, Any]) -> None:
    """`got`: the parsed settings by field name (replicate/shard degrees, batch sizes, pipeline fields, AC)."""
    exp = _expected(entry)
    req = entry.request
    replicate, shard = got["data_parallel_replicate_degree"], got["data_parallel_shard_degree"]
    assert replicate * shard == exp["d"]
    if req.shard_group is not None:  # HSDP: FSDP shards over shard × cp, replicated
        assert (shard * req.cp, replicate) == (req.shard_group, exp["d"] * req.cp // req.shard_group)
    elif req.zero_stage == 0 and (version == "0.3" or req.tp == req.pp == req.cp == 1):
        assert shard == 1  # ZeRO-0: replicas
    else:
        assert (
            replicate == 1
        )  # FSDP shards d (ZeRO-3; the nearest for ZeRO-1/2 and 0.2.x's ZeRO-0 with t/p/cp)
    assert (
        got["tensor_parallel_degree"],
        got["pipeline_parallel_degree"],
        got["context_parallel_degree"],
    ) == (
        req.tp,
        req.pp,
        req.cp,
    )
    assert got["global_batch_size"] == req.global_batch and got["seq_len"] == exp["seq_len"]
    if req.pp > 1:
        b = got["pipeline_parallel_microbatch_size"]
        assert b == req.micro_batch and got["local_batch_size"] == req.global_batch // exp["d"]
        assert got["local_batch_size"] // b == exp["m"]  # torchtitan's n_microbatches
        assert got["pipeline_parallel_schedule"] == exp["schedule"]
    else:  # one stage: gradient accumulation over m steps of b
        assert got["local_batch_size"] == req.micro_batch
        assert req.global_batch // (got["local_batch_size"] * exp["d"]) == exp["m"]
    assert got["ac"] == AC_READ_BACK[version][req.recompute]
    if (
        req.zero_stage == 3
    ):  # set explicitly: torchtitan's "default" does not reshard under pipeline parallelism
        assert got["fsdp_reshard_after_forward"] == ("always" if req.reshard_after_forward else "never")


# ----------------------------------------------------------------------------------------------- fast tier


@pytest.mark.parametrize("launcher", list(VERSIONS))
@pytest.mark.parametrize("entry", PANEL, ids=[e.id for e in PANEL])
def test_panel_entry_is_refused_or_the_plan(launcher: str, entry: PanelPlan) -> None:
    if entry.id in REFUSED:
        with pytest.raises(ConfigError) as err:
            _text(launcher, entry)
        assert err.value.field == "--launcher" and REFUSED[entry.id] in err.value.message, err.value.message
        assert err.value.fix
        return
    text = _text(launcher, entry)
    exp = _expected(entry)
    config, flavor = LLAMA3[entry.model]
    if VERSIONS[launcher] == "0.3":
        values, switches, ac = _parse_03(text)
        assert values.pop("--module") == "llama3" and values.pop("--config") == config
        for flag in values:
            section, name = flag.removeprefix("--").split(".")
            assert name in TT03_VALUES[section], flag
        got: dict[str, Any] = {flag.split(".")[1]: int(v) if v.isdigit() else v for flag, v in values.items()}
        got["ac"] = {"activation-checkpoint:full": "FullAC", "activation-checkpoint:none": None}[ac]
        assert ac == TT03_AC[entry.request.recompute]
        assert ("--training.disable_cuda_graphs" in switches) == (entry.request.pp > 1)  # required with PP
        assert "expert_parallel_degree" not in got  # a dense model: no expert parallelism written
        sp = "--parallelism.enable_sequence_parallel" in switches
        assert sp == (entry.request.tp > 1 and entry.request.sequence_parallel)
    else:
        doc = tomllib.loads(text)
        assert doc.pop("model") == {"name": "llama3", "flavor": flavor}
        got = {**doc["parallelism"], **doc["training"], "ac": doc["activation_checkpoint"]["mode"]}
    _check_values(entry, VERSIONS[launcher], got)
    if entry.request.pp > 1:  # torchtitan's split: stages of k layers, fewer by *_less_layers at the ends
        k = got["pipeline_parallel_layers_per_stage"]
        first_less = got["pipeline_parallel_first_stage_less_layers"]
        last_less = got["pipeline_parallel_last_stage_less_layers"]
        split = exp["split"]
        assert [k - first_less, *[k] * (len(split) - 2), k - last_less] == split
        assert (
            -(-(exp["model"].num_layers + first_less + last_less) // k)
            == len(split)
            == entry.request.pp * exp["v"]
        )


def test_panel_covers_outputs_and_refusals() -> None:
    assert set(REFUSED) <= {e.id for e in PANEL}
    runnable = _runnable()
    assert len(runnable) == 18 and len(REFUSED) == 14
    assert {e.request.recompute for e in runnable} == {"none", "full"}
    assert any(e.request.pp == 1 for e in runnable) and any((e.request.vp or 1) > 1 for e in runnable)


def test_version_selection() -> None:
    assert LAUNCHERS == ("megatron", "torchtitan", "torchtitan@0.2", "megatron-bridge")
    assert torchtitan_version("torchtitan") == "0.3" and torchtitan_version("TorchTitan@0.2") == "0.2"
    with pytest.raises(ConfigError) as err:
        torchtitan_version("torchtitan@0.1")
    assert err.value.field == "--launcher"
    entry = PANEL[0]
    current, old = _text("torchtitan", entry), _text("torchtitan@0.2", entry)
    assert (
        current.startswith("    --module llama3 \\\n")
        and "\n# torchtitan 0.3.x arguments" in current
        and "--module llama3" in current
    )
    assert "[parallelism]" not in current and "job.config_file" not in current
    assert (
        old.startswith("# torchtitan 0.2.x job config (TOML)")
        and tomllib.loads(old)["model"]["flavor"] == "8B"
    )
    for text in (current, old):  # no "pick a flavor" left to the user; sources are public releases
        assert "pick" not in text and "/tmp" not in text and "/work" not in text


def test_data_parallel_degrees_by_release() -> None:
    llama70 = load_model("llama3-70b")
    zero0 = make_plan(llama70, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4))
    zero3 = make_plan(llama70, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, zero_stage=3))
    assert data_parallel_degrees(zero0, "0.3") == (2, 1)  # 0.3.x replicates beside TP/PP
    assert data_parallel_degrees(zero0, "0.2") == (1, 2)  # 0.2.x only without other parallelism
    assert data_parallel_degrees(zero3, "0.3") == data_parallel_degrees(zero3, "0.2") == (1, 2)


def test_selective_is_refused_before_a_plan() -> None:
    req = PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, recompute="selective")
    for launcher in ("torchtitan", "torchtitan@0.2"):
        assert request_unsupported_reason(launcher, req, 8, 80) == SELECTIVE
        assert unsupported_reason(launcher, "1f1b", recompute="selective") == SELECTIVE
    assert request_unsupported_reason("megatron", req, 8, 80) is None


def test_other_shapes_are_refused_naming_the_shipped_configs() -> None:
    llama70 = load_model("llama3-70b")
    plan = make_plan(llama70, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4))
    wider: ModelSpec = llama70.model_copy(update={"name": "llama3-70b-wide", "ffn_hidden_size": 32768})
    with pytest.raises(ConfigError) as err:
        torchtitan_args(wider, plan)
    assert NO_MODEL in err.value.message and "llama3_70b" in err.value.message
    other_base: ModelSpec = llama70.model_copy(update={"rope_theta": 10000.0})
    with pytest.raises(ConfigError, match=NO_MODEL):
        torchtitan_args(other_base, plan)
    assert torchtitan_args(llama70, plan)[:4] == ["--module", "llama3", "--config", "llama3_70b"]


def test_cli_formats(capsys: pytest.CaptureFixture[str]) -> None:
    base = (
        "explain",
        "--model",
        "llama3-70b",
        "--gpus",
        "64",
        "--global-batch",
        "128",
        "--tp",
        "4",
        "--pp",
        "4",
    )
    res = run_pplan(capsys, *base, "--format", "torchtitan")
    assert res.code == 0, res.err
    values, _, ac = _parse_03(res.out)
    assert values["--parallelism.tensor_parallel_degree"] == "4" and ac == "activation-checkpoint:none"
    res = run_pplan(capsys, *base, "--format", "torchtitan@0.2")
    assert res.code == 0, res.err
    assert tomllib.loads(res.out)["parallelism"]["pipeline_parallel_degree"] == 4
    res = run_pplan(capsys, *base, "--recompute", "selective", "--format", "torchtitan")
    assert res.code == 2 and "--launcher" in res.err and "attention-core" in res.err
    res = run_pplan(
        capsys, "recommend", "--model", "gpt3-175b", "--gpus", "1024", "--launcher", "torchtitan@0.2"
    )
    assert res.code == 2 and "--launcher" in res.err and NO_MODEL in res.err


# ------------------------------------------------------------------------------------- routed models (0.3.x)

# torchtitan 0.3.0 config functions (torchtitan/models/<module>/config_registry.py) of the routed profiles they
# build, and the Float8 one where the registry has it (deepseek_v3_671b_float8).
ROUTED_CONFIGS = {
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b", None),
    "gpt-oss-120b": ("gpt_oss", "gpt_oss_120b", None),
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b", "deepseek_v3_671b_float8"),
}
EP_MESH = "torchtitan: ep must divide data_parallel_shard_degree × cp × tp"
ROUTED_REFUSED = {
    "qwen3-30b-zero0-ep8": EP_MESH,
    "qwen3-30b-t2-etp1": "torchtitan: expert tensor parallelism is the tensor parallelism",
    "qwen3-30b-ep4-etp2": "torchtitan: no expert tensor parallelism with expert parallelism",
    "qwen3-30b-fp8": "torchtitan: FP8 not emitted",
    "dsv3-torchtitan-mxfp8": "torchtitan: FP8 not emitted",
    "oss-120b-cp2": "torchtitan: gpt_oss_120b cannot run context parallelism",
    "qwen3-30b-dualpipev-ep4": "torchtitan: dualpipev without the expert all-to-all overlap",
    "dsv3-dualpipev-ep32": "torchtitan: dualpipev without the expert all-to-all overlap",
    "dsv3-dualpipev-ep32-ac": "torchtitan: dualpipev without the expert all-to-all overlap",
    "dsv3-mtp": NO_MODEL,
    "qwen3-235b": NO_MODEL,
    "mixtral-8x7b": NO_MODEL,
    "oss-120b-p1-cp2": "torchtitan: gpt_oss_120b cannot run context parallelism",
    "qwen3-30b-t4-ep2-etp2": "torchtitan: no expert tensor parallelism with expert parallelism",
    "qwen3-30b-hsdp-ep8-etp2": "torchtitan: no expert tensor parallelism with expert parallelism",
}
# What the refusal names, beyond its reason: the fields or release facts that make the model another one.
ROUTED_REFUSAL_NAMES = {
    "dsv3-mtp": ("mtp_layers", "norm_epsilon", "deepseek_v3_671b"),
    "qwen3-235b": ("no config function", "rope_theta"),
    "mixtral-8x7b": ("routed experts",),
    "qwen3-30b-zero0-ep8": ("--zero-stage 3",),
    "qwen3-30b-t2-etp1": ("--etp 2",),
    "qwen3-30b-ep4-etp2": ("drop --etp",),
    "oss-120b-cp2": ("--cp 1",),
}


def _routed_runnable() -> list[PanelPlan]:
    return [e for e in ROUTED_PANEL if e.id not in ROUTED_REFUSED]


def _routed_dp(entry: PanelPlan, version: str = "0.3") -> tuple[int, int]:
    """(replicate, shard) torchtitan must be given: HSDP's S/cp, FSDP's d, or ZeRO-0's replicas (0.2.x: DDP only
    without t, p or cp, else FSDP's d)."""
    req = entry.request
    d = req.gpus // (req.tp * req.pp * req.cp)
    if req.shard_group is not None:
        return d * req.cp // req.shard_group, req.shard_group // req.cp
    replicated = req.zero_stage == 0 and (version == "0.3" or req.tp == req.pp == req.cp == 1)
    return (d, 1) if replicated else (1, d)


def _refused_as_listed(
    launcher: str, entry: PanelPlan, refused: dict[str, str], names: dict[str, tuple[str, ...]]
) -> bool:
    """Whether `entry` is listed as refused for `launcher`; if so, that the writer refuses it in one line with the
    listed reason, a fix, and the names the refusal must give."""
    if entry.id not in refused:
        return False
    with pytest.raises(ConfigError) as err:
        _text(launcher, entry)
    message = err.value.message + " " + err.value.fix
    assert err.value.field == "--launcher" and refused[entry.id] in err.value.message, message
    assert err.value.fix and "\n" not in message
    for name in names.get(entry.id, ()):
        assert name in message, (name, message)
    return True


@pytest.mark.parametrize("entry", ROUTED_PANEL, ids=[e.id for e in ROUTED_PANEL])
def test_routed_entry_is_refused_or_the_plan(entry: PanelPlan) -> None:
    req = entry.request
    if _refused_as_listed("torchtitan", entry, ROUTED_REFUSED, ROUTED_REFUSAL_NAMES):
        return
    text = _text("torchtitan", entry)
    values, switches, ac = _parse_03(text)
    module, config, fp8_config = ROUTED_CONFIGS[entry.model]
    assert values.pop("--module") == module
    assert values.pop("--config") == (fp8_config if req.precision == "fp8" else config)
    for flag in values:
        section, name = flag.removeprefix("--").split(".")
        assert name in TT03_VALUES[section], flag
    got: dict[str, Any] = {flag.split(".")[1]: int(v) if v.isdigit() else v for flag, v in values.items()}
    got["ac"] = {"activation-checkpoint:full": "FullAC", "activation-checkpoint:none": None}[ac]
    _check_values(entry, "0.3", got)
    assert (got["data_parallel_replicate_degree"], got["data_parallel_shard_degree"]) == _routed_dp(entry)
    assert got["expert_parallel_degree"] == req.ep  # written even at 1: deepseek_v3_671b's default is 2
    efsdp, rest = divmod(got["data_parallel_shard_degree"] * req.cp * req.tp, req.ep)
    assert rest == 0 and efsdp >= 1  # torchtitan's sparse mesh: dp_shard·cp·tp = efsdp·ep
    # CUDA graphs: Trainer.Config refuses PP, and EP with the standard dispatcher, without the switch
    assert ("--training.disable_cuda_graphs" in switches) == (req.pp > 1 or req.ep > 1)
    assert ("--parallelism.enable_sequence_parallel" in switches) == (req.tp > 1)
    if req.ep == 1 and req.tp > 1:
        assert req.etp == req.tp  # torchtitan splits the experts over TP without EP
    else:
        assert req.etp == 1
    if req.precision == "fp8":  # the header says what the Float8 config function sets
        assert "rowwise" in text and "Float8GroupedExpertsConverter" in text


# ------------------------------------------------------------------------------------- routed models (0.2.x)

# torchtitan 0.2.2 flavours of the routed profiles (`[model] name`, `flavor`): torchtitan/models/qwen3/__init__.py
# (qwen3_args), gpt_oss/__init__.py (gptoss_configs), deepseek_v3/__init__.py (deepseekv3_args).
ROUTED_FLAVORS_02 = {
    "qwen3-30b-a3b": ("qwen3", "30B-A3B"),
    "gpt-oss-120b": ("gpt_oss", "120b"),
    "deepseek-v3": ("deepseek_v3", "671B"),
}
FP8_02 = "torchtitan@0.2: FP8 not emitted"
QWEN3_NO_PP_02 = "torchtitan@0.2: qwen3 30B-A3B cannot run pipeline parallelism"
OSS_NO_PP_02 = "torchtitan@0.2: gpt_oss 120b cannot run pipeline parallelism"
# 0.2.2's rules (ParallelDims._validate: etp = 1 or t with EP; build_mesh: efsdp = dp_shard·cp·tp / (etp·ep);
# qwen3 and gpt_oss TrainSpecs have no pipelining_fn; DeepSeek's FlexAttention and gpt_oss refuse CP).
ROUTED_REFUSED_02 = {
    "qwen3-30b-zero0-ep8": EP_MESH,
    "qwen3-30b-t2-etp1": "torchtitan: expert tensor parallelism is the tensor parallelism",
    "qwen3-30b-t4-ep2-etp2": "torchtitan@0.2: expert tensor parallelism is 1 or t with expert parallelism",
    "qwen3-30b-hsdp-ep8-etp2": "torchtitan@0.2: ep must divide data_parallel_shard_degree × cp with etp = t",
    "qwen3-30b-fp8": FP8_02,
    "dsv3-torchtitan-fp8-t2-ep16": FP8_02,
    "dsv3-torchtitan-mxfp8": FP8_02,
    "qwen3-30b-dualpipev-ep4": QWEN3_NO_PP_02,
    "dsv3-dualpipev-ep32-ac": "torchtitan@0.2: DualPipeV's expert overlap without activation checkpointing only",
    "qwen3-30b-t2-p2-ep4": QWEN3_NO_PP_02,
    "qwen3-30b-dualpipev-ep1": QWEN3_NO_PP_02,
    "oss-120b-t2-p2-ep4": OSS_NO_PP_02,
    "oss-120b-cp2": OSS_NO_PP_02,
    "oss-120b-p1-cp2": "torchtitan@0.2: gpt_oss 120b cannot run context parallelism",
    "dsv3-torchtitan-cp2": "torchtitan@0.2: deepseek_v3 671B cannot run context parallelism",
    "dsv3-mtp": NO_MODEL,
    "qwen3-235b": NO_MODEL,
    "mixtral-8x7b": NO_MODEL,
}
ROUTED_REFUSAL_NAMES_02 = {
    "dsv3-mtp": ("mtp_layers", "norm_epsilon", "flavour 671B"),
    "qwen3-235b": ("flavour 235B-A22B", "rope_theta"),  # 0.2.2 builds the flavour; its RoPE base differs
    "mixtral-8x7b": ("routed flavours",),
    "qwen3-30b-zero0-ep8": ("--zero-stage 3",),
    "qwen3-30b-t4-ep2-etp2": ("--etp 1 or --etp 4",),
    "qwen3-30b-hsdp-ep8-etp2": ("--etp 1", "--ep dividing 4"),
    "qwen3-30b-t2-p2-ep4": ("--pp 1", "pipelining_fn"),
    "oss-120b-p1-cp2": ("--cp 1", "update_from_config"),
    "dsv3-torchtitan-cp2": ("--cp 1", "FlexAttention"),
    "qwen3-30b-dualpipev-ep4": ("--pp 1", "pipelining_fn"),
    "dsv3-dualpipev-ep32-ac": ("get_dual_pipe_v_flag", "--recompute none"),
}


def _routed_runnable_02() -> list[PanelPlan]:
    return [e for e in ROUTED_PANEL if e.id not in ROUTED_REFUSED_02]


def _check_experts_02(entry: PanelPlan, got: dict[str, Any]) -> None:
    """The parsed 0.2.x expert degrees are the plan's and fit 0.2.2's sparse mesh."""
    req = entry.request
    ep, etp = got["expert_parallel_degree"], got["expert_tensor_parallel_degree"]
    assert (ep, etp) == (req.ep, req.etp)  # both written, even at 1
    # ETP = TP or 1 with EP; experts split over TP without
    assert etp in (1, req.tp) if ep > 1 else etp == req.tp
    efsdp, rest = divmod(got["data_parallel_shard_degree"] * req.cp * req.tp, etp * ep)
    assert rest == 0 and efsdp >= 1


@pytest.mark.parametrize("entry", ROUTED_PANEL, ids=[e.id for e in ROUTED_PANEL])
def test_routed_entry_for_0_2_is_refused_or_the_plan(entry: PanelPlan) -> None:
    req = entry.request
    if _refused_as_listed("torchtitan@0.2", entry, ROUTED_REFUSED_02, ROUTED_REFUSAL_NAMES_02):
        return
    text = _text("torchtitan@0.2", entry)
    doc = tomllib.loads(text)
    assert doc.pop("model") == dict(zip(("name", "flavor"), ROUTED_FLAVORS_02[entry.model], strict=True))
    assert set(doc) == {"parallelism", "training", "activation_checkpoint"}
    got: dict[str, Any] = {
        **doc["parallelism"],
        **doc["training"],
        "ac": doc["activation_checkpoint"]["mode"],
    }
    _check_values(entry, "0.2", got)
    assert (got["data_parallel_replicate_degree"], got["data_parallel_shard_degree"]) == _routed_dp(
        entry, "0.2"
    )
    _check_experts_02(entry, got)
    assert "disable_cuda_graphs" not in text  # 0.2.2 has no CUDA-graph switch
    overrides = shlex.split(text.rstrip("\n").rsplit("\n# ", 1)[1])
    assert overrides[overrides.index("--parallelism.expert_tensor_parallel_degree") + 1] == str(req.etp)
    assert overrides[overrides.index("--model.flavor") + 1] == ROUTED_FLAVORS_02[entry.model][1]


def test_routed_panel_for_0_2_covers_outputs_and_refusals() -> None:
    assert set(ROUTED_REFUSED_02) <= {e.id for e in ROUTED_PANEL}
    runnable = _routed_runnable_02()
    assert {e.model for e in runnable} == set(ROUTED_FLAVORS_02)
    assert any(e.request.ep > 1 and e.request.etp == e.request.tp > 1 for e in runnable)  # etp = t beside EP
    assert any(e.request.ep > 1 and e.request.etp == 1 < e.request.tp for e in runnable)
    assert any(e.request.cp > 1 for e in runnable) and any(e.request.pp > 1 for e in runnable)
    assert any(e.request.shard_group for e in runnable) and any(e.request.zero_stage == 0 for e in runnable)
    # the 0.3.x-only refusals that 0.2.x writes, and the reverse
    assert {"qwen3-30b-ep4-etp2"} <= {e.id for e in runnable} - {e.id for e in _routed_runnable()}
    assert "dsv3-torchtitan-cp2" in {e.id for e in _routed_runnable()} - {e.id for e in runnable}


def test_routed_panel_covers_outputs_and_refusals() -> None:
    assert set(ROUTED_REFUSED) <= {e.id for e in ROUTED_PANEL}
    runnable = _routed_runnable()
    assert {e.model for e in runnable} == set(ROUTED_CONFIGS)
    assert {e.request.precision for e in runnable} == {"bf16", "fp8"}
    assert any(e.request.ep == 1 for e in runnable) and any(e.request.shard_group for e in runnable)
    assert any(e.request.zero_stage == 0 and e.request.ep > 1 for e in runnable)
    assert any(e.request.pp > 1 and e.request.ep > 1 for e in runnable)


def test_routed_request_rules_before_a_plan() -> None:
    """The search sees the mesh and etp rules too (before a plan), for either release."""
    zero0 = PlanRequest(gpus=16, global_batch=64, tp=1, pp=1, ep=8)
    etp = PlanRequest(gpus=16, global_batch=64, tp=2, pp=1, ep=4, etp=2, zero_stage=3)
    fine = PlanRequest(gpus=16, global_batch=64, tp=1, pp=1, ep=8, zero_stage=3)
    for launcher in ("torchtitan", "torchtitan@0.2"):
        assert request_unsupported_reason(launcher, zero0, 4, 48) == EP_MESH
        assert request_unsupported_reason(launcher, fine, 4, 48) is None
    assert request_unsupported_reason("torchtitan", etp, 4, 48) == ROUTED_REFUSED["qwen3-30b-ep4-etp2"]
    assert request_unsupported_reason("torchtitan@0.2", etp, 4, 48) is None  # etp = t beside EP: 0.2.2 has it
    odd = PlanRequest(gpus=16, global_batch=64, tp=4, pp=1, ep=2, etp=2, zero_stage=3)
    assert (
        request_unsupported_reason("torchtitan@0.2", odd, 4, 48) == ROUTED_REFUSED_02["qwen3-30b-t4-ep2-etp2"]
    )
    assert request_unsupported_reason("megatron", zero0, 4, 48) is None


def test_routed_cli(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("explain", "--gpus", "16", "--global-batch", "64", "--tp", "1", "--pp", "1", "--ep", "8")
    res = run_pplan(capsys, *base, "--model", "qwen3-30b-a3b", "--zero-stage", "3", "--format", "torchtitan")
    assert res.code == 0, res.err
    values, switches, _ = _parse_03(res.out)
    assert "--training.disable_cuda_graphs" in switches
    assert values["--parallelism.expert_parallel_degree"] == "8" and values["--config"] == "qwen3_30b_a3b"
    res = run_pplan(capsys, *base, "--model", "qwen3-30b-a3b", "--format", "torchtitan")
    assert res.code == 2 and EP_MESH in res.err and "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1
    res = run_pplan(capsys, "explain", "--model", "deepseek-v3", "--gpus", "512", "--global-batch", "512",
                    "--tp", "2", "--pp", "4", "--first-stage-layers", "13", "--last-stage-layers", "16",
                    "--ep", "16", "--zero-stage", "3", "--format", "torchtitan")  # fmt: skip
    assert res.code == 2 and "mtp_layers" in res.err and "Traceback" not in res.err


# ------------------------------------------------------------------------------------------ acceptance tier

# The pinned packages torchtitan's config path imports (from PyPI, installed with --no-deps beside the system's
# torch): tyro and its two dependencies parse the command line; torchdata's StatefulDataLoader is a base class
# of torchtitan's data loader; spmd_types backs 0.3.0's ParallelDims; torchao's Float8 config is what
# llama3_405b's model converter builds. typing_extensions, requests and urllib3 come from the system.
PARSE_DEPS = ("tyro==1.0.17", "docstring-parser==0.18.0", "typeguard==4.6.1", "torchdata==0.11.0")
RELEASES = {
    "0.3": ("torchtitan==0.3.0", "spmd_types==0.2.3", "torchao==0.18.0"),
    "0.2": ("torchtitan==0.2.2",),
}
# Modules torchtitan's modules import at their top level only for the training run, replaced by empty modules
# in the parser process: Triton kernels (triton is about 1 GB), TensorBoard logging, the tokenizer and
# dataset libraries (Rust and pyarrow wheels). None of them takes part in reading a config.
STUBS = {
    "0.3": (
        "torchtitan.distributed.minimal_async_ep.kernels",
        "torch.utils.tensorboard",
        "tokenizers",
        "datasets",
    ),
    "0.2": ("torchtitan.models.moe.kernels", "torch.utils.tensorboard", "tokenizers", "datasets"),
}

_DRIVER = r"""'''Feed pplan's torchtitan outputs to torchtitan's own config parser; one process for every case of one release.

argv[1]: a JSON file {"version": "0.3" | "0.2", "stubs": [module, ...], "cases": [{"id", "gpus", "args" |
"toml"}, ...]}; argv[2]: where to write {id: {"error": text} | {parsed values}}. The modules in "stubs" are
imported by torchtitan's modules at their top level for the training run only (kernels, logging, tokenizer and
data libraries); they are replaced by empty modules so the config path imports without them.
'''

import importlib.abc
import importlib.machinery
import json
import math
import sys
import traceback
import types

spec = json.load(open(sys.argv[1]))
STUBS = tuple(spec["stubs"])


class _Anything:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a decorator
        return _Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __getitem__(self, key):
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if any(name == s or name.startswith(s + ".") for s in STUBS):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, _StubFinder())

import torch  # noqa: E402
from torch.distributed.pipelining.schedules import get_schedule_class  # noqa: E402

import torchtitan  # noqa: E402

PAR = (
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
    "context_parallel_degree", "pipeline_parallel_degree", "pipeline_parallel_schedule",
    "pipeline_parallel_microbatch_size", "pipeline_parallel_layers_per_stage",
    "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
    "fsdp_reshard_after_forward",
)


def _split(stage_fqns):
    return [sum(1 for fqn in stage if fqn.startswith("layers.")) for stage in stage_fqns]


def _owner(config):
    return type(config)._owner.__name__


def _routed(model):
    # the routed model's shape as torchtitan's config builds it (the layer configs, not modules)
    layers = list(model.layers)
    routed = [i for i, block in enumerate(layers) if block.moe is not None]
    dense = [i for i, block in enumerate(layers) if block.moe is None]
    moe = layers[routed[0]].moe
    inner = moe.routed_experts.inner_experts
    attention = layers[0].attention
    mla = [getattr(attention, k, None) for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                                   "qk_rope_head_dim", "v_head_dim")]
    linears = [(fqn, _owner(c)) for fqn, c, _, _ in model.traverse(Linear.Config)]
    return {
        "head_dim": getattr(attention, "head_dim", None), "mla": mla,
        "qk_norm": getattr(attention, "qk_norm", None) is not None,
        "windows": [getattr(block.attention, "sliding_window_size", None) for block in layers],
        "routed_layers": routed, "dense_layers": dense,
        "dense_ffn": [layers[i].feed_forward.w1.out_features for i in dense],
        "num_experts": inner.num_experts, "router_experts": moe.router.num_experts, "top_k": moe.router.top_k,
        "expert_ffn": inner.hidden_dim, "router_bias": moe.router.gate.bias,
        "shared_ffn": None if moe.shared_experts is None else moe.shared_experts.w1.out_features,
        "mtp_layers": len(getattr(model, "mtp_layers", None) or []),
        "experts_class": _owner(inner),
        "float8_linears": sorted(fqn for fqn, owner in linears if owner == "Float8Linear"),
        "bf16_linears": sorted(fqn for fqn, owner in linears if owner != "Float8Linear"),
        "qkv_bias": [getattr(getattr(attention, "qkv_linear", None), "wqkv", None) is not None
                     and attention.qkv_linear.wqkv.bias],
        "wo_bias": attention.wo.bias,
    }


def parse_03(case):
    # llama3_405b's Float8 converter checks for an SM89+ GPU when the config function runs: report one (H100)
    from torchtitan.components.quantization import float8

    float8.has_cuda_capability = lambda major, minor: (9, 0) >= (major, minor)
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed import pipeline_parallel as pp_mod

    global Linear
    from torchtitan.models.common import Linear

    config = ConfigManager().parse_args(list(case["args"]))
    par, train, ac = config.parallelism, config.training, config.activation_checkpoint
    dims = ParallelDims.from_config(par, world_size=case["gpus"])  # torchtitan's world-size check
    model = config.model_spec.model
    layer = model.layers[0]
    attention, ffn = layer.attention, layer.feed_forward
    out = {p: getattr(par, p) for p in PAR}
    out["enable_sequence_parallel"] = par.enable_sequence_parallel
    out.update(
        local_batch_size=train.local_batch_size, global_batch_size=train.global_batch_size,
        seq_len=train.seq_len, disable_cuda_graphs=train.disable_cuda_graphs,
        ac=None if ac is None else type(ac).__qualname__.split(".")[0],
        model_name=config.model_spec.name, flavor=config.model_spec.flavor,
        num_layers=len(model.layers), hidden_size=model.dim, vocab_size=model.vocab_size,
        tied=getattr(model, "enable_weight_tying", False), num_heads=attention.n_heads,
        num_kv_heads=getattr(attention, "n_kv_heads", None), rope_theta=attention.rope.theta,
        norm=type(layer.attention_norm).__qualname__.split(".")[0], norm_eps=layer.attention_norm.eps,
        expert_parallel_degree=par.expert_parallel_degree,
    )
    if case.get("routed"):
        out.update(_routed(model))
    else:
        out.update(
            ffn_hidden_size=ffn.w1.out_features,
            biases=[ffn.w1.bias, ffn.w2.bias, ffn.w3.bias, attention.wo.bias],
        )
    if par.pipeline_parallel_degree > 1:
        get_schedule_class(par.pipeline_parallel_schedule)
        stages, layers, first_w, last_w = pp_mod._get_pipeline_metadata(dims, par, model)
        out["stages"] = stages
        out["split"] = _split(pp_mod._generate_llm_fqn_per_model_part(stages, layers, first_w, last_w))
    return out


def _routed_02(args):
    # the routed flavour's model args as torchtitan 0.2.2's table has them (every field the profile has)
    moe = args.moe_args
    fields = ("head_dim", "qk_norm", "norm_eps", "n_dense_layers", "inter_dim", "moe_inter_dim", "moe_enabled",
              "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
              "sliding_window_size", "enable_weight_tying", "attn_type")
    out = {f: getattr(args, f, None) for f in fields}
    out.update(num_experts=moe.num_experts, top_k=moe.top_k, num_shared_experts=moe.num_shared_experts,
               gate_bias=moe.gate_bias, args_class=type(args).__name__)
    return out


def parse_02(case):
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import pipeline_parallel as pp_mod
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.models.llama3.model.model import FeedForward
    from torchtitan.protocols.train_spec import get_train_spec

    config = ConfigManager().parse_args(list(case["args"]))
    par, train, ac = config.parallelism, config.training, config.activation_checkpoint
    # torchtitan's own checks of the degrees (ParallelDims._validate: world size, ETP = TP or 1 with EP)
    ParallelDims(
        dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
        cp=par.context_parallel_degree, tp=par.tensor_parallel_degree, pp=par.pipeline_parallel_degree,
        ep=par.expert_parallel_degree, etp=par.expert_tensor_parallel_degree, world_size=case["gpus"],
    )
    train_spec = get_train_spec(config.model.name)
    args = train_spec.model_args[config.model.flavor]
    out = {p: getattr(par, p) for p in PAR}
    out.update(
        local_batch_size=train.local_batch_size, global_batch_size=train.global_batch_size,
        seq_len=train.seq_len, ac=ac.mode, model_name=config.model.name, flavor=config.model.flavor,
        num_layers=args.n_layers, hidden_size=args.dim, vocab_size=args.vocab_size, num_heads=args.n_heads,
        num_kv_heads=getattr(args, "n_kv_heads", None), rope_theta=args.rope_theta,
        expert_parallel_degree=par.expert_parallel_degree,
        expert_tensor_parallel_degree=par.expert_tensor_parallel_degree,
    )
    if case.get("routed"):
        args.update_from_config(config)  # the flavour's own checks on the job (0.2.2: CP, sequence length)
        if par.pipeline_parallel_degree > 1:
            assert train_spec.pipelining_fn is not None, "Trainer.__init__ refuses PP without a pipelining_fn"
        out.update(_routed_02(args))
    else:
        with torch.device("meta"):
            ffn = FeedForward(
                dim=args.dim, hidden_dim=4 * args.dim, multiple_of=args.multiple_of,
                ffn_dim_multiplier=args.ffn_dim_multiplier,
            )
        out["ffn_hidden_size"] = ffn.w1.out_features
    if par.pipeline_parallel_degree > 1:
        # torchtitan 0.2.2 pipeline_llm: the stage count of pipeline_parallel_layers_per_stage
        get_schedule_class(par.pipeline_parallel_schedule)
        k = par.pipeline_parallel_layers_per_stage
        first_w = par.pipeline_parallel_first_stage_less_layers
        last_w = par.pipeline_parallel_last_stage_less_layers
        stages = math.ceil((args.n_layers + first_w + last_w) / k)
        out["stages"] = stages
        out["split"] = _split(pp_mod.generate_llm_fqn_per_model_part(stages, args.n_layers, first_w, last_w))
    return out


def run(case):
    if "toml" in case:
        path = f"{sys.argv[2]}.{case['id']}.toml"
        with open(path, "w") as f:
            f.write(case["toml"])
        case = dict(case, args=["--job.config_file", path])
    return (parse_03 if spec["version"] == "0.3" else parse_02)(case)


results = {"torchtitan": torchtitan.__version__ if hasattr(torchtitan, "__version__") else "?"}
for case in spec["cases"]:
    try:
        results[case["id"]] = run(case)
    except BaseException as exc:  # tyro exits with SystemExit on a bad argument
        results[case["id"]] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
with open(sys.argv[2], "w") as f:
    json.dump(results, f)
"""


@pytest.fixture(scope="session")
def _wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every pinned wheel, downloaded once for the session (both venvs install from here)."""
    import subprocess
    import sys

    cache = tmp_path_factory.mktemp("torchtitan-wheels")
    for pins in (PARSE_DEPS, *RELEASES.values()):  # one pip call per release: the two torchtitans conflict
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), *pins]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    return cache


def _share_site_packages(python: Path) -> None:
    """Make the packages this interpreter sees (torch among them) importable from the venv of `python`, behind
    that venv's own."""
    import subprocess
    import sysconfig

    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    shared = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(own) / "pplan-outer-site-packages.pth").write_text("".join(f"{path}\n" for path in shared))


def _parse_in_venv(root: Path, wheels: Path, version: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    import subprocess
    import sys

    venv = root / f"venv-{version}"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300
    )
    python = venv / "bin" / "python"
    # --system-site-packages shows the base interpreter's packages, not those of a virtual environment the tests
    # run in (where torch is): a .pth file puts this interpreter's site-packages after the new venv's own
    _share_site_packages(python)
    pins = [*PARSE_DEPS, *RELEASES[version]]
    install = [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        "--find-links",
        str(wheels),
    ]
    done = subprocess.run([*install, *pins], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    spec = root / f"cases-{version}.json"
    spec.write_text(json.dumps({"version": version, "stubs": STUBS[version], "cases": cases}))
    script = root / "parse_torchtitan.py"
    script.write_text(_DRIVER)
    out = root / f"parsed-{version}.json"
    done = subprocess.run(
        [str(python), str(script), str(spec), str(out)], capture_output=True, text=True, timeout=600, cwd=root
    )
    assert done.returncode == 0, done.stderr[-3000:]
    parsed: dict[str, Any] = json.loads(out.read_text())
    return parsed


def _check_model(entry: PanelPlan, got: dict[str, Any], version: str) -> None:
    """torchtitan's model (its shipped config) is pplan's profile."""
    model: ModelSpec = load_model(entry.model)
    flavor = LLAMA3[entry.model][1]
    assert (got["model_name"], got["flavor"]) == ("llama3", flavor)
    assert (got["num_layers"], got["hidden_size"], got["num_heads"], got["num_kv_heads"]) == (
        model.num_layers,
        model.hidden_size,
        model.num_attention_heads,
        model.kv_heads,
    )
    assert (got["ffn_hidden_size"], got["vocab_size"]) == (model.ffn_hidden_size, model.vocab_size)
    assert got["rope_theta"] == LLAMA3_ROPE_THETA == (model.rope_theta or LLAMA3_ROPE_THETA)
    if version == "0.3":  # 0.3.x's config carries the layer's parts too
        assert got["tied"] is model.tied_embeddings is False
        assert got["norm"] == "RMSNorm" and model.norm == "rmsnorm"
        assert not any(got["biases"]) and not model.linear_bias


def _check_routed_model(entry: PanelPlan, got: dict[str, Any]) -> None:
    """torchtitan's routed model (its config function's) is pplan's profile, field by field, and the parsed
    expert parallelism is the plan's and fits torchtitan's sparse mesh."""
    model = panel_model(entry)
    req = entry.request
    moe = model.moe
    assert moe is not None
    assert got["model_name"] == ROUTED_CONFIGS[entry.model][0]
    assert (got["num_layers"], got["hidden_size"], got["num_heads"], got["vocab_size"]) == (
        model.num_layers, model.hidden_size, model.num_attention_heads, model.vocab_size,
    )  # fmt: skip
    assert got["tied"] is model.tied_embeddings is False and got["norm"] == "RMSNorm" == "RMSNorm"
    assert got["norm_eps"] == (model.norm_epsilon if model.norm_epsilon is not None else got["norm_eps"])
    assert model.rope_theta in (None, got["rope_theta"])
    if model.mla is not None:
        mla = model.mla
        assert got["mla"] == [mla.q_lora_rank or 0, mla.kv_lora_rank, mla.qk_nope_head_dim,
                              mla.qk_rope_head_dim, mla.v_head_dim]  # fmt: skip
    else:
        assert (got["num_kv_heads"], got["head_dim"]) == (model.kv_heads, model.head_size)
    assert got["qk_norm"] == model.qk_norm
    windowed = [i for i in range(model.num_layers) if model.sliding_window is not None
                and (model.sliding_window_layers == "all" or i % 2 == 0)]  # fmt: skip
    assert [i for i, w in enumerate(got["windows"]) if w is not None] == windowed
    assert {w for w in got["windows"] if w is not None} <= {model.sliding_window}
    assert got["routed_layers"] == [i for i in range(model.num_layers) if model.is_moe_layer(i)]
    assert got["dense_ffn"] == [model.ffn_hidden_size] * len(got["dense_layers"])
    assert got["num_experts"] == got["router_experts"] == moe.num_experts and got["top_k"] == moe.top_k
    assert got["expert_ffn"] == moe.expert_ffn_hidden_size and got["router_bias"] == moe.router_bias
    assert (got["shared_ffn"] or 0) == moe.shared_expert_ffn_hidden_size
    assert got["mtp_layers"] == model.mtp_layers
    assert got["wo_bias"] == model.linear_bias
    assert got["expert_parallel_degree"] == req.ep
    assert (got["data_parallel_shard_degree"] * req.cp * req.tp) % req.ep == 0
    assert got["disable_cuda_graphs"] == (req.pp > 1 or req.ep > 1)
    if req.precision == "fp8":  # every Linear of the layers in Float8, the experts' grouped GEMMs too
        assert got["experts_class"].startswith("Float8")
        assert got["float8_linears"] and all("router" in f or f == "lm_head" for f in got["bf16_linears"])
    else:
        assert not got["float8_linears"] and not got["experts_class"].startswith("Float8")


def _check_routed_model_02(entry: PanelPlan, got: dict[str, Any]) -> None:
    """torchtitan 0.2.2's routed flavour (its model args, read from the wheel) is pplan's profile, field by field;
    the parsed expert degrees are the plan's and fit 0.2.2's sparse mesh."""
    model = panel_model(entry)
    moe = model.moe
    assert moe is not None
    assert (got["model_name"], got["flavor"]) == ROUTED_FLAVORS_02[entry.model]
    assert (got["num_layers"], got["hidden_size"], got["num_heads"], got["vocab_size"]) == (
        model.num_layers, model.hidden_size, model.num_attention_heads, model.vocab_size,
    )  # fmt: skip
    assert not got["enable_weight_tying"] and not model.tied_embeddings
    assert got["norm_eps"] == (model.norm_epsilon if model.norm_epsilon is not None else got["norm_eps"])
    assert model.rope_theta in (None, got["rope_theta"])
    assert (got["num_experts"], got["top_k"], got["gate_bias"]) == (
        moe.num_experts,
        moe.top_k,
        moe.router_bias,
    )
    assert got["moe_inter_dim"] == moe.expert_ffn_hidden_size
    assert got["num_shared_experts"] * got["moe_inter_dim"] == moe.shared_expert_ffn_hidden_size
    assert (got["n_dense_layers"] or 0) == moe.first_dense_layers and moe.layer_frequency == 1
    if got["n_dense_layers"]:  # DeepSeek: dense layers first, of inter_dim
        assert got["inter_dim"] == model.ffn_hidden_size
    assert got["moe_enabled"] in (None, True)  # qwen3: every layer routed
    if model.mla is not None:
        mla = model.mla
        assert [got[k] for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                 "v_head_dim")] == [mla.q_lora_rank or 0, mla.kv_lora_rank, mla.qk_nope_head_dim,
                                                    mla.qk_rope_head_dim, mla.v_head_dim]  # fmt: skip
    else:
        assert (got["num_kv_heads"], got["head_dim"]) == (model.kv_heads, model.head_size)
    assert bool(got["qk_norm"]) == model.qk_norm
    # gpt_oss: every other layer (use_sliding_attention)
    assert got["sliding_window_size"] == model.sliding_window
    assert model.mtp_layers == 0  # 0.2.2's models build none
    assert got["expert_parallel_degree"] == entry.request.ep
    _check_experts_02(entry, got)


@pytest.mark.acceptance
@pytest.mark.parametrize("launcher", list(VERSIONS))
def test_torchtitan_parses_every_panel_output(launcher: str, tmp_path: Path, _wheels: Path) -> None:
    version = VERSIONS[launcher]
    cases: list[dict[str, Any]] = []
    entries = _runnable() + (_routed_runnable() if version == "0.3" else _routed_runnable_02())
    for entry in entries:
        text = _text(launcher, entry)
        gpus = entry.request.gpus
        if version == "0.3":
            body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
            args = shlex.split(body.replace("\\\n", " "))
            cases.append({"id": entry.id, "gpus": gpus, "args": args, "routed": entry in ROUTED_PANEL})
        else:  # the TOML file, and the overrides line printed under it
            routed = entry in ROUTED_PANEL
            cases.append({"id": entry.id, "gpus": gpus, "toml": text, "routed": routed})
            overrides = text.rstrip("\n").rsplit("\n# ", 1)[1]
            cases.append(
                {
                    "id": f"{entry.id}+overrides",
                    "gpus": gpus,
                    "args": shlex.split(overrides),
                    "routed": routed,
                }
            )
    parsed = _parse_in_venv(tmp_path, _wheels, version, cases)
    assert parsed.pop("torchtitan") == {"0.3": "0.3.0", "0.2": "0.2.2"}[version]
    failures = {key: value["error"] for key, value in parsed.items() if "error" in value}
    assert not failures, json.dumps(failures, indent=1)
    assert set(parsed) == {c["id"] for c in cases}
    for case in cases:
        entry = next(e for e in entries if case["id"].startswith(e.id + "+") or case["id"] == e.id)
        got = parsed[case["id"]]
        _check_values(entry, version, got)
        if entry in ROUTED_PANEL and version == "0.2":
            _check_routed_model_02(entry, got)
        elif entry in ROUTED_PANEL:
            _check_routed_model(entry, got)
        else:
            _check_model(entry, got, version)
            assert got["expert_parallel_degree"] == 1  # a dense model: no expert parallelism written
        exp = _expected(entry)
        if entry.request.pp > 1:  # torchtitan's own stage count and split of the layers
            assert got["split"] == exp["split"], case["id"]
            assert got["stages"] == entry.request.pp * exp["v"]
        if version == "0.3":
            assert got["enable_sequence_parallel"] == entry.request.sequence_parallel or entry.request.tp == 1
            assert got["disable_cuda_graphs"] == (entry.request.pp > 1 or entry.request.ep > 1)


def test_a_routed_search_shows_only_what_torchtitan_runs() -> None:
    """recommend --launcher torchtitan on a routed model: every plan it shows is written (not refused by the
    writer); with t > 1 and ep = 1 forced it shows only etp = t (torchtitan splits the experts over t), and with
    etp = 1 forced too nothing, so the model-level rules are the search's too."""
    from pplan.launchers.support import SearchFilter
    from pplan.profiles.catalog import load_hardware
    from pplan.search import SearchRequest, top_configurations

    model, hw = load_model("qwen3-30b-a3b"), load_hardware("h100-sxm-80gb")
    reason = SearchFilter("torchtitan", model)
    base = SearchRequest(gpus=16, global_batch=128, launcher="torchtitan", stack="torchtitan", top_n=5)
    split = SearchRequest(gpus=16, global_batch=128, launcher="torchtitan", stack="torchtitan", tp=2, ep=1)
    for request in (base, split):
        shown = top_configurations(model, hw, request, launcher=reason).candidates
        assert shown
        for rec in shown:
            assert "--parallelism.expert_parallel_degree" in launcher_text(
                "torchtitan", model, make_plan(model, rec.request)
            )
    assert {rec.request.etp for rec in top_configurations(model, hw, split, launcher=reason).candidates} == {
        2
    }
    whole = SearchRequest(
        gpus=16, global_batch=128, launcher="torchtitan", stack="torchtitan", tp=2, ep=1, etp=1
    )
    assert not top_configurations(model, hw, whole, launcher=reason).candidates


def test_a_routed_search_for_0_2_shows_etp_t_beside_ep() -> None:
    """recommend --launcher torchtitan@0.2: with t = 2 and ep = 2 forced it shows both etp = 1 and etp = t (0.2.2's
    ParallelDims takes either), where 0.3.x shows only etp = 1; every plan shown is written with the plan's etp."""
    from pplan.launchers.support import SearchFilter
    from pplan.profiles.catalog import load_hardware
    from pplan.search import SearchRequest, top_configurations

    model, hw = load_model("qwen3-30b-a3b"), load_hardware("h100-sxm-80gb")
    shown: dict[str, set[int]] = {}
    for launcher in ("torchtitan@0.2", "torchtitan"):
        request = SearchRequest(
            gpus=8, global_batch=32, launcher=launcher, stack="torchtitan", tp=2, ep=2, top_n=50
        )
        found = top_configurations(model, hw, request, launcher=SearchFilter(launcher, model)).candidates
        assert found
        shown[launcher] = {rec.request.etp for rec in found}
        for rec in found[:5]:
            text = launcher_text(launcher, model, make_plan(model, rec.request))
            if launcher == "torchtitan@0.2":
                assert tomllib.loads(text)["parallelism"]["expert_tensor_parallel_degree"] == rec.request.etp
    assert shown == {"torchtitan@0.2": {1, 2}, "torchtitan": {1}}
