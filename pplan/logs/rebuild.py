"""Rebuilding a run's plan from what its log printed (pplan.logs.record.LogRecord): the model (a bundled model
whose shape matches the logged one, else the logged shape itself), the hardware (from the GPU name) and the plan
request (the logged axes and batches), with the user's flags on top and pplan's assumptions for what neither gives,
each said. A log that lacks something only a flag can give is refused in one line naming the flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pplan.errors import ConfigError
from pplan.logs.record import STACK_BRIDGE, STACK_MEGATRON, STACK_TORCHTITAN, LogRecord
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import list_profiles, load_hardware, load_model
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

SHAPE = ("num_layers", "hidden_size", "num_attention_heads")
"""Without these (or a model name pplan bundles) no model can be built: --model is needed."""
GPU_PROFILES = (
    (re.compile(r"GB200", re.I), "gb200-nvl72"),
    (re.compile(r"B200", re.I), "b200-180gb"),
    (re.compile(r"H200|GH200", re.I), "h200-sxm-141gb"),
    (re.compile(r"H800", re.I), "h800-sxm-80gb"),
    (re.compile(r"H100", re.I), "h100-sxm-80gb"),
    (re.compile(r"A100.*\b40\s*G", re.I), "a100-sxm-40gb"),
    (re.compile(r"A100|A800", re.I), "a100-sxm-80gb"),
)
"""A GPU name as logs print it → pplan's bundled hardware profile (first match wins)."""
PLAN_FIELDS = (
    "gpus",
    "global_batch",
    "micro_batch",
    "seq_len",
    "tp",
    "pp",
    "vp",
    "cp",
    "ep",
    "etp",
    "sequence_parallel",
    "zero_stage",
    "recompute",
    "recompute_method",
    "recompute_layers",
    "precision",
    "grad_dtype",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "tp_comm_overlap",
    "first_stage_layers",
    "last_stage_layers",
    "moe_dispatcher",
    "schedule",
    "stack",
)
"""Plan fields a log can give."""
ASSUMED_SAID = ("micro_batch", "seq_len", "tp", "pp", "cp", "ep", "precision", "recompute", "zero_stage")
"""Plan fields whose assumed value is printed when the log does not give them (the rest keep pplan's defaults
silently: they move the step time little)."""


@dataclass
class Rebuilt:
    """The plan rebuilt from a log and every field's provenance."""

    model: ModelSpec
    hardware: HardwareSpec
    request: PlanRequest
    model_source: str
    hardware_source: str
    read: dict[str, str] = field(default_factory=dict)
    """Plan field → where its value came from (the log's line, or "flag")."""
    assumed: list[str] = field(default_factory=list)
    """One line per field neither the log nor a flag gave."""


def hardware_for(record: LogRecord, given: str | None) -> tuple[HardwareSpec, str]:
    """The hardware: the flag's, else the bundled profile of the logged GPU; refused naming --hardware."""
    if given is not None:
        return load_hardware(given), f"--hardware {given}"
    name = record.gpu_name
    if name is None:
        raise ConfigError(
            "--hardware",
            "the log names no GPU (Megatron-LM and NeMo do not print it)",
            "pass the GPU it ran on, e.g. --hardware h100-sxm-80gb (pplan profiles lists them)",
        )
    for pattern, profile in GPU_PROFILES:
        if pattern.search(name):
            return load_hardware(profile), f"{profile} (the log's GPU: {name})"
    raise ConfigError(
        "--hardware",
        f"pplan has no profile for the log's GPU {name!r}",
        "pass a hardware profile, e.g. --hardware my-gpu.toml",
    )


def _candidates(name: str) -> list[str]:
    low = name.lower().replace("_", "-").replace(".", "")
    out = [low, re.sub(r"llama3?1-", "llama3-", low), re.sub(r"^llama31", "llama3", low)]
    out += [re.sub(r"^(llama\d)-?(\d)", r"\1-\2", x) for x in list(out)]
    return list(dict.fromkeys(out))


