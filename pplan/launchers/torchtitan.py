"""torchtitan output: one validated `Plan` as torchtitan 0.3.x command-line arguments, or as a 0.2.x job-config TOML.

Pure functions (no I/O). Two releases, chosen by the launcher name (`pplan.launchers.support.Launcher`):
- `torchtitan` (0.3.x, the current release; names checked against torchtitan 0.3.0): TOML job configs are gone;
  a run is `--module <model module> --config <config function>` (torchtitan/config/manager.py, `ConfigManager`)
  followed by tyro's `--section.field value` overrides of `Trainer.Config` (torchtitan/trainer.py;
  `ParallelismConfig`, `TrainingConfig` in torchtitan/config/configs.py) and, last, the activation-checkpointing
  subcommand `activation-checkpoint:full|none` (torchtitan/distributed/activation_checkpoint.py,
  `ActivationCheckpointingConfig`). `Trainer.Config` refuses pipeline parallelism unless
  `--training.disable_cuda_graphs` is set, so a plan with p > 1 sets it.
- `torchtitan@0.2` (0.2.x; checked against torchtitan 0.2.2's `torchtitan/config/job_config.py`): the TOML
  sections `[model]`, `[parallelism]`, `[training]`, `[activation_checkpoint]`, and the same fields as
  `--section.field value` overrides.

Both: the model is the shipped configuration of the plan's shape (`pplan.launchers.torchtitan_models`; any other
model is refused); the schedule names are torch.distributed.pipelining's classes (PyTorch 2.13
`torch/distributed/pipelining/schedules.py`, `get_schedule_class`); the split (`_generate_llm_fqn_per_model_part`
in torchtitan/distributed/pipeline_parallel.py, the same in both releases) gives each of the
ceil((L + first_less + last_less) / layers_per_stage) stages layers_per_stage layers, less at the ends, and the
`*_less_layers` default to 1, so they are always written (0 included). With p > 1 one step is one pipeline pass
over local_batch_size / pipeline_parallel_microbatch_size micro-batches, so local_batch_size = B / d; with p = 1
torchtitan accumulates gradients over global_batch_size / (local_batch_size · d) steps, so local_batch_size = b.
pplan's `full` recompute is torchtitan's full AC (every layer re-run from its input), `none` none; `selective` is
refused (`pplan.launchers.support`).

Routed models: `expert_parallel_degree` is always written (a 0.3.x config function may set another:
deepseek_v3_671b's is 2). 0.3.x: `--training.disable_cuda_graphs` with ep > 1 too (`Trainer.Config`'s
`_validate_cuda_graphs` refuses EP with the standard token dispatcher without it); an FP8 plan names the model's
Float8 config function (`deepseek_v3_671b_float8`) and says what it sets beyond pplan's plan. 0.2.x: `[model]`
names the flavour, and `[parallelism] expert_tensor_parallel_degree` is the plan's etp (1 or t with ep > 1,
`ParallelDims._validate` in torchtitan 0.2.2 torchtitan/distributed/parallel_dims.py; t without EP); 0.2.2 has no
CUDA-graph switch and compiles nothing unless `[compile] enable` is set, so nothing else is needed; FP8 is refused
(`pplan.launchers.support`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pplan.errors import ConfigError
from pplan.launchers.capabilities import TORCHTITAN, TORCHTITAN_02, capabilities_of
from pplan.launchers.support import (
    check_supported,
    plan_summary,
    torchtitan_dp_degrees,
    torchtitan_split,
    torchtitan_version,
)
from pplan.launchers.torchtitan_models import (
    TORCHTITAN_02_RELEASE,
    TORCHTITAN_RELEASE,
    ShippedModel,
    TorchtitanVersion,
    shipped_model,
)
from pplan.plan.records import Plan
from pplan.profiles.model_spec import ModelSpec
from pplan.profiles.text import escaped
from pplan.schedules import ScheduleFamily


def torchtitan_schedule(family: ScheduleFamily) -> str:
    """The name torchtitan's `pipeline_parallel_schedule` takes for the family: torch's short class name."""
    if family.torch_short_name is None:
        raise ConfigError(
            "--launcher",
            f"torchtitan cannot run {family.name} ({family.why_not_torch})",
            family.fix_not_torch,
        )
    return family.torch_short_name


def data_parallel_degrees(plan: Plan, version: TorchtitanVersion = "0.3") -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree) for pplan's d and ZeRO stage.

    torchtitan shards with FSDP, which shards weights, gradients and optimizer states (ZeRO-3). ZeRO-0 is
    replication: 0.3.x replicates over `data_parallel_replicate_degree` beside any other parallelism (FSDP with
    a replicate axis and a shard axis of 1, `resolve_fsdp_mesh` in torchtitan/distributed/full_dtensor.py);
    0.2.x replicates (DDP) only when data parallelism is the only dimension
    (torchtitan/models/llama3/infra/parallelize.py). Everything else shards d: for ZeRO-1/2 that shards more
    than planned (memory ≤ the plan's, more parameter traffic). Hybrid sharding (a shard group S of the d·cp GPUs)
    is torchtitan's HSDP: FSDP shards over data_parallel_shard_degree × context_parallel_degree, so the shard
    degree is S/cp and the replicate degree (d·cp)/S (torchtitan 0.3.0 torchtitan/config/configs.py).
    """
    return torchtitan_dp_degrees(
        version, plan.dp, plan.zero_stage, plan.shard_group, plan.tp, plan.pp, plan.cp
    )


