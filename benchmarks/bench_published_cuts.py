"""Where each published cut of the bundled 2024–2026 runs stands in `pplan recommend` (pplan validate --recent's
runs): for every run pplan predicts and the collection does not flag uncertain, `recommend` on the same model,
hardware, GPUs, global batch, sequence, GEMM precision, stack and TP overlap, restricted to the launcher its stack
runs (Megatron-LM for NVIDIA's, torchtitan for torchtitan's), and the published cut's rank and throughput gap to
the search's best, both by pplan's own model. Runs that ask the same query share one search. Prints figures;
asserts nothing.

    python benchmarks/bench_published_cuts.py [--markdown] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from pplan.profiles.catalog import load_hardware, load_model, load_recent_runs
from pplan.validation.recent import PublishedRank, predict_row, rank_published


def _launcher(data: dict[str, Any]) -> str:
    return "torchtitan" if data["stack"] == "torchtitan" else "megatron"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--only", help="keep runs whose id contains this")
    args = parser.parse_args()
    collection = load_recent_runs()
    seen: dict[tuple[Any, ...], PublishedRank | None] = {}
    lines: list[tuple[str, str, int | None, float | None, str, float | None]] = []
    started = time.perf_counter()
    for data in collection["sets"]:
        for row in data["rows"]:
            if args.only and args.only not in row["id"]:
                continue
            got = predict_row(data, row, load_model, load_hardware)
            if got.request is None or got.uncertain:
                continue
            model = load_model(row["model"]).model_copy(
                update={"num_layers": row["layers"]} if row["layers"] else {}
            )
            hardware = load_hardware(row["hardware"])
            req = got.request
            key = (row["model"], row["layers"], row["hardware"], req, _launcher(data))
            if key not in seen:
                seen[key] = rank_published(model, hardware, req, _launcher(data))
            ranked = seen[key]
            if ranked is None:
                lines.append((row["id"], got.label, None, None, "no plan found", got.error))
                continue
            lines.append((row["id"], got.label, ranked.rank, ranked.gap, ranked.best, got.error))
    elapsed = time.perf_counter() - started
    if args.markdown:
        print("| run | published cut | rank | gap to best | pplan's best | step error |")
        print("|---|---|---|---|---|---|")
    for rid, cut, rank, gap, best, error in lines:
        rank_text = "–" if rank is None else str(rank) if rank <= 50 else "> 50"
        gap_text = "–" if gap is None else f"{gap:+.1%}"
        err_text = "–" if error is None else f"{error:+.1%}"
        if args.markdown:
            print(f"| {rid} | {cut} | {rank_text} | {gap_text} | {best} | {err_text} |")
        else:
            print(f"{rid:58} {cut:38} rank {rank_text:>4} gap {gap_text:>7}  best {best:40} err {err_text}")
    gaps = [gap for _, _, _, gap, _, _ in lines if gap is not None]
    ranks = [rank for _, _, rank, _, _, _ in lines if rank is not None]
    if gaps:
        print(
            f"\n{len(lines)} published cuts, {len(seen)} searches in {elapsed:.0f} s; gap to pplan's best: median "
            f"{statistics.median(gaps):.1%}, above 10 %: {sum(g > 0.10 for g in gaps)}; rank 1: "
            f"{sum(r == 1 for r in ranks)}, top 10: {sum(r <= 10 for r in ranks)}"
        )


if __name__ == "__main__":
    main()
