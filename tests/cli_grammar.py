"""A grammar of `pplan` command lines for fuzzing: ordinary, extreme, zero, negative, non-finite and malformed
values for the options of `recommend`, `explain`, `schedule` and `bubble`. `draw(rng, tmp)` returns one command
line and whether it holds a detectably invalid value (which must then be refused). Used by
`benchmarks/fuzz_inputs.py` (time-boxed, as subprocesses) and `tests/test_cli_fuzz.py` (bounded, in-process).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path

Gen = Callable[[random.Random], tuple[str, bool]]
"""A value generator: (the argument text, whether the value is detectably invalid)."""

MALFORMED = [
    "",
    "abc",
    "1,2",
    "0x10",
    "1e",
    "--",
    "½",
    "1_000",
    " 3",
    "3 ",
    "١٢",
    "+",
    "1.5.2",
    "None",
    "true",
]
NON_FINITE = ["nan", "NaN", "inf", "-inf", "Infinity", "-Infinity", "1e309", "-1e309"]
HUGE_INTS = [10**k for k in (7, 8, 9, 12, 18, 19, 30, 100, 400)] + [2**31, 2**63, 2**64]


def count(lo: int = 1, typical: tuple[int, ...] = (1, 2, 4, 8, 16, 64), hi: int | None = None) -> Gen:
    """An integer option whose valid values are ≥ `lo` (and ≤ `hi`, where known)."""

    def gen(rng: random.Random) -> tuple[str, bool]:
        kind = rng.random()
        if kind < 0.45:
            value = rng.choice(typical)
        elif kind < 0.6:
            value = rng.choice([0, -1, -4, -(2**31), lo - 1])
        elif kind < 0.75:
            value = rng.choice(HUGE_INTS)
        elif kind < 0.85:
            value = rng.randint(-100, 10**6)
        else:
            text = rng.choice([*MALFORMED, *NON_FINITE, "2.0", "1e3", "-0"])
            return text, False  # a malformed int is a click error (exit 2); nothing to detect beyond that
        invalid = value < lo or (hi is not None and value > hi)
        return str(value), invalid

    return gen


def real(
    lo: float, lo_open: bool, hi: float | None = None, typical: tuple[float, ...] = (0.5, 1.0, 2.0)
) -> Gen:
    """A float option whose valid values are finite and ≥ `lo` (> `lo` when `lo_open`), ≤ `hi` where known."""

    def gen(rng: random.Random) -> tuple[str, bool]:
        kind = rng.random()
        if kind < 0.4:
            value = rng.choice(typical)
        elif kind < 0.55:
            return rng.choice(NON_FINITE), True
        elif kind < 0.7:
            value = rng.choice([0.0, -0.0, -1.0, -1e-300, 5e-324, -1e300])
        elif kind < 0.85:
            value = rng.choice([1e12, 1e13, 1e18, 1e19, 1e300, 1.7976931348623157e308])
        else:
            return rng.choice([*MALFORMED, "1e-400", "0x1p3", "1e5"]), False
        invalid = value < lo or (lo_open and value == lo) or (hi is not None and value > hi)
        return repr(value), invalid

    return gen


def choice(valid: list[str], bad: list[str]) -> Gen:
    def gen(rng: random.Random) -> tuple[str, bool]:
        if rng.random() < 0.8:
            return rng.choice(valid), False
        return rng.choice(bad), False  # unknown names: refused, but not "detectably invalid" by this grammar

    return gen


def count_list(rng: random.Random) -> tuple[str, bool]:
    """bubble's --microbatches: a comma list of micro-batch counts."""
    values = [count()(rng)[0] for _ in range(rng.randint(1, 4))]
    invalid = any(v.lstrip("-").isdigit() and int(v) <= 0 for v in values)
    return ",".join(values), invalid


