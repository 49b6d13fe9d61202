"""Both MFU conventions, named: the attention core counted over the full s×s scores (non-causal, pplan's `mfu`)
or over the causal half (`mfu_causal`). Hand derivation: per layer the core is 4·B·s²·a·d_h forward (QKᵀ and PV,
2·B·s·s·a·d_h each) and twice that in the input-gradient pass, 12·B·s²·a·d_h; the causal count keeps half, so
the two step totals differ by 6·L·B·s²·a·d_h."""

from __future__ import annotations

import pytest

from pplan.cost.steptime import step_time
from pplan.model.flops import model_flops_per_step
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model


@pytest.mark.parametrize(("name", "seq"), [("llama3-8b", 8192), ("llama3-70b", 8192), ("gpt3-175b", 2048)])
def test_causal_count_is_half_the_attention_core(name: str, seq: int) -> None:
    model = load_model(name)
    batch = 4
    full = model_flops_per_step(model, seq, batch)
    causal = model_flops_per_step(model, seq, batch, causal=True)
    core = 6 * model.num_layers * batch * seq * seq * model.num_attention_heads * model.head_size
    assert full - causal == pytest.approx(core, rel=1e-12)


def test_both_conventions_in_explain_and_their_ratio() -> None:
    """Same step, two numerators: mfu / mfu_causal is the ratio of the two FLOP counts; Llama 3 70B at s = 8192
    counts about 10 % more non-causally (the issue's "up to 11 % apart")."""
    model, hw = load_model("llama3-70b"), load_hardware("h100-sxm-80gb")
    plan = make_plan(model, PlanRequest(gpus=64, global_batch=64, tp=8, pp=4, schedule="1f1b"))
    st = step_time(model, hw, plan, split_p2p=False)
    ratio = model_flops_per_step(model, 8192, 64) / model_flops_per_step(model, 8192, 64, causal=True)
    assert st.mfu / st.mfu_causal == pytest.approx(ratio, rel=1e-12)
    assert st.model_tflops_per_gpu / st.model_tflops_per_gpu_causal == pytest.approx(ratio, rel=1e-12)
    assert 1.05 < ratio < 1.12
