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
from pplan.launchers.support import LAUNCHERS, request_unsupported_reason, unsupported_reason
from pplan.launchers.torchtitan import data_parallel_degrees, torchtitan_args, torchtitan_version
from pplan.plan.configuration import PlanRequest, make_plan
from pplan.profiles.catalog import load_model
from pplan.profiles.specs import ModelSpec
from pplan.schedules import schedule_family
from tests.cli_run import run_pplan
from tests.launcher_panel import PANEL, PanelPlan

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
        "fsdp_reshard_after_forward",
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
    model = load_model(entry.model)
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
    model = load_model(entry.model)
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
    assert len(runnable) == 16 and len(REFUSED) == 14
    assert {e.request.recompute for e in runnable} == {"none", "full"}
    assert any(e.request.pp == 1 for e in runnable) and any((e.request.vp or 1) > 1 for e in runnable)


def test_version_selection() -> None:
    assert LAUNCHERS == ("megatron", "torchtitan", "torchtitan@0.2")
    assert torchtitan_version("torchtitan") == "0.3" and torchtitan_version("TorchTitan@0.2") == "0.2"
    with pytest.raises(ConfigError) as err:
        torchtitan_version("torchtitan@0.1")
    assert err.value.field == "--launcher"
    entry = PANEL[0]
    current, old = _text("torchtitan", entry), _text("torchtitan@0.2", entry)
    assert current.startswith("# torchtitan 0.3.x arguments") and "--module llama3" in current
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


def parse_03(case):
    # llama3_405b's Float8 converter checks for an SM89+ GPU when the config function runs: report one (H100)
    from torchtitan.components.quantization import float8

    float8.has_cuda_capability = lambda major, minor: (9, 0) >= (major, minor)
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed import pipeline_parallel as pp_mod

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
        tied=model.enable_weight_tying, num_heads=attention.n_heads, num_kv_heads=attention.n_kv_heads,
        ffn_hidden_size=ffn.w1.out_features, rope_theta=attention.rope.theta,
        norm=type(layer.attention_norm).__qualname__.split(".")[0],
        biases=[ffn.w1.bias, ffn.w2.bias, ffn.w3.bias, attention.wo.bias],
    )
    if par.pipeline_parallel_degree > 1:
        get_schedule_class(par.pipeline_parallel_schedule)
        stages, layers, first_w, last_w = pp_mod._get_pipeline_metadata(dims, par, model)
        out["stages"] = stages
        out["split"] = _split(pp_mod._generate_llm_fqn_per_model_part(stages, layers, first_w, last_w))
    return out


def parse_02(case):
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import pipeline_parallel as pp_mod
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.models.llama3.model.model import FeedForward
    from torchtitan.protocols.train_spec import get_train_spec

    config = ConfigManager().parse_args(list(case["args"]))
    par, train, ac = config.parallelism, config.training, config.activation_checkpoint
    ParallelDims(
        dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
        cp=par.context_parallel_degree, tp=par.tensor_parallel_degree, pp=par.pipeline_parallel_degree,
        ep=1, etp=1, world_size=case["gpus"],
    )
    args = get_train_spec(config.model.name).model_args[config.model.flavor]
    with torch.device("meta"):
        ffn = FeedForward(
            dim=args.dim, hidden_dim=4 * args.dim, multiple_of=args.multiple_of,
            ffn_dim_multiplier=args.ffn_dim_multiplier,
        )
    out = {p: getattr(par, p) for p in PAR}
    out.update(
        local_batch_size=train.local_batch_size, global_batch_size=train.global_batch_size,
        seq_len=train.seq_len, ac=ac.mode, model_name=config.model.name, flavor=config.model.flavor,
        num_layers=args.n_layers, hidden_size=args.dim, vocab_size=args.vocab_size, num_heads=args.n_heads,
        num_kv_heads=args.n_kv_heads, ffn_hidden_size=ffn.w1.out_features, rope_theta=args.rope_theta,
    )
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


def _parse_in_venv(root: Path, wheels: Path, version: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    import subprocess
    import sys

    venv = root / f"venv-{version}"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300
    )
    python = venv / "bin" / "python"
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


@pytest.mark.acceptance
@pytest.mark.parametrize("launcher", list(VERSIONS))
def test_torchtitan_parses_every_panel_output(launcher: str, tmp_path: Path, _wheels: Path) -> None:
    version = VERSIONS[launcher]
    cases: list[dict[str, Any]] = []
    for entry in _runnable():
        text = _text(launcher, entry)
        gpus = entry.request.gpus
        if version == "0.3":
            body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
            cases.append({"id": entry.id, "gpus": gpus, "args": shlex.split(body.replace("\\\n", " "))})
        else:  # the TOML file, and the overrides line printed under it
            cases.append({"id": entry.id, "gpus": gpus, "toml": text})
            overrides = text.rstrip("\n").rsplit("\n# ", 1)[1]
            cases.append({"id": f"{entry.id}+overrides", "gpus": gpus, "args": shlex.split(overrides)})
    parsed = _parse_in_venv(tmp_path, _wheels, version, cases)
    assert parsed.pop("torchtitan") == {"0.3": "0.3.0", "0.2": "0.2.2"}[version]
    failures = {key: value["error"] for key, value in parsed.items() if "error" in value}
    assert not failures, json.dumps(failures, indent=1)
    assert set(parsed) == {c["id"] for c in cases}
    for case in cases:
        entry = next(e for e in PANEL if case["id"].startswith(e.id + "+") or case["id"] == e.id)
        got = parsed[case["id"]]
        _check_values(entry, version, got)
        _check_model(entry, got, version)
        exp = _expected(entry)
        if entry.request.pp > 1:  # torchtitan's own stage count and split of the layers
            assert got["split"] == exp["split"], case["id"]
            assert got["stages"] == entry.request.pp * exp["v"]
        if version == "0.3":
            assert got["enable_sequence_parallel"] == entry.request.sequence_parallel or entry.request.tp == 1
            assert got["disable_cuda_graphs"] == (entry.request.pp > 1)
