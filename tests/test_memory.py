"""Memory invariants: stages sum to the model, 1F1B's stage 0 does not depend on p, GPipe grows with m."""

from __future__ import annotations

import pytest

from pplan.cost.memory import bytes_per_param, plan_rank_params
from pplan.explain import explain
from pplan.model.params import total_params
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model

LLAMA = load_model("llama3-70b")
GPT3 = load_model("gpt3-175b")
H100 = load_hardware("h100-sxm-80gb")


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved-1f1b", "zbv", "dualpipev"])
def test_stages_sum_to_the_model(schedule: str) -> None:
    vp = 2 if schedule == "interleaved-1f1b" else None
    report = explain(LLAMA, H100, PlanRequest(gpus=4, global_batch=16, tp=1, pp=4, vp=vp, schedule=schedule))
    assert sum(s.params for s in report.memory.stages) == total_params(LLAMA)
    assert sum(s.layers for s in report.memory.stages) == LLAMA.num_layers


def test_tied_embeddings_keep_a_copy_on_the_last_stage() -> None:
    report = explain(GPT3, H100, PlanRequest(gpus=8, global_batch=16, tp=1, pp=8))
    copy = GPT3.vocab_size * GPT3.hidden_size
    assert sum(s.params for s in report.memory.stages) == total_params(GPT3) + copy


def test_dualpipe_holds_two_copies() -> None:
    report = explain(LLAMA, H100, PlanRequest(gpus=4, global_batch=16, pp=4, tp=1, schedule="dualpipe"))
    assert sum(s.params for s in report.memory.stages) == 2 * total_params(LLAMA)


@pytest.mark.parametrize("model", [LLAMA, GPT3])
def test_1f1b_stage0_activations_do_not_depend_on_p(model: object) -> None:
    values = set()
    for p in (2, 4, 8, 16):
        r = explain(model, H100, PlanRequest(gpus=8 * p, global_batch=32, tp=8, pp=p))  # type: ignore[arg-type]
        values.add(r.memory.stages[0].activation_bytes)
    assert len(values) == 1


def test_gpipe_grows_with_m_1f1b_does_not() -> None:
    def stage0(schedule: str, m: int) -> int:
        r = explain(LLAMA, H100, PlanRequest(gpus=32, global_batch=m, tp=8, pp=4, schedule=schedule))
        return r.memory.stages[0].activation_bytes

    gpipe = [stage0("gpipe", m) for m in (4, 8, 16, 32)]
    one = [stage0("1f1b", m) for m in (4, 8, 16, 32)]
    assert gpipe == sorted(gpipe) and len(set(gpipe)) == 4
    assert gpipe[3] == 8 * gpipe[0]
    assert len(set(one)) == 1


@pytest.mark.parametrize(
    ("zero", "grad", "d", "expected"),
    [
        (0, "bf16", 4, 16),  # 16 bytes per parameter: Rajbhandari et al. 2020 (ZeRO), arXiv 1910.02054 §3.1
        (0, "fp32", 4, 18),
        (1, "fp32", 4, 6 + 12 / 4),  # Megatron's distributed optimizer: 6 + 12/d
        (2, "fp32", 4, 2 + 16 / 4),
        (3, "fp32", 4, 18 / 4),
    ],
)
def test_bytes_per_parameter_table(zero: int, grad: str, d: int, expected: float) -> None:
    plan = make_plan(LLAMA, PlanRequest(gpus=8 * d, global_batch=d, tp=8, zero_stage=zero,
                                        grad_dtype=grad))  # type: ignore[arg-type]  # fmt: skip
    assert bytes_per_param(plan).total == pytest.approx(expected)


def test_uneven_first_and_last_stage() -> None:
    # Llama 3 405B style: 126 layers on 16 ranks, one fewer layer on the first and last stage (7 + 14·8 + 7).
    model = load_model("llama3-405b")
    plan = make_plan(model, PlanRequest(gpus=128, global_batch=16, tp=8, pp=16, first_stage_layers=7,
                                        last_stage_layers=7))  # fmt: skip
    assert [c.layers for c in plan.layout.chunks] == [7] + [8] * 14 + [7]


def test_zero3_gathers_two_layers_of_weights() -> None:
    # FSDP runs a layer with its weights gathered and prefetches the next: 2 layers × (params / t) × 2 bytes.
    report = explain(LLAMA, H100, PlanRequest(gpus=256, global_batch=32, tp=8, pp=4, zero_stage=3))
    # One Llama 3 70B layer (the shapes of Dubey et al. 2024, arXiv 2407.21783, Table 3); t = 8 splits all but
    # its two norms (2 × 8192).
    per_layer = 855_654_400
    per_rank = (per_layer - 2 * 8192) / 8 + 2 * 8192
    assert report.memory.stages[1].gathered_weights_bytes == pytest.approx(2 * per_rank * 2, abs=1)
    zero1 = explain(LLAMA, H100, PlanRequest(gpus=256, global_batch=32, tp=8, pp=4, zero_stage=1))
    assert zero1.memory.stages[1].gathered_weights_bytes == 0


def test_a_learned_position_table_grows_to_the_planned_sequence() -> None:
    """GPT-3 175B has 2,048 learned positions (Brown et al. 2020, arXiv 2005.14165, Table 2.1: n_ctx 2048); a plan
    at s = 4,096 needs a table of 4,096 rows (Megatron-LM asserts max_position_embeddings ≥ seq_length), so the
    first stage holds (4096 − 2048) × 12288 more parameters (the table is not split by t) and no other stage
    changes."""
    model = load_model("gpt3-175b")
    base = dict(gpus=1024, global_batch=1536, tp=8, pp=16, recompute="full", zero_stage=1)
    short = plan_rank_params(model, make_plan(model, PlanRequest(seq_len=2048, **base)))  # type: ignore[arg-type]
    long = plan_rank_params(model, make_plan(model, PlanRequest(seq_len=4096, **base)))  # type: ignore[arg-type]
    assert long[0] - short[0] == (4096 - 2048) * 12288
    assert long[1:] == short[1:]
