"""Build pplan/validation/recent_runs.json from the published-runs collection (a development tool, run by hand).

    python scripts/import_recent_runs.py PATH/TO/public-runs-2026.json

The collection holds published pre-training runs of 2024–2026 with their full cut, each set with its source. This
keeps, per row, the figures pplan predicts from (cut, batch, sequence, precision, hardware, model), the published
time (a step time as published or derived from tokens/s, or a TFLOP/s per GPU with the FLOP count its source
names), the source and the collection's uncertainty flag; it maps hardware and model names to pplan's profiles
(None where pplan has none: the row is then refused, naming what is missing). No prose is copied.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "pplan" / "validation" / "recent_runs.json"

HARDWARE = [  # (prefix of the published hardware text, pplan profile)
    ("GB200", "gb200-nvl72"),
    ("B200", "b200-180gb"),
    ("H200", "h200-sxm-141gb"),
    ("H800", "h800-sxm-80gb"),
    ("H100 SXM 96GB", None),  # Meta's Grand Teton H100 96 GB HBM2e at 500 W: no profile
    ("H100", "h100-sxm-80gb"),
]
MODELS = {
    "Llama-3 8B": "llama3-8b",
    "Llama-3.1 8B": "llama3-8b",
    "Llama-3 70B": "llama3-70b",
    "Llama-3.1 70B": "llama3-70b",
    "Llama-3.1 405B": "llama3-405b",
    "DeepSeek-V3 671B": "deepseek-v3",
    "Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "GPT-OSS 120B": "gpt-oss-120b",
    "Mixtral 8x7B": "mixtral-8x7b",
    "Mixtral 8x22B": "mixtral-8x22b",
    "Grok-1 314B": "grok-1",
    "Llama-2 7B": "llama2-7b",
}
STACKS = {  # set → (stack family as the report groups it, pplan stack, FLOP count of its TFLOP/s)
    "megatron-bridge-performance-summary": ("megatron-bridge", "megatron-bridge", "megatron-bridge"),
    "dgxc-benchmarking-24.12": ("nemo", "megatron-bridge", "nemo"),
    "dgxc-benchmarking-25.02.01": ("nemo", "megatron-bridge", "nemo"),
    "dgxc-benchmarking-25.04.01": ("nemo", "megatron-bridge", "nemo"),
    "nemo-24.07-performance-summary": ("nemo", "megatron-bridge", "nemo"),
    "nemo-docs-performance-summary-25.x-partial": ("nemo", "megatron-bridge", "nemo"),
    "nemo-long-sequence-cp": ("nemo", "megatron-bridge", "nemo"),
    "torchtitan-benchmarks": ("torchtitan", "torchtitan", None),
    "deepseek-v3-technical-report": ("deepseek", "megatron-core", None),
}


def _hardware(text: str) -> str | None:
    return next(name for prefix, name in HARDWARE if text.startswith(prefix))


def _precision(row: dict[str, Any]) -> tuple[str, str]:
    """(pplan precision, scaling recipe as the source states it: delayed, current, blockwise, mx, tensorwise,
    rowwise, or unstated)."""
    text = f"{row['precision']} {row['fp8_recipe'] or ''}".lower()
    if row["precision"] == "BF16":
        return "bf16", "none"
    if "mxfp8" in text or "mx block" in text or "32x32" in text:
        return "mxfp8", "mx"
    if "blockwise" in text or "block-wise" in text or "fine-grained" in text:
        return "fp8", "blockwise"
    if "rowwise" in text:
        return "fp8", "rowwise"
    if "tensorwise" in text:
        return "fp8", "tensorwise"
    if "current" in text and "not labelled" not in text and "not stated" not in text:
        return "fp8", "current"
    return "fp8", "unstated"


def _release(row: dict[str, Any], set_name: str) -> str:
    rid = row["id"]
    for pattern, name in (
        (r"^mb-(\d\d\.\d\d(?:\.\d\d)?)", "Megatron-Bridge {}"),
        (r"^dgxc-(\d\d\.\d\d(?:\.\d\d)?)", "NeMo {}"),
        (r"^nemo-(\d\d\.\d\d)", "NeMo {}"),
        (r"^nemodocs-(\d\d\.\d\d)", "NeMo {}"),
    ):
        found = re.match(pattern, rid)
        if found:
            return name.format(found.group(1))
    return {"nemo-long-sequence-cp": "NeMo 2025-05", "torchtitan-benchmarks": "torchtitan 2025-06"}.get(
        set_name, "DeepSeek-V3 report"
    )


def _layers(row: dict[str, Any]) -> int | None:
    """The layers a reduced-layer proxy runs (`N of M layers` in the collection's model note)."""
    found = re.search(r"(\d+) of (\d+) layers", row["model_note"] or "")
    return int(found.group(1)) if found and found.group(1) != found.group(2) else None


def _micro_batch(row: dict[str, Any]) -> int | None:
    """The published micro-batch size, unless the row's own gradient accumulation contradicts it: GBS = MBS × GA × DP
    must hold, and where the published GA and GBS agree on another MBS (GBS / (GA × DP), a whole number) that MBS is
    the run's (a table whose MBS column holds another recipe's value: Megatron-Bridge 25.09's Llama 3 70B MXFP8 row
    prints MBS 2 beside GA 16 at GBS 128 on DP 8, and the 25.09 recipe runs MBS 1)."""
    if row["mbs"] is None:
        return None
    mbs, ga, gbs = int(row["mbs"]), row.get("ga"), int(row["gbs"])
    dp = row.get("dp_derived") or row.get("dp_as_published")
    if not ga or not dp or mbs * int(ga) * int(dp) == gbs:
        return mbs
    implied, rest = divmod(gbs, int(ga) * int(dp))
    return implied if implied and not rest else mbs


def _published(row: dict[str, Any]) -> dict[str, Any]:
    step = row["step_s"] if row["step_s"] is not None else row["step_s_derived"]
    if step is not None:
        return {"published_step_s": float(step), "step_derived": row["step_s"] is None}
    return {"published_tflops_per_gpu": float(row["tflops_per_gpu"])}


def convert(collection: dict[str, Any]) -> dict[str, Any]:
    sets = []
    for data in collection["sets"]:
        family, stack, flops = STACKS[data["name"]]
        rows = []
        for row in data["rows"]:
            precision, recipe = _precision(row)
            recompute = row["recompute"]
            rows.append(
                {
                    "id": row["id"],
                    "release": _release(row, data["name"]),
                    "hardware": _hardware(row["hardware"]),
                    "hardware_published": row["hardware"].split(" (")[0].split(",")[0],
                    "model": MODELS[row["model"]],
                    "model_published": row["model"],
                    "layers": _layers(row),
                    "moe": bool(row["moe"]),
                    "precision": precision,
                    "fp8_recipe": recipe,
                    "seq_len": int(row["seq_len"]),
                    "gpus": int(row["gpus"]),
                    "global_batch": int(row["gbs"]),
                    "micro_batch": _micro_batch(row),
                    "tp": int(row["tp"]),
                    "pp": int(row["pp"]),
                    "cp": int(row["cp"] or 1),
                    "vp": row["vp"],
                    "ep": int(row["ep"] or 1),
                    "etp": row["etp"],
                    "fsdp": row["fsdp"],
                    "recompute": None if recompute is None else recompute.split(" ")[0].lower(),
                    "async_tp": "asyncTP" in row["id"],
                    "dualpipe": "DualPipe" in (row["other_settings"] or ""),
                    **_published(row),
                    "uncertain": bool(row["uncertain"]),
                }
            )
        sets.append(
            {
                "name": data["name"],
                "source": data["source"],
                "stack": family,
                "pplan_stack": stack,
                "flops": flops,
                "rows": rows,
            }
        )
    return {
        "about": "Published pre-training runs of 2024-2026 with their full cut, as each set's source publishes "
        "them; built by scripts/import_recent_runs.py. Step times are as published, or global batch x sequence / "
        "(GPUs x tokens/s per GPU) where only throughput is published (step_derived).",
        "sets": sets,
    }


def main() -> None:
    collection = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    OUT.write_text(json.dumps(convert(collection), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{OUT}: {sum(len(s['rows']) for s in convert(collection)['sets'])} rows")


if __name__ == "__main__":
    main()