MODELS = ["llama3-8b", "llama3-70b", "gpt-1.7b", "gpt3-175b", "llama3-405b", "gpt-1t"]
BAD_PATHS = [
    "nosuch",
    "~nosuchuser/x.toml",
    "/",
    "/dev/null",
    "/etc",
    "x" * 300 + ".toml",
    "",
    "\x1b[2J.toml",
]
HARDWARE = ["h100-sxm-80gb", "a100-sxm-40gb", "b200-180gb", "h200-sxm-141gb"]
SCHEDULES = ["1f1b", "gpipe", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev", "dualpipe"]
BAD_NAMES = ["", "nosuch", "1F1B ", "zb-h3", "\x07", "ñ", "1f1b,1f1b"]

COMMON = {
    "--model": choice(MODELS, BAD_PATHS),
    "--hardware": choice(HARDWARE, BAD_PATHS),
    "--gpus": count(typical=(8, 16, 64, 512, 2048, 9699690)),
    "--global-batch": count(typical=(1, 8, 64, 1024, 1048576)),
    "--seq-len": count(typical=(512, 2048, 8192, 131072)),
    "--tp": count(),
    "--pp": count(),
    "--cp": count(),
    "--micro-batch": count(),
}
GRAMMAR: dict[str, dict[str, Gen]] = {
    "recommend": {
        **COMMON,
        "--vp": count(),
        "--max-vp": count(),
        "--top": count(typical=(1, 3, 10)),
        "--min-microbatches": count(),
        "--headroom": real(0.0, False, typical=(0.0, 0.1, 0.5)),
        "--jitter": real(0.0, False, typical=(0.0, 0.01, 0.05)),
        "--schedule": choice([*SCHEDULES, "1f1b,zb-h1", "zbv,dualpipev"], BAD_NAMES),
        "--recompute": choice(["none", "selective", "full", "none,full"], BAD_NAMES),
        "--zero-stage": choice(["0", "1", "0,1", "2,3"], ["4", "-1", "", "0,,1"]),
        "--grad-dtype": choice(["fp32", "bf16"], BAD_NAMES),
        "--launcher": choice(["megatron", "torchtitan", "torchtitan@0.2"], BAD_NAMES),
        "--format": choice(["table", "json", "json", "megatron", "torchtitan", "torchtitan@0.2"], BAD_NAMES),
    },
    "explain": {
        **COMMON,
        "--vp": count(),
        "--schedule": choice([*SCHEDULES, "auto"], BAD_NAMES),
        "--memory-limit": count(typical=(1, 4, 16)),
        "--jitter": real(0.0, False, typical=(0.0, 0.01, 0.05)),
        "--recompute": choice(["none", "selective", "full"], BAD_NAMES),
        "--zero-stage": count(lo=0, typical=(0, 1, 2, 3), hi=3),
        "--grad-dtype": choice(["fp32", "bf16"], BAD_NAMES),
        "--activation-model": choice(["itemised", "korthikanti"], BAD_NAMES),
        "--first-stage-layers": count(lo=0, typical=(0, 1, 2, 4)),
        "--last-stage-layers": count(lo=0, typical=(0, 1, 2, 4)),
        "--train-tokens": real(0.0, True, 1e18, typical=(1e9, 15e12)),
        "--pass-durations": choice(["analytic", "unit"], BAD_NAMES),
        "--format": choice(["megatron", "torchtitan", "torchtitan@0.2"], BAD_NAMES),
    },
    "schedule": {
        "--pp": count(typical=(1, 2, 4, 8, 16)),
        "--microbatches": count(typical=(1, 2, 4, 8, 32)),
        "--vp": count(typical=(1, 2, 3)),
        "--f": real(0.0, False, 1e12),
        "--b": real(0.0, False, 1e12),
        "--w": real(0.0, False, 1e12),
        "--comm": real(0.0, False, 1e12, typical=(0.0, 0.1, 1.0)),
    },
    "bubble": {
        "--pp": count(typical=(1, 2, 4, 8, 16), hi=256),
        "--microbatches": count_list,
        "--measure": choice(["span", "step"], BAD_NAMES),
    },
}
FLAGS = {
    "recommend": ["--allow-cross-node", "--no-allow-cross-node"],
    "explain": [
        "--json",
        "--json",
        "--all-stages",
        "--no-flash-attention",
        "--sequence-parallel",
        "--distributed-optimizer",
    ],
    "schedule": ["--json", "--json"],
    "bubble": ["--json"],
}


def draw(rng: random.Random, tmp: Path) -> tuple[list[str], bool]:
    """One random command line and whether it holds a detectably invalid value."""
    command = rng.choice(list(GRAMMAR))
    args = [command]
    if command == "schedule":
        args.append(rng.choice(SCHEDULES) if rng.random() < 0.9 else rng.choice(BAD_NAMES))
    options = GRAMMAR[command]
    invalid = False
    for name in rng.sample(list(options), k=min(len(options), rng.randint(0, 6))):
        value, bad = options[name](rng)
        args += [name, value]
        invalid |= bad
    for flag in FLAGS[command]:
        if rng.random() < 0.2:
            args.append(flag)
    if command in ("schedule", "bubble") and rng.random() < 0.2:
        args += ["--svg", str(tmp / "out.svg")]
    if command == "schedule" and rng.random() < 0.1:
        args += ["--csv", str(tmp / "out.csv")]
    roll = rng.random()
    if roll < 0.03:
        args.append(rng.choice(list(options)))  # an option missing its value
    elif roll < 0.05:
        args += ["--bogus", "1"]
    return args, invalid


def is_json(args: list[str]) -> bool:
    return "--json" in args or any(x == "--format" and y == "json" for x, y in itertools.pairwise(args))
