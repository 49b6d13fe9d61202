"""`pplan recommend` on a panel of queries: configurations enumerated, bounded and simulated, wall time of the
whole command from a fresh process (interpreter start-up included, median of 3) and its peak RSS; "wall s" with
an empty structure cache (a first query: pplan.cli.cache), "again s" with what that run kept (the same query
once more, or another that needs the same schedules); with
`--brute-force`, every enumerated configuration is also evaluated exactly (simulated, no bound used) and the
report says whether recommend's top N is the brute-force top N. Prints figures; asserts nothing. pplan's modules
run from cached bytecode, as an installed pplan's do (`CHILD_ENV`; `--no-bytecode` compiles them every run).

    python benchmarks/bench_recommend.py [--brute-force] [--only 8b-8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Query:
    label: str
    model: str
    hardware: str
    gpus: int
    global_batch: int
    seq_len: int | None = None
    launcher: str | None = None
    """Plans only this launcher runs (`--launcher`: the search's launcher filter)."""

    def args(self) -> list[str]:
        out = ["--model", self.model, "--hardware", self.hardware, "--gpus", str(self.gpus)]
        out += ["--global-batch", str(self.global_batch)]
        out += ["--launcher", self.launcher] if self.launcher else []
        return out + (["--seq-len", str(self.seq_len)] if self.seq_len else [])


PANEL = (
    Query("8b-8", "llama3-8b", "h100-sxm-80gb", 8, 128),
    Query("8b-64", "llama3-8b", "h100-sxm-80gb", 64, 512),
    Query("70b-64", "llama3-70b", "h100-sxm-80gb", 64, 1024),
    Query("70b-2048", "llama3-70b", "h100-sxm-80gb", 2048, 1024),
    Query("405b-1024", "llama3-405b", "h100-sxm-80gb", 1024, 2048),
    Query("405b-4096", "llama3-405b", "h100-sxm-80gb", 4096, 2048),
    Query("405b-16384", "llama3-405b", "h100-sxm-80gb", 16384, 2048),
    Query("175b-4096-a100", "gpt3-175b", "a100-sxm-80gb", 4096, 1536, 2048),
    Query("70b-100000", "llama3-70b", "h100-sxm-80gb", 100_000, 25_000),
    Query("mixtral-64", "mixtral-8x7b", "h100-sxm-80gb", 64, 512, 4096),
    Query("dsv3-2048", "deepseek-v3", "h800-sxm-80gb", 2048, 15_360, 4096),
    Query("405b-1024-mlm", "llama3-405b", "h100-sxm-80gb", 1024, 2048, launcher="megatron"),
    Query("405b-1024-tt", "llama3-405b", "h100-sxm-80gb", 1024, 2048, launcher="torchtitan"),
    Query("qwen3-64-tt", "qwen3-30b-a3b", "h100-sxm-80gb", 64, 512, launcher="torchtitan"),
    Query("530b-5128-a100", "gpt-529.6b", "a100-sxm-80gb", 5128, 1923),
)
"""The last query's batch, 1,923 = 3 × 641 on 5,128 = 8 × 641 GPUs, is best run at b = 3 (d = 641): a micro-batch
size outside 1, 2, 4, 8."""
PLAN_KEYS = (
    "schedule",
    "tp",
    "pp",
    "dp",
    "vp",
    "cp",
    "micro_batch",
    "recompute",
    "zero_stage",
    "layers_per_chunk",
    "ep",
)


CHILD_ENV = dict(os.environ)
"""The environment of every timed `python -m pplan`: by default without PYTHONDONTWRITEBYTECODE, so that pplan's
modules run from their cached bytecode as an installed pplan does (pip compiles it at install; an editable install
writes it on the first import); `--no-bytecode` keeps the caller's setting (then every run compiles pplan's
sources again: about 6 % of the instructions of the 405B query)."""


def _run(args: list[str], cache: str = "off") -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one `python -m pplan` process keeping its structures under
    `cache` (PPLAN_CACHE_DIR; "off": none kept, none read)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pplan", *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**CHILD_ENV, "PPLAN_CACHE_DIR": cache},
    )
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"pplan {' '.join(args)} failed")
    return wall, usage.ru_maxrss / 1024, out


def _plan_id(plan: dict[str, object]) -> tuple[object, ...]:
    return tuple(json.dumps(plan[k]) for k in PLAN_KEYS)


