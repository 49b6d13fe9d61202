"""`pplan bench` from the command line: one-line errors for bad input, and one real run end to end (--json with
the keys of `pplan schedule --json`, --report, --svg, --calibrate writing a profile `pplan` plans with)."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import NoReturn

import pytest

import pplan.bench.config as bench_config
from pplan.bench.config import BenchConfig
from pplan.bench.records import RankRecord
from pplan.cli.bench import MAX_BENCH_MICROBATCHES, MAX_BENCH_RANKS
from pplan.profiles.catalog import load_hardware
from tests.cli_run import CliResult, run_pplan
from tests.test_bench_analysis import _play


def _one_line_error(res: CliResult, *needles: str) -> None:
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith("pplan: error: ")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--schedule", "nope"), ("--schedule", "unknown schedule", "zb-h1")),
        (("--schedule", "dualpipev", "--pp", "2", "--microbatches", "2"), ("--microbatches", "at least 4")),
        (
            ("--schedule", "1f1b", "--pp", "4", "--microbatches", "2"),
            ("--microbatches", "Schedule1F1B", "csv"),
        ),
        (("--schedule", "interleaved-1f1b", "--vp", "1"), ("--vp",)),
        (("--schedule", "dualpipe"), ("one chain", "dualpipev")),
        (("--schedule", "zb-h1", "--runtime", "torch"), ("--runtime", "csv")),
        (("--pp", "1"), ("--pp", "at least 2")),
        (("--steps", "0"), ("--steps",)),
        (("--f-ms", "-1"), ("--f-ms",)),
        (("--mode", "compute", "--hidden", "50"), ("--hidden", "multiple of 16")),
        (("--mode", "compute", "--model", "no-such-model"), ("model", "llama3-8b")),
        (("--calibrate",), ("--calibrate", "--hardware", "--out")),
        (
            ("--calibrate", "--hardware", "h100-sxm-80gb", "--out", "x.toml", "--mode", "sleep"),
            ("--mode compute",),
        ),
        (("--hardware", "h100-sxm-80gb"), ("--calibrate",)),
        (("--calibrate", "--hardware", "no-such-gpu", "--out", "x.toml"), ("hardware", "h100-sxm-80gb")),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    _one_line_error(run_pplan(capsys, "bench", *args), *needles)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--pp", "20000"), "--pp"),
        (("--pp", str(MAX_BENCH_RANKS + 1), "--runtime", "csv"), "--pp"),
        (("--microbatches", "1000000"), "--microbatches"),
        (("--schedule", "interleaved-1f1b", "--vp", "100000", "--microbatches", "8"), "--vp"),
        (("--steps", str(10**9)), "--steps"),
        (("--warmup", str(10**9)), "--warmup"),
        (("--f-ms", "nan"), "--f-ms"),
        (("--i-ms", "inf"), "--i-ms"),
        (("--w-ms", "1e300"), "--w-ms"),
        (("--timeout", "nan"), "--timeout"),
        (("--timeout", "inf"), "--timeout"),
        (("--timeout", "0"), "--timeout"),
    ],
)
def test_sizes_and_times_are_capped_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], flag: str
) -> None:
    """Refused before the run is even configured: no BenchConfig (which builds the schedule), no torch."""
    reached: list[str] = []
    for name in ("BenchConfig", "require_torch"):

        def start(*_: object, _name: str = name, **__: object) -> NoReturn:
            reached.append(_name)
            raise AssertionError(f"{_name} ran before the refusal")

        monkeypatch.setattr(bench_config, name, start)
    _one_line_error(run_pplan(capsys, "bench", *args), flag)
    assert reached == []


def test_the_bench_caps_are_stated(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "bench", "--pp", "20000")
    _one_line_error(res, f"cap of {MAX_BENCH_RANKS}", f"--pp {MAX_BENCH_RANKS} or less")
    res = run_pplan(capsys, "bench", "--microbatches", str(MAX_BENCH_MICROBATCHES + 1))
    _one_line_error(res, f"--microbatches {MAX_BENCH_MICROBATCHES} or less")


def test_without_torch_says_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    _one_line_error(run_pplan(capsys, "bench", "--schedule", "1f1b"), "torch", 'pip install "pplan[bench]"')


def slow_gpu(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    """The H100 profile with a peak of 10 TFLOP/s (the least a hardware profile accepts: pplan.profiles.plausible's
    plausibility bounds): tiny blocks on a CPU (or a launch-bound GPU) then fit a GEMM efficiency far above the
    1e-5 they would against the H100's own peak."""
    text = run_pplan(capsys, "profiles", "hardware", "h100-sxm-80gb", "--source").out
    text = re.sub(r"peak_bf16_tflops = [0-9.]+", "peak_bf16_tflops = 10.0", text)
    text = re.sub(r"peak_fp8_tflops = [0-9.]+", "peak_fp8_tflops = 20.0", text)
    path = tmp_path / "slow-gpu.toml"
    path.write_text(text)
    return str(path)


