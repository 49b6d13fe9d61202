"""torchtitan output: one validated `Plan` as a job-config TOML and the same fields as command-line overrides.

Pure functions (no I/O). Every section and field emitted is one of torchtitan 0.2.2's job config
(`torchtitan/config/job_config.py`: `[parallelism]`, `[training]`, `[activation_checkpoint]`), as TOML and as
the equivalent `--section.field value` overrides; the schedule names are torch.distributed.pipelining's classes
(PyTorch 2.13 `torch/distributed/pipelining/schedules.py`, `get_schedule_class`).

Checked against torchtitan 0.2.2's sources: the first/last `*_less_layers` default to 1 (so they are always
written, 0 included) and the split (`torchtitan/distributed/pipeline_parallel.py`) gives each of the
ceil((L + first_less + last_less) / layers_per_stage) stages layers_per_stage layers, less at the ends; the
model is replicated (DDP) only when data parallelism is the only dimension
(`torchtitan/models/llama3/infra/parallelize.py`); `selective_ac_option` defaults to "2", checkpointing every
2nd layer.
"""

from __future__ import annotations

import shlex

from pplan.errors import ConfigError
from pplan.launchers.support import check_supported, plan_summary, torchtitan_split
from pplan.plan.configuration import Plan
from pplan.profiles.specs import ModelSpec
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


def data_parallel_degrees(plan: Plan) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree) for pplan's d and ZeRO stage.

    torchtitan shards with FSDP, which shards weights, gradients and optimizer states (ZeRO-3), and replicates
    (DDP) only when data parallelism is the only parallel dimension. So ZeRO-0 without tensor, pipeline or
    context parallelism → replicate d; everything else → shard d. For ZeRO-1/2 that shards more than planned:
    memory ≤ the plan's, for more parameter traffic.
    """
    if plan.zero_stage == 0 and plan.tp == plan.pp == plan.cp == 1:
        return plan.dp, 1
    return 1, plan.dp


def _torchtitan_fields(model: ModelSpec, plan: Plan) -> list[tuple[str, list[tuple[str, int | str, str]]]]:
    """Sections of (field, value, comment) in output order."""
    check_supported("torchtitan", plan)
    replicate, shard = data_parallel_degrees(plan)
    if shard == 1:
        dp_note = "plain data parallelism (ZeRO-0) and nothing else: DDP replicas"
    elif plan.zero_stage == 3:
        dp_note = "ZeRO-3 = FSDP over d"
    elif plan.zero_stage == 0:
        dp_note = (
            "pplan planned ZeRO-0, but torchtitan replicates (DDP) only without tensor/pipeline/context "
            "parallelism, so FSDP over d (memory ≤ plan, more parameter traffic)"
        )
    else:
        dp_note = (
            f"pplan planned ZeRO-{plan.zero_stage}; torchtitan has no such stage, so FSDP over d "
            "(shards weights too: memory ≤ plan, more parameter traffic)"
        )
    par: list[tuple[str, int | str, str]] = [
        ("data_parallel_replicate_degree", replicate, dp_note),
        ("data_parallel_shard_degree", shard, ""),
        ("tensor_parallel_degree", plan.tp, ""),
        ("context_parallel_degree", plan.cp, ""),
        ("pipeline_parallel_degree", plan.pp, "ranks, not stages"),
    ]
    if plan.tp > 1 and not plan.sequence_parallel:
        par[2] = (
            "tensor_parallel_degree",
            plan.tp,
            "planned without sequence parallelism; torchtitan's TP shards the norms over the sequence anyway",
        )
    if plan.pp > 1:
        chunk_layers = tuple(c.layers for c in plan.layout.chunks)
        edges = torchtitan_split(chunk_layers)
        assert edges is not None  # check_supported refused it otherwise
        k, first_less, last_less = edges
        par += [
            ("pipeline_parallel_schedule", torchtitan_schedule(plan.kind), ""),
            ("pipeline_parallel_microbatch_size", plan.micro_batch, ""),
            (
                "pipeline_parallel_layers_per_stage",
                k,
                f"{len(chunk_layers)} virtual stages of {k} layers, {plan.vp} per rank",
            ),
            (
                "pipeline_parallel_first_stage_less_layers",
                first_less,
                "set explicitly, even when 0, so the split is exactly the plan's",
            ),
            ("pipeline_parallel_last_stage_less_layers", last_less, ""),
        ]
    training: list[tuple[str, int | str, str]] = [
        ("local_batch_size", plan.global_batch // plan.dp, "per data-parallel rank = global batch / d"),
        ("global_batch_size", plan.global_batch, ""),
        ("seq_len", plan.seq_len, ""),
    ]
    ac: list[tuple[str, int | str, str]] = [("mode", plan.recompute, "")]
    if plan.recompute == "selective":
        ac.append(
            (
                "selective_ac_option",
                "op",
                "op-level selective recompute, the nearest to pplan's (attention core recomputed); "
                "torchtitan's default, 2, would checkpoint every 2nd layer whole",
            )
        )
    return [("parallelism", par), ("training", training), ("activation_checkpoint", ac)]


def _toml_value(value: int | str) -> str:
    return (
        str(value) if isinstance(value, int) else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    )


def torchtitan_toml(model: ModelSpec, plan: Plan) -> str:
    """A torchtitan v0.2.x job-config TOML for `plan` (the sections pplan decides; merge into a full config).

    Raises a ConfigError naming `--launcher` when torchtitan cannot run the plan.
    """
    sections = _torchtitan_fields(model, plan)
    lines = [
        f"# torchtitan job config (v0.2.x TOML) from pplan: {plan_summary(model, plan)}",
        f"# launch on {plan.gpus} GPUs in all; the [model] section is yours to set: pick torchtitan's flavor for "
        f"{model.name} (pplan writes none of its fields)",
    ]
    for name, fields in sections:
        lines += ["", f"[{name}]"]
        for field, value, comment in fields:
            if comment:
                lines.append(f"# {comment}")
            lines.append(f"{field} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def torchtitan_overrides(model: ModelSpec, plan: Plan) -> str:
    """The same fields as torchtitan `--section.field value` command-line overrides, on one line."""
    parts = []
    for name, fields in _torchtitan_fields(model, plan):
        for field, value, _ in fields:
            parts.append(f"--{name}.{field} {shlex.quote(str(value))}")
    return " ".join(parts)
