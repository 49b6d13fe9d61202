"""Megatron-LM / Megatron-Core logs: the arguments block (`  name ....... value`, sorted, between the
`arguments` and `end of arguments` rules), the world line (`using world size: W, data-parallel size: D, …`), a
pasted command line (`--tensor-model-parallel-size 4`), the iteration lines (` iteration  N/  M | … | elapsed
time per iteration (ms): X | …`, X the mean over the logging interval) and the memory lines (`[Rank r] (after k
iterations) memory (MB) | … | max reserved: d`, MiB, one per pipeline stage).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from pplan.logs.clean import Line
from pplan.logs.record import Iteration, LogRecord
from pplan.logs.values import as_int, number, size_bytes, value

ARGUMENT = re.compile(r"^\s*([A-Za-z_]\w*)\s*\.{2,}\s?(.*)$")
WORLD = re.compile(r"using world size:", re.IGNORECASE)
WORLD_PART = re.compile(r"([a-z][a-z\-]*)[\s-]+size:\s*(\d+)", re.IGNORECASE)
WORLD_NAMES = {
    "world": "world_size",
    "data-parallel": "data_parallel_size",
    "context-parallel": "context_parallel_size",
    "tensor-model-parallel": "tensor_model_parallel_size",
    "pipeline-model-parallel": "pipeline_model_parallel_size",
    "expert-model-parallel": "expert_model_parallel_size",
    "expert-tensor-parallel": "expert_tensor_parallel_size",
}
FLAG = re.compile(r"(?:^|\s)--([a-z][a-z0-9_\-]*[a-z0-9])(?:[ =]+(?!--)([^\s\\]+))?")
LAUNCHER_FLAGS = {"nproc_per_node": "nproc_per_node", "nnodes": "nnodes"}
"""torchrun's flags (either spelling, `--nproc-per-node` or `--nproc_per_node`) that give the world size."""
ITERATION = re.compile(r"\biteration\s+(\d+)\s*(?:/\s*(\d+)\s*)?\|(.*)$")
MEMORY = re.compile(
    r"(?:\[Rank\s*\d+\]\s*)?\(after\s+\d+\s+iterations?\)\s*memory\s*\((MB|MiB|GB|GiB|bytes)\)\s*\|(.*)$",
    re.IGNORECASE,
)
STEP_MS = ("elapsed time per iteration (ms)",)
STEP_S = ("elapsed time per iteration (s)",)
TFLOPS = ("throughput per gpu (tflop/s/gpu)", "tflops/gpu", "tflop/s/gpu")
TOKENS = ("tokens per gpu (tokens/s/gpu)", "tokens/s/gpu")


BLOCK_START = re.compile(r"^-{3,}\s*arguments\s*-{3,}\s*$")
BLOCK_END = re.compile(r"^-{3,}\s*end of arguments\s*-{3,}\s*$")
UNPRINTED_DEFAULTS = {
    "swiglu": False,
    "normalization": "LayerNorm",
    "position_embedding_type": "learned_absolute",
    "untie_embeddings_and_output_weights": False,
    "add_bias_linear": True,
}
"""Megatron-LM's defaults for the model's kinds. The block prints every argument the release has, so a whole block
without one of these comes from a release without the option, which had the default (GeLU, LayerNorm, learned
positions, tied output, biases: GPT-2's and GPT-3's)."""
WHOLE_BLOCK_ARGUMENTS = 80
"""A block counts as whole (every argument of its release printed) with both rules and at least this many lines:
releases since 2021 print well over a hundred; a block shortened by hand does not say what it left out."""


def arguments(lines: list[Line]) -> dict[str, tuple[Any, str]]:
    """The arguments block's readings (anywhere in the log: an excerpt may hold part of it); where the whole block
    is there (both rules), the defaults of `UNPRINTED_DEFAULTS` it does not print."""
    out: dict[str, tuple[Any, str]] = {}
    start = end = None
    count = 0
    for line in lines:
        if start is None and BLOCK_START.match(line.text):
            start = line.number
        elif start is not None and end is None and BLOCK_END.match(line.text):
            end = line.number
        m = ARGUMENT.match(line.text)
        if m and m.group(1) not in out:
            out[m.group(1)] = (value(m.group(2)), f"arguments block, line {line.number}")
            count += start is not None and end is None
    if start is not None and end is not None and count >= WHOLE_BLOCK_ARGUMENTS and "num_layers" in out:
        where = f"arguments block, lines {start}–{end} (not printed: the release's default)"
        for name, default in UNPRINTED_DEFAULTS.items():
            out.setdefault(name, (default, where))
    return out


