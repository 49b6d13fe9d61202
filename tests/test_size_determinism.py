"""A sweep point is a pure function of its inputs: `pplan size --format json` gives the same bytes for any `--jobs`
(and so on any machine, whose core count is the default), because no answer depends on what its process computed
before. The cause found: the periodic schedule summary took the full simulation for a short list only while its
structure was not yet cached, and the two routes agree only to rounding."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import pplan.schedules.periodic as periodic
from pplan.schedules.periodic import period, summarise_with_route
from pplan.schedules.timeline import Durations

CASES = [("1f1b", 8, None, 11), ("zbv", 8, None, 26), ("interleaved-1f1b", 4, 2, 20), ("1f1b", 4, None, 8)]
"""Short lists whose last digits differed, warm against cold, before the route was chosen by m alone."""


def _durations(rng: random.Random, stages: int) -> Durations:
    return Durations(
        [rng.uniform(0.5, 2) for _ in range(stages)],
        [rng.uniform(0.5, 2) for _ in range(stages)],
        rng.uniform(0, 1),
    )


@pytest.mark.parametrize(("name", "p", "v", "m"), CASES)
def test_a_summary_does_not_depend_on_the_cache(name: str, p: int, v: int | None, m: int) -> None:
    """The same summary, to the bit, cold and after a longer m of the same class cached its structure."""
    delta = period(name, p)
    assert delta is not None
    stages = p * (v or 1) * (2 if name == "zbv" else 1)
    d = _durations(random.Random(m), stages)
    periodic.clear_caches()
    cold, cold_route = summarise_with_route(name, p, v, m, d, 0.013)
    long_m = m + 40 * delta * p
    _, long_route = summarise_with_route(name, p, v, long_m, d, 0.013)
    assert long_route.fast  # the long one took the periodic route and cached the structure
    warm, warm_route = summarise_with_route(name, p, v, m, d, 0.013)
    assert warm_route == cold_route
    assert (warm.makespan, warm.busy_per_rank, warm.bubble) == (
        cold.makespan,
        cold.busy_per_rank,
        cold.bubble,
    )


def _size_json(args: list[str], jobs: int, cache: Path) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-m", "pplan", "size", *args, "--format", "json", "--jobs", str(jobs)],
        capture_output=True, env={**os.environ, "PPLAN_CACHE_DIR": str(cache)}, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()[-500:]
    return proc.stdout


SWEEPS = {
    "mixtral": ["--model", "mixtral-8x7b", "--hardware", "h100-sxm-80gb", "--train-tokens", "1e12", "--gpus",
                "16,64"],
    "llama-two-hardware": ["--model", "llama3-8b", "--hardware", "h100-sxm-80gb,b200-180gb", "--train-tokens",
                           "1e12", "--gpus", "8..512"],
    "gpt-growing-batch": ["--model", "gpt-1.7b", "--hardware", "a100-sxm-80gb", "--train-tokens", "3e11",
                          "--max-global-batch-tokens", "16777216", "--gpus", "8,24,64,96,256"],
}  # fmt: skip


@pytest.mark.acceptance  # three sweeps at four --jobs: about a minute on two cores
@pytest.mark.parametrize("sweep", sorted(SWEEPS))
def test_size_json_is_the_same_for_any_jobs(sweep: str, tmp_path: Path) -> None:
    """Byte-identical `--format json` for --jobs 1, 2, 3 and 4 (fresh processes sharing one structure cache, which
    before the fix did not hide the difference: a structure read from disk still left the route to history)."""
    outputs = {jobs: _size_json(SWEEPS[sweep], jobs, tmp_path / "cache") for jobs in (1, 2, 3, 4)}
    assert outputs[1].startswith(b"{")
    for jobs in (2, 3, 4):
        assert outputs[jobs] == outputs[1], (sweep, jobs)
