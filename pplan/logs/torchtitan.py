"""torchtitan logs: the step lines (`step: N  loss: L  memory: XGiB(P%)  tps: 1,234  tflops: T  mfu: M%`; older
releases `wps` and no `tflops`), the start-up lines (`Building <model> <flavor> with ModelArgs(...)` or `{json}`,
`Building N-D device mesh with [names], [sizes]`, `CUDA capacity: <GPU> with X GiB memory`, `Training starts at
step 1, with local batch size B, global batch size G, sequence length S, …`, activation checkpointing and Float8
lines) and a pasted job TOML.

There is no step-time field: tps is tokens per second per GPU, counted over the data-parallel rank's tokens and
divided by the non-data-parallel degree (tp·pp·cp) (torchtitan's metrics logger), so the step time is
local batch × sequence / (tps × tp·pp·cp); where tps cannot be turned into time, successive step lines'
timestamps are used.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pplan.logs.clean import Line
from pplan.logs.record import Iteration, LogRecord
from pplan.logs.values import as_int, number, size_bytes, value

STEP = re.compile(r"\bstep:\s*(\d+)\s+(.*)$")
STEP_FIELD = re.compile(r"(\w+):\s*(\d[\d.,]*(?:[eE][+-]?\d+)?)\s?(GiB|MiB|GB|MB|B)?(?:\(([\d.]+)%\))?")
BUILDING = re.compile(r"Building\s+(\w+)\s+(\S+)\s+with\s+(\w*)\s*([({].*)$")
MESH = re.compile(r"Building\s+\d+-D device mesh with\s*(\[[^\]]*\])\s*,\s*(\[[^\]]*\])")
CAPACITY = re.compile(
    r"(?:CUDA|GPU|ROCm|XPU) capacity:\s*(.+?)(?:\s*\(\d+\))?\s+with\s+([\d.]+)\s*(GiB|GB)", re.IGNORECASE
)
"""`CUDA capacity: <GPU> with X GiB memory`; releases of 2024: `GPU capacity: <GPU> (0) with X GiB memory`."""
STARTS = re.compile(r"Training starts at step \d+", re.IGNORECASE)
STARTS_PART = re.compile(
    r"(local batch size|global batch size|sequence length|gradient accumulation steps)\s+(\d+)"
)
CLI_OVERRIDE = re.compile(r"(?:^|\s)--([a-z_]+)\.([a-z_]+)(?:[ =]+(?!--)([^\s\\]+))?")
"""A command line's override of the job config (`--training.local_batch_size 2`, `--parallelism.tensor_parallel_degree=4`):
torchtitan's options are `--section.key`; a flag alone is True."""
CONFIG_FILE = re.compile(
    r"--job\.config[_-]file[ =]+\S*?(llama\d|qwen\d|deepseek_v\d|llama\d_\d)_?(\d+[bB](?:[_-][aA]\d+[bB])?)\w*\.toml"
)
"""A job config file named for its model (`./train_configs/llama3_8b.toml`): the model, when nothing else names it."""
TOML_SECTION = re.compile(r"^\s*\[([a-z_.]+)\]\s*$")
TOML_KEY = re.compile(r"^\s*([a-z_]+)\s*=\s*(.+?)\s*(?:#.*)?$")
MODEL_ARG = re.compile(r"\b(\w+)=([^,()]+|\([^)]*\))")
MESH_NAMES = {
    "dp": "dp_shard",
    "dp_shard": "dp_shard",
    "dp_replicate": "dp_replicate",
    "tp": "tp",
    "pp": "pp",
    "cp": "cp",
    "ep": "ep",
    "dp_shard_cp": "dp_shard_cp",
}
FLAVORS = {
    ("llama3", "8b"): "llama3-8b",
    ("llama3", "70b"): "llama3-70b",
    ("llama3", "405b"): "llama3-405b",
    ("llama2", "7b"): "llama2-7b",
    ("llama2", "70b"): "llama2-70b",
    ("qwen3", "30b-a3b"): "qwen3-30b-a3b",
    ("qwen3", "235b-a22b"): "qwen3-235b-a22b",
    ("deepseek_v3", "671b"): "deepseek-v3",
}
"""torchtitan's model name and flavor → pplan's bundled model of that shape."""
SCHEDULES = {
    "1f1b": "1f1b",
    "gpipe": "gpipe",
    "interleaved1f1b": "interleaved-1f1b",
    "loopedbfs": "looped-bfs",
    "interleavedzerobubble": "interleaved-zb",
    "zbvzerobubble": "zbv",
    "dualpipev": "dualpipev",
}
"""torchtitan's `pipeline_parallel_schedule` → pplan's schedule."""