def world(lines: list[Line]) -> dict[str, tuple[Any, str]]:
    """The world line's sizes, in the arguments block's names."""
    out: dict[str, tuple[Any, str]] = {}
    for line in lines:
        if not WORLD.search(line.text):
            continue
        for m in WORLD_PART.finditer(line.text):
            word = m.group(1).lower()
            if word.startswith("encoder"):
                continue
            # "…sizes: Nonetensor-model-parallel size: 4" (a release that lost a separator): match the ending
            key = next(
                (
                    v
                    for k, v in WORLD_NAMES.items()
                    if word == k or (word.endswith(k) and not word.endswith("-" + k))
                ),
                None,
            )
            if key and key not in out:
                out[key] = (int(m.group(2)), f"world line, line {line.number}")
        break
    return out


@cache
def _options() -> dict[str, tuple[str, str]]:
    """Megatron-LM's flags → (dest, argparse action), from the option table pplan ships (core_v0.16.1)."""
    from pplan.launchers.megatron_validate import option_table

    out: dict[str, tuple[str, str]] = {}
    for opt in option_table()["options"]:
        for flag in opt["flags"]:
            out[flag] = (opt["dest"], opt["action"])
    return out


def _flag(name: str, text: str | None, known: frozenset[str]) -> tuple[str, Any] | None:
    """One `--name [text]` as (Megatron's dest, value), or None when it is none `translate` reads: store-true and
    store-false flags (`--swiglu`, `--disable-bias-linear`) by Megatron's option table, the rest by their name."""
    under = name.replace("-", "_")
    if under in LAUNCHER_FLAGS:
        return LAUNCHER_FLAGS[under], value(text) if text is not None else None
    dest, action = _options().get("--" + name, ("", ""))
    if dest in known and action in ("_StoreTrueAction", "_StoreFalseAction"):
        return dest, action == "_StoreTrueAction"
    if dest in known and text is not None:
        return dest, value(text)
    negated = under.startswith("no_") and under[3:] in known
    under = under[3:] if negated else under
    if under == "fp8_format":
        under = "fp8"
    if under in known or under == "fp8":
        return under, False if negated else value(text) if text is not None else True
    return None


def command_line(lines: list[Line], known: frozenset[str]) -> dict[str, tuple[Any, str]]:
    """`--flag value` pairs of a pasted command line or launch script, in the arguments block's names (`--swiglu`
    alone: True; `--disable-bias-linear`: add_bias_linear False)."""
    out: dict[str, tuple[Any, str]] = {}
    for line in lines:
        if "--" not in line.text:
            continue
        for m in FLAG.finditer(line.text):
            got = _flag(m.group(1), m.group(2), known)
            if got is not None and got[1] is not None:
                out.setdefault(got[0], (got[1], f"command line, line {line.number}"))
    return out


def _fields(rest: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in rest.split("|"):
        label, sep, text = part.rpartition(":")
        if sep:
            out[label.strip().lower()] = text.strip()
    return out


def _first(fields: dict[str, str], labels: tuple[str, ...]) -> float | None:
    for label in labels:
        if label in fields:
            return number(fields[label])
    return None


def _step_s(fields: dict[str, str]) -> float | None:
    """The iteration's time in seconds: `elapsed time per iteration (ms)`, or any label naming the time per
    iteration with its unit (forks print `time per iteration (ms)`, `iteration time (s)`)."""
    ms = _first(fields, STEP_MS)
    if ms is not None:
        return ms / 1000
    s = _first(fields, STEP_S)
    if s is not None:
        return s
    for label, text in fields.items():
        if "iteration" in label and "time" in label and "(ms)" in label:
            got = number(text)
            return got / 1000 if got is not None else None
        if "iteration" in label and "time" in label and "(s)" in label:
            return number(text)
    return None


def iterations(lines: list[Line], record: LogRecord) -> int:
    """Read every iteration line onto `record` (rank 0's reading first: lines from other ranks repeat it); the
    number of lines read."""
    found = 0
    for line in sorted(lines, key=lambda ln: (ln.rank or 0, ln.number)):
        m = ITERATION.search(line.text)
        if not m:
            continue
        fields = _fields(m.group(3))
        step_s = _step_s(fields)
        if step_s is None or step_s <= 0:
            continue
        found += 1
        tokens = _first(fields, TOKENS)
        batch = fields.get("global batch size")
        record.add_iteration(
            Iteration(
                number=int(m.group(1)),
                step_s=step_s,
                line=line.number,
                tflops_per_gpu=_first(fields, TFLOPS),
                tokens_per_s_per_gpu=tokens,
                global_batch=as_int(number(batch)) if batch is not None else None,
            )
        )
        if m.group(2):
            record.put("train_iters", int(m.group(2)), f"iteration line, line {line.number}")
    return found


def memory(lines: list[Line], record: LogRecord) -> None:
    """The peaks of every memory line (one per pipeline stage), in bytes."""
    for line in lines:
        m = MEMORY.search(line.text)
        if not m:
            continue
        fields = _fields(m.group(2))
        unit = m.group(1)
        reserved = fields.get("max reserved")
        allocated = fields.get("max allocated")
        record.note_memory(
            size_bytes(reserved, unit) if reserved is not None else None,
            size_bytes(allocated, unit) if allocated is not None else None,
            f"Megatron memory lines ({unit}; the largest over ranks)",
        )
