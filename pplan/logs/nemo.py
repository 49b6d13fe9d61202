"""NeMo 2 / Megatron-Bridge logs: the progress lines (`Training epoch 0, iteration i/N | lr: … | global_batch_size:
G | … | max_memory_reserved: <bytes> | … | train_step_timing in s: X | …`, fields in any order, numbers possibly
in scientific form), the performance scripts' run name (`pretrain_llama3_8b_bf16_1nodes_tp1_pp1_cp1_vp1_2mbs_128gbs`)
and printed configuration (dataclass reprs `name=value`, YAML dumps `name: value`), read for Megatron-Core's names.
"""

from __future__ import annotations

import re
from typing import Any

from pplan.logs.clean import Line
from pplan.logs.record import Iteration, LogRecord
from pplan.logs.values import as_int, number, value

ITERATION = re.compile(r"Training epoch\s+\d+\s*,\s*iteration\s+(\d+)\s*/\s*(\d+)\s*(.*)$", re.IGNORECASE)
RUN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*_[A-Za-z0-9_.]*")
"""A word that may be a run name: letters, digits, dots and underscores."""
NAME_TOKEN = re.compile(r"^(tp|pp|cp|vp|ep|etp)(\d+|None|none)$", re.IGNORECASE)
COUNT_TOKEN = re.compile(
    r"^(?:(\d+)(mbs|gbs|nodes?|gpus|seq)|(mbs|gbs|nodes?|gpus|seq)(\d+))$", re.IGNORECASE
)
"""`2mbs` and `mbs2` (the performance scripts of NeMo 2 and Megatron-Bridge write either order)."""
CONFIG_CLASS = re.compile(r"\b([A-Z][A-Za-z]*?\d*)Config(\d[\w.]*[A-Za-z])\s*\(")
"""NeMo 2's model config classes (`Llama3Config70B(`, `Llama31Config405B(`, `MixtralConfig8x7B(`): the model's name."""
DUMP = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(?:=|:)\s*('[^']*'|\"[^\"]*\"|<[^>]*>|[^,\s(){}\[\]]+)")
TASKS = ("pretrain", "finetune", "sft", "lora", "peft")
PRECISIONS = ("mxfp8", "fp8cs", "fp8mx", "fp8ds", "fp8sc", "fp8ss", "fp8", "bf16", "fp16")
RECIPES = ("cs", "mx", "ds", "sc", "ss")
"""The FP8 recipe a run name may add after `fp8` as a token of its own (`fp8_cs`): `mx` is MXFP8."""
RUN_NAME_NAMES = {
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "cp": "context_parallel_size",
    "vp": "virtual_pipeline_model_parallel_size",
    "ep": "expert_model_parallel_size",
    "etp": "expert_tensor_parallel_size",
}


