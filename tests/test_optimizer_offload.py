"""Optimizer CPU offload (`--optimizer-offload-fraction`, megatron-core's hybrid device optimizer): a GPU keeps
(1 − f) of its optimizer states, its step adds the offloaded part's FP32 copies over the host link, the plan's
rules refuse what megatron-core does not run, and the launchers write or refuse it as declared.

Figures are derived by hand from Llama 3 8B's published size (8,030,261,248 parameters, the Hugging Face
checkpoint's count) and the H100 profile's stated figures."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pplan.cost.steptime import step_time
from pplan.errors import ConfigError
from pplan.explain import explain
from pplan.launchers.capabilities import MEGATRON, TORCHTITAN, TORCHTITAN_02
from pplan.launchers.megatron import megatron_args, megatron_env, megatron_notes
from pplan.launchers.megatron_validate import option_table, validate_megatron
from pplan.launchers.torchtitan import torchtitan_text
from pplan.plan.configuration import make_plan
from pplan.plan.records import Plan, PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.stacks import STACKS
from tests.cli_run import run_pplan

LLAMA = load_model("llama3-8b")
H100 = load_hardware("h100-sxm-80gb")
LLAMA_8B_PARAMS = 8_030_261_248
"""Llama 3 8B's parameters (meta-llama/Meta-Llama-3-8B: embedding and output layer untied)."""
N = 16
"""Data-parallel GPUs: 16 GPUs at t = p = cp = 1, so each holds 1/16 of the optimizer states (ZeRO-1)."""


def _request(f: float) -> PlanRequest:
    return PlanRequest(gpus=N, global_batch=32, zero_stage=1, optimizer_offload_fraction=f)


def _plan(f: float) -> Plan:
    return make_plan(LLAMA, _request(f))


@pytest.mark.parametrize("f", [0.0, 0.25, 0.5, 1.0])
def test_a_gpu_keeps_the_rest_of_its_optimizer_states(f: float) -> None:
    """12 bytes per parameter (FP32 master 4 + Adam's two FP32 moments 4 + 4), sharded over 16 GPUs, (1 − f) kept."""
    memory = explain(LLAMA, H100, _request(f), with_sensitivity=False).memory
    (rank,) = memory.stages
    assert rank.optimizer_bytes == math.ceil(LLAMA_8B_PARAMS * 12 * (1 - f) / N)
    assert memory.bytes_per_param.optimizer == 12 * (1 - f) / N
    assert (rank.weights_bytes, rank.grads_bytes) == (LLAMA_8B_PARAMS * 2, LLAMA_8B_PARAMS * 4)  # both stay


def test_the_step_adds_the_copies_and_sheds_the_gpus_share_of_adam() -> None:
    """The optimizer term moves by: + two host-link messages of f·P/N FP32 values (gradients out, master weights
    back; latency 10 µs, 64 GB/s at 80 % efficiency), − f of the GPU's Adam traffic (24 bytes read and written per
    parameter plus the stack's weight refresh, at 3,350 GB/s at 80 %)."""
    f = 0.5
    link = H100.host_link
    assert link is not None and (link.bandwidth_gb_per_s, link.efficiency, link.latency_us) == (
        64.0,
        0.8,
        10.0,
    )
    shard = LLAMA_8B_PARAMS / N
    copies_s = 2 * (10e-6 + f * shard * 4 / (64e9 * 0.8))
    refresh = STACKS["megatron-core"].weight_copy_bytes
    adam_s = f * shard * (24 + refresh) / (3350e9 * 0.8)
    base = step_time(LLAMA, H100, _plan(0.0)).breakdown_s["optimizer"]
    offloaded = step_time(LLAMA, H100, _plan(f)).breakdown_s["optimizer"]
    assert offloaded - base == pytest.approx(copies_s - adam_s, rel=1e-9)
    assert offloaded - base > 0.030  # about 1 GB each way over PCIe: tens of milliseconds


