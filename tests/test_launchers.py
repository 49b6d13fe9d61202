"""Launcher output: every flag and field is a documented name, values match plans worked out by hand, the TOML
parses back to the plan's numbers, and what a launcher cannot run is refused with a ConfigError on --launcher."""

from __future__ import annotations

import re
import shlex
import tomllib
from typing import Any

import pytest

from pplan.errors import ConfigError
from pplan.launchers.megatron import megatron_args, megatron_notes, megatron_text
from pplan.launchers.megatron_validate import option_table
from pplan.launchers.support import LAUNCHERS, request_unsupported_reason, supports, unsupported_reason
from pplan.launchers.torchtitan import data_parallel_degrees, torchtitan_overrides, torchtitan_toml
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_model
from pplan.profiles.model_spec import ModelSpec
from pplan.schedules import SCHEDULE_NAMES

# Megatron-LM's parser options and choices come from its option table (core_v0.16.1, bundled with pplan);
# the flag there is no `--virtual-pipeline-model-parallel-size` (NeMo's key, not Megatron-LM's).
MEGATRON_OPTIONS = {f: o for o in option_table()["options"] for f in o["flags"]}
MEGATRON_NEVER = {"--virtual-pipeline-model-parallel-size"}

# Fields typed from torchtitan 0.2.2's job config (`torchtitan/config/job_config.py`): what `torchtitan@0.2` writes.
TORCHTITAN_FIELDS = {
    "model": {"name", "flavor"},
    "parallelism": {
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "tensor_parallel_degree",
        "pipeline_parallel_degree",
        "pipeline_parallel_schedule",
        "pipeline_parallel_microbatch_size",
        "pipeline_parallel_layers_per_stage",
        "pipeline_parallel_first_stage_less_layers",
        "pipeline_parallel_last_stage_less_layers",
        "context_parallel_degree",
        "expert_parallel_degree",
    },
    "training": {"local_batch_size", "global_batch_size", "seq_len"},
    "activation_checkpoint": {"mode"},
}
# Written only with selective recompute: torchtitan 0.2.2's `ActivationCheckpoint.selective_ac_option`.
TORCHTITAN_FIELDS_FROM_SOURCE = {"activation_checkpoint": {"selective_ac_option"}}
TORCHTITAN_SCHEDULE_NAMES = {
    "1F1B",
    "Interleaved1F1B",
    "GPipe",
    "LoopedBFS",
    "InterleavedZeroBubble",
    "ZBVZeroBubble",
    "DualPipeV",
}
TORCHTITAN_AC_MODES = {"selective", "full", "none"}

LLAMA70 = load_model("llama3-70b")
LLAMA405 = load_model("llama3-405b")
LLAMA8 = load_model("llama3-8b")
GPT3 = load_model("gpt3-175b")


def _worked_example() -> Plan:
    """The README's worked example: Llama 3 70B on 2,048 GPUs, t = 8, p = 4, b = 1."""
    return make_plan(LLAMA70, PlanRequest(gpus=2048, global_batch=1024, tp=8, pp=4, micro_batch=1))


def _interleaved() -> Plan:
    return make_plan(
        LLAMA70,
        PlanRequest(
            gpus=2048, global_batch=1024, tp=8, pp=4, vp=5, schedule="interleaved-1f1b", zero_stage=1
        ),
    )


def _uneven() -> Plan:
    return make_plan(
        LLAMA405,
        PlanRequest(gpus=16384, global_batch=2048, tp=8, pp=16, first_stage_layers=7, last_stage_layers=7),
    )


def _uneven_interleaved() -> Plan:
    req = PlanRequest(
        gpus=16384,
        global_batch=2048,
        tp=8,
        pp=8,
        vp=2,
        schedule="interleaved-1f1b",
        first_stage_layers=7,
        last_stage_layers=7,
        recompute="full",
        zero_stage=1,
    )
    return make_plan(LLAMA405, req)


def _gpt3() -> Plan:
    req = PlanRequest(
        gpus=1024, global_batch=1536, tp=8, pp=16, vp=2, schedule="interleaved-1f1b", recompute="selective"
    )
    return make_plan(GPT3, req)


