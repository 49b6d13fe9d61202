"""`pplan explain --from-log`: the plan rebuilt from a log, flags filling what it lacks, predicted against measured,
the gap's terms (MoE terms named for a routed run), and the one-line refusals."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from pplan.explain import explain
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from tests.cli_run import run_pplan

DATA = Path(__file__).parent / "data" / "logs"


def _log(stem: str) -> str:
    return str(DATA / f"{stem}.log")


def test_torchtitan_log_rebuilds_its_plan_and_reads_its_step(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(capsys, *["explain", "--from-log", _log("torchtitan_2025_h100_allranks"), "--json"])
    assert got.code == 0, got.err
    doc = got.json()
    assert doc["schema"] == "pplan.fromlog/1"
    plan = doc["explain"]["plan"]
    assert (plan["gpus"], plan["tp"], plan["global_batch"]) == (8, 2, 8)
    assert doc["model_source"].startswith("llama3-8b")
    assert doc["hardware_source"].startswith("h100-sxm-80gb")
    want = statistics.median(2 * 8192 / (t * 2) for t in (4096, 4096, 4201, 4150))
    assert doc["measured_step_s"] == pytest.approx(want, rel=1e-9)
    # predicted: the same plan explained directly
    direct = explain(
        load_model("llama3-8b"),
        load_hardware("h100-sxm-80gb"),
        PlanRequest(
            gpus=8,
            global_batch=8,
            micro_batch=2,
            tp=2,
            seq_len=8192,
            recompute="selective",
            zero_stage=3,
            stack="torchtitan",
        ),
    )
    assert direct.performance is not None
    step = next(row for row in doc["comparison"] if row["quantity"] == "step_s")
    assert step["predicted"] == pytest.approx(direct.performance.step_s, rel=1e-9)
    assert doc["gap"] == pytest.approx(direct.performance.step_s / want - 1, rel=1e-9)
    mfu = next(row for row in doc["comparison"] if row["quantity"] == "mfu")
    assert mfu["measured"] == pytest.approx(
        direct.performance.mfu * direct.performance.step_s / want, rel=1e-9
    )
    assert {row["quantity"] for row in doc["comparison"]} >= {
        "step_s",
        "tokens_per_s",
        "mfu",
        "mfu_causal",
        "peak_memory_bytes",
    }


def test_a_log_without_gpu_name_asks_for_hardware(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(capsys, *["explain", "--from-log", _log("megatron_core016_dense")])
    assert got.code == 2
    assert "--hardware" in got.err and len(got.err.strip().splitlines()) == 1
    assert "Traceback" not in got.err


def test_flags_fill_what_the_log_lacks_and_assumptions_are_said(capsys: pytest.CaptureFixture[str]) -> None:
    missing = run_pplan(capsys, *["explain", "--from-log", _log("bridge_2508_yaml_swapped")])
    assert missing.code == 2 and "--gpus" in missing.err
    got = run_pplan(
        capsys, *["explain", "--from-log", _log("bridge_2508_yaml_swapped"), "--gpus", "16", "--json"]
    )
    assert got.code == 0, got.err
    doc = got.json()
    read = {f["field"]: f["source"] for f in doc["read"]}
    assert read["gpus"] == "flag"
    assert read["tp"].startswith("printed configuration")
    assert doc["explain"]["plan"]["precision"] == "fp8"
    assert doc["measured_step_s"] == pytest.approx(6.40)


def test_a_flag_wins_over_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(
        capsys,
        *[
            "explain",
            "--from-log",
            _log("megatron_core016_dense"),
            "--hardware",
            "h100-sxm-80gb",
            "--micro-batch",
            "2",
            "--json",
        ],
    )
    assert got.code == 0, got.err
    doc = got.json()
    assert doc["explain"]["plan"]["micro_batch"] == 2
    assert doc["explain"]["plan"]["vp"] == 4  # 80 layers / (pp 4 × 5 per virtual stage), from the log
    # Llama 2 70B and Llama 3 70B share the layer shape: the logged vocabulary (128,256) picks Llama 3
    assert doc["model_source"].startswith("llama3-70b")


def test_run_name_only_log_uses_the_named_model_and_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(
        capsys,
        *["explain", "--from-log", _log("nemo2_2409_runname"), "--hardware", "h100-sxm-80gb", "--json"],
    )
    assert got.code == 0, got.err
    doc = got.json()
    assert doc["model_source"].startswith("llama3-8b")
    assert doc["explain"]["plan"]["gpus"] == 8  # 1 node × 8 GPUs per node
    assert any(a.startswith("seq_len") for a in doc["assumed"])


def test_moe_log_names_the_moe_terms(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(
        capsys, *["explain", "--from-log", _log("megatron_moe_wrapped_srun"), "--hardware", "h100-sxm-80gb"]
    )
    assert got.code == 0, got.err
    assert "MoE: grouped GEMM efficiency" in got.out
    assert "MoE: exposed expert all-to-all" in got.out
    assert "mixtral-8x7b" in got.out


def test_no_steady_state_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(
        capsys, *["explain", "--from-log", _log("unusable_one_iteration"), "--hardware", "h100-sxm-80gb"]
    )
    assert got.code == 2 and "no steady state" in got.err


def test_no_iterations_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(
        capsys, *["explain", "--from-log", _log("unusable_no_iterations"), "--hardware", "h100-sxm-80gb"]
    )
    assert got.code == 2 and "no iteration lines" in got.err


def test_fromlog_schema_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(capsys, *["schema", "fromlog"])
    assert got.code == 0
    assert "gap_terms" in got.out


def test_torchtitan_hsdp_from_a_printed_job_config(capsys: pytest.CaptureFixture[str]) -> None:
    got = run_pplan(capsys, "explain", "--from-log", _log("torchtitan_2025_hsdp_jsonconfig"), "--json")
    assert got.code == 0, got.err
    doc = got.json()
    plan = doc["explain"]["plan"]
    assert (plan["gpus"], plan["tp"], plan["global_batch"]) == (64, 2, 64)  # 2 × 16 × tp 2; 2 per rank × 32
    assert doc["hardware_source"].startswith("h200-sxm-141gb")
    assert (plan["zero_stage"], plan["shard_group"]) == (
        3,
        16,
    )  # FSDP2 over the 16-way shard, replicated twice


@pytest.mark.acceptance
def test_uneven_layers_take_megatrons_first_and_last_stage_split(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Llama 3.1 405B's 126 layers on p·v = 8·8 = 64 chunks: 62 chunks of ⌈126/64⌉ = 2 leave 2, one each on the
    first and last chunk (Megatron counts the embedding and the loss as layers there)."""
    log = tmp_path / "405b.log"
    lines = ["Experiment name: pretrain_llama31_405b_fp8_64nodes_tp8_pp8_cp2_vp8_1mbs_256gbs"]
    lines += [
        f"Training epoch 0, iteration {i}/9 | global_batch_size: 256 | train_step_timing in s: 12.5"
        for i in range(4)
    ]
    log.write_text("\n".join(lines) + "\n")
    got = run_pplan(capsys, "explain", "--from-log", str(log), "--hardware", "h100-sxm-80gb", "--json")
    assert got.code == 0, got.err
    doc = got.json()
    plan = doc["explain"]["plan"]
    assert plan["gpus"] == 512
    assert plan["layers_per_chunk"][0] == plan["layers_per_chunk"][-1] == 1
    assert sum(plan["layers_per_chunk"]) == 126 and set(plan["layers_per_chunk"][1:-1]) == {2}
    assert any(a.startswith("first_stage_layers = 1, last_stage_layers = 1") for a in doc["assumed"])