def _matches(spec: ModelSpec, record: LogRecord) -> bool:
    checks = {
        "num_layers": spec.num_layers,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_attention_heads,
        "num_kv_heads": spec.kv_heads,
        "ffn_hidden_size": spec.ffn_hidden_size if spec.moe is None else None,
        "num_experts": spec.moe.num_experts if spec.moe else None,
        "top_k": spec.moe.top_k if spec.moe else None,
        "expert_ffn_hidden_size": spec.moe.expert_ffn_hidden_size if spec.moe else None,
    }
    for key, want in checks.items():
        got = record.value(key)
        if got is not None and want is not None and got != want:
            return False
    if (record.value("num_experts") is None) != (spec.moe is None) and record.value(
        "num_experts"
    ) is not None:
        return False
    return all(record.value(k) is not None for k in SHAPE)


def model_for(record: LogRecord, given: str | None) -> tuple[ModelSpec, str, list[str]]:
    """The model: the flag's, else a bundled model whose shape matches the log's (its vocabulary the logged padded
    one), else the logged shape; assumptions for a built shape's unlogged fields."""
    if given is not None:
        return load_model(given), f"--model {given}", []
    bundled = {entry.name: entry for entry in list_profiles("models")}
    if all(record.value(k) is not None for k in SHAPE):
        vocab = record.value("vocab_size")
        matching = [(name, spec) for name in bundled if _matches(spec := load_model(name), record)]
        if isinstance(
            vocab, int
        ):  # prefer the model whose vocabulary the logged (padded) one is closest above
            matching.sort(key=lambda pair: (pair[1].vocab_size > vocab, abs(vocab - pair[1].vocab_size)))
        hint = record.value("model_name")
        if isinstance(hint, str):  # a name the log gives (a run name, a config class) breaks a tie of shapes
            named = _candidates(hint)
            matching.sort(key=lambda pair: pair[0] not in named)
        if matching:
            spec, source, notes = _bundled_match(*matching[0], record)
            others = [name for name, _ in matching[1:]]
            if others and not isinstance(vocab, int):
                notes.append(f"the logged shape matches {', '.join(others)} too; pass --model to choose")
            return spec, source, notes
        return _built(record)
    hint = record.value("model_name")
    if isinstance(hint, str):
        for candidate in _candidates(hint):
            if candidate in bundled:
                where = record.fields["model_name"].source
                return load_model(candidate), f"{candidate} (bundled; the log names {hint!r}, {where})", []
    missing = ", ".join(k for k in SHAPE if record.value(k) is None)
    raise ConfigError(
        "--model",
        f"the log gives no model shape ({missing} not printed) and no model name pplan bundles",
        "pass the model, e.g. --model llama3-8b or --model config.json",
    )


def _bundled_match(name: str, spec: ModelSpec, record: LogRecord) -> tuple[ModelSpec, str, list[str]]:
    """A bundled model whose shape the log's matches: its unlogged fields said, the logged padded vocabulary kept."""
    vocab = record.value("vocab_size")
    shape = {
        "num_kv_heads": spec.kv_heads,
        "ffn_hidden_size": spec.ffn_hidden_size,
        "vocab_size": spec.vocab_size,
    }
    notes = [f"{k} = {v:,} ({name}'s; not in the log)" for k, v in shape.items() if record.value(k) is None]
    if isinstance(vocab, int) and vocab != spec.vocab_size:
        notes.append(f"vocabulary {vocab:,} as logged (padded; {name} has {spec.vocab_size:,})")
        spec = spec.model_copy(update={"vocab_size": vocab})
    return spec, f"{name} (bundled; its shape matches the logged one)", notes