@pytest.mark.parametrize(
    ("kw", "problem"),
    [
        ({"optimizer_offload_fraction": 1.5}, "must be a fraction in (0, 1]"),
        ({"optimizer_offload_fraction": -0.1}, "must be a fraction in (0, 1]"),
        ({"optimizer_offload_fraction": 0.5, "zero_stage": 0}, "not ZeRO-0's"),
        ({"optimizer_offload_fraction": 0.5, "zero_stage": 3}, "not ZeRO-3's"),
        ({"optimizer_offload_fraction": 0.5, "zero_stage": 1, "moment_dtype": "bf16"}, "moments in FP32"),
        (
            {
                "optimizer_offload_fraction": 0.5,
                "zero_stage": 1,
                "precision": "mxfp8",
                "fp8_param_gather": True,
            },
            "delayed scaling",
        ),
    ],
)
def test_the_plan_refuses_what_megatron_core_does_not_run(kw: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PlanRequest(gpus=N, global_batch=32, **kw)
    assert caught.value.field == "--optimizer-offload-fraction"
    assert problem in caught.value.one_line()


def test_the_command_line_refuses_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "explain", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "32", "--tp", "1",
                    "--pp", "1", "--optimizer-offload-fraction", "0.5")  # fmt: skip
    assert res.code == 2
    assert res.err.strip().startswith("pplan: error: --optimizer-offload-fraction: ")
    assert len(res.err.strip().splitlines()) == 1


def test_a_profile_without_a_host_link_is_refused_naming_the_flag() -> None:
    bare = H100.model_copy(update={"host_link": None})
    with pytest.raises(ConfigError) as caught:
        step_time(LLAMA, bare, _plan(0.5))
    assert caught.value.field == "--optimizer-offload-fraction"


def test_megatron_writes_it_and_megatrons_parser_reads_it_back() -> None:
    plan = _plan(0.25)
    args = megatron_args(LLAMA, plan)
    at = args.index("--optimizer-cpu-offload")
    assert args[at : at + 4] == [
        "--optimizer-cpu-offload", "--optimizer-offload-fraction", "0.25", "--use-precision-aware-optimizer"
    ]  # fmt: skip
    check = validate_megatron(args, plan.gpus, megatron_env(plan))
    assert not check.failures
    ns = check.namespace
    assert (ns.optimizer_cpu_offload, ns.optimizer_offload_fraction) == (True, 0.25)
    assert ns.use_precision_aware_optimizer and ns.use_distributed_optimizer
    assert (ns.exp_avg_dtype, ns.exp_avg_sq_dtype) == ("fp32", "fp32")
    assert any("not the CPU's Adam" in note for note in megatron_notes(LLAMA, plan))
    assert "--optimizer-cpu-offload" not in megatron_args(LLAMA, _plan(0.0))


def test_the_declared_options_are_megatron_lm_options() -> None:
    options = {flag for o in option_table()["options"] for flag in o["flags"]}
    assert set(MEGATRON.optimizer_offload.runs[True]) <= options
    assert MEGATRON.optimizer_offload.refusal(True, "megatron") is None


@pytest.mark.parametrize("launcher", ["torchtitan", "torchtitan@0.2"])
def test_torchtitan_refuses_it_as_declared(launcher: str) -> None:
    for caps in (TORCHTITAN, TORCHTITAN_02):
        assert caps.optimizer_offload.refusal(True, caps.name) is not None
    with pytest.raises(ConfigError) as caught:
        torchtitan_text(launcher, LLAMA, _plan(0.5))
    assert caught.value.field == "--launcher"
    assert "no optimizer CPU offload" in caught.value.one_line()


def test_explain_states_what_it_assumes_and_leaves_out() -> None:
    """The offload's assumptions are printed: the fraction, the host link it crosses and that the CPU's Adam is not
    costed; a plan without offload says nothing of it."""
    with_offload = explain(LLAMA, H100, _request(0.5), with_sensitivity=False).assumptions
    (line,) = [a for a in with_offload if a.startswith("optimizer CPU offload")]
    link = H100.host_link
    assert link is not None
    assert "--optimizer-offload-fraction 0.5" in line and link.name in line and "not costed" in line
    without = explain(LLAMA, H100, _request(0.0), with_sensitivity=False).assumptions
    assert not [a for a in without if "offload" in a.lower()]
