"""Issue 10's minimal failing inputs, as data: each was once a traceback, a hang, a memory blow-up, an invalid
input accepted with exit code 0, non-strict JSON or a clobbered file.

One home for the list: `tests/test_regression_corpus.py` runs it in-process, `benchmarks/fuzz_inputs.py` runs
it as real `python -m pplan` subprocesses (with wall time and peak RSS). A case's arguments may name files it
writes first: "{tmp}" in an argument or a file name is the case's own scratch folder.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
H100_TOML = (ROOT / "hardware" / "h100-sxm-80gb.toml").read_text(encoding="utf-8")
LLAMA_TOML = (ROOT / "models" / "llama3-8b.toml").read_text(encoding="utf-8")

REFUSED = 2
"""`Case.expect`: the input is invalid (or asks for more than the stated bounds) and must be refused in one line."""
EITHER = None
"""`Case.expect`: any of exit 0 (a sane answer) or exit 2 (a one-line refusal) is right."""


def _set(toml: str, key: str, value: str) -> str:
    """`toml` with the (first) line `key = ...` given `value` (a TOML literal)."""
    text, n = re.subn(rf"^{re.escape(key)} = .*$", f"{key} = {value}", toml, count=1, flags=re.MULTILINE)
    assert n == 1, key
    return text


HF_LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
}
DEPTH = 100_000
DIGITS_5000 = "1" + "0" * 4999
EXPLAIN = ("explain", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--pp", "1")
"""A small explain that runs in well under a second; cases add or override one option."""
RECOMMEND = ("recommend", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "64")


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    expect: int | None = EITHER
    files: dict[str, str] = field(default_factory=dict)
    heavy: bool = False
    """Too slow for the test suite's time budget (run by the benchmark only)."""
    known: str = ""
    """An open finding (not fixed yet): the test expects this case to fail (strict xfail), naming why."""

    @property
    def json_out(self) -> bool:
        """Whether stdout is a JSON document on exit code 0."""
        a = self.args
        return "--json" in a or any(x == "--format" and y == "json" for x, y in itertools.pairwise(a))

    def argv(self, tmp: Path) -> list[str]:
        return [arg.replace("{tmp}", str(tmp)) for arg in self.args]

    def write_files(self, tmp: Path) -> dict[Path, str]:
        """Write the case's input files under `tmp`; returns their paths and contents."""
        written: dict[Path, str] = {}
        for name, text in self.files.items():
            path = tmp / name.replace("{tmp}/", "")
            path.write_text(text, encoding="utf-8")
            written[path] = text
        return written


def _hw(key: str, value: str) -> dict[str, str]:
    return {"hw.toml": _set(H100_TOML, key, value)}


def _model(key: str, value: str) -> dict[str, str]:
    return {"model.toml": _set(LLAMA_TOML, key, value)}


EXPLAIN_HW = (*EXPLAIN, "--hardware", "{tmp}/hw.toml")
EXPLAIN_MODEL = ("explain", "--model", "{tmp}/model.toml", "--gpus", "8", "--tp", "8", "--pp", "1")