def _built(record: LogRecord) -> tuple[ModelSpec, str, list[str]]:
    notes: list[str] = []

    def get(key: str, default: Any, why: str) -> Any:
        got = record.value(key)
        if got is None:
            notes.append(f"{key} = {default} ({why})")
            return default
        return got

    hidden = record.value("hidden_size")
    ffn = get("ffn_hidden_size", 4 * hidden, "4 × hidden_size")
    data: dict[str, Any] = {
        "name": "from-log",
        "description": "the model shape a training log printed",
        "source": "pplan explain --from-log",
        "num_layers": record.value("num_layers"),
        "hidden_size": hidden,
        "num_attention_heads": record.value("num_attention_heads"),
        "num_kv_heads": record.value("num_kv_heads"),
        "head_dim": record.value("head_dim")
        if record.value("head_dim") != hidden // record.value("num_attention_heads")
        else None,
        "ffn_hidden_size": ffn,
        "mlp": get("mlp", "swiglu", "not logged; most current models"),
        "norm": get("norm", "rmsnorm", "not logged; most current models"),
        "vocab_size": get("vocab_size", 128256, "not logged; Llama 3's"),
        "tied_embeddings": get("tied_embeddings", False, "not logged"),
        "seq_len": record.value("seq_len") or 4096,
        "position_embedding": record.value("position_embedding") or "rope",
        "linear_bias": bool(record.value("linear_bias", False)),
        "qkv_bias": bool(record.value("qkv_bias", False)),
    }
    experts = record.value("num_experts")
    if experts:
        data["moe"] = {
            "num_experts": experts,
            "top_k": get("top_k", 2, "not logged"),
            "expert_ffn_hidden_size": record.value("expert_ffn_hidden_size") or ffn,
            "shared_expert_ffn_hidden_size": record.value("shared_expert_ffn_hidden_size") or 0,
            "first_dense_layers": record.value("first_dense_layers") or 0,
            "layer_frequency": record.value("moe_layer_frequency") or 1,
        }
    try:
        spec = ModelSpec.model_validate(data)
    except ValueError as err:
        raise ConfigError(
            "--model",
            f"the logged shape is not a model pplan can build ({str(err).splitlines()[0]})",
            "pass the model, e.g. --model llama3-8b",
        ) from None
    return spec, "built from the logged shape (no bundled model matches it)", notes