@dataclass(frozen=True, slots=True)
class _Field:
    section: str
    name: str
    value: int | str | bool
    """A bool is a switch on a command line: `--section.name` when True, `--section.no_name` when False (a TOML
    value in 0.2.x's file)."""
    comment: str = ""


def _dp_note(plan: Plan, version: TorchtitanVersion) -> str:
    shard = data_parallel_degrees(plan, version)[1]
    if plan.shard_group is not None:
        note = (
            f"HSDP: FSDP shards over shard × cp = {shard}·{plan.cp} = {plan.shard_group} GPUs, "
            f"replicated {plan.shard_replicas} times"
        )
        if plan.zero_stage < 3:
            note += f" (pplan planned ZeRO-{plan.zero_stage}; FSDP shards the weights too: memory ≤ plan)"
        return note
    if shard == 1:
        if plan.dp == 1:
            return ""
        note = "ZeRO-0: replicas over d"
        if plan.cp > 1:
            note += (
                "; torchtitan's FSDP still shards the weights over the context-parallel ranks (memory ≤ plan)"
            )
        return note
    if plan.zero_stage == 3:
        return "ZeRO-3 = FSDP over d"
    if plan.zero_stage == 0:
        return (
            "pplan planned ZeRO-0, but torchtitan 0.2.x replicates (DDP) only without tensor/pipeline/context "
            "parallelism, so FSDP over d (memory ≤ plan, more parameter traffic)"
        )
    return (
        f"pplan planned ZeRO-{plan.zero_stage}; torchtitan has no such stage, so FSDP over d "
        "(shards weights too: memory ≤ plan, more parameter traffic)"
    )