CASES: tuple[Case, ...] = (
    # --- non-finite and extreme numbers (were tracebacks) -------------------------------------------------
    Case("schedule-f-nan", ("schedule", "1f1b", "--f", "nan"), REFUSED),
    Case("schedule-f-inf-json", ("schedule", "1f1b", "--f", "inf", "--json"), REFUSED),
    Case("schedule-b-neg", ("schedule", "1f1b", "--b", "-1"), REFUSED),
    Case("schedule-zero-durations-json", ("schedule", "1f1b", "--f", "0", "--b", "0", "--w", "0", "--json")),
    Case("hw-hbm-inf", EXPLAIN_HW, REFUSED, _hw("hbm_gib", "inf")),
    Case("hw-hbm-inf-recommend", (*RECOMMEND, "--hardware", "{tmp}/hw.toml"), REFUSED, _hw("hbm_gib", "inf")),
    Case(
        "hw-kernel-overhead-inf",
        (*RECOMMEND, "--hardware", "{tmp}/hw.toml"),
        REFUSED,
        _hw("kernel_overhead_us", "inf"),
    ),
    Case("hw-kernel-overhead-nan", EXPLAIN_HW, REFUSED, _hw("kernel_overhead_us", "nan")),
    Case("model-hidden-1e300", EXPLAIN_MODEL, REFUSED, _model("hidden_size", "1e300")),
    Case("model-seq-len-1e300-int", EXPLAIN_MODEL, REFUSED, _model("seq_len", "1" + "0" * 300)),
    Case(
        "hf-hidden-1e300",
        (*EXPLAIN[:2], "{tmp}/config.json", *EXPLAIN[3:]),
        REFUSED,
        {"config.json": json.dumps({**HF_LLAMA, "hidden_size": 1e300})},
    ),
    Case("model-5000-digit-int", EXPLAIN_MODEL, REFUSED, _model("num_layers", DIGITS_5000)),
    Case(
        "hf-5000-digit-int",
        (*EXPLAIN[:2], "{tmp}/config.json", *EXPLAIN[3:]),
        REFUSED,
        {"config.json": json.dumps(HF_LLAMA)[:-1] + f', "num_hidden_layers": {DIGITS_5000}}}'},
    ),
    Case(
        "durations-5000-digit-int",
        ("schedule", "1f1b", "--durations", "{tmp}/d.toml"),
        REFUSED,
        {"d.toml": f"f = {DIGITS_5000}\nb = 1.0\nw = 1.0\n"},
    ),
    Case(
        "hf-json-100000-deep",
        (*EXPLAIN[:2], "{tmp}/config.json", *EXPLAIN[3:]),
        REFUSED,
        {"config.json": "[" * DEPTH + "]" * DEPTH},
    ),
    Case(
        "model-toml-100000-deep",
        EXPLAIN_MODEL,
        REFUSED,
        {"model.toml": LLAMA_TOML + "deep = " + "[" * DEPTH + "]" * DEPTH + "\n"},
    ),
    Case(
        "durations-json-100000-deep",
        ("schedule", "1f1b", "--durations", "{tmp}/d.json"),
        REFUSED,
        {"d.json": '{"f": ' + "[" * DEPTH + "]" * DEPTH + "}"},
    ),
    Case(
        "model-path-300-chars", ("explain", "--model", "{tmp}/" + "m" * 300 + ".toml", "--gpus", "8"), REFUSED
    ),
    Case("hw-path-300-chars", (*EXPLAIN, "--hardware", "{tmp}/" + "h" * 300 + ".toml"), REFUSED),
    Case("model-tilde-nosuchuser", ("explain", "--model", "~nosuchuser/x.toml", "--gpus", "8"), REFUSED),
    Case("recommend-tilde-nosuchuser", ("recommend", "--model", "~nosuchuser/x.toml"), REFUSED),
    # --- problem sizes (were hangs or memory blow-ups) ----------------------------------------------------
    Case("recommend-gpus-1e9", ("recommend", "--gpus", "1000000000"), REFUSED),
    Case("recommend-global-batch-2^20", ("recommend", "--global-batch", "1048576", "--format", "json")),
    Case("recommend-gpus-at-cap", ("recommend", "--gpus", "10000000", "--format", "json")),
    Case("recommend-gpus-above-cap", ("recommend", "--gpus", "10000001"), REFUSED),
    Case("explain-global-batch-2^30", ("explain", "--global-batch", "1073741824", "--json")),
    Case("explain-global-batch-2^30-8-gpus", (*EXPLAIN, "--global-batch", "1073741824", "--json")),
    Case(
        "schedule-microbatches-1e6", ("schedule", "1f1b", "--pp", "4", "--microbatches", "1000000"), REFUSED
    ),
    Case("bubble-pp-256", ("bubble", "--pp", "256")),
    Case("bubble-pp-32", ("bubble", "--pp", "32"), heavy=True),  # just under the chart's cap: ~3 s
    Case(
        "schedule-at-cap", ("schedule", "1f1b", "--pp", "256", "--microbatches", "195", "--json"), heavy=True
    ),
    Case("bubble-pp-257", ("bubble", "--pp", "257"), REFUSED),
    Case("bench-pp-20000", ("bench", "--pp", "20000"), REFUSED),
    # --- invalid input once accepted with exit code 0 -----------------------------------------------------
    Case("recommend-tp-0", (*RECOMMEND, "--tp", "0"), REFUSED),
    Case("recommend-pp-neg4", (*RECOMMEND, "--pp", "-4"), REFUSED),
    Case("recommend-cp-0", (*RECOMMEND, "--cp", "0"), REFUSED),
    Case("recommend-micro-batch-0", (*RECOMMEND, "--micro-batch", "0"), REFUSED),
    Case("recommend-seq-len-0", (*RECOMMEND, "--seq-len", "0"), REFUSED),
    Case("recommend-gpus-neg", ("recommend", "--gpus", "-8"), REFUSED),
    Case("recommend-global-batch-neg", ("recommend", "--global-batch", "-1"), REFUSED),
    Case("recommend-headroom-nan", (*RECOMMEND, "--headroom", "nan"), REFUSED),
    Case("explain-seq-len-0", (*EXPLAIN, "--seq-len", "0"), REFUSED),
    Case("explain-train-tokens-nan", (*EXPLAIN, "--train-tokens", "nan"), REFUSED),
    Case("explain-train-tokens-inf", (*EXPLAIN, "--train-tokens", "inf", "--json"), REFUSED),
    Case(  # --format printed the launcher settings before --train-tokens was checked
        "explain-train-tokens-nan-with-format",
        (*EXPLAIN, "--train-tokens", "nan", "--format", "torchtitan", "--pp", "8"),
        REFUSED,
    ),
    Case("hw-context-above-hbm", EXPLAIN_HW, REFUSED, _hw("context_gib", "105.0")),
    Case(
        "hw-context-above-hbm-recommend",
        (*RECOMMEND, "--hardware", "{tmp}/hw.toml"),
        REFUSED,
        _hw("context_gib", "105.0"),
    ),
    # --- output files -------------------------------------------------------------------------------------
    Case("schedule-csv-equals-svg", ("schedule", "1f1b", "--csv", "{tmp}/x", "--svg", "{tmp}/x"), REFUSED),
    Case(
        "schedule-svg-equals-durations",
        ("schedule", "1f1b", "--durations", "{tmp}/d.toml", "--svg", "{tmp}/d.toml"),
        REFUSED,
        {"d.toml": "f = 1.0\nb = 1.0\nw = 1.0\n"},
    ),
    # --- control characters from a profile key ------------------------------------------------------------
    Case(
        "model-key-control-chars",
        EXPLAIN_MODEL,
        REFUSED,
        {"model.toml": LLAMA_TOML + '"evil\\u001b[2J\\u0007\\r\\nkey" = 1\n'},
    ),
    Case(
        "hf-value-control-chars",
        (*EXPLAIN[:2], "{tmp}/config.json", *EXPLAIN[3:]),
        REFUSED,
        {"config.json": json.dumps({**HF_LLAMA, "hidden_size": "\x1b[2J4096\r\n"})},
    ),
    # --- found by benchmarks/fuzz_inputs.py (not in the list) ----------------------
    Case(
        "recommend-max-vp-2^64",
        ("recommend", "--max-vp", "18446744073709551616"),
        REFUSED,
    ),
    Case(
        "explain-pp1-first-stage-layers-neg",
        (*EXPLAIN, "--first-stage-layers", "-1"),
        REFUSED,
    ),
    Case("explain-json-and-format", ("explain", "--format", "megatron", "--json"), REFUSED),
    Case(
        "recommend-seq-len-400-digits",
        ("recommend", "--model", "gpt3-175b", "--seq-len", "1" + "0" * 400),
        REFUSED,
    ),
    Case("explain-global-batch-400-digits", ("explain", "--global-batch", "9" * 400), REFUSED),
    # --- sane answers the probes must still give ----------------------------------------------------------
    Case("explain-small-json", (*EXPLAIN, "--json")),
    Case("recommend-small-json", (*RECOMMEND, "--format", "json", "--top", "3")),
    Case("schedule-zbv-json", ("schedule", "zbv", "--pp", "4", "--microbatches", "8", "--json")),
)