def _two_stages_uneven() -> Plan:
    return make_plan(LLAMA70, PlanRequest(gpus=16, global_batch=16, tp=8, pp=2, first_stage_layers=38))


CASES = [
    (LLAMA70, _worked_example),
    (LLAMA70, _two_stages_uneven),
    (LLAMA70, _interleaved),
    (LLAMA405, _uneven),
    (LLAMA405, _uneven_interleaved),
    (GPT3, _gpt3),
]
# torchtitan ships no GPT-3 model (tests/test_launchers_torchtitan.py checks the refusal)
TORCHTITAN_CASES = [(model, make) for model, make in CASES if model is not GPT3]


def _flags(args: list[str]) -> dict[str, list[str]]:
    """flag → the values after it (empty for a switch); each flag appears once."""
    out: dict[str, list[str]] = {}
    current = ""
    for token in args:
        if token.startswith("--"):
            assert token not in out, f"{token} repeated"
            current = token
            out[token] = []
        else:
            out[current].append(token)
    return out


def _single(flags: dict[str, list[str]], name: str) -> str:
    assert len(flags[name]) == 1, name
    return flags[name][0]


# ------------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(("model", "make"), CASES)
def test_megatron_flags_are_documented_names(model: ModelSpec, make: Any) -> None:
    flags = _flags(megatron_args(model, make()))
    assert set(flags) <= set(MEGATRON_OPTIONS)
    assert not set(flags) & MEGATRON_NEVER
    for flag, values in flags.items():
        option = MEGATRON_OPTIONS[flag]
        assert len(values) == (0 if option["nargs"] == 0 else 1), flag
        if option["choices"] is not None:
            assert _single(flags, flag) in option["choices"]
    # the two interleaving flags and the layout string exclude one another
    exclusive = {
        "--num-layers-per-virtual-pipeline-stage",
        "--num-virtual-stages-per-pipeline-rank",
        "--pipeline-model-parallel-layout",
    }
    assert len(set(flags) & exclusive) <= 1


@pytest.mark.parametrize(("model", "make"), TORCHTITAN_CASES)
def test_torchtitan_fields_are_documented_names(model: ModelSpec, make: Any) -> None:
    doc = tomllib.loads(torchtitan_toml(model, make()))
    assert set(doc) <= set(TORCHTITAN_FIELDS)
    for section, fields in doc.items():
        assert set(fields) <= TORCHTITAN_FIELDS[section] | TORCHTITAN_FIELDS_FROM_SOURCE.get(section, set())
    assert doc["parallelism"]["pipeline_parallel_schedule"] in TORCHTITAN_SCHEDULE_NAMES
    assert doc["activation_checkpoint"]["mode"] in TORCHTITAN_AC_MODES


# -------------------------------------------------------------------------------------- values by hand


def test_worked_example_megatron() -> None:
    # 2048 GPUs / (t 8 · p 4) = d 64; m = 1024 / (1 · 64) = 16; ZeRO-0 by default: no distributed optimizer.
    # Llama 3: RoPE, no biases, no dropout, RMSNorm, SwiGLU, 8 KV groups, untied; V = 128256 is a multiple of
    # 32 · t = 256 but not of Megatron's default 128 · t = 1024
    flags = _flags(megatron_args(LLAMA70, _worked_example()))
    assert flags == {
        "--tensor-model-parallel-size": ["8"],
        "--pipeline-model-parallel-size": ["4"],
        "--sequence-parallel": [],
        "--micro-batch-size": ["1"],
        "--global-batch-size": ["1024"],
        "--overlap-grad-reduce": [],
        "--num-layers": ["80"],
        "--hidden-size": ["8192"],
        "--ffn-hidden-size": ["28672"],
        "--rotary-base": ["500000"],  # Llama 3's rope_theta (meta-llama/Meta-Llama-3-70B config.json)
        "--norm-epsilon": ["1e-05"],  # its rms_norm_eps
        "--num-attention-heads": ["64"],
        "--group-query-attention": [],
        "--num-query-groups": ["8"],
        "--seq-length": ["8192"],
        "--max-position-embeddings": ["8192"],
        "--position-embedding-type": ["rope"],
        "--disable-bias-linear": [],
        "--hidden-dropout": ["0"],
        "--attention-dropout": ["0"],
        "--normalization": ["RMSNorm"],
        "--swiglu": [],
        "--untie-embeddings-and-output-weights": [],
        "--make-vocab-size-divisible-by": ["32"],
        "--bf16": [],
    }


