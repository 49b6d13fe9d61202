"""Instructions `pplan recommend` executes on a panel of queries (callgrind, structure cache off), per process, for
one or two source trees side by side. Prints figures; asserts nothing.

    python benchmarks/bench_instructions.py [--before TREE] [--after TREE] [--only mixtral-64,dsv3-2048]

Each query runs once under `valgrind --tool=callgrind --trace-children=yes` (1 to 5 minutes for the larger ones;
run one at a time on a shared machine) with pplan imported from the tree named (PYTHONPATH), from cached bytecode
as an installed pplan runs (a plain run first writes it). The search process dumps its counters when it forks the
prefetch child (`--dump-before=PyOS_BeforeFork`): callgrind gives a forked child a copy of its parent's counters,
so without that dump the child's total would count the parent's work up to the fork once more. Columns:
"search" is the search process's whole count; "child" what the child itself executed; "at fork" the search's
count when it forked; "raw child" the child's total as callgrind reports it without the dump (child + at fork);
"in all" search + child. Needs valgrind.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from bench_recommend import CHILD_ENV, PANEL, Query

SPEED_PANEL = ("dsv3-2048", "mixtral-64", "qwen3-64-tt", "70b-512-8k")
"""The queries issue 45 and 46 track: DeepSeek-V3, Mixtral and Qwen3 (torchtitan) MoE queries, and one dense."""
EXTRA = (Query("70b-512-8k", "llama3-70b", "h100-sxm-80gb", 512, 1024, 8192),)


@dataclass(frozen=True)
class Count:
    search: int
    child: int
    at_fork: int

    @property
    def in_all(self) -> int:
        return self.search + self.child


def _count(tree: str, q: Query) -> Count:
    """One callgrind run of `q` with pplan from `tree`."""
    tree = os.path.abspath(tree)  # run from it: `python -m` puts the working directory first on sys.path
    env = {**CHILD_ENV, "PYTHONPATH": tree, "PPLAN_CACHE_DIR": "off"}
    env.pop(
        "PYTHONDONTWRITEBYTECODE", None
    )  # the plain run below must write the bytecode the counted run reads
    args = ["-m", "pplan", "recommend", *q.args(), "--format", "json"]
    # a plain run first writes the bytecode
    subprocess.run([sys.executable, *args], env=env, cwd=tree, check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--trace-children=yes", "--dump-before=PyOS_BeforeFork",
             f"--callgrind-out-file={out}/cg.%p", sys.executable, *args],
            env=env, cwd=tree, check=True, capture_output=True,
        )  # fmt: skip
        parts: dict[int, list[tuple[int, int]]] = {}
        for path in glob.glob(f"{out}/cg.*"):
            found = re.fullmatch(r".*/cg\.(\d+)(?:\.(\d+))?", path)
            if found is None:
                continue
            with open(path) as f:
                total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
            parts.setdefault(int(found[1]), []).append((int(found[2] or 1 << 30), total))
    search = min(parts)  # the first process
    mine = sorted(parts[search])
    child = sum(t for pid, ps in parts.items() if pid != search for _, t in ps)
    at_fork = mine[0][1] if len(mine) > 1 else 0
    return Count(sum(t for _, t in mine), child, at_fork)


def _g(n: int) -> str:
    return f"{n / 1e9:6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="a source tree to compare with (a checkout of another commit)")
    parser.add_argument("--after", default=".", help="the source tree measured (default: this one)")
    parser.add_argument("--only", help="comma list of query labels (default: the speed panel)")
    ns = parser.parse_args()
    queries = {q.label: q for q in (*PANEL, *EXTRA)}
    labels = ns.only.split(",") if ns.only else list(SPEED_PANEL)
    trees = [("before", ns.before)] if ns.before else []
    trees.append(("after", ns.after))
    print("G instructions   " + "".join(f"{name:>44}" for name, _ in trees))
    print(f"{'query':16}" + "   search  child at fork raw child  in all" * len(trees))
    for label in labels:
        row = f"{label:16}"
        for _, tree in trees:
            c = _count(tree, queries[label])
            row += (
                f"   {_g(c.search)} {_g(c.child)} {_g(c.at_fork)} {_g(c.child + c.at_fork):>9} {_g(c.in_all)}"
            )
        print(row, flush=True)


if __name__ == "__main__":
    main()