def _fields(model: ModelSpec, plan: Plan, version: TorchtitanVersion) -> list[_Field]:
    """Every field pplan sets, in output order (the 0.3.x AC subcommand excepted)."""
    replicate, shard = data_parallel_degrees(plan, version)
    par = "parallelism"
    out = [
        _Field(par, "data_parallel_replicate_degree", replicate, _dp_note(plan, version)),
        _Field(par, "data_parallel_shard_degree", shard),
        _Field(par, "tensor_parallel_degree", plan.tp),
    ]
    if plan.tp > 1 and version == "0.3":
        out.append(_Field(par, "enable_sequence_parallel", plan.sequence_parallel))
    elif plan.tp > 1 and not plan.sequence_parallel:
        out[-1] = _Field(
            par,
            "tensor_parallel_degree",
            plan.tp,
            "planned without sequence parallelism; torchtitan 0.2.x's TP shards the norms over the sequence anyway",
        )
    if plan.zero_stage == 3:
        default = "does not reshard" if plan.pp > 1 else "reshards"
        out.append(
            _Field(
                par,
                "fsdp_reshard_after_forward",
                "always" if plan.reshard_after_forward else "never",
                f'as pplan costed; torchtitan\'s "default" {default} with pp = {plan.pp} '
                "(get_fsdp_reshard_after_forward_policy: not pipeline-parallel)",
            )
        )
    out += [
        _Field(par, "context_parallel_degree", plan.cp),
        _Field(par, "pipeline_parallel_degree", plan.pp, "ranks, not stages"),
    ]
    if model.moe is not None:  # always written: a config function may set another (deepseek_v3_671b: 2)
        out += _expert_fields(plan, version, shard)
    if plan.pp > 1:
        chunk_layers = tuple(c.layers for c in plan.layout.chunks)
        edges = torchtitan_split(chunk_layers)
        assert edges is not None  # check_supported refused it otherwise
        k, first_less, last_less = edges
        out += [
            _Field(par, "pipeline_parallel_schedule", torchtitan_schedule(plan.kind)),
            _Field(par, "pipeline_parallel_microbatch_size", plan.micro_batch),
            _Field(
                par,
                "pipeline_parallel_layers_per_stage",
                k,
                f"{len(chunk_layers)} virtual stages of {k} layers, {len(chunk_layers) // plan.pp} per rank",
            ),
            _Field(
                par,
                "pipeline_parallel_first_stage_less_layers",
                first_less,
                "set explicitly, even when 0, so the split is exactly the plan's",
            ),
            _Field(par, "pipeline_parallel_last_stage_less_layers", last_less),
        ]
        local, local_note = (
            plan.global_batch // plan.dp,
            "per data-parallel rank = global batch / d, one pipeline pass",
        )
    else:
        local = plan.micro_batch
        local_note = (
            f"= micro-batch b; torchtitan accumulates gradients over m = {plan.num_microbatches} steps"
        )
    out += [
        _Field("training", "local_batch_size", local, local_note),
        _Field("training", "global_batch_size", plan.global_batch),
        _Field("training", "seq_len", plan.seq_len),
    ]
    routed = model.moe is not None
    if version == "0.3" and (plan.pp > 1 or (routed and plan.ep > 1)):
        why = (
            "pipeline parallelism" if plan.pp > 1 else "expert parallelism with the standard token dispatcher"
        )
        out.append(
            _Field("training", "disable_cuda_graphs", True, f"Trainer.Config refuses {why} without it")
        )
    if version == "0.2":
        out.append(_Field("activation_checkpoint", "mode", plan.recompute))
    return out


def _expert_fields(plan: Plan, version: TorchtitanVersion, shard: int) -> list[_Field]:
    """A routed model's expert parallelism: `expert_parallel_degree` (both releases, always written) and 0.2.x's
    `expert_tensor_parallel_degree` (etp = 1 or t with ep > 1; no effect with ep = 1, where both releases split
    the experts over t: `pplan.launchers.support._expert_tp_refusal`)."""
    par = "parallelism"
    ep, etp, tp, cp = plan.ep, plan.etp, plan.tp, plan.cp
    if ep == 1:
        note = "no expert parallelism" + (
            f"; every expert split over the t = {tp} tensor-parallel ranks (etp = t)" if tp > 1 else ""
        )
    elif version == "0.3":
        note = (
            f"EP borrows its ranks from FSDP and TP: efsdp = shard·cp·t / ep = "
            f"{shard}·{cp}·{tp} / {ep} = {shard * cp * tp // ep}; each expert whole on its rank (etp = 1)"
        )
    else:
        borrowed = "FSDP and CP (each expert split over the t ranks)" if etp > 1 else "FSDP, CP and TP"
        note = (
            f"EP borrows its ranks from {borrowed}: efsdp = shard·cp·t / (etp·ep) = "
            f"{shard}·{cp}·{tp} / ({etp}·{ep}) = {shard * cp * tp // (etp * ep)}"
        )
    out = [_Field(par, "expert_parallel_degree", ep, note)]
    if version == "0.2":
        out.append(
            _Field(
                par,
                "expert_tensor_parallel_degree",
                etp,
                "no effect without EP (torchtitan splits the experts over TP)" if ep == 1 and tp > 1 else "",
            )
        )
        if ep > 1 and plan.pp > 1 and plan.kind.overlaps_expert_comm:
            out.append(
                _Field(
                    par,
                    "pipeline_parallel_expert_parallel_overlap",
                    True,
                    f"{torchtitan_schedule(plan.kind)} hides the expert all-to-all behind its paired passes, as "
                    "pplan costed it (0.2.2's default, written; runs only without activation checkpointing)",
                )
            )
    return out