def test_worked_example_torchtitan() -> None:
    doc = tomllib.loads(torchtitan_toml(LLAMA70, _worked_example()))
    assert doc == {
        "parallelism": {
            "data_parallel_replicate_degree": 1,
            "data_parallel_shard_degree": 64,
            "tensor_parallel_degree": 8,
            "context_parallel_degree": 1,
            "pipeline_parallel_degree": 4,
            "pipeline_parallel_schedule": "1F1B",
            "pipeline_parallel_microbatch_size": 1,
            "pipeline_parallel_layers_per_stage": 20,
            "pipeline_parallel_first_stage_less_layers": 0,
            "pipeline_parallel_last_stage_less_layers": 0,
        },
        "training": {"local_batch_size": 16, "global_batch_size": 1024, "seq_len": 8192},
        "activation_checkpoint": {"mode": "none"},
        "model": {"name": "llama3", "flavor": "70B"},
    }


def test_interleaved_plan() -> None:
    # 80 layers in p·v = 20 chunks of 4; ZeRO-1 → distributed optimizer with both overlaps
    plan = _interleaved()
    flags = _flags(megatron_args(LLAMA70, plan))
    assert _single(flags, "--num-virtual-stages-per-pipeline-rank") == "5"
    assert "--num-layers-per-virtual-pipeline-stage" not in flags
    assert {"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"} <= set(flags)
    par = tomllib.loads(torchtitan_toml(LLAMA70, plan))["parallelism"]
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert par["pipeline_parallel_layers_per_stage"] == 4
    assert par["data_parallel_shard_degree"] == 64 and par["data_parallel_replicate_degree"] == 1


def test_uneven_first_and_last_stage() -> None:
    # Llama 3 405B on p = 16: 126 layers = 7 + 14·8 + 7
    plan = _uneven()
    flags = _flags(megatron_args(LLAMA405, plan))
    assert _single(flags, "--decoder-first-pipeline-num-layers") == "7"
    assert _single(flags, "--decoder-last-pipeline-num-layers") == "7"
    assert _single(flags, "--num-layers") == "126"
    assert "--num-virtual-stages-per-pipeline-rank" not in flags
    par = tomllib.loads(torchtitan_toml(LLAMA405, plan))["parallelism"]
    assert par["pipeline_parallel_layers_per_stage"] == 8
    assert par["pipeline_parallel_first_stage_less_layers"] == 1
    assert par["pipeline_parallel_last_stage_less_layers"] == 1


def test_two_uneven_stages() -> None:
    plan = _two_stages_uneven()
    assert [c.layers for c in plan.layout.chunks] == [38, 42]
    flags = _flags(megatron_args(LLAMA70, plan))
    assert _single(flags, "--decoder-first-pipeline-num-layers") == "38"
    assert "--decoder-last-pipeline-num-layers" not in flags  # the rest go to the one stage left
    par = tomllib.loads(torchtitan_toml(LLAMA70, plan))["parallelism"]
    assert par["pipeline_parallel_layers_per_stage"] == 42
    assert par["pipeline_parallel_first_stage_less_layers"] == 4
    assert par["pipeline_parallel_last_stage_less_layers"] == 0


def test_only_first_stage_uneven_gives_only_the_first_flag() -> None:
    plan = make_plan(LLAMA70, PlanRequest(gpus=32, global_batch=32, tp=8, pp=4, first_stage_layers=17))
    assert [c.layers for c in plan.layout.chunks] == [17, 21, 21, 21]
    flags = _flags(megatron_args(LLAMA70, plan))
    assert _single(flags, "--decoder-first-pipeline-num-layers") == "17"
    assert "--decoder-last-pipeline-num-layers" not in flags