def _fields(rest: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in rest.split("|"):
        label, sep, text = part.partition(":")
        if sep:
            out[label.strip().lower()] = text.strip().split()[0] if text.strip() else ""
    return out


def iterations(lines: list[Line], record: LogRecord) -> int:
    """Every progress line onto `record`, in seconds and bytes; the number read."""
    found = 0
    for line in sorted(lines, key=lambda ln: (ln.rank or 0, ln.number)):
        m = ITERATION.search(line.text)
        if not m:
            continue
        fields = _fields(m.group(3))
        step = None
        for label in ("train_step_timing in s", "train_step_timing", "step_time", "train_step_timing_s"):
            if label in fields:
                step = number(fields[label])
                break
        if step is None or step <= 0:
            continue
        found += 1
        tflops = number(fields["tflops_per_gpu"]) if "tflops_per_gpu" in fields else None
        batch = number(fields["global_batch_size"]) if "global_batch_size" in fields else None
        record.add_iteration(
            Iteration(int(m.group(1)), step, line.number, tflops_per_gpu=tflops, global_batch=as_int(batch))
        )
        if batch:
            record.put("global_batch", as_int(batch), f"progress line, line {line.number}")
        reserved = number(fields.get("max_memory_reserved", "x"))
        allocated = number(fields.get("max_memory_allocated", "x"))
        record.note_memory(
            round(reserved) if reserved is not None else None,
            round(allocated) if allocated is not None else None,
            "NeMo progress lines (bytes; the largest)",
        )
    return found


TQDM_STEP = re.compile(r"train_step_timing in s=([\d.eE+-]+)")
TQDM_GLOBAL = re.compile(r"global_step=([\d.]+)")


def progress_bars(lines: list[Line], record: LogRecord) -> int:
    """NeMo's Lightning progress bar (`Epoch 0: … global_step=49.0, … train_step_timing in s=2.51]`), each redraw a
    line once carriage returns are split; the number read."""
    found = 0
    for line in lines:
        step = TQDM_STEP.search(line.text)
        done = TQDM_GLOBAL.search(line.text)
        if not step or not done:
            continue
        seconds = number(step.group(1))
        count = number(done.group(1))
        if seconds is None or seconds <= 0 or count is None:
            continue
        found += 1
        record.add_iteration(Iteration(int(count), seconds, line.number))
    return found


def _name_tokens(word: str) -> list[str] | None:
    """`word` split on underscores when it reads as a run name: at least one parallel size (`tp4`) and three tokens
    of the configuration (sizes, nodes, batches); None otherwise."""
    tokens = word.split("_")
    sizes = sum(bool(NAME_TOKEN.match(t)) for t in tokens)
    counts = sum(bool(COUNT_TOKEN.match(t)) for t in tokens)
    return tokens if sizes >= 1 and sizes + counts >= 3 else None


def run_name(lines: list[Line]) -> tuple[dict[str, tuple[Any, str]], dict[str, tuple[Any, str]]]:
    """The performance scripts' run name (`pretrain_llama3_70b_fp8_8nodes_tp4_pp4_cp2_vpNone_1mbs_128gbs`, either
    order of count and unit): Megatron readings (parallel sizes, batches, sequence) and extra readings (model name,
    precision, nodes, GPUs) under pplan's names."""
    raw: dict[str, tuple[Any, str]] = {}
    extra: dict[str, tuple[Any, str]] = {}
    for line in lines:
        tokens = next((t for w in RUN_WORD.finditer(line.text) if (t := _name_tokens(w.group(0)))), None)
        if tokens is None:
            continue
        where = f"run name, line {line.number}"
        head: list[str] = []
        configured = False
        for i, tok in enumerate(tokens):
            size = NAME_TOKEN.match(tok)
            count = COUNT_TOKEN.match(tok)
            low = tok.lower()
            if size:
                configured = True
                got = value(size.group(2))
                if got is not None:
                    raw.setdefault(RUN_NAME_NAMES[size.group(1).lower()], (got, where))
            elif count:
                configured = True
                amount = int(count.group(1) or count.group(4))
                unit = (count.group(2) or count.group(3)).lower()
                key = {"mbs": "micro_batch_size", "gbs": "global_batch_size", "seq": "seq_length"}.get(unit)
                if key:
                    raw.setdefault(key, (amount, where))
                else:
                    extra.setdefault("nodes" if unit.startswith("node") else "gpus", (amount, where))
            elif low in PRECISIONS:
                after = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
                mx = "mx" in low or (low == "fp8" and after == "mx")
                chosen = "bf16" if low in ("bf16", "fp16") else "mxfp8" if mx else "fp8"
                extra.setdefault("precision", (chosen, where))
            elif not configured and not (i == 0 and low in TASKS) and low not in RECIPES:
                head.append(tok)
        if head:
            extra.setdefault("model_name", ("_".join(head).lower(), where))
        break
    return raw, extra


def config_class(lines: list[Line]) -> tuple[str, str] | None:
    """The model name a printed NeMo 2 config class gives (`llama3_70b`), and where."""
    for line in lines:
        m = CONFIG_CLASS.search(line.text)
        if m:
            return (
                f"{m.group(1)}_{m.group(2)}".lower(),
                f"config class {m.group(0)[:-1].strip()}, line {line.number}",
            )
    return None


def dumps(lines: list[Line], known: frozenset[str]) -> dict[str, tuple[Any, str]]:
    """`name=value` (printed dataclasses) and `name: value` (YAML) readings of Megatron-Core's names."""
    out: dict[str, tuple[Any, str]] = {}
    for line in lines:
        if ITERATION.search(line.text):
            continue
        for m in DUMP.finditer(line.text):
            name = m.group(1)
            if name in known and name not in out:
                text = m.group(2)
                if text.startswith("<"):  # <function silu at 0x…>
                    text = text.strip("<>").split()[1] if len(text.split()) > 1 else text
                out[name] = (value(text), f"printed configuration, line {line.number}")
    return out
