"""Usable memory from named parts (pplan.cost.usable), checked against hand derivations: which NCCL communicators
a rank of a plan opens, usable bytes = HBM − context − label gap − NCCL, and fragmentation = a fraction of the
dynamic bytes in every stage's need."""

from __future__ import annotations

import math

import pytest

from pplan.cost.memory import plan_memory_totals
from pplan.cost.pipeline import activation_peaks
from pplan.cost.usable import communicators, plan_communicators, usable_bytes, usable_memory
from pplan.explain import explain
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from tests.cli_run import run_pplan

H100 = load_hardware("h100-sxm-80gb")
LLAMA_405B = load_model("llama3-405b")
GPT3 = load_model("gpt3-175b")  # tied embeddings
GIB, MIB = 2**30, 2**20


@pytest.mark.parametrize(
    ("t", "p", "d", "cp", "zero", "tied", "groups"),
    [
        # Meta's 405B cut with the distributed optimizer: the world, t, p and d groups; the model-parallel group
        # only carries the plain optimizer's gradient norm; no cp.
        (8, 16, 64, 1, 1, False, ["world 8192", "tensor 8", "pipeline 16", "data 64"]),
        # The same cut without the distributed optimizer: the gradient norm runs over t·p = 128.
        (8, 16, 64, 1, 0, False, ["world 8192", "tensor 8", "pipeline 16", "data 64", "model 128"]),
        # Pure data parallelism on one node: the world and the data group (same members, two groups).
        (1, 1, 8, 1, 1, False, ["world 8", "data 8"]),
        # NeMo's 405B recipe: cp 2 adds the context group and the d·cp = 8 gradient / optimizer group.
        (
            8,
            9,
            4,
            2,
            1,
            False,
            [
                "world 576",
                "tensor 8",
                "pipeline 9",
                "data 4",
                "context 2",
                "data×context 8",
            ],
        ),
        # d = 1, cp = 2: no data group, but the d·cp group (2 members) is Megatron's gradient group.
        (1, 1, 1, 2, 1, False, ["world 2", "context 2", "data×context 2"]),
        # Tied embeddings with the ends on two ranks: the embedding group (first and last stage).
        (1, 8, 1, 1, 1, True, ["world 8", "pipeline 8", "embedding 2"]),
        # One GPU: no communicator at all.
        (1, 1, 1, 1, 0, True, []),
    ],
)
def test_communicators_counted_by_hand(
    t: int, p: int, d: int, cp: int, zero: int, tied: bool, groups: list[str]
) -> None:
    assert [f"{c.name} {c.size}" for c in communicators(t, p, d, cp, zero, tied)] == groups


def test_embedding_group_only_when_the_tied_ends_sit_on_two_ranks() -> None:
    one_f_one_b = make_plan(GPT3, PlanRequest(gpus=8, global_batch=16, tp=1, pp=8))
    assert "embedding" in [c.name for c in plan_communicators(GPT3, one_f_one_b)]
    # ZB-V's V-shaped layout puts the first and the last chunk on rank 0: no group needed.
    zbv = make_plan(GPT3, PlanRequest(gpus=8, global_batch=16, tp=1, pp=8, schedule="zbv"))
    assert "embedding" not in [c.name for c in plan_communicators(GPT3, zbv)]
    # Llama 3 does not tie its embeddings.
    llama = make_plan(
        LLAMA_405B,
        PlanRequest(gpus=128, global_batch=16, tp=8, pp=16, first_stage_layers=7, last_stage_layers=7),
    )
    assert "embedding" not in [c.name for c in plan_communicators(LLAMA_405B, llama)]


@pytest.mark.parametrize(
    ("model_name", "req", "n_communicators"),
    [
        (
            "llama3-405b",
            PlanRequest(
                gpus=8192,
                global_batch=2048,
                tp=8,
                pp=16,
                zero_stage=1,
                first_stage_layers=7,
                last_stage_layers=7,
            ),
            4,
        ),
        ("llama3-8b", PlanRequest(gpus=8, global_batch=8, tp=1, pp=1, zero_stage=1), 2),
    ],
)
def test_usable_bytes_are_hbm_less_the_parts(model_name: str, req: PlanRequest, n_communicators: int) -> None:
    model = load_model(model_name)
    plan = make_plan(model, req)
    # The H100 profile's figures: 80 GiB, 0.75 GiB context, 0.85 GiB label gap, 294 MiB per communicator.
    expected = int(80 * GIB) - int(0.75 * GIB) - int(0.85 * GIB) - n_communicators * int(294 * MIB)
    assert usable_bytes(H100, model, plan) == expected
    parts = usable_memory(H100, model, plan).parts
    assert [p.name for p in parts] == ["context", "label gap", "NCCL"]
    assert parts[2].bytes == n_communicators * 294 * MIB


def test_usable_bytes_never_go_below_zero() -> None:
    greedy = H100.model_copy(
        update={"memory": H100.memory.model_copy(update={"nccl_per_communicator_mib": 1e6})}
    )
    plan = make_plan(
        LLAMA_405B,
        PlanRequest(gpus=128, global_batch=16, tp=8, pp=16, first_stage_layers=7, last_stage_layers=7),
    )
    assert usable_bytes(greedy, LLAMA_405B, plan) == 0


@pytest.mark.parametrize("zero", [1, 3])
def test_fragmentation_is_a_fraction_of_the_dynamic_bytes(zero: int) -> None:
    req = PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, zero_stage=zero, recompute="selective")
    report = explain(load_model("llama3-70b"), H100, req)
    fraction = H100.memory.dynamic_fragmentation_fraction
    assert fraction == 0.15 and report.memory.fragmentation_fraction_of_dynamic == fraction
    for s in report.memory.stages:
        dynamic = (
            s.activation_bytes
            + s.extra_activation_bytes
            + s.recompute_working_bytes
            + s.gathered_weights_bytes
        )
        assert s.fragmentation_bytes == math.ceil(0.15 * dynamic) > 0
        states = s.weights_bytes + s.grads_bytes + s.optimizer_bytes
        assert s.total_bytes == states + dynamic + s.fragmentation_bytes
        assert s.headroom_bytes == report.memory.usable_bytes - s.total_bytes
    if zero == 3:
        assert all(s.gathered_weights_bytes for s in report.memory.stages)


def test_the_search_totals_match_explain() -> None:
    model = load_model("llama3-70b")
    plan = make_plan(model, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, zero_stage=3))
    report = explain(model, H100, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, zero_stage=3))
    totals = plan_memory_totals(model, plan, activation_peaks(model, plan), 0.15)
    assert totals == tuple(s.total_bytes for s in report.memory.stages)
    assert report.memory.usable_bytes == report.hardware.usable_bytes == usable_bytes(H100, model, plan)


def test_explain_text_shows_the_breakdown(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("explain", "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--pp", "1", "--zero-stage", "1")
    res = run_pplan(capsys, *args)
    assert res.code == 0, res.err
    text = " ".join(res.out.split())
    # in GB (10⁹ bytes), as every memory figure: 80 GiB = 85.8993 GB, 0.75 GiB = 0.8053, 0.85 GiB = 0.9127,
    # 2 × 294 MiB = 0.6166 (world 8, data 8): 85.8993 − 0.8053 − 0.9127 − 0.6166 = 83.5647 GB
    assert "usable 83.56 GB = 85.90 GB HBM − 0.81 context − 0.91 label gap − 0.62 NCCL" in text
    assert "(2 communicators × 0.31: world 8, data 8)" in text