def test_uneven_interleaved_is_a_layout_string() -> None:
    # with v = 2 the first and last *chunks* are short: written stage by stage, in model order
    plan = _uneven_interleaved()
    flags = _flags(megatron_args(LLAMA405, plan))
    assert not {"--num-virtual-stages-per-pipeline-rank", "--decoder-first-pipeline-num-layers"} & set(flags)
    stages = _single(flags, "--pipeline-model-parallel-layout").split("|")
    assert len(stages) == 16
    assert stages[0] == "E" + "t" * 7 and stages[-1] == "t" * 7 + "L"
    assert all(s == "t" * 8 for s in stages[1:-1])
    assert flags["--recompute-granularity"] == ["full"]
    assert flags["--recompute-method"] == ["uniform"] and flags["--recompute-num-layers"] == ["1"]


def test_gpt3_tied_gelu_layernorm() -> None:
    plan = _gpt3()
    flags = _flags(megatron_args(GPT3, plan))
    for absent in (
        "--swiglu",
        "--untie-embeddings-and-output-weights",
        "--disable-bias-linear",
        "--group-query-attention",
        "--num-query-groups",
        "--use-distributed-optimizer",
        "--overlap-param-gather",
    ):
        assert absent not in flags
    assert _single(flags, "--num-attention-heads") == "96"
    assert _single(flags, "--ffn-hidden-size") == "49152"
    assert _single(flags, "--max-position-embeddings") == "2048"
    assert _single(flags, "--position-embedding-type") == "learned_absolute"
    assert _single(flags, "--normalization") == "LayerNorm"
    assert _single(flags, "--hidden-dropout") == _single(flags, "--attention-dropout") == "0.1"
    assert _single(flags, "--recompute-granularity") == "selective"
    assert "--recompute-method" not in flags
    assert _single(flags, "--num-virtual-stages-per-pipeline-rank") == "2"
    # torchtitan ships no GPT-3 model (and has no attention-core recompute): refused, naming the model
    with pytest.raises(ConfigError, match="torchtitan ships no configuration for this model") as err:
        torchtitan_toml(GPT3, plan)
    assert err.value.field == "--launcher" and "gpt3-175b" in str(err.value)


def test_features_are_flags_and_the_rest_comments() -> None:
    # every architecture feature with a Megatron option is a flag; the notes carry what has none
    notes = megatron_notes(LLAMA70, _worked_example())
    assert notes and all(n.startswith("#") for n in notes)
    assert not any("pplan writes no flag" in n for n in notes)
    assert any("tokenizer" in n for n in notes)
    # the profile states the RoPE base and the norm's epsilon: flags, not notes; a profile without them gets a note
    assert not any("--rotary-base" in n or "--norm-epsilon" in n for n in notes)
    bare = LLAMA70.model_copy(update={"rope_theta": None, "norm_epsilon": None})
    bare_notes = megatron_notes(bare, _worked_example())
    assert any("--rotary-base" in n for n in bare_notes) and any("--norm-epsilon" in n for n in bare_notes)
    assert "--rotary-base" not in _flags(megatron_args(bare, _worked_example()))
    squared = LLAMA70.model_copy(update={"mlp": "squared-relu"})
    flags = _flags(megatron_args(squared, _worked_example()))
    assert "--squared-relu" in flags and "--swiglu" not in flags and set(flags) <= set(MEGATRON_OPTIONS)


def test_pure_data_parallel_zero0_replicates() -> None:
    plan = make_plan(LLAMA8, PlanRequest(gpus=8, global_batch=16))
    assert data_parallel_degrees(plan) == (8, 1)
    par = tomllib.loads(torchtitan_toml(LLAMA8, plan))["parallelism"]
    assert par["data_parallel_replicate_degree"] == 8 and par["data_parallel_shard_degree"] == 1
    assert "pipeline_parallel_schedule" not in par  # p = 1: no pipeline to configure
    assert "--pipeline-model-parallel-layout" not in megatron_args(LLAMA8, plan)


