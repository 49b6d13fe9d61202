"""Where each published cut of the bundled 2024–2026 runs stands in `pplan recommend` (pplan validate --recent's
runs): for every run pplan predicts and the collection does not flag uncertain, `recommend` on the same model,
hardware, GPUs, global batch, sequence, GEMM precision, stack and TP overlap, restricted to the launcher its stack
runs (Megatron-LM for NVIDIA's, torchtitan for torchtitan's), and the published cut's rank and throughput gap to
the search's best, both by pplan's own model; for every gap above 10 %, the two step-time terms that differ most
between the two plans' `explain` reports (`pplan compare`'s terms, pplan.compare.compare_terms). Runs
that ask the same query share one search. Prints figures; asserts nothing.

    python benchmarks/bench_published_cuts.py [--markdown | --summary] [--only SUBSTRING]

`--summary` prints the gaps above 10 % as one Markdown row per distinct query and cut (the releases that ran it
collapsed into one row), as the README shows them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from pplan.compare import compare_terms
from pplan.explain import explain
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model, load_recent_runs
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.validation.recent import PublishedRank, predict_row, rank_published, row_model

GAP_EXPLAINED = 0.10
"""Gaps above this are explained term by term."""


def _why(model: ModelSpec, hardware: HardwareSpec, published: PlanRequest, best: PlanRequest) -> str:
    """The two step-time terms that differ most between the published cut (A) and pplan's best (B)."""
    a = explain(model, hardware, published, with_sensitivity=False)
    b = explain(model, hardware, best, with_sensitivity=False)
    terms = [t for t in compare_terms(a, b) if t.group == "step" and t.name != "step time"]
    top = sorted(terms, key=lambda t: -abs(t.delta))[:2]
    return ", ".join(f"{t.name} {t.delta:+.3g} s" for t in top)


def _launcher(data: dict[str, Any]) -> str:
    return "torchtitan" if data["stack"] == "torchtitan" else "megatron"


def _summary(groups: dict[tuple[Any, ...], list[tuple[str, float, float | None]]]) -> None:
    """One Markdown row per distinct query and published cut whose gap exceeds `GAP_EXPLAINED`."""
    print("| model on GPUs | runs | published cut | gap | pplan's best | why: best − published |")
    print("|---|---|---|---|---|---|")
    for (model, hardware, gpus, cut, best, why), runs in groups.items():
        gaps = sorted(g for _, g, _ in runs)
        gap = f"{gaps[0]:.0%}" if gaps[0] == gaps[-1] else f"{gaps[0]:.0%}–{gaps[-1]:.0%}"
        print(f"| {model}, {gpus} × {hardware} | {len(runs)} | {cut} | {gap} | {best} | {why} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--summary", action="store_true", help="gaps above 10 %%, one Markdown row per cut")
    parser.add_argument("--only", help="keep runs whose id contains this")
    args = parser.parse_args()
    collection = load_recent_runs()
    seen: dict[tuple[Any, ...], PublishedRank | None] = {}
    lines: list[tuple[str, str, int | None, float | None, str, float | None, str]] = []
    groups: dict[tuple[Any, ...], list[tuple[str, float, float | None]]] = {}
    whys: dict[tuple[Any, ...], str] = {}
    started = time.perf_counter()
    for data in collection["sets"]:
        for row in data["rows"]:
            if args.only and args.only not in row["id"]:
                continue
            got = predict_row(data, row, load_model, load_hardware)
            if got.request is None or got.uncertain:
                continue
            model = row_model(row, load_model)
            hardware = load_hardware(row["hardware"])
            req = got.request
            key = (row["model"], row["layers"], row["hardware"], req, _launcher(data))
            if key not in seen:
                seen[key] = rank_published(model, hardware, req, _launcher(data))
            ranked = seen[key]
            if ranked is None:
                lines.append((row["id"], got.label, None, None, "no plan found", got.error, ""))
                continue
            if ranked.gap > GAP_EXPLAINED and ranked.best_request is not None and key not in whys:
                whys[key] = _why(model, hardware, req, ranked.best_request)
            why = whys.get(key, "")
            lines.append((row["id"], got.label, ranked.rank, ranked.gap, ranked.best, got.error, why))
            if ranked.gap > GAP_EXPLAINED:
                what = (row["model"], row["hardware"], row["gpus"], got.label, ranked.best, why)
                groups.setdefault(what, []).append((row["release"], ranked.gap, got.error))
    elapsed = time.perf_counter() - started
    if args.summary:
        _summary(groups)
    elif args.markdown:
        print(
            "| run | published cut | rank | gap to best | pplan's best | step error | why (best − published) |"
        )
        print("|---|---|---|---|---|---|---|")
    for rid, cut, rank, gap, best, error, why in [] if args.summary else lines:
        rank_text = "–" if rank is None else str(rank) if rank <= 50 else "> 50"
        gap_text = "–" if gap is None else f"{gap:+.1%}"
        err_text = "–" if error is None else f"{error:+.1%}"
        if args.markdown:
            print(f"| {rid} | {cut} | {rank_text} | {gap_text} | {best} | {err_text} | {why} |")
        else:
            print(
                f"{rid:58} {cut:38} rank {rank_text:>4} gap {gap_text:>7}  best {best:40} err {err_text:>7}  {why}"
            )
    gaps = [line[3] for line in lines if line[3] is not None]
    ranks = [line[2] for line in lines if line[2] is not None]
    if gaps:
        print(
            f"\n{len(lines)} published cuts, {len(seen)} searches in {elapsed:.0f} s; gap to pplan's best: median "
            f"{statistics.median(gaps):.1%}, above 10 %: {sum(g > 0.10 for g in gaps)}; rank 1: "
            f"{sum(r == 1 for r in ranks)}, top 10: {sum(r <= 10 for r in ranks)}"
        )


if __name__ == "__main__":
    main()
