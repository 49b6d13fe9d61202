"""The log corpus (tests/data/logs): each log, written from the formats' public descriptions, parses to the JSON
beside it; the steady-state step times there were derived by hand from the lines (medians noted below); and the
messy forms of one log (CRLF, ANSI codes, rank prefixes, every rank repeating, wrapped records) parse as it does."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

import pytest

from pplan.logs import read_log
from pplan.logs.clean import clean_lines

DATA = Path(__file__).parent / "data" / "logs"
LOGS = sorted(DATA.glob("*.log"))


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("path", LOGS, ids=[p.stem for p in LOGS])
def test_each_log_parses_to_its_expected_json(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text())
    assert read_log(_text(path)).summary() == expected


HAND_STEADY_S = {
    # Megatron core_v0.16.1: iteration 1 is warm-up; median of 8012.4, 7996.1, 8003.9, 8020.0 ms
    "megatron_core016_dense": (8003.9 + 8012.4) / 2 / 1000,
    # iteration 50 warm-up, iteration 200 (4988 ms) a profiling step; median of 3120.4, 3118.8, 3124.6 ms
    "megatron_lm_2024_messy_crlf": 3.1204,
    "megatron_moe_wrapped_srun": 9.888,
    "nemo2_2409_runname": (2.508 + 2.51) / 2,
    "bridge_2508_yaml_swapped": 6.40,
    # torchtitan: step = local batch × seq / (tps × tp); rank 0's tps 4096, 4096, 4201, 4150
    "torchtitan_2025_h100_allranks": statistics.median(2 * 8192 / (t * 2) for t in (4096, 4096, 4201, 4150)),
    # older torchtitan: wps, local batch 4 (TOML batch_size), tp 8: wps 412, 410, 414
    "torchtitan_2024_old_toml": statistics.median(4 * 8192 / (w * 8) for w in (412, 410, 414)),
    # NeMo 1 progress bar redrawn with carriage returns: global_step 0 is warm-up; median of 4.12, 4.10, 4.11, 4.13
    "nemo1_2404_tqdm_cr": (4.11 + 4.12) / 2,
    # torchtitan HSDP (2 × 16) with tp 2, job config printed as JSON: 2 × 8192 / (tps × 2) for 655, 660, 658
    "torchtitan_2025_hsdp_jsonconfig": statistics.median(2 * 8192 / (t * 2) for t in (655, 660, 658)),
}


@pytest.mark.parametrize("stem", sorted(HAND_STEADY_S))
def test_steady_step_matches_the_hand_derivation(stem: str) -> None:
    steady = read_log(_text(DATA / f"{stem}.log")).steady
    assert steady is not None
    assert steady.step_s == pytest.approx(HAND_STEADY_S[stem], rel=1e-9)


def test_every_stack_and_release_is_in_the_corpus() -> None:
    stacks = {json.loads(p.with_suffix(".json").read_text())["stack"] for p in LOGS}
    assert {"megatron-core", "megatron-bridge", "torchtitan"} <= stacks
    assert sum("torchtitan" in p.stem for p in LOGS) >= 2
    assert sum(p.stem.startswith(("nemo", "bridge")) for p in LOGS) >= 2
    assert sum(p.stem.startswith("megatron") for p in LOGS) >= 3


def _messy(text: str) -> str:
    """Every rank repeats each line with a torchrun prefix and a timestamp, ANSI colour, CRLF line ends."""
    out = []
    for line in text.splitlines():
        for rank in (0, 1):
            out.append(f"[rank{rank}]:[2026-03-02 08:00:00] \x1b[1m{line}\x1b[0m")
    return "\r\n".join(out) + "\r\n"


def test_messy_forms_parse_as_the_clean_log() -> None:
    clean = _text(DATA / "megatron_core016_dense.log")
    want = read_log(clean).summary()
    assert read_log(_messy(clean)).summary() == want
    assert read_log(clean.replace("\n", "\r")).summary() == want


def test_a_wrapped_record_is_joined() -> None:
    lines = clean_lines(
        " iteration 20/ 100 | consumed samples: 1 |\n elapsed time per iteration (ms): 250.0 |\n"
        "| global batch size: 8 |\n iteration 30/ 100 | elapsed time per iteration (ms): 260.0 |\n"
    )
    assert len(lines) == 2
    assert "250.0" in lines[0].text and "global batch size" in lines[0].text


def test_memory_units_are_read_in_bytes() -> None:
    megatron = read_log(
        "[Rank 0] (after 5 iterations) memory (MB) | max allocated: 1024.0 | max reserved: 2048.0"
    )
    assert megatron.peak_reserved_bytes == 2048 * 2**20
    assert megatron.peak_allocated_bytes == 1024 * 2**20
    nemo = read_log(
        "Training epoch 0, iteration 3/9 | max_memory_reserved: 1.5e+10 | train_step_timing in s: 1.0"
    )
    assert nemo.peak_reserved_bytes == 15_000_000_000


@pytest.mark.parametrize("width", [50, 80, 120])
def test_a_terminal_cut_record_is_rebuilt(width: int) -> None:
    clean = _text(DATA / "megatron_core016_dense.log")
    want = read_log(clean).summary()
    cut = "\n".join(
        "\n".join(line[i : i + width] for i in range(0, len(line), width)) if "iteration" in line else line
        for line in clean.splitlines()
    )
    assert read_log(cut).summary() == want


def test_launcher_host_prefixes_are_dropped() -> None:
    log = "node-3: [rank0]:  iteration 10/ 20 | elapsed time per iteration (ms): 5.0 |\n"
    log += "gpu001:  iteration 20/ 20 | elapsed time per iteration (ms): 6.0 |\n"
    assert [it.step_s for it in read_log(log).iterations] == [0.005, 0.006]


def test_moe_layer_frequency_gives_the_dense_layers() -> None:
    listed = read_log("  moe_layer_freq .................................. [0, 0, 0, 1, 1, 1]\n")
    spelled = read_log("  moe_layer_freq .................................. ([0]*3+[1]*58)\n")
    assert listed.value("first_dense_layers") == spelled.value("first_dense_layers") == 3


def test_nemo1_yaml_names_are_read() -> None:
    """NeMo 1's Hydra config: the trainer's devices × nodes, its precision, activations_checkpoint_* names."""
    got = read_log(
        "trainer:\n  devices: 8\n  num_nodes: 4\n  precision: bf16-mixed\nmodel:\n"
        "  activations_checkpoint_granularity: selective\n  tensor_model_parallel_size: 4\n"
    )
    assert (got.value("gpus"), got.value("precision"), got.value("recompute"), got.value("tp")) == (
        32, "bf16", "selective", 4,
    )  # fmt: skip


PREFIXES = ("", "[rank0]: ", "0: ", "[default0]:", "[1,0]<stdout>: ", "node-3: ", "gpu017: ")
"""Launcher prefixes users' logs carry: torchrun's --tee and -r, srun --label, Open MPI --tag-output, pdsh hosts."""


def _shaken(text: str, seed: int) -> str:
    """`text` as a launcher might have written it (seeded): one prefix style per line, rank 1 repeating some lines,
    ANSI colour around some, CRLF or LF."""
    rng = random.Random(seed)
    style = rng.choice(PREFIXES)
    out = []
    for line in text.split("\n"):
        if not line:
            continue
        shown = f"\x1b[3{rng.randint(1, 6)}m{line}\x1b[0m" if rng.random() < 0.3 else line
        out.append(style + shown)
        if rng.random() < 0.3:
            out.append("[rank1]: " + line)
    return ("\r\n" if rng.random() < 0.5 else "\n").join(out) + "\n"


SHAKEN = [p for p in LOGS if "\r" not in _text(p).replace("\r\n", "\n")]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("path", SHAKEN, ids=[p.stem for p in SHAKEN])
def test_launcher_prefixes_and_repeats_change_nothing(path: Path, seed: int) -> None:
    want = json.loads(path.with_suffix(".json").read_text())
    assert read_log(_shaken(_text(path).replace("\r\n", "\n"), seed)).summary() == want


def test_forks_iteration_labels_are_read() -> None:
    """Iteration lines without the total (`iteration 10 |`) and forks' labels for the time per iteration."""
    got = read_log(
        " iteration 10 | time per iteration (ms): 100.0 |\n iteration 20/ 20 | iteration time (s): 0.09 |\n"
    )
    assert [(it.number, it.step_s) for it in got.iterations] == [(10, 0.1), (20, 0.09)]
