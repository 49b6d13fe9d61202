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
RUN_NAME = re.compile(
    r"\b(?:pretrain|finetune|sft|lora)?_?([a-z][a-z0-9_.]*?)_(\d+)nodes?_((?:[a-z]+\d+_?)+)"
    r"(?:_?(\d+)mbs)?(?:_(\d+)gbs)?",
    re.IGNORECASE,
)
NAME_TOKEN = re.compile(r"(tp|pp|cp|vp|ep|etp)(\d+|None)", re.IGNORECASE)
BATCH_TOKEN = re.compile(r"(\d+)(mbs|gbs|nodes?|gpus|seq)(?![a-z])", re.IGNORECASE)
DUMP = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(?:=|:)\s*('[^']*'|\"[^\"]*\"|<[^>]*>|[^,\s(){}\[\]]+)")
PRECISIONS = ("mxfp8", "fp8_cs", "fp8_mx", "fp8_ds", "fp8_sc", "fp8", "bf16", "fp16")
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


def run_name(lines: list[Line]) -> tuple[dict[str, tuple[Any, str]], dict[str, tuple[Any, str]]]:
    """The performance scripts' run name: Megatron readings (parallel sizes, batches) and extra readings (model
    name, precision, nodes) under pplan's names."""
    raw: dict[str, tuple[Any, str]] = {}
    extra: dict[str, tuple[Any, str]] = {}
    for line in lines:
        m = RUN_NAME.search(line.text)
        if not m:
            continue
        where = f"run name, line {line.number}"
        name = m.group(0)
        for tok in NAME_TOKEN.finditer(name):
            key = RUN_NAME_NAMES[tok.group(1).lower()]
            got = value(tok.group(2))
            if got is not None:
                raw.setdefault(key, (got, where))
        for tok in BATCH_TOKEN.finditer(name):
            unit = tok.group(2).lower()
            amount = int(tok.group(1))
            if unit == "mbs":
                raw.setdefault("micro_batch_size", (amount, where))
            elif unit == "gbs":
                raw.setdefault("global_batch_size", (amount, where))
            elif unit.startswith("node"):
                extra.setdefault("nodes", (amount, where))
            elif unit == "gpus":
                extra.setdefault("gpus", (amount, where))
        head = m.group(1).lower()
        for precision in PRECISIONS:
            marker = f"_{precision}"
            if marker in head + "_":
                head = head.split(marker)[0]
                extra.setdefault(
                    "precision",
                    (
                        "bf16" if precision in ("bf16", "fp16") else "mxfp8" if "mx" in precision else "fp8",
                        where,
                    ),
                )
                break
        extra.setdefault("model_name", (head, where))
        break
    return raw, extra


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
