"""Launcher output: one validated `Plan` as Megatron-LM arguments or a torchtitan job config.

Pure functions (no I/O). Every flag and field name emitted here is one that `shared/reference/launchers.md`
lists, read there from the projects' sources: Megatron-LM's `megatron/training/arguments.py` and torchtitan's
job config (v0.2.x TOML sections `[parallelism]`, `[training]`, `[activation_checkpoint]`, and the equivalent
`--section.field value` command-line overrides). Two names are not in launchers.md: Megatron-LM's
`--max-position-embeddings` (a model-size argument) and torchtitan's `[activation_checkpoint]
selective_ac_option`, read from torchtitan 0.2.2's `torchtitan/config/job_config.py`. A model feature with no
documented flag (position-embedding kind, biases, dropout, a squared-ReLU MLP, ...) is never given an invented
flag: it is reported as a `#` comment.

Checked against the released sources (torchtitan 0.2.2, megatron-core 0.16.1): torchtitan's first/last
`*_less_layers` default to 1 (so they are always written, 0 included) and its split gives each of the
ceil((L + first_less + last_less) / layers_per_stage) stages layers_per_stage layers, less at the ends; it
replicates (DDP) only when data parallelism is the only dimension; its `selective` mode defaults to checkpointing
every 2nd layer. Megatron-core's `num_layers_in_first/last_pipeline_stage` count the layers of the whole first/last
pipeline rank, over all its virtual stages; its layout string lists virtual stages in model order; its
interleaved schedule with the default micro-batch group (p) refuses m not a multiple of p.

Which schedules each launcher runs (each family's record in `pplan.schedules.registry` says so, with the
refusal texts; the launcher-specific rules on m below are keyed by its fields):
- Megatron-LM main: 1F1B and interleaved 1F1B only. The zero-bubble schedules (ZB-H1/H2, ZB-V, interleaved
  ZB) live in the sail-sg fork; DualPipe/DualPipeV and GPipe are not Megatron-LM schedules. Its interleaved
  schedule takes micro-batches in groups of p, so m must be a multiple of p (Narayanan et al. 2021 §2.2; see
  `pplan.schedules.families.interleaved` for what goes wrong otherwise). ZeRO-2/3 are not Megatron options here: its
  distributed optimizer (`--use-distributed-optimizer`) shards the optimizer states (ZeRO-1).
- torchtitan runs torch.distributed.pipelining's classes: GPipe, 1F1B, Interleaved1F1B, LoopedBFS,
  InterleavedZeroBubble, ZBVZeroBubble and DualPipeV, with torch's rules on m (torch-pipelining-notes.md §1):
  1F1B needs m ≥ p; Interleaved1F1B and InterleavedZeroBubble need m divisible by max(1, m // p); DualPipeV needs
  m ≥ 2p. torch has no ZB-H1/ZB-H2 class (pplan could feed them to torch as a CSV, but a torchtitan config cannot
  name them) and no bidirectional DualPipe.

Interleaving in Megatron is written `--num-virtual-stages-per-pipeline-rank v` rather than
`--num-layers-per-virtual-pipeline-stage N`: v is the planner's own variable, so nothing is derived from layer
arithmetic that Megatron might do differently (for example when embedding or loss count as layers). An uneven
first/last stage without interleaving uses `--decoder-first/last-pipeline-num-layers`; with interleaving those
counts would cover a whole pipeline rank rather than pplan's first and last chunk, so that case is written as an
explicit `--pipeline-model-parallel-layout` string (one `|`-separated entry per virtual stage in model order,
`E` embedding, `t` a decoder layer, `L` the loss), which is exclusive with the interleaving flags.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from pplan.errors import ConfigError
from pplan.plan.configuration import Plan, PlanRequest
from pplan.profiles.specs import ModelSpec
from pplan.schedules import ScheduleFamily, schedule_family
from pplan.schedules.rules import nearest_valid

LAUNCHERS: tuple[str, ...] = ("megatron", "torchtitan")

_ALL_LAUNCHERS = ", ".join(LAUNCHERS)


@dataclass(frozen=True, slots=True)
class _Refusal:
    reason: str
    """Generic, so a search can count rejections by it (no plan-specific numbers)."""
    detail: str
    fix: str


def _launcher(name: str) -> str:
    key = name.strip().lower()
    if key not in LAUNCHERS:
        raise ConfigError("--launcher", f"unknown launcher {name!r}", f"use one of {_ALL_LAUNCHERS}")
    return key


def _schedule_refusal(launcher: str, family: ScheduleFamily) -> _Refusal | None:
    """Whether the launcher runs the family at all, from its record (pplan.schedules.registry)."""
    if launcher == "megatron":
        if family.megatron:
            return None
        return _Refusal(
            f"megatron cannot run {family.name}",
            family.why_not_megatron,
            "use --schedule interleaved-1f1b (or 1f1b), or --launcher torchtitan",
        )
    if family.torch_class is not None:
        return None
    return _Refusal(f"torchtitan cannot run {family.name}", family.why_not_torch, family.fix_not_torch)


def torchtitan_schedule(family: ScheduleFamily) -> str:
    """The name torchtitan's `pipeline_parallel_schedule` takes for the family: torch's short class name."""
    if family.torch_short_name is None:
        raise ConfigError(
            "--launcher",
            f"torchtitan cannot run {family.name} ({family.why_not_torch})",
            family.fix_not_torch,
        )
    return family.torch_short_name


def _edge_fewer_layers(chunk_layers: Sequence[int]) -> tuple[int, int, int] | None:
    """(layers per stage k, first-stage shortfall, last-stage shortfall) for torchtitan, or None if the
    first or last chunk has more layers than the chunks between them."""
    first, last = chunk_layers[0], chunk_layers[-1]
    inner = chunk_layers[1:-1]
    k = inner[0] if inner else max(first, last)
    if first > k or last > k:
        return None
    return k, k - first, k - last


def _refusal(
    launcher: str,
    schedule: str,
    p: int | None,
    v: int | None,
    m: int | None,
    zero_stage: int,
    chunk_layers: Sequence[int] | None,
) -> _Refusal | None:
    launcher = _launcher(launcher)
    kind = schedule_family(schedule)
    chunks = kind.fixed_v if kind.fixed_v is not None else v
    if p == 1 and chunks is not None and chunks > 1 and kind.placement != "dual":
        return _Refusal(
            f"{launcher}: several chunks on one pipeline rank",
            f"p = 1 with {chunks} chunks",
            "use --pp 2 or more, or a one-chunk schedule such as 1f1b",
        )
    # without a pipeline (p = 1) no schedule runs: any one-chunk plan is the same job for either launcher
    no_pipeline = p == 1 and kind.placement != "dual"
    refused = None if no_pipeline else _schedule_refusal(launcher, kind)
    if refused is not None:
        return refused
    if launcher == "megatron":
        if zero_stage >= 2:
            return _Refusal(
                "megatron: no ZeRO-2/3",
                f"ZeRO-{zero_stage}; Megatron-LM's distributed optimizer shards optimizer states only (ZeRO-1)",
                "use --zero-stage 1, or --launcher torchtitan (FSDP)",
            )
        # Megatron's interleaved schedule (the one with a chosen v) takes micro-batches in groups of p
        if kind.fixed_v is None and p is not None and p > 1 and m is not None and m % p:
            return _Refusal(
                "megatron: interleaved 1F1B needs m a multiple of p",
                f"m = {m}, p = {p}",
                f"use a global batch giving m a multiple of {p}, or --launcher torchtitan",
            )
        return None
    if p is not None and p > 1 and m is not None:
        if kind.torch_class == "Schedule1F1B" and m < p:  # torch's own rule on top of the family's
            return _Refusal(
                "torchtitan: 1F1B needs m ≥ p",
                f"m = {m}, p = {p}",
                f"use a global batch giving m ≥ {p}, or --schedule gpipe",
            )
        if kind.m_problem(p, m) is not None:  # torch's class has the family's own rule on m
            near = nearest_valid(m, lambda c: kind.m_problem(p, c) is None, m + 8 * p + 1)
            return _Refusal(
                f"torchtitan: {kind.torch_short_name} needs {kind.m_rule}",
                f"m = {m}, p = {p}",
                f"use a global batch giving m = {' or '.join(str(c) for c in near if c is not None)}",
            )
    if (
        p is not None
        and p > 1
        and chunk_layers
        and len(chunk_layers) > 1
        and not _edge_fewer_layers(chunk_layers)
    ):
        return _Refusal(
            "torchtitan: first/last stage cannot have more layers than the others",
            f"layers per chunk {chunk_layers[0]}, ..., {chunk_layers[-1]}",
            "give the first and last stages fewer layers (or as many), or --launcher megatron",
        )
    return None


def supports(launcher: str, schedule_name: str) -> bool:
    """Whether `launcher` can run the schedule at all (before any rule on p, v or m)."""
    return _schedule_refusal(_launcher(launcher), schedule_family(schedule_name)) is None


def unsupported_reason(
    launcher: str,
    schedule: str | Plan,
    *,
    p: int | None = None,
    v: int | None = None,
    m: int | None = None,
    zero_stage: int = 0,
    chunk_layers: Sequence[int] | None = None,
) -> str | None:
    """Why `launcher` cannot run the schedule or plan, or None when it can.

    Pass a `Plan`, or a schedule name with whatever of p (pipeline ranks), v (chunks per rank), m
    (micro-batches), the ZeRO stage and the layers per chunk (model order) are known: unknown ones are not
    checked, so a search can filter the schedule axis first and each (p, m) later without building a plan.
    The reason is generic (no plan-specific numbers), so it can key a rejection count.
    """
    if isinstance(schedule, Plan):
        refused = _plan_refusal(launcher, schedule)
    else:
        refused = _refusal(launcher, schedule, p, v, m, zero_stage, chunk_layers)
    return None if refused is None else refused.reason


def request_unsupported_reason(
    launcher: str, req: PlanRequest, m: int, num_layers: int | None = None
) -> str | None:
    """`unsupported_reason` for a request before it becomes a plan (the search's `launcher_reason` callback).

    With `num_layers`, an uneven first/last split is checked too.
    """
    layers: tuple[int, ...] | None = None
    kind = schedule_family(req.schedule)
    v = kind.fixed_v if kind.fixed_v is not None else req.vp
    if (
        num_layers is not None
        and v is not None
        and (req.first_stage_layers, req.last_stage_layers) != (None, None)
    ):
        chunks = req.pp if kind.placement == "dual" else req.pp * v
        edges = [x for x in (req.first_stage_layers, req.last_stage_layers) if x is not None]
        rest = chunks - len(edges)
        if chunks == 2 and rest == 0:
            layers = tuple(edges)
        elif chunks >= 2 and rest > 0 and (num_layers - sum(edges)) % rest == 0:
            k = (num_layers - sum(edges)) // rest
            first = k if req.first_stage_layers is None else req.first_stage_layers
            last = k if req.last_stage_layers is None else req.last_stage_layers
            layers = (first, *([k] * (chunks - 2)), last)
    refused = _refusal(launcher, req.schedule, req.pp, v, m, req.zero_stage, layers)
    return None if refused is None else refused.reason


def _plan_refusal(launcher: str, plan: Plan) -> _Refusal | None:
    return _refusal(
        launcher,
        plan.kind.name,
        plan.pp,
        plan.vp,
        plan.num_microbatches,
        plan.zero_stage,
        tuple(c.layers for c in plan.layout.chunks),
    )


def check_supported(launcher: str, plan: Plan) -> None:
    """Raise a ConfigError naming `--launcher` when `launcher` cannot run `plan`."""
    refused = _plan_refusal(launcher, plan)
    if refused is not None:
        raise ConfigError("--launcher", f"{refused.reason} ({refused.detail})", refused.fix)


# ---------------------------------------------------------------------------------------------------- Megatron


def _plan_line(model: ModelSpec, plan: Plan) -> str:
    v = f" v={plan.vp}" if plan.vp > 1 else ""
    return (
        f"{model.name} on {plan.gpus} GPUs = t {plan.tp} × p {plan.pp} × cp {plan.cp} × d {plan.dp}; "
        f"{plan.kind.name}{v}, micro-batch {plan.micro_batch} × {plan.num_microbatches} micro-batches, "
        f"global batch {plan.global_batch}, sequence {plan.seq_len}, recompute {plan.recompute}, "
        f"ZeRO-{plan.zero_stage}"
    )


def _uneven(plan: Plan) -> bool:
    return len({c.layers for c in plan.layout.chunks}) > 1


def _layout_string(plan: Plan) -> str:
    stages = []
    for c in plan.layout.chunks:
        stages.append(("E" if c.has_embedding else "") + "t" * c.layers + ("L" if c.has_output else ""))
    return "|".join(stages)


def _megatron_pipeline_args(plan: Plan) -> list[str]:
    if plan.pp == 1:
        return []
    chunks = plan.layout.chunks
    if not _uneven(plan):
        return ["--num-virtual-stages-per-pipeline-rank", str(plan.vp)] if plan.vp > 1 else []
    if plan.vp > 1:
        return ["--pipeline-model-parallel-layout", _layout_string(plan)]
    inner = chunks[1:-1]
    args: list[str] = []
    if not inner or chunks[0].layers != inner[0].layers:
        args += ["--decoder-first-pipeline-num-layers", str(chunks[0].layers)]
    if inner and chunks[-1].layers != inner[0].layers:
        args += ["--decoder-last-pipeline-num-layers", str(chunks[-1].layers)]
    return args


def _position_rows(model: ModelSpec, plan: Plan) -> int:
    if model.position_embedding == "learned":
        return model.position_rows
    return max(model.position_rows, plan.seq_len)


def megatron_args(model: ModelSpec, plan: Plan) -> list[str]:
    """Megatron-LM `pretrain_gpt.py` arguments for `plan`, as an argv list (flags and values as separate items).

    Raises a ConfigError naming `--launcher` when Megatron-LM cannot run the plan.
    """
    check_supported("megatron", plan)
    args = [
        "--tensor-model-parallel-size",
        str(plan.tp),
        "--pipeline-model-parallel-size",
        str(plan.pp),
        *_megatron_pipeline_args(plan),
    ]
    if plan.cp > 1:
        args += ["--context-parallel-size", str(plan.cp)]
    if plan.sequence_parallel:
        args.append("--sequence-parallel")
    args += ["--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch)]
    if plan.recompute == "full":
        args += [
            "--recompute-granularity",
            "full",
            "--recompute-method",
            "uniform",
            "--recompute-num-layers",
            "1",
        ]
    elif plan.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    if plan.zero_stage == 1:
        args.append("--use-distributed-optimizer")
    if plan.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
    if plan.overlap_param_gather and plan.zero_stage == 1:
        args.append("--overlap-param-gather")  # gathers the distributed optimizer's shards: ZeRO-1 only
    args += [
        "--num-layers",
        str(model.num_layers),
        "--hidden-size",
        str(model.hidden_size),
        "--ffn-hidden-size",
        str(model.ffn_hidden_size),
        "--num-attention-heads",
        str(model.num_attention_heads),
    ]
    if model.kv_heads < model.num_attention_heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
    args += ["--seq-length", str(plan.seq_len), "--max-position-embeddings", str(_position_rows(model, plan))]
    if model.mlp == "swiglu":
        args.append("--swiglu")
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if model.norm == "rmsnorm":
        args += ["--normalization", "RMSNorm"]
    args.append("--bf16")
    return args


def megatron_notes(model: ModelSpec, plan: Plan) -> list[str]:
    """What the arguments cannot say: model features without a documented flag, and planning assumptions.

    Each line starts with `#`.
    """
    undocumented = "launchers.md documents no flag for it; set it to match"
    notes = [
        f"# position embedding: {model.position_embedding} ({undocumented})",
        f"# biases: qkv {'yes' if model.qkv_bias else 'no'}, other linear layers "
        f"{'yes' if model.linear_bias else 'no'} ({undocumented})",
        f"# dropout: {'yes' if model.dropout else 'none'} ({undocumented})",
        f"# vocabulary: {model.vocab_size} rows as planned; its size comes from the tokenizer, not from these flags",
    ]
    if model.mlp == "squared-relu":
        notes.append(f"# MLP activation: squared ReLU ({undocumented})")
    if model.head_size * model.num_attention_heads != model.hidden_size:
        notes.append(f"# head width {model.head_size} ≠ hidden size / heads ({undocumented})")
    if model.position_embedding == "learned" and plan.seq_len > model.position_rows:
        notes.append(
            f"# the learned position table has {model.position_rows} rows, fewer than the sequence length "
            f"{plan.seq_len}: --max-position-embeddings must cover it"
        )
    if not plan.flash_attention:
        notes.append("# pplan assumed attention without flash attention (full score matrices kept)")
    if plan.grad_dtype == "bf16":
        notes.append(f"# pplan assumed bf16 gradients ({undocumented})")
    return notes


def megatron_text(model: ModelSpec, plan: Plan) -> str:
    """The arguments as a ready-to-paste shell fragment: comments first, then one flag per line."""
    args = megatron_args(model, plan)
    groups: list[list[str]] = []
    for token in args:
        if token.startswith("--"):
            groups.append([token])
        else:
            groups[-1].append(token)
    lines = [
        f"# Megatron-LM arguments from pplan: {_plan_line(model, plan)}",
        f"# launch on {plan.gpus} GPUs in all (the world size; Megatron derives d = {plan.dp} from it)",
        *megatron_notes(model, plan),
    ]
    flags = ["    " + " ".join(shlex.quote(t) for t in g) for g in groups]
    lines += [f"{f} \\" for f in flags[:-1]] + flags[-1:]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------------- torchtitan


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
        edges = _edge_fewer_layers(chunk_layers)
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
        f"# torchtitan job config (v0.2.x TOML) from pplan: {_plan_line(model, plan)}",
        f"# launch on {plan.gpus} GPUs in all; the [model] section is yours to set: pick torchtitan's flavor for "
        f"{model.name} (launchers.md documents no model fields)",
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


def launcher_text(launcher: str, model: ModelSpec, plan: Plan) -> str:
    """What `--format megatron|torchtitan` prints: the flags, or the TOML followed by its overrides as a comment.

    Raises ConfigError naming `--launcher` when the launcher cannot run the plan.
    """
    check_supported(launcher, plan)
    if _launcher(launcher) == "megatron":
        return megatron_text(model, plan)
    return (
        torchtitan_toml(model, plan).rstrip("\n")
        + "\n\n# the same as command-line overrides:\n# "
        + torchtitan_overrides(model, plan)
    )
