"""`read_log(text)`: clean the text, read it with every stack's reader, and settle the stack, the GPU and the
derived fields (GPUs from the nodes of a run name, data-parallel batches of torchtitan).

Precedence, first reading wins: the arguments block, the world line, printed configuration, a pasted command line,
then a run name; for torchtitan its start-up lines, then its TOML.
"""

from __future__ import annotations

import re

from pplan.logs import megatron, nemo, torchtitan
from pplan.logs.clean import clean_lines
from pplan.logs.names import KNOWN, translate
from pplan.logs.record import STACK_BRIDGE, STACK_MEGATRON, STACK_TORCHTITAN, LogRecord

GPU = re.compile(
    r"\b(?:NVIDIA\s+)?(GB200|GH200|B200|B100|H200|H100|H800|H20|A100|A800|L40S|MI300X|MI250X)"
    r"(?:[\s-]*(?:SXM\d?|PCIe|NVL|HBM3e?|HBM2e?|-?SXM4|-?SXM5)?)*(?:[\s-]*(\d+)\s*G(?:i?B)?)?",
    re.IGNORECASE,
)

BRIDGE = re.compile(r"megatron[._-]bridge|ConfigContainer|nemo\.collections|NeMo", re.IGNORECASE)
"""Megatron-Bridge (and NeMo 2 on Megatron-Core's loop) print Megatron's iteration lines too: these name them."""


def read_log(text: str) -> LogRecord:
    """Everything `text` says about its run (pplan.logs.record.LogRecord); never raises on odd text."""
    lines = clean_lines(text)
    record = LogRecord(lines=len(lines))
    megatron_found = megatron.iterations(lines, record)
    nemo_found = 0 if megatron_found else nemo.iterations(lines, record)
    if not (megatron_found or nemo_found):
        nemo_found = nemo.progress_bars(lines, record)
    args = megatron.arguments(lines)
    world = megatron.world(lines)
    dumps = nemo.dumps(lines, KNOWN)
    flags = megatron.command_line(lines, KNOWN)
    named, extra = nemo.run_name(lines)
    for raw in (args, world, dumps, flags, named):
        translate(raw, record)
    for key, (got, where) in extra.items():
        record.put(key, got, where)
    named_class = nemo.config_class(lines)
    if named_class:
        record.put("model_name", *named_class)
    megatron.memory(lines, record)
    torchtitan.startup(lines, record)
    titan_found = 0 if (megatron_found or nemo_found) else torchtitan.steps(lines, record)
    if megatron_found:
        record.stack = STACK_BRIDGE if BRIDGE.search(text) else STACK_MEGATRON
    elif nemo_found:
        record.stack = STACK_BRIDGE
    elif titan_found:
        record.stack = STACK_TORCHTITAN
    elif args or world:
        record.stack = STACK_MEGATRON
    _gpu(text, record)
    _derive(record)
    return record


def _gpu(text: str, record: LogRecord) -> None:
    if record.gpu_name is not None:
        return
    m = GPU.search(text)
    if m:
        record.gpu_name = m.group(0).strip()
        record.put("gpu_name", record.gpu_name, "a GPU name in the log")


def _derive(record: LogRecord) -> None:
    """Fields the log gives only through others."""
    if "gpus" not in record.fields:
        dp = record.value("data_parallel_size")
        nodes = record.value("nodes")
        tp, pp, cp = (record.value(k, 1) or 1 for k in ("tp", "pp", "cp"))
        if isinstance(dp, int) and dp > 0:
            record.put("gpus", dp * tp * pp * cp, "data-parallel size × tp × pp × cp")
        elif record.stack == STACK_TORCHTITAN and record.value("dp_shard"):
            dp = record.value("dp_shard") * (record.value("dp_replicate", 1) or 1)
            record.put("dp", dp, "data-parallel shard × replicate degrees")
            record.put("gpus", dp * tp * pp * cp, "data-parallel shard × replicate degrees × tp × pp × cp")
        elif (
            record.stack == STACK_TORCHTITAN and record.value("local_batch") and record.value("global_batch")
        ):
            accumulation = record.value("grad_accumulation", 1) or 1
            dp = record.value("global_batch") // (record.value("local_batch") * accumulation)
            record.put("dp", dp, "global batch / local batch")
            if dp > 0:
                record.put("gpus", dp * tp * pp * cp, "global batch / local batch × tp × pp × cp")
        elif isinstance(record.value("nproc_per_node"), int):
            per_node = record.value("nproc_per_node")
            count = record.value("nnodes", 1) if isinstance(record.value("nnodes", 1), int) else 1
            record.put("gpus", per_node * count, record.fields["nproc_per_node"].source + " (× nodes)")
        elif isinstance(nodes, int):
            record.notes.append(
                f"the run name gives {nodes} node(s): GPUs = nodes × the hardware's GPUs per node"
            )
    if record.stack == STACK_TORCHTITAN:
        local = record.value("local_batch")
        if local and "micro_batch" not in record.fields:
            pp = record.value("pp", 1) or 1
            micro = record.value("pp_microbatch", 1) if pp > 1 else local
            record.put("micro_batch", micro, record.fields["local_batch"].source)
        if "global_batch" not in record.fields and local and record.value("gpus"):
            tp, pp, cp = (record.value(k, 1) or 1 for k in ("tp", "pp", "cp"))
            dp = record.value("gpus") // (tp * pp * cp)
            record.put("global_batch", local * dp, "local batch × data-parallel degree")
    its = [it.global_batch for it in record.iterations if it.global_batch]
    if its and "global_batch" not in record.fields:
        record.put("global_batch", its[-1], "iteration lines")