@pytest.mark.parametrize(
    ("gpu", "profile"),
    [("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"), ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
     ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"), ("NVIDIA H200", "h200-sxm-141gb"), ("NVIDIA B200", "b200-180gb")],
)  # fmt: skip
def test_the_logged_gpu_names_its_profile(gpu: str, profile: str) -> None:
    from pplan.logs import read_log
    from pplan.logs.rebuild import hardware_for

    spec, _ = hardware_for(read_log(f"GPU 0: {gpu}\n"), None)
    assert spec.name == profile


def test_torchtitan_degrees_given_by_flag_rescale_tps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """torchtitan's tps is per GPU over tp·pp·cp (module pplan.logs.torchtitan): a log with no TP degree read at
    --tp 2 has half the step a TP of 1 would give, and twice the GPUs."""
    lines = ["[rank0]:[titan] 2025-06-10 09:00:08,000 - root - INFO - Training starts at step 1, with local batch "
             "size 2, global batch size 8, sequence length 8192, gradient accumulation steps 1"]  # fmt: skip
    for step, tps in ((1, 1180), (10, 4096), (20, 4096), (30, 4201)):
        lines.append(f"[rank0]:[titan] 2025-06-10 09:00:{step:02d},000 - root - INFO - step: {step:2d}  loss: 9.0  "
                     f"memory: 52.38GiB(66.21%)  tps: {tps:,}  tflops: 237.30  mfu: 23.99%")  # fmt: skip
    log = tmp_path / "titan.log"
    log.write_text("\n".join(lines) + "\n")
    base = [
        "explain",
        "--from-log",
        str(log),
        "--hardware",
        "h100-sxm-80gb",
        "--model",
        "llama3-8b",
        "--json",
    ]
    one = run_pplan(capsys, *base).json()
    two = run_pplan(capsys, *base, "--tp", "2").json()
    assert one["measured_step_s"] == pytest.approx(
        statistics.median(2 * 8192 / t for t in (4096, 4096, 4201))
    )
    assert two["measured_step_s"] == pytest.approx(one["measured_step_s"] / 2)
    assert (one["explain"]["plan"]["gpus"], two["explain"]["plan"]["gpus"]) == (4, 8)


def test_a_logged_knob_pplan_refuses_is_left_at_its_default_and_said() -> None:
    """TP communication overlap without sequence parallelism (pplan refuses the pair): the rest of the log still
    rebuilds; a recompute layer count under no recompute (Megatron prints its default) is not read."""
    from pplan.logs import read_log
    from pplan.logs.rebuild import rebuild

    text = (DATA / "megatron_core016_dense.log").read_text()
    text = text.replace("  sequence_parallel ............................... True",
                        "  sequence_parallel ............................... False\n"
                        "  tp_comm_overlap ................................. True\n"
                        "  recompute_num_layers ............................ 1")  # fmt: skip
    rebuilt = rebuild(read_log(text), None, "h100-sxm-80gb", {}, {})
    assert (rebuilt.request.tp_comm_overlap, rebuilt.request.recompute_layers, rebuilt.request.tp) == (
        False,
        None,
        4,
    )
    assert any(a.startswith("tp_comm_overlap = False (the logged True is refused") for a in rebuilt.assumed)