def test_a_played_run_reports_without_torch(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fast tier's stand-in for the torch runs below: the launch is replaced by records played by hand
    (`tests.test_bench_analysis._play`: F, I, W of 6, 5, 4 ms, 0.5 ms dispatch, 1.5 ms a hop), so everything after
    the launch (analysis, --json, --report, --svg, the terminal tables) runs here without torch."""

    def launch(configs: list[BenchConfig]) -> list[list[RankRecord]]:
        return [_play(c, f=6.0, i=5.0, w=4.0, o=0.5, c=1.5) for c in configs]

    monkeypatch.setattr(bench_config, "require_torch", lambda: None)
    monkeypatch.setitem(sys.modules, "pplan.bench.worker", types.SimpleNamespace(launch=launch))
    report, svg = tmp_path / "report.json", tmp_path / "run.svg"
    p, m = 2, 4
    res = run_pplan(capsys, "bench", "--schedule", "1f1b", "--pp", str(p), "--microbatches", str(m), "--json",
                    "--report", str(report), "--svg", str(svg))  # fmt: skip
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["schema"] == "pplan.bench/1" and doc["config"]["schedule"] == "1f1b"
    assert doc["predicted"]["p2p_messages_per_step"] == 2 * m * (p - 1)  # every boundary, both directions
    assert doc["measured"]["makespan"] == pytest.approx(
        doc["predicted"]["makespan"], rel=1e-6
    )  # played exactly
    assert json.loads(report.read_text()) == doc
    assert svg.read_text().count('class="action"') == 2 * (2 * p * m)  # measured and predicted: F and B each
    res = run_pplan(capsys, "bench", "--schedule", "1f1b", "--pp", str(p), "--microbatches", str(m))
    assert res.code == 0, res.err
    for text in (
        "Measured",
        "Predicted by pplan",
        "bubble, fraction of step",
        "P2P messages per step",
        "rank 1",
    ):
        assert text in res.out


@pytest.mark.acceptance  # launches torch ranks
def test_calibrate_end_to_end(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.pipelining")
    from pplan.cli.schedule import timeline_json
    from pplan.schedules import get_schedule
    from pplan.schedules.timeline import simulate

    out, report, svg = tmp_path / "fitted.toml", tmp_path / "report.json", tmp_path / "run.svg"
    res = run_pplan(
        capsys,
        "bench",
        "--calibrate",
        "--hardware",
        slow_gpu(capsys, tmp_path),
        "--out",
        str(out),
        "--schedule",
        "gpipe",
        "--microbatches",
        "2",
        "--steps",
        "1",
        "--json",
        "--report",
        str(report),
        "--svg",
        str(svg),
    )
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["schema"] == "pplan.bench/1"
    assert doc["config"]["mode"] == "compute"
    schedule_keys = set(timeline_json(simulate(get_schedule("gpipe", 2, 2))))
    assert schedule_keys <= set(doc["measured"]) and schedule_keys <= set(doc["predicted"])
    assert {"bubble_fraction_of_step", "checks", "ok"} <= set(doc["error"])
    assert doc["measured"]["p2p_messages_per_step"] == 4  # 2 micro-batches × 1 boundary × 2 directions
    assert json.loads(report.read_text()) == doc
    assert svg.read_text().count('class="action"') == 2 * 8  # measured and predicted, 8 passes each
    fitted = load_hardware(str(out))
    assert fitted.efficiency.matmul == pytest.approx(doc["calibration"]["matmul"])
    assert 0 < fitted.efficiency.matmul < 1 and fitted.efficiency.calibrated
    # a profile pplan plans with: explain runs on it
    plan = run_pplan(
        capsys, "explain", "--model", "llama3-8b", "--hardware", str(out), "--gpus", "16", "--global-batch", "8",
        "--pp", "2", "--json",
    )  # fmt: skip
    assert plan.code == 0, plan.err


@pytest.mark.acceptance  # launches torch ranks
def test_terminal_output(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.pipelining")
    res = run_pplan(capsys, "bench", "--schedule", "zb-h1", "--microbatches", "2", "--steps", "1", "--f-ms", "2",
                    "--i-ms", "2", "--w-ms", "2")  # fmt: skip
    assert res.code == 0, res.err
    for text in (
        "Measured",
        "Predicted by pplan",
        "bubble, fraction of step",
        "P2P messages per step",
        "rank 1",
    ):
        assert text in res.out


@pytest.mark.acceptance  # launches torch ranks
def test_a_failing_rank_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception on a rank (here injected into the forked workers) ends the launch with that rank's error."""
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.pipelining")
    import pplan.bench.worker as worker

    def boom(*args: object) -> None:
        raise RuntimeError("injected failure")

    monkeypatch.setattr(worker, "run_case", boom)
    _one_line_error(
        run_pplan(capsys, "bench", "--steps", "1"), "bench: rank", "RuntimeError: injected failure"
    )


@pytest.mark.acceptance  # launches torch ranks
def test_a_fit_outside_the_profile_ranges_is_refused_and_nothing_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A GEMM efficiency a profile cannot hold (here forced above the peak) is one line on --calibrate, not a file
    that `pplan` then refuses to read."""
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.pipelining")
    import dataclasses

    import pplan.bench.calibrate as calibrate

    real = calibrate.fit_matmul_to_measured

    def impossible(result: object, hw: object) -> calibrate.Calibration:
        cal = real(result, hw)  # type: ignore[arg-type]
        eff = cal.hardware.efficiency.model_copy(update={"matmul": 1.5})
        return dataclasses.replace(
            cal, matmul=1.5, hardware=cal.hardware.model_copy(update={"efficiency": eff})
        )

    monkeypatch.setattr(calibrate, "fit_matmul_to_measured", impossible)
    out = tmp_path / "fitted.toml"
    res = run_pplan(capsys, "bench", "--calibrate", "--hardware", slow_gpu(capsys, tmp_path), "--out", str(out),
                    "--schedule", "gpipe", "--microbatches", "2", "--steps", "1")  # fmt: skip
    _one_line_error(res, "--calibrate", "efficiency.matmul", "1.5")
    assert not out.exists()