def rebuild(
    record: LogRecord,
    model: str | None,
    hardware: str | None,
    flags: dict[str, Any],
    defaults: dict[str, Any],
) -> Rebuilt:
    """The plan of `record` (module docstring): `flags` are the plan settings the user gave (they win over the
    log), `defaults` every other setting's value (explain's)."""
    hw, hw_source = hardware_for(record, hardware)
    spec, model_source, model_notes = model_for(record, model)
    values = dict(defaults)
    read: dict[str, str] = {}
    assumed: list[str] = [f"model: {note}" for note in model_notes]
    logged = {k: record.fields[k] for k in PLAN_FIELDS if k in record.fields}
    for key, got in logged.items():
        values[key] = got.value
        read[key] = got.source
    if "gpus" not in logged and "gpus" not in flags:
        nodes = record.value("nodes")
        if isinstance(nodes, int):
            values["gpus"] = nodes * hw.gpus_per_node
            read["gpus"] = f"{nodes} node(s) of the run name × {hw.gpus_per_node} GPUs per node of {hw.name}"
        else:
            raise ConfigError(
                "--gpus",
                "the log gives no world size (no arguments block, world line or device mesh)",
                "pass the run's GPU count, e.g. --gpus 64",
            )
    if "global_batch" not in logged and "global_batch" not in flags:
        raise ConfigError(
            "--global-batch",
            "the log gives no global batch size",
            "pass the run's global batch in sequences, e.g. --global-batch 512",
        )
    natural = {
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "ep": 1,
        "etp": 1,
        "vp": None,
        "micro_batch": 1,
        "seq_len": spec.seq_len,
        "recompute": "none",
        "precision": "bf16",
        "zero_stage": 0,
        "stack": record.stack or STACK_MEGATRON,
    }
    for key, default in natural.items():
        if key not in logged and key not in flags:
            values[key] = default
            if key in ASSUMED_SAID and not (key in ("ep", "etp") and spec.moe is None):
                assumed.append(f"{key} = {default} (not in the log; pass its flag to change it)")
    values.update(
        flags
    )  # the derivations below see the flags' axes (they are applied again, and said, below)
    if record.stack == STACK_TORCHTITAN and "zero_stage" not in logged and "zero_stage" not in flags:
        tp, pp, cp = (values[k] or 1 for k in ("tp", "pp", "cp"))
        dp = values["gpus"] // max(1, tp * pp * cp)
        values["zero_stage"] = 3 if dp > 1 else 0
        assumed = [a for a in assumed if not a.startswith("zero_stage")]
        assumed.append(
            f"zero_stage = {values['zero_stage']} (torchtitan shards over data parallel with FSDP2)"
        )
    mesh = record.value("mesh")
    mesh = mesh if isinstance(mesh, dict) else {}
    if record.stack == STACK_TORCHTITAN and "shard_group" not in flags:
        shard = mesh.get("dp_shard", record.value("dp_shard", 1)) or 1
        replicate = mesh.get("dp_replicate", record.value("dp_replicate", 1)) or 1
        if shard > 1 and replicate > 1:
            values["shard_group"] = shard
            read["shard_group"] = f"device mesh: HSDP, {replicate} replicas of {shard}-way shards"
    if values.get("schedule") in ("interleaved-1f1b", "looped-bfs", "interleaved-zb") and not values.get(
        "vp"
    ):
        values["vp"] = 2
        assumed.append("vp = 2 (torchtitan's multi-stage schedules default to two stages per rank)")
    if "sequence_parallel" not in logged and "sequence_parallel" not in flags:
        values["sequence_parallel"] = (values["tp"] or 1) > 1
    if record.stack == STACK_BRIDGE:
        _bridge_recipe(values, logged, flags, assumed)
    if "etp" not in logged and "etp" not in flags and record.stack == STACK_MEGATRON and spec.moe is not None:
        values["etp"] = values["tp"]  # Megatron-Core: expert TP defaults to TP
    if "schedule" not in logged and "schedule" not in flags:
        vp = values.get("vp")
        values["schedule"] = "interleaved-1f1b" if vp and vp > 1 else "1f1b"
    if values.get("vp") == 1 and values["schedule"] == "1f1b":
        values["vp"] = None
    if spec.moe is None:
        for key in ("ep", "etp", "moe_dispatcher"):
            read.pop(key, None)  # a dense model's logged expert sizes (1) are no part of its plan
            if key in defaults:
                values[key] = defaults[key]
            else:
                values.pop(key, None)
    for key, got in flags.items():
        values[key] = got
        read[key] = "flag"
    dp = record.value("dp")
    if (
        record.stack == STACK_TORCHTITAN
        and isinstance(dp, int)
        and "gpus" not in flags
        and "mesh" not in record.fields
    ):
        values["gpus"] = dp * values["tp"] * values["pp"] * values["cp"]  # the degrees may be flags
        read["gpus"] = f"data-parallel degree {dp} × tp × pp × cp"
    try:
        request = PlanRequest(**values)
    except (TypeError, ValueError) as err:
        raise ConfigError(
            "--from-log",
            f"the logged settings are not a plan pplan can build ({err})",
            "pass the axes as flags (--tp, --pp, ...)",
        ) from None
    request = _plannable(spec, request, flags, defaults, assumed)
    return Rebuilt(spec, hw, request, model_source, hw_source, read, assumed)


BRIDGE_RECIPE = "NeMo 2's and Megatron-Bridge's performance recipes"