# --- the contract of issue 10 for one run ---------------------------------------------------------------------

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
NON_FINITE_WORD = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"non-strict JSON token {token}")


def _non_finite(node: Any, where: str) -> str | None:
    """The path of the first non-finite number in a parsed JSON document (e.g. 1e999 reads as inf)."""
    if isinstance(node, float) and not math.isfinite(node):
        return f"{where} = {node}"
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in children:
        found = _non_finite(value, f"{where}.{key}" if isinstance(node, dict) else f"{where}[{key}]")
        if found:
            return found
    return None


def json_problem(text: str) -> str | None:
    """None when `text` is strict JSON (RFC 8259) with finite numbers only, else what is wrong."""
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        return f"not strict JSON: {exc}"
    found = _non_finite(doc, "$")
    return f"non-finite number at {found}" if found else None


def problems(json_out: bool, code: int, out: str, err: str, expect: int | None = EITHER) -> list[str]:
    """What is wrong with one run, as short labels with detail ([] when it keeps the contract): exit 0 with a
    sane answer (strict JSON, finite numbers), exit 1 with the same (the documented "no answer": nothing fits, or
    no count meets a deadline) or exit 2 with exactly one "pplan: error: " line."""
    found: list[str] = []
    if "Traceback" in err or code not in (0, 1, 2):
        found.append(f"traceback: exit {code}: {err.strip()[-300:]}")
        return found
    if expect is not None and code != expect:
        found.append(f"invalid-accepted: expected exit {expect}, got {code}")
    if code == 2:
        lines = err.splitlines()
        if len(lines) != 1 or not lines[0].startswith("pplan: error: "):
            found.append(f"error-lines: {len(lines)} stderr lines: {err[:300]!r}")
        elif CONTROL.search(lines[0]):
            found.append(f"error-lines: control character in {lines[0][:200]!r}")
        return found
    if not out.strip():
        found.append(f"empty-output: exit {code} with nothing on stdout")
    elif json_out:
        problem = json_problem(out)
        if problem:
            found.append(f"non-strict-json: {problem}")
    elif match := NON_FINITE_WORD.search(out):
        found.append(f"non-finite-text: {match.group(0)!r} in the output")
    return found
