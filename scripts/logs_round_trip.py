"""The `pplan calibrate` round trip on public runs standing in for one cluster's logs (a development tool, run by
hand; docs/logs.md quotes its figures).

    python scripts/logs_round_trip.py [SET] [--keep DIR]

Takes the rows of one published set of pplan/validation/recent_runs.json (default: NVIDIA's DGX Cloud Benchmarking
recipes 25.02.01, dense H100 runs with a certain step), writes each as the NeMo 2 log its performance script would
print (the run name with its cut, then progress lines at the published step after one warm-up line), and runs
`pplan calibrate` on them. Prints the mean absolute step-time error with the bundled profile (the public
calibration), in sample, and with each log left out of the fit, as calibrate reports them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "pplan" / "validation" / "recent_runs.json"
DEFAULT_SET = "dgxc-benchmarking-25.02.01"
MODEL_NAMES = {"llama3-8b": "llama3_8b", "llama3-70b": "llama3_70b", "llama3-405b": "llama31_405b"}
"""pplan's model → the name the performance scripts put in the run name."""


def rows(name: str) -> list[dict[str, Any]]:
    """The set's rows a user's logs could be: one GPU type, a model pplan names, a step as published, certain."""
    data = json.loads(RUNS.read_text())
    chosen = next(s for s in data["sets"] if s["name"] == name)
    keep = [
        r
        for r in chosen["rows"]
        if r["hardware"] == "h100-sxm-80gb"
        and not r["moe"]
        and r["model"] in MODEL_NAMES
        and not r["uncertain"]
        and not r["step_derived"]
        and r["published_step_s"]
    ]
    return keep


def log_text(row: dict[str, Any]) -> str:
    """The run as NeMo 2's performance scripts log it: run name, then progress lines."""
    nodes = row["gpus"] // 8
    vp = row["vp"] if row["vp"] else "None"
    name = (
        f"pretrain_{MODEL_NAMES[row['model']]}_{row['precision']}_{nodes}nodes_tp{row['tp']}_pp{row['pp']}"
        f"_cp{row['cp']}_vp{vp}_ep{row['ep'] or 1}_{row['micro_batch']}mbs_{row['global_batch']}gbs"
    )
    lines = [f"Experiment name: {name}"]
    for i in range(0, 10):
        step = row["published_step_s"] * (4 if i == 0 else 1)
        lines.append(
            f"Training epoch 0, iteration {i}/49 | lr: 1.5e-07 | global_batch_size: {row['global_batch']} | "
            f"global_step: {i} | reduced_train_loss: 11.0 | train_step_timing in s: {step:.4g} | "
            f"consumed_samples: {row['global_batch'] * (i + 1)}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    name = next((a for a in argv if not a.startswith("--") and a != keep), DEFAULT_SET)
    chosen = rows(name)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(keep) if keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for row in chosen:
            path = folder / f"{row['id']}.log"
            path.write_text(log_text(row))
            paths.append(str(path))
        out = folder / "fitted.toml"
        fit = ["--hardware", "h100-sxm-80gb", "-o", str(out), "--force"]
        cmd = [sys.executable, "-m", "pplan", "calibrate", *paths, *fit]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        print(f"{len(paths)} logs of {name}")
        print(done.stdout, end="")
        print(done.stderr, end="", file=sys.stderr)
        return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