# ---------------------------------------------------------------------------------- text and round trips


def _torchtitan_split(stages: int, layers: int, first_less: int, last_less: int) -> list[int]:
    """Transformer layers per stage as torchtitan 0.2.2's generate_llm_fqn_per_model_part assigns them."""
    effective = layers + first_less + last_less
    base, extra = divmod(effective, stages)
    assert first_less <= base and last_less <= base  # its balance check
    out, left = [], layers
    for i in range(stages):
        take = (
            base + (1 if i < extra else 0) - (first_less if i == 0 else last_less if i == stages - 1 else 0)
        )
        out.append(min(take, left))
        left -= out[-1]
    return out


@pytest.mark.parametrize(("model", "make"), CASES)
def test_megatron_text_pastes_back_to_the_args(model: ModelSpec, make: Any) -> None:
    plan = make()
    text = megatron_text(model, plan)
    lines = text.rstrip("\n").split("\n")
    tail = [i for i, line in enumerate(lines) if line.startswith("#")]
    assert tail == list(range(len(lines) - len(tail), len(lines))) and tail, "comments follow the last flag"
    first = lines[tail[0]]
    assert model.name in first and str(plan.gpus) in first
    body = lines[: tail[0]]
    assert all(line.endswith(" \\") for line in body[:-1]) and not body[-1].endswith("\\")
    assert all(line.strip().startswith("--") for line in body)
    assert shlex.split("\n".join(body).replace("\\\n", " ")) == megatron_args(model, plan)