TORCHTITAN_MOE_DEFAULTS = {
    "moe_dispatcher": "alltoall", "moe_ep_overlap": False, "cuda_graph_scope": (), "moe_permute_fusion": False,
    "moe_router_fusion": False, "moe_fused_grouped_mlp": False, "moe_capacity_factor": None,
    "moe_force_balance": False,
}  # fmt: skip
"""The MoE knobs as torchtitan runs them, the only values pplan writes for it: its expert parallelism's
all-to-all, no EP overlap, no CUDA graphs (`--training.disable_cuda_graphs` with pipelining), its own permutation
and router, dropless, natural routing (its DeepEP flavours and graph experiments are not written)."""


def moe_knob_refusal(plan: Plan, launcher: str) -> ConfigError | None:
    """The first MoE knob of `plan` off torchtitan's value (`TORCHTITAN_MOE_DEFAULTS`), as the error to raise."""
    for name, value in TORCHTITAN_MOE_DEFAULTS.items():
        if getattr(plan, name) != value:
            flag = "--" + name.replace("_", "-")
            return ConfigError(
                flag, f"{launcher}: pplan writes torchtitan's own expert parallelism only ({name} {value!r})",
                f"drop {flag}, or --launcher megatron",
            )  # fmt: skip
    return None


def _shipped(model: ModelSpec, plan: Plan, launcher: str) -> ShippedModel:
    check_supported(launcher, plan, model)
    knob = moe_knob_refusal(plan, launcher)
    if knob is not None:
        raise knob
    refused = capabilities_of(launcher).optimizer_offload.refusal(
        plan.optimizer_offload_fraction > 0, launcher
    )
    if refused is not None:  # no search offloads the optimizer: refused here, when a plan asks for it
        raise ConfigError("--launcher", f"{refused.reason} ({refused.detail})", refused.fix)
    shipped = shipped_model(model, torchtitan_version(launcher))
    assert shipped is not None  # check_supported refused it otherwise
    return shipped


def _notes(model: ModelSpec, plan: Plan, shipped: ShippedModel, version: TorchtitanVersion) -> list[str]:
    """Header comment lines after the summary: the model's source and what the settings cannot carry."""
    shape = shipped.shape()
    if version == "0.3":
        source = f"--module {shipped.module} --config {_config(shipped, plan)}"
        rest = "data, tokenizer (--hf_assets_path), optimizer and steps are the config function's: yours to change"
    else:
        source = f'[model] name = "{shipped.module}", flavor = "{shipped.flavor}"'
        rest = "data, tokenizer (hf_assets_path), optimizer and steps are yours: merge these sections into your job config"
    stated = "as the profile states" if model.rope_theta is not None else "the profile states none"
    notes = [
        f"model: {source} builds {escaped(model.name, markup=False)}'s shape ({shape}); RoPE base {shipped.rope_theta} "
        f"({stated})",
        rest,
    ]
    if version == "0.3":
        notes += list(shipped.config_notes)
        if plan.precision == "fp8":
            notes += list(shipped.fp8_notes)
    else:
        notes += list(shipped.flavor_notes)
    if not plan.flash_attention:
        notes.append(
            "attention: planned without flash attention; torchtitan's fused attention stores no scores"
        )
    if not (plan.overlap_grad_reduce and plan.overlap_param_gather) and plan.dp > 1:
        notes.append(
            "overlap: pplan costed some data-parallel communication as exposed; torchtitan's FSDP overlaps it"
        )
    return notes


def _config(shipped: ShippedModel, plan: Plan) -> str:
    """The 0.3.x config function: the Float8 one for an FP8 plan (check_supported refused FP8 without one)."""
    if plan.precision == "fp8":
        assert shipped.fp8_config is not None
        return shipped.fp8_config
    return shipped.config


def _arg_groups(model: ModelSpec, plan: Plan) -> list[list[str]]:
    """The 0.3.x arguments, one option (with its value) per group; the AC subcommand last."""
    shipped = _shipped(model, plan, TORCHTITAN.name)
    groups = [["--module", shipped.module], ["--config", _config(shipped, plan)]]
    groups += [_tokens(f) for f in _fields(model, plan, "0.3")]
    groups.append(list(TORCHTITAN.recompute.runs[plan.recompute]))  # activation-checkpoint:full|none
    return groups