def _brute_top(q: Query, n: int) -> tuple[list[tuple[object, ...]], int, float]:
    from pplan.launchers.support import request_unsupported_reason
    from pplan.plan.records import PlanRequest
    from pplan.profiles.catalog import load_hardware, load_model
    from pplan.profiles.stacks import DEFAULT_STACK, launcher_for_stack, stack_for_launcher
    from pplan.search import SearchRequest, brute_force
    from pplan.search.rank import distinct

    t0 = time.perf_counter()
    model = load_model(q.model)

    def reason(name: str, req: PlanRequest, m: int) -> str | None:  # each request asked whole
        return request_unsupported_reason(name, req, m, model.num_layers, model)

    # the launcher recommend ranks for when none is asked: the default stack's (pplan.cli.recommend)
    launcher = q.launcher or launcher_for_stack(DEFAULT_STACK)
    req = SearchRequest(gpus=q.gpus, global_batch=q.global_batch, seq_len=q.seq_len, top_n=n, launcher=launcher,
                        stack=stack_for_launcher(launcher))  # fmt: skip
    scored = brute_force(model, load_hardware(q.hardware), req, reason)
    top, _ = distinct(scored, n)
    ids: list[tuple[object, ...]] = []
    for s in top:
        plan = s.plan
        ids.append(tuple(json.dumps(x) for x in (plan.schedule, plan.tp, plan.pp, plan.dp, plan.vp, plan.cp,
                                                 plan.micro_batch, plan.recompute, plan.zero_stage,
                                                 [c.layers for c in plan.layout.chunks], plan.ep)))  # fmt: skip
    return ids, len(scored), time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brute-force", action="store_true", help="also rank every configuration exactly")
    parser.add_argument("--only", help="comma list of query labels")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument(
        "--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE if it is set"
    )
    ns = parser.parse_args()
    if not ns.no_bytecode:
        CHILD_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        for q in PANEL:  # untimed: writes the bytecode of what each query imports (launchers, formats)
            _run(["recommend", *q.args(), "--top", "1", "--format", "json"])
    queries = [q for q in PANEL if not ns.only or q.label in ns.only.split(",")]
    head = (
        f"{'query':<16} {'enumerated':>10} {'bounded':>8} {'simulated':>9} {'wall s':>7} {'again s':>7} "
        f"{'RSS MB':>7}  best (Mtok/s)"
    )
    print(head, flush=True)
    docs = {}
    for (
        q
    ) in queries:  # timed first: a child forked from a parent grown by the brute force would report its RSS
        walls, agains, rss = [], [], []
        for _ in range(3):
            with tempfile.TemporaryDirectory() as cache:
                wall, peak, _ = _run(["recommend", *q.args(), "--top", str(ns.top)], cache)
                again, peak_again, _ = _run(["recommend", *q.args(), "--top", str(ns.top)], cache)
            walls.append(wall)
            agains.append(again)
            rss += [peak, peak_again]
        _, _, out = _run(["recommend", *q.args(), "--top", str(ns.top), "--format", "json"])
        doc = json.loads(out)
        docs[q.label] = doc
        cands = doc["candidates"]
        best = (
            f"t{cands[0]['plan']['tp']} p{cands[0]['plan']['pp']} cp{cands[0]['plan']['cp']} "
            f"{cands[0]['plan']['schedule']} {cands[0]['performance']['tokens_per_s'] / 1e6:.3f}"
            if cands
            else "none fits"
        )
        print(
            f"{q.label:<16} {doc['enumerated']:>10,} {doc['bounded']:>8,} {doc['simulated']:>9,} "
            f"{statistics.median(walls):>7.2f} {statistics.median(agains):>7.2f} {max(rss):>7.0f}  {best}",
            flush=True,
        )
    if not ns.brute_force:
        return
    print(
        f"\n{'query':<16} {'fit':>7} {'brute force s':>13}  recommend's top {ns.top} = brute force top {ns.top}"
    )
    for q in queries:
        ids, fits, secs = _brute_top(q, ns.top)
        same = ids == [_plan_id(c["plan"]) for c in docs[q.label]["candidates"]]
        print(f"{q.label:<16} {fits:>7,} {secs:>13.0f}  {'yes' if same else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