def _bridge_recipe(
    values: dict[str, Any], logged: dict[str, Any], flags: dict[str, Any], assumed: list[str]
) -> None:
    """What NeMo 2's and Megatron-Bridge's performance recipes run where the log does not say (a run name, no
    printed configuration): the distributed optimizer, gradients reduced in BF16, TP communication overlapped with
    sequence parallelism, FP8 weights gathered in FP8 (the same pplan assumes of the public NeMo runs it is validated
    on, pplan.validation.recent's STACK_ASSUMED); each said as assumed."""
    tp = values.get("tp") or 1
    recipe = {
        "zero_stage": 1,
        "grad_dtype": "bf16",
        "tp_comm_overlap": tp > 1 and bool(values.get("sequence_parallel")),
        "fp8_param_gather": values.get("precision") not in (None, "bf16"),
    }
    for key, got in recipe.items():
        if key in logged or key in flags:
            continue
        values[key] = got
        assumed[:] = [a for a in assumed if not a.startswith(f"{key} =")]
        if got is not False:  # an overlap or gather the run does not use goes unsaid, as pplan's default
            assumed.append(f"{key} = {got} ({BRIDGE_RECIPE}; not in the log)")


DROPPABLE = {
    "--tp-comm-overlap": "tp_comm_overlap", "--recompute-layers": "recompute_layers",
    "--recompute-method": "recompute_method", "--overlap-grad-reduce": "overlap_grad_reduce",
    "--overlap-param-gather": "overlap_param_gather", "--moe-dispatcher": "moe_dispatcher",
    "--grad-dtype": "grad_dtype", "--sequence-parallel": "sequence_parallel",
    "--first-stage-layers": "first_stage_layers", "--last-stage-layers": "last_stage_layers",
}  # fmt: skip
"""Logged knobs that move a step little: where pplan cannot price the logged value (a combination it refuses), the
knob is left at pplan's default and said, rather than the whole log refused."""


def _plannable(
    spec: ModelSpec, request: PlanRequest, flags: dict[str, Any], defaults: dict[str, Any], assumed: list[str]
) -> PlanRequest:
    """`request` made a plan pplan can price: the uneven split (`_uneven_split`), then each refused logged knob of
    `DROPPABLE` back at its default, said as assumed."""
    from dataclasses import replace

    from pplan.plan.configuration import make_plan

    for _ in range(len(DROPPABLE)):
        try:
            request = _uneven_split(spec, request, flags, assumed)
            make_plan(spec, request)
            return request
        except ConfigError as err:
            name = DROPPABLE.get(err.field)
            if name is None or name in flags:
                raise
            default = defaults.get(name, getattr(PlanRequest(gpus=1, global_batch=1), name))
            if getattr(request, name) == default:
                raise
            assumed.append(
                f"{name} = {default} (the logged {getattr(request, name)} is refused: {err.message})"
            )
            request = replace(request, **{name: default})
    return request


def _uneven_split(
    spec: ModelSpec, request: PlanRequest, flags: dict[str, Any], assumed: list[str]
) -> PlanRequest:
    """`request`, or where its layers do not split evenly over the p·v chunks (Llama 3.1 405B's 126 layers on
    p·v = 64, which Megatron runs by counting the embedding and the loss as layers of the first and last stage), the
    same with the remainder on the first and last chunks, said as assumed."""
    from dataclasses import replace

    from pplan.plan.configuration import make_plan

    try:
        make_plan(spec, request)
        return request
    except ConfigError as err:
        if err.field not in ("--pp", "--vp") or "first_stage_layers" in flags or "last_stage_layers" in flags:
            raise
        chunks = request.pp * (request.vp or 1)
        per = -(-spec.num_layers // chunks)
        rest = spec.num_layers - per * (chunks - 2)
        if chunks < 3 or rest < 2:
            raise
        first, last = rest // 2, rest - rest // 2
        changed = replace(request, first_stage_layers=first, last_stage_layers=last)
        make_plan(spec, changed)
    assumed.append(
        f"first_stage_layers = {first}, last_stage_layers = {last} ({spec.num_layers} layers do not divide into "
        f"{chunks} chunks: the first and last take the remainder, as Megatron's embedding and loss accounting does)"
    )
    return changed