TPS_DIVISOR = "tps_divisor"
"""The record field holding the tp·pp·cp the step times were derived from tps with."""


def _ffn(dim: int, multiple_of: int, multiplier: float | None) -> int:
    """torchtitan's (and Llama's) FeedForward width: 2/3 of 4·dim, times the multiplier, rounded up."""
    hidden = int(2 * 4 * dim / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def startup(lines: list[Line], record: LogRecord) -> None:
    """Start-up lines and a pasted TOML onto `record`."""
    section = ""
    toml: dict[str, tuple[Any, str]] = {}
    for line in lines:  # command-line overrides win over the file they override
        if "--" in line.text and "." in line.text:
            for o in CLI_OVERRIDE.finditer(line.text):
                got = value(o.group(3)) if o.group(3) is not None else True
                toml.setdefault(f"{o.group(1)}.{o.group(2)}", (got, f"command line, line {line.number}"))
            c = CONFIG_FILE.search(line.text)
            if c:
                name, flavor = c.group(1).lower(), c.group(2).replace("_", "-").lower()
                record.put(
                    "model_name",
                    FLAVORS.get((name, flavor), f"{name}-{flavor}"),
                    f"job config file, line {line.number}",
                )
    for line in lines:
        text = line.text
        where = f"line {line.number}"
        m = BUILDING.search(text)
        if m:
            _model(m.group(1), m.group(2), m.group(4), record, f"model build line, {where}")
        m = MESH.search(text)
        if m:
            _mesh(m.group(1), m.group(2), record, f"device mesh line, {where}")
        m = CAPACITY.search(text)
        if m and record.gpu_name is None:
            record.gpu_name = m.group(1).strip()
            record.put("gpu_name", record.gpu_name, f"CUDA capacity line, {where}")
        if STARTS.search(text):
            for part in STARTS_PART.finditer(text):
                key = {
                    "local batch size": "local_batch",
                    "global batch size": "global_batch",
                    "sequence length": "seq_len",
                    "gradient accumulation steps": "grad_accumulation",
                }[part.group(1)]
                record.put(key, int(part.group(2)), f"training start line, {where}")
        low = text.lower()
        if "activation checkpointing" in low and "applied" in low:
            kind = "full" if "full" in low else "selective" if "selective" in low else None
            record.put("recompute", kind, f"activation checkpointing line, {where}")
        if "float8" in low and ("training active" in low or "swapped to float8" in low):
            record.put("precision", "fp8", f"Float8 line, {where}")
        if "mxfp8" in low and "active" in low:
            record.put("precision", "mxfp8", f"MXFP8 line, {where}", overwrite=True)
        if ("'parallelism'" in text or '"parallelism"' in text) and "{" in text:
            _config_dict(text[text.index("{") :], toml, f"printed job config, {where}")
        s = TOML_SECTION.match(text)
        if s:
            section = s.group(1)
            continue
        k = TOML_KEY.match(text)
        if k and section:
            toml.setdefault(f"{section}.{k.group(1)}", (value(k.group(2)), f"job TOML, {where}"))
    _toml(toml, record)


def _balanced(text: str) -> str:
    """`text` up to the bracket that closes its first one (`{…}` or `(…)`, quotes respected): a printed config
    followed by whatever a log line (or a joined piece) put after it."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    depth = 0
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in pairs:
            depth += 1
        elif ch in pairs.values():
            depth -= 1
            if depth == 0:
                return text[: i + 1]
    return text


def _config_dict(text: str, toml: dict[str, tuple[Any, str]], where: str) -> None:
    """A job config printed as a dict (`Running with args: {...}`), flattened to `section.key` like the TOML."""
    import ast

    text = _balanced(text)
    try:
        loaded = json.loads(text)
    except ValueError:
        try:
            loaded = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return
    if not isinstance(loaded, dict):
        return
    for section, table in loaded.items():
        if isinstance(table, dict):
            for key, got in table.items():
                toml.setdefault(f"{section}.{key}", (got, where))


def _model(name: str, flavor: str, args: str, record: LogRecord, where: str) -> None:
    record.put("model_name", FLAVORS.get((name.lower(), flavor.lower()), f"{name}-{flavor}".lower()), where)
    got: dict[str, Any] = {}
    if args.startswith("{"):
        try:
            loaded = json.loads(_balanced(args))
            got = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            got = {}
    else:
        got = {m.group(1): value(m.group(2)) for m in MODEL_ARG.finditer(args)}
    dim = as_int(got.get("dim"))
    layers = as_int(got.get("n_layers"))
    heads = as_int(got.get("n_heads"))
    if dim:
        record.put("hidden_size", dim, where)
    if layers:
        record.put("num_layers", layers, where)
    if heads:
        record.put("num_attention_heads", heads, where)
    kv = as_int(got.get("n_kv_heads"))
    if kv:
        record.put("num_kv_heads", kv, where)
    vocab = as_int(got.get("vocab_size"))
    if vocab and vocab > 0:
        record.put("vocab_size", vocab, where)
    hidden = as_int(got.get("hidden_dim")) or as_int(got.get("inter_dim"))
    multiple = as_int(got.get("multiple_of"))
    if hidden:
        record.put("ffn_hidden_size", hidden, where)
    elif dim and multiple:
        mult = got.get("ffn_dim_multiplier")
        record.put("ffn_hidden_size", _ffn(dim, multiple, mult if isinstance(mult, float) else None), where)
    experts = as_int(got.get("n_routed_experts")) or as_int(got.get("num_experts"))
    if experts:
        record.put("num_experts", experts, where)
        record.put("top_k", as_int(got.get("n_activated_experts")) or as_int(got.get("top_k")), where)
        record.put("expert_ffn_hidden_size", as_int(got.get("moe_inter_dim")), where)
        shared = as_int(got.get("n_shared_experts")) or as_int(got.get("num_shared_experts"))
        expert = as_int(got.get("moe_inter_dim"))
        if shared and expert:  # DeepSeek's shared experts, each as wide as a routed one
            record.put("shared_expert_ffn_hidden_size", shared * expert, where)
        dense = as_int(got.get("n_dense_layers"))
        if dense:
            record.put("first_dense_layers", dense, where)
    record.put("mlp", "swiglu", f"{where} (torchtitan's models use SwiGLU)")
    record.put("norm", "rmsnorm", f"{where} (torchtitan's models use RMSNorm)")
    record.put("tied_embeddings", False, f"{where} (torchtitan's Llama: untied output)")


def _mesh(names: str, sizes: str, record: LogRecord, where: str) -> None:
    try:
        keys = [str(x) for x in json.loads(names.replace("'", '"'))]
        degrees = [int(x) for x in json.loads(sizes)]
    except (ValueError, TypeError):
        return
    mesh = dict(zip((MESH_NAMES.get(k, k) for k in keys), degrees, strict=False))
    if "dp_shard_in_ep" in mesh:  # the expert mesh: ep = dp_shard_in_ep × cp, dp_shard = mod_ep × in_ep
        mesh.setdefault("ep", mesh["dp_shard_in_ep"] * mesh.get("cp", 1))
        mesh.setdefault("dp_shard", mesh["dp_shard_in_ep"] * mesh.get("dp_shard_mod_ep", 1))
    record.put("mesh", mesh, where)
    for key, field in (("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("ep", "ep")):
        if key in mesh:
            record.put(field, mesh[key], where)
    if "dp_shard_in_ep" in mesh:
        record.put("gpus", math.prod(d for k, d in mesh.items() if k not in ("ep", "dp_shard")), where)
    elif "ep" not in mesh:
        record.put("gpus", math.prod(d for k, d in mesh.items() if k != "ep"), where)


def _toml(toml: dict[str, tuple[Any, str]], record: LogRecord) -> None:
    def put(key: str, field: str) -> None:
        if key in toml:
            got = as_int(toml[key][0])
            if got is not None and got > 0:
                record.put(field, got, toml[key][1])

    for old in ("training", "experimental"):  # releases of 2024 kept the degrees under [training]
        put(f"{old}.tensor_parallel_degree", "tp")
        put(f"{old}.pipeline_parallel_degree", "pp")
        put(f"{old}.data_parallel_degree", "dp_shard")
        put(f"{old}.data_parallel_shard_degree", "dp_shard")
        put(f"{old}.context_parallel_degree", "cp")
    put("parallelism.tensor_parallel_degree", "tp")
    put("parallelism.pipeline_parallel_degree", "pp")
    put("parallelism.context_parallel_degree", "cp")
    put("parallelism.expert_parallel_degree", "ep")
    put("parallelism.expert_tensor_parallel_degree", "etp")
    put("parallelism.data_parallel_shard_degree", "dp_shard")
    put("parallelism.data_parallel_replicate_degree", "dp_replicate")
    put("parallelism.pipeline_parallel_microbatch_size", "pp_microbatch")
    put("training.local_batch_size", "local_batch")
    put("training.batch_size", "local_batch")
    put("training.global_batch_size", "global_batch")
    put("training.seq_len", "seq_len")
    if "model.name" in toml and "model.flavor" in toml:
        name, flavor = str(toml["model.name"][0]), str(toml["model.flavor"][0])
        record.put(
            "model_name",
            FLAVORS.get((name.lower(), flavor.lower()), f"{name}-{flavor}".lower()),
            toml["model.name"][1],
        )
    schedule = toml.get("parallelism.pipeline_parallel_schedule")
    if schedule and isinstance(schedule[0], str):
        chosen = SCHEDULES.get(schedule[0].lower().replace("-", "").replace("_", ""))
        record.put("schedule", chosen, schedule[1])
    mode = toml.get("activation_checkpoint.mode")
    if mode and str(mode[0]).lower() in ("full", "selective", "none"):
        record.put("recompute", str(mode[0]).lower(), mode[1])
    converters = toml.get("model.converters")
    if converters and "float8" in str(converters[0]):
        record.put("precision", "fp8", converters[1])
    if converters and "mx" in str(converters[0]):
        record.put("precision", "mxfp8", converters[1], overwrite=True)


def steps(lines: list[Line], record: LogRecord) -> int:
    """Every training step line onto `record`; the number read. Step times from tps where the degrees and the
    local batch are known, else from the timestamps of successive lines."""
    rows: list[tuple[int, Line, dict[str, tuple[float, str | None, float | None]]]] = []
    for line in sorted(lines, key=lambda ln: (ln.rank or 0, ln.number)):
        if "validat" in line.text.lower():
            continue
        m = STEP.search(line.text)
        if not m:
            continue
        fields = {}
        for f in STEP_FIELD.finditer(m.group(2)):
            num = number(f.group(2))
            if num is not None:
                fields[f.group(1).lower()] = (num, f.group(3), number(f.group(4)) if f.group(4) else None)
        if "tps" not in fields and "wps" not in fields and "loss" not in fields:
            continue
        rows.append((int(m.group(1)), line, fields))
    seen: set[int] = set()
    unique = []
    for number_, line, fields in rows:
        if number_ not in seen:
            seen.add(number_)
            unique.append((number_, line, fields))
    unique.sort(key=lambda r: r[0])
    tokens_per_rank = _tokens_per_step(record)
    non_dp = (record.value("tp", 1) or 1) * (record.value("pp", 1) or 1) * (record.value("cp", 1) or 1)
    previous: tuple[int, float] | None = None
    for number_, line, fields in unique:
        tps = fields.get("tps", fields.get("wps"))
        step_s: float | None = None
        if tps and tps[0] > 0 and tokens_per_rank:
            step_s = tokens_per_rank / (tps[0] * non_dp)
            record.put(TPS_DIVISOR, non_dp, "tp·pp·cp as the log gives them (1 where it gives none)")
        elif line.time_s is not None and previous is not None and number_ > previous[0]:
            step_s = (line.time_s - previous[1]) / (number_ - previous[0])
        if line.time_s is not None:
            previous = (number_, line.time_s)
        mem = fields.get("memory")
        if mem is not None and mem[1]:
            record.note_memory(size_bytes(str(mem[0]), mem[1]), None, "torchtitan step lines (GiB, reserved)")
        mfu = fields.get("mfu")
        tflops = fields.get("tflops")
        reading = Iteration(
            number_,
            step_s or 0.0,
            line.number,
            tflops_per_gpu=tflops[0] if tflops else None,
            tokens_per_s_per_gpu=tps[0] if tps else None,
            mfu=mfu[0] / 100 if mfu else None,
        )
        if (
            tps
            and tps[0] > 0
            and not tokens_per_rank
            and all(it.number != number_ for it in record.tps_steps)
        ):
            record.tps_steps.append(reading)
        if step_s is None or step_s <= 0:
            continue
        record.add_iteration(reading)
    if record.tps_steps and not record.iterations:
        record.notes.append(
            "torchtitan step lines carry tps but the log gives no local batch: the step is global batch × sequence "
            "/ (GPUs × tps) once the plan is known (--global-batch, --gpus, --seq-len where the log lacks them)"
        )
    elif unique and not record.iterations:
        record.notes.append(
            "torchtitan step lines found, but no step time: tps needs the local batch and sequence length "
            "(the 'Training starts' line or the TOML), and the lines carry no timestamps"
        )
    return len(unique)


def for_plan(
    record: LogRecord, gpus: int, global_batch: int, seq_len: int, tp: int, pp: int, cp: int
) -> LogRecord:
    """`record` with its step times for the rebuilt plan. Where the log gives tps but no local batch, every step is
    global batch × sequence / (GPUs × tps) (tps = the rank's tokens / (step × tp·pp·cp), and the ranks' tokens sum
    to the global batch's over the data-parallel degree), in place of steps timed from the timestamps; else the
    tps-derived steps are rescaled to the plan's tp·pp·cp (`rescaled`)."""
    from dataclasses import replace

    if not record.tps_steps:
        return rescaled(record, tp, pp, cp)
    tokens = global_batch * seq_len
    its = [
        replace(it, step_s=tokens / (gpus * (it.tokens_per_s_per_gpu or math.inf))) for it in record.tps_steps
    ]
    out = replace(record, iterations=its)
    out.step_source = "step times from tps: global batch × sequence / (GPUs × tps), of the rebuilt plan"
    return out


def rescaled(record: LogRecord, tp: int, pp: int, cp: int) -> LogRecord:
    """`record` with its tps-derived step times for the plan's tp·pp·cp where the log did not give them (torchtitan's
    tps is divided by that degree: module docstring); unchanged where they agree or no step came from tps."""
    from dataclasses import replace

    used = record.value(TPS_DIVISOR)
    degree = tp * pp * cp
    if not used or used == degree:
        return record
    factor = used / degree
    out = replace(record, iterations=[replace(it, step_s=it.step_s * factor) for it in record.iterations])
    out.fields = {**record.fields}
    out.put(TPS_DIVISOR, degree, "tp·pp·cp of the plan (flags)", overwrite=True)
    return out


def _accumulation(record: LogRecord) -> int:
    """The micro-batches each rank runs per step: as logged, else global batch / (local batch × data-parallel
    degree) where the TOML gives a global batch (releases of 2025 accumulate up to it), else 1."""
    logged = record.value("grad_accumulation")
    if logged:
        return int(logged)
    local, total = record.value("local_batch"), record.value("global_batch")
    mesh = record.value("mesh") if isinstance(record.value("mesh"), dict) else {}
    dp = (mesh.get("dp_shard") or record.value("dp_shard") or 0) * (
        mesh.get("dp_replicate") or record.value("dp_replicate") or 1
    )
    if local and total and dp and total % (local * dp) == 0 and total > local * dp:
        steps = int(total // (local * dp))
        record.put("grad_accumulation", steps, "global batch / (local batch × data-parallel degree)")
        return steps
    return 1


def _tokens_per_step(record: LogRecord) -> int | None:
    local = record.value("local_batch")
    seq = record.value("seq_len")
    accumulation = _accumulation(record)
    if not local or not seq:
        return None
    return int(local) * int(seq) * int(accumulation)