def torchtitan_args(model: ModelSpec, plan: Plan) -> list[str]:
    """torchtitan 0.3.x arguments for `plan` (for `python -m torchtitan.train`): module, config, overrides, AC.

    Raises a ConfigError naming `--launcher` when torchtitan cannot run the plan or build the model.
    """
    return [arg for group in _arg_groups(model, plan) for arg in group]


def torchtitan_command(model: ModelSpec, plan: Plan) -> str:
    """What `--format torchtitan` prints: the 0.3.x arguments one option per line, then the comments (after the last
    argument, so the block pastes whole after `torchrun ... -m torchtitan.train \\`)."""
    shipped = _shipped(model, plan, TORCHTITAN.name)
    lines = [
        f"# torchtitan 0.3.x arguments from pplan: {escaped(plan_summary(model, plan), markup=False)}",
        f"# launch on {plan.gpus} GPUs in all: torchrun ... -m torchtitan.train followed by these arguments "
        f"(names checked against {TORCHTITAN_RELEASE}, which takes a config function and overrides; its TOML "
        "job configs are gone: --format torchtitan@0.2 writes one for 0.2.x)",
    ]
    lines += [f"# {note}" for note in _notes(model, plan, shipped, "0.3")]
    lines += [f"# {f.name}: {f.comment}" for f in _fields(model, plan, "0.3") if f.comment]
    body = ["    " + shlex.join(group) for group in _arg_groups(model, plan)]
    return "\n".join([line + " \\" for line in body[:-1]] + body[-1:] + lines) + "\n"


def _toml_value(value: int | str | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return (
        str(value) if isinstance(value, int) else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    )


def torchtitan_toml(model: ModelSpec, plan: Plan) -> str:
    """A torchtitan 0.2.x job-config TOML for `plan` (the sections pplan decides; merge into a full config).

    Raises a ConfigError naming `--launcher` when torchtitan cannot run the plan or build the model.
    """
    shipped = _shipped(model, plan, TORCHTITAN_02.name)
    lines = [
        f"# torchtitan 0.2.x job config (TOML) from pplan: {escaped(plan_summary(model, plan), markup=False)}"
    ]
    lines.append(
        f"# launch on {plan.gpus} GPUs in all; checked against {TORCHTITAN_02_RELEASE} "
        "(for 0.3.x and later, --format torchtitan)"
    )
    lines += [f"# {note}" for note in _notes(model, plan, shipped, "0.2")]
    sections: dict[str, list[_Field]] = {
        "model": [_Field("model", "name", shipped.module), _Field("model", "flavor", shipped.flavor)]
    }
    for f in _fields(model, plan, "0.2"):
        sections.setdefault(f.section, []).append(f)
    for name, fields in sections.items():
        lines += ["", f"[{name}]"]
        for f in fields:
            if f.comment:
                lines.append(f"# {f.comment}")
            lines.append(f"{f.name} = {_toml_value(f.value)}")
    return "\n".join(lines) + "\n"


def torchtitan_overrides(model: ModelSpec, plan: Plan, version: TorchtitanVersion = "0.3") -> str:
    """The settings on one command line: the 0.3.x arguments, or the 0.2.x TOML's `--section.field value`s."""
    if version == "0.3":
        return shlex.join(torchtitan_args(model, plan))
    shipped = _shipped(model, plan, TORCHTITAN_02.name)
    fields = [_Field("model", "name", shipped.module), _Field("model", "flavor", shipped.flavor)]
    fields += _fields(model, plan, "0.2")
    return " ".join(shlex.join(_tokens(f)) for f in fields)


def _tokens(f: _Field) -> list[str]:
    """One field on a command line: `--section.name value`, a bool as the switch tyro makes of it
    (`--section.name` or `--section.no_name`; both releases parse with tyro)."""
    if isinstance(f.value, bool):
        return [f"--{f.section}.{f.name}" if f.value else f"--{f.section}.no_{f.name}"]
    return [f"--{f.section}.{f.name}", str(f.value)]


def torchtitan_text(launcher: str, model: ModelSpec, plan: Plan) -> str:
    """What `--format torchtitan` (0.3.x arguments) or `--format torchtitan@0.2` (TOML and overrides) prints."""
    if torchtitan_version(launcher) == "0.3":
        return torchtitan_command(model, plan).rstrip("\n")
    return (
        torchtitan_toml(model, plan).rstrip("\n")
        + "\n\n# the same as command-line overrides:\n# "
        + torchtitan_overrides(model, plan, "0.2")
    )