@pytest.mark.parametrize(("model", "make"), TORCHTITAN_CASES)
def test_torchtitan_toml_round_trips_to_the_plan(model: ModelSpec, make: Any) -> None:
    plan = make()
    doc = tomllib.loads(torchtitan_toml(model, plan))
    par, train = doc["parallelism"], doc["training"]
    d = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
    assert d == plan.dp
    assert (
        par["tensor_parallel_degree"],
        par["pipeline_parallel_degree"],
        par["context_parallel_degree"],
    ) == (
        plan.tp,
        plan.pp,
        plan.cp,
    )
    assert d * plan.tp * plan.pp * plan.cp == plan.gpus
    assert train["local_batch_size"] * d == train["global_batch_size"] == plan.global_batch
    assert train["seq_len"] == plan.seq_len
    b = par["pipeline_parallel_microbatch_size"]
    assert b == plan.micro_batch and train["local_batch_size"] // b == plan.num_microbatches
    # torchtitan's split (0.2.2, generate_llm_fqn_per_model_part): S = ceil((L + first_less + last_less) / k)
    # stages of k "effective layers" each, the first stage k − first_less of them, the last k − last_less
    k = par["pipeline_parallel_layers_per_stage"]
    fl, ll = par["pipeline_parallel_first_stage_less_layers"], par["pipeline_parallel_last_stage_less_layers"]
    stages = -(-(model.num_layers + fl + ll) // k)
    assert stages % plan.pp == 0
    single = par["pipeline_parallel_schedule"] in {"GPipe", "1F1B"}
    assert stages // plan.pp == 1 if single else stages // plan.pp >= 2
    assert _torchtitan_split(stages, model.num_layers, fl, ll) == [c.layers for c in plan.layout.chunks]
    assert doc["activation_checkpoint"]["mode"] == plan.recompute


@pytest.mark.parametrize(("model", "make"), TORCHTITAN_CASES)
def test_overrides_match_the_toml(model: ModelSpec, make: Any) -> None:
    plan = make()
    doc = tomllib.loads(torchtitan_toml(model, plan))
    line = torchtitan_overrides(model, plan, "0.2")
    assert "\n" not in line
    tokens = shlex.split(line)
    pairs = dict(zip(tokens[::2], tokens[1::2], strict=True))
    expected = {f"--{s}.{f}": str(v) for s, fields in doc.items() for f, v in fields.items()}
    assert pairs == expected


# ----------------------------------------------------------------------------------------- refusals


def test_supports_matches_the_documented_lists() -> None:
    megatron = {s for s in SCHEDULE_NAMES if supports("megatron", s)}
    torchtitan = {s for s in SCHEDULE_NAMES if supports("torchtitan", s)}
    assert megatron == {"1f1b", "interleaved-1f1b"}
    assert torchtitan == set(SCHEDULE_NAMES) - {"zb-h1", "zb-h2", "dualpipe", "auto"}
    assert supports("torchtitan", "ScheduleZBVZeroBubble")  # torch class names resolve too
    assert LAUNCHERS == ("megatron", "torchtitan", "torchtitan@0.2", "megatron-bridge")


@pytest.mark.parametrize(
    ("launcher", "request_kwargs"),
    [
        ("megatron", {"schedule": "gpipe"}),
        ("megatron", {"schedule": "zb-h1"}),
        ("megatron", {"schedule": "zbv"}),
        ("megatron", {"schedule": "dualpipev"}),
        ("megatron", {"schedule": "dualpipe"}),
        ("megatron", {"schedule": "interleaved-zb", "vp": 2}),
        ("torchtitan", {"schedule": "zb-h1"}),
        ("torchtitan", {"schedule": "zb-h2"}),
        ("torchtitan", {"schedule": "dualpipe"}),
    ],
)
def test_unsupported_plans_raise_on_launcher(launcher: str, request_kwargs: dict[str, Any]) -> None:
    # t 8, p 4, d 2, m = 64 / 2 = 32 ≥ 2p: every schedule's own rules hold
    plan = make_plan(LLAMA70, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, **request_kwargs))
    render = megatron_args if launcher == "megatron" else torchtitan_toml
    with pytest.raises(ConfigError) as err:
        render(LLAMA70, plan)
    zero = request_kwargs.get("zero_stage", 0)
    reason = (
        f"{launcher}: no ZeRO-2/3" if zero >= 2 else f"{launcher} cannot run {request_kwargs['schedule']}"
    )
    assert unsupported_reason(launcher, plan) == reason
    assert err.value.field == "--launcher" and reason in str(err.value)
    if zero >= 2:
        assert "--zero-stage 1" in err.value.fix
    else:  # the fix's first schedule is one this launcher runs
        suggested = re.findall(r"--schedule ([\w-]+)", err.value.fix)
        assert suggested and supports(launcher, suggested[0]), err.value.fix


def test_megatron_fix_suggests_a_schedule() -> None:
    plan = make_plan(LLAMA70, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, schedule="zbv"))
    with pytest.raises(ConfigError, match="interleaved-1f1b"):
        megatron_text(LLAMA70, plan)
    assert torchtitan_overrides(LLAMA70, plan)  # ZB-V is torch's ZBVZeroBubble


def test_megatron_interleaved_needs_m_a_multiple_of_p() -> None:
    # d = 2, m = 12 / 2 = 6: torch's rounds rule accepts it (6 % max(1, 6 // 4) == 0), Megatron's groups of p do not
    plan = make_plan(
        LLAMA70, PlanRequest(gpus=64, global_batch=12, tp=8, pp=4, vp=2, schedule="interleaved-1f1b")
    )
    assert plan.num_microbatches == 6
    with pytest.raises(ConfigError) as err:
        megatron_args(LLAMA70, plan)
    assert err.value.field == "--launcher"
    assert torchtitan_toml(LLAMA70, plan)


