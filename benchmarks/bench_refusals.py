"""How long pplan takes to refuse problem sizes over its caps and outputs it must not write: in-process, after one
burn-in, median of 5, against a budget of 1 s each (the wall-clock limit the test suite used to assert; the
tests now check that no schedule is built or simulated before these refusals, which is what keeps them fast).

Prints the figures; asserts nothing.

    python benchmarks/bench_refusals.py
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from pathlib import Path

from pplan.cli import main as pplan

BUDGET_S = 1.0
REPEATS = 5

CASES: list[tuple[str, ...]] = [
    ("schedule", "1f1b", "--pp", "4", "--microbatches", "1000000"),
    ("schedule", "dualpipe", "--pp", "4", "--microbatches", "10000"),
    ("schedule", "interleaved-1f1b", "--pp", "4", "--vp", "100000", "--microbatches", "8"),
    ("schedule", "zbv", "--pp", "20000", "--microbatches", "1"),
    ("schedule", "1f1b", "--pp", str(10**30)),
    ("bubble", "--pp", "256"),
    ("bubble", "--pp", "4", "--microbatches", "8,1000000"),
    ("bubble", "--pp", "4", "--microbatches", "9" * 5000),
    ("bench", "--pp", "20000"),
    ("bench", "--microbatches", "1000000"),
    ("bench", "--schedule", "interleaved-1f1b", "--vp", "100000", "--microbatches", "8"),
    ("bench", "--steps", str(10**9)),
    ("bench", "--f-ms", "nan"),
]


def refuse(args: list[str]) -> tuple[float, int]:
    """Seconds for `pplan *args` in-process, and its exit code (2 when refused)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            pplan(args)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return time.perf_counter() - start, code


def _shown(args: list[str]) -> str:
    text = " ".join(args)
    return text if len(text) <= 64 else text[:61] + "..."


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old.svg"
        old.write_text("the old contents\n")
        # an existing output without --force: refused before the 250-rank schedule is built
        refused_output = ["schedule", "zb-h2", "--pp", "250", "--microbatches", "200", "--csv", str(old),
                          "--svg", str(old)]  # fmt: skip
        cases = [list(c) for c in CASES] + [refused_output]
        refuse(cases[0])  # burn-in (imports, typer's first parse)
        print(f"{'command':<66}{'exit':>5}{'median s':>10}  budget {BUDGET_S:g} s")
        over = 0
        for args in cases:
            runs = [refuse(args) for _ in range(REPEATS)]
            wall = statistics.median(t for t, _ in runs)
            code = runs[-1][1]
            verdict = (
                "ok" if wall < BUDGET_S and code == 2 else ("OVER" if wall >= BUDGET_S else "not refused")
            )
            over += verdict != "ok"
            print(f"{_shown(args):<66}{code:>5}{wall:>10.4f}  {verdict}")
    print(f"=> {over} of {len(cases)} refusals over budget or not refused")


if __name__ == "__main__":
    main()
