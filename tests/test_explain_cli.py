"""`pplan explain` as a user sees it: the default example, the tables, the JSON document and its schema."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run_pplan


def test_default_example_runs_and_says_what_it_assumed(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "explain")
    assert res.code == 0, res.err
    for heading in ("Configuration", "Memory per GPU", "Pipeline", "Communication per GPU", "Assumptions"):
        assert heading in res.out
    assert "--model llama3-70b" in res.out  # a defaulted value is stated, not silently used
    flat = " ".join(res.out.split())  # the terminal wraps long lines
    assert "m = global batch / (micro-batch × d) = 1024 / (1 × 64) = 16" in flat


def test_json_carries_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "explain", "--json").json()
    assert doc["schema"] == "pplan.explain/2"
    plan_keys = {"tp", "pp", "dp", "vp", "cp", "schedule", "micro_batch", "num_microbatches", "global_batch",
                 "seq_len", "recompute", "sequence_parallel"}  # fmt: skip
    assert plan_keys <= doc["plan"].keys()
    assert {"usable_bytes", "fits", "stages"} <= doc["memory"].keys()
    stage_keys = {"stage", "layers", "weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes",
                  "extra_activation_bytes", "in_flight_microbatches", "total_bytes"}  # fmt: skip
    assert all(stage_keys <= s.keys() for s in doc["memory"]["stages"])
    for s in doc["memory"]["stages"]:
        parts = ("weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes", "extra_activation_bytes",
                 "recompute_working_bytes", "gathered_weights_bytes", "fragmentation_bytes")  # fmt: skip
        assert s["total_bytes"] == sum(s[k] for k in parts)
    assert {"bubble_fraction_of_ideal", "bubble_fraction_of_step", "p2p_message_bytes",
            "p2p_messages_per_step"} <= doc["pipeline"].keys()  # fmt: skip
    assert {"tp_bytes_per_microbatch", "dp_bytes_per_step"} <= doc["communication"].keys()
    assert isinstance(doc["assumptions"], list) and doc["assumptions"]


def test_schema_command_prints_a_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "schema", "explain")
    assert res.code == 0
    schema = json.loads(res.out)
    assert {"schema", "plan", "memory", "pipeline", "communication", "assumptions"} <= schema[
        "properties"
    ].keys()


def test_p2p_messages_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    # 1F1B: 2·m·(p−1) messages; interleaved: 2·m·(v·p−1); V placement keeps the middle hop local: 2·m·(2p−2).
    base = ("explain", "--json", "--global-batch", "1024")
    assert run_pplan(capsys, *base).json()["pipeline"]["p2p_messages_per_step"] == 2 * 16 * 3
    il = run_pplan(capsys, *base, "--schedule", "interleaved-1f1b", "--vp", "2").json()
    assert il["pipeline"]["p2p_messages_per_step"] == 2 * 16 * (2 * 4 - 1)
    v = run_pplan(capsys, *base, "--schedule", "zbv").json()
    assert v["pipeline"]["p2p_messages_per_step"] == 2 * 16 * (2 * 4 - 2)


def test_data_parallel_traffic_ring_allreduce(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_pplan(capsys, "explain", "--json", "--grad-dtype", "bf16").json()
    s0 = doc["memory"]["stages"][0]
    d = doc["plan"]["dp"]
    assert doc["communication"]["dp_bytes_per_step_per_stage"][0] == int(2 * (d - 1) / d * s0["params"] * 2)


def test_python_dash_m_runs() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pplan", "explain", "--json"], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert json.loads(out.stdout)["plan"]["num_microbatches"] == 16


def test_python_dash_m_exit_status_and_flushed_output() -> None:
    """`run` leaves with os._exit: the exit status must still be main's, and what was printed must arrive."""
    import subprocess
    import sys

    bad = subprocess.run(
        [sys.executable, "-m", "pplan", "explain", "--tp", "3"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("pplan: error: --tp") and bad.stdout == ""
    good = subprocess.run([sys.executable, "-m", "pplan", "profiles"], capture_output=True, text=True)
    assert good.returncode == 0 and "llama3-405b" in good.stdout


def test_exit_status_as_sys_exit_gives_it(capsys: pytest.CaptureFixture[str]) -> None:
    from pplan.cli import _exit_status

    assert (_exit_status(None), _exit_status(0), _exit_status(3)) == (0, 0, 3)
    assert _exit_status("stopped") == 1 and capsys.readouterr().err == "stopped\n"


def test_explain_emits_launcher_settings(capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    res = run_pplan(capsys, "explain", "--format", "megatron")
    assert res.code == 0, res.err
    assert "--tensor-model-parallel-size 8" in res.out and "--pipeline-model-parallel-size 4" in res.out
    res = run_pplan(capsys, "explain", "--format", "torchtitan")  # torchtitan 0.3.x: arguments
    assert res.code == 0, res.err
    assert "--parallelism.tensor_parallel_degree 8" in res.out and "--config llama3_70b" in res.out
    res = run_pplan(capsys, "explain", "--format", "torchtitan@0.2")  # torchtitan 0.2.x: a TOML job config
    assert res.code == 0, res.err
    toml = tomllib.loads(res.out)
    assert toml["parallelism"]["tensor_parallel_degree"] == 8
    assert toml["parallelism"]["pipeline_parallel_degree"] == 4
    res = run_pplan(capsys, "explain", "--schedule", "zb-h1", "--format", "megatron")
    assert res.code == 2 and "--launcher" in res.err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e30"])
def test_train_tokens_must_be_finite_and_positive(capsys: pytest.CaptureFixture[str], value: str) -> None:
    res = run_pplan(capsys, "explain", "--train-tokens", value, "--json")
    assert res.code == 2, (res.out, res.err)
    lines = res.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pplan: error: --train-tokens: "), res.err


def test_train_tokens_reports_a_finite_time(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "explain", "--train-tokens", "15e12", "--json")
    assert res.code == 0, res.err

    def reject(token: str) -> None:
        raise ValueError(token)

    json.loads(res.out, parse_constant=reject)


def test_memory_table_with_every_knob_fits_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    # ZeRO-3 gathers, a recompute transient, offload in transit, fragmentation and the model ends: 14 columns
    res = run_pplan(capsys, "explain", "--model", "llama3-70b", "--gpus", "2048", "--global-batch", "1024",
                    "--tp", "8", "--pp", "4", "--zero-stage", "3", "--shard-group", "8", "--recompute", "full",
                    "--recompute-method", "block", "--recompute-layers", "2", "--offload-modules",
                    "attn_norm,mlp_norm")  # fmt: skip
    assert res.code == 0, res.err
    header = next(line for line in res.out.splitlines() if line.lstrip().startswith("stage "))
    assert header.split() == [
        "stage", "wts", "grad", "opt", "mb", "act", "ext", "rcmp", "gath", "offl", "frag", "total", "free", "fits",
    ]  # fmt: skip


def test_explain_states_how_tp_overlap_is_costed(capsys: pytest.CaptureFixture[str]) -> None:
    # megatron-core's TP overlap is costed as Transformer Engine's userbuffers run it, and explain says so: 16
    # communication SMs of the H100's 132 (datasheet), 4 pipeline splits
    args = (
        "explain",
        "--model",
        "llama3-70b",
        "--gpus",
        "16",
        "--tp",
        "8",
        "--pp",
        "2",
        "--global-batch",
        "16",
    )
    text = " ".join(run_pplan(capsys, *args, "--tp-comm-overlap").out.split())
    assert "reduce-scatters pipelined in 4 splits" in text
    assert "16 of the GPU's 132 SMs" in text
    assert "TP overlap (" not in " ".join(run_pplan(capsys, *args).out.split())