def test_torch_rules_on_m() -> None:
    # torch's checks on n_microbatches: 1F1B m ≥ p; the interleaved classes m % max(1, m // p) == 0; DualPipeV m ≥ 2p
    rounds = "needs m divisible by max(1, m // p)"
    assert unsupported_reason("torchtitan", "1f1b", p=4, m=3) == "torchtitan: 1F1B needs m ≥ p"
    assert unsupported_reason("torchtitan", "1f1b", p=4, m=4) is None
    assert unsupported_reason("megatron", "1f1b", p=4, m=3) is None
    assert (
        unsupported_reason("torchtitan", "interleaved-1f1b", p=2, v=2, m=5)
        == f"torchtitan: Interleaved1F1B {rounds}"
    )
    assert unsupported_reason("torchtitan", "interleaved-zb", p=4, v=2, m=6) is None
    assert unsupported_reason("torchtitan", "interleaved-zb", p=4, v=2, m=9) == (
        f"torchtitan: InterleavedZeroBubble {rounds}"
    )
    assert unsupported_reason("torchtitan", "dualpipev", p=4, m=7) == "torchtitan: DualPipeV needs m ≥ 2p"
    assert unsupported_reason("torchtitan", "dualpipev", p=4, m=8) is None
    assert unsupported_reason("torchtitan", "zbv", p=4, m=1) is None
    assert unsupported_reason("torchtitan", "gpipe", p=4, m=1) is None
    # m < p for 1F1B is a pplan plan (a stage holds at most m) but not a torch one
    plan = make_plan(LLAMA70, PlanRequest(gpus=64, global_batch=4, tp=8, pp=4))
    assert plan.num_microbatches == 2
    with pytest.raises(ConfigError) as err:
        torchtitan_toml(LLAMA70, plan)
    assert err.value.field == "--launcher"
    assert megatron_args(LLAMA70, plan)


def test_torchtitan_cannot_give_an_end_stage_more_layers() -> None:
    plan = make_plan(LLAMA70, PlanRequest(gpus=32, global_batch=32, tp=8, pp=4, first_stage_layers=23))
    assert [c.layers for c in plan.layout.chunks] == [23, 19, 19, 19]
    with pytest.raises(ConfigError) as err:
        torchtitan_toml(LLAMA70, plan)
    assert err.value.field == "--launcher"
    assert _single(_flags(megatron_args(LLAMA70, plan)), "--decoder-first-pipeline-num-layers") == "23"


def test_reason_by_name_prunes_before_any_plan() -> None:
    assert unsupported_reason("megatron", "zbv") == "megatron cannot run zbv"
    assert unsupported_reason("megatron", "interleaved-1f1b") is None
    assert unsupported_reason("torchtitan", "zb-h2") == "torchtitan cannot run zb-h2"
    # reasons carry no plan numbers, so a search can count rejections by them
    assert unsupported_reason("torchtitan", "1f1b", p=4, m=2) == unsupported_reason(
        "torchtitan", "1f1b", p=8, m=3
    )


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize(
    "req",
    [
        PlanRequest(gpus=64, global_batch=64, tp=8, pp=4),
        PlanRequest(gpus=64, global_batch=4, tp=8, pp=4),
        PlanRequest(gpus=64, global_batch=12, tp=8, pp=4, vp=2, schedule="interleaved-1f1b"),
        PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, schedule="zbv"),
        PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, schedule="zb-h1", zero_stage=3),
        PlanRequest(gpus=32, global_batch=32, tp=8, pp=4, first_stage_layers=23),
        PlanRequest(gpus=32, global_batch=32, tp=8, pp=4, first_stage_layers=19, last_stage_layers=19),
    ],
)
def test_request_reason_agrees_with_the_plan(launcher: str, req: PlanRequest) -> None:
    plan = make_plan(LLAMA70, req)
    expected = unsupported_reason(launcher, plan)
    assert request_unsupported_reason(launcher, req, plan.num_microbatches, LLAMA70.num_layers) == expected


def test_no_pipeline_means_no_schedule_rule() -> None:
    plan = make_plan(LLAMA8, PlanRequest(gpus=8, global_batch=16, schedule="gpipe"))
    assert unsupported_reason("megatron", plan) is None
    assert (
        unsupported_reason("megatron", "interleaved-1f1b", p=1, v=2)
        == "megatron: several chunks on one pipeline rank"
    )


def test_unknown_launcher() -> None:
    with pytest.raises(ConfigError) as err:
        supports("deepspeed", "1f1b")
    assert err.value.field == "--launcher" and "megatron" in err.value.fix
