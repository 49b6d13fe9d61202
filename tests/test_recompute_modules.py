"""Selective recompute's modules as megatron-core defines them (`--recompute-modules`, core 0.16
`transformer_config.py`): `mlp` re-runs dense MLPs only, `moe` a routed layer's whole MoE block, `shared_experts` its
shared experts, `moe_act` the experts' activation (issue 46 items 1 and 3)."""

from __future__ import annotations

from typing import Any

import pytest

from pplan.cost.passtime import layer_pass_times
from pplan.errors import ConfigError
from pplan.launchers.megatron import megatron_args
from pplan.model.activations import itemised_layer
from pplan.model.flops import layer_flops, recompute_flops
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model

MIXTRAL = load_model("mixtral-8x7b")  # h 4096, 8 experts, top-2, expert width 14,336, no shared experts
DSV3 = load_model("deepseek-v3")  # 3 dense layers, then routed: shared experts 2,048 wide
H100 = load_hardware("h100-sxm-80gb")
QB = 4096  # s 4096, b 1, cp 1


def _plan(model: Any, modules: tuple[str, ...], **kw: object) -> Any:
    req = dict(gpus=8, global_batch=8, seq_len=QB, recompute="selective", recompute_modules=modules) | kw
    return make_plan(model, PlanRequest(**req))  # type: ignore[arg-type]


def _bytes(model: Any, modules: tuple[str, ...]) -> int:
    return itemised_layer(model, _plan(model, modules)).total_bytes


def test_mlp_leaves_a_routed_layer_alone_and_moe_drops_its_block() -> None:
    core = _bytes(MIXTRAL, ("core_attn",))
    assert _bytes(MIXTRAL, ("core_attn", "mlp")) == core
    # the MoE block's tensors, t = etp = 1, rows = qb·k: router probabilities 4·qb·E, dispatched rows 2·rows·h,
    # fc1 (SwiGLU) 2·rows·2f_e, activation 2·rows·f_e, routing probability per row 4·rows
    rows = QB * 2
    block = 4 * QB * 8 + 2 * rows * 4096 + 2 * rows * 2 * 14336 + 2 * rows * 14336 + 4 * rows
    assert core - _bytes(MIXTRAL, ("core_attn", "moe")) == block


def test_shared_experts_drop_their_fc1_and_activation_outputs() -> None:
    kw = dict(gpus=64, global_batch=64, ep=8)
    base = itemised_layer(DSV3, _plan(DSV3, ("core_attn",), **kw)).total_bytes
    shared = itemised_layer(DSV3, _plan(DSV3, ("core_attn", "shared_experts"), **kw)).total_bytes
    assert base - shared == 2 * QB * 2 * 2048 + 2 * QB * 2048


def test_recompute_time_follows_the_module_to_its_layer_kind() -> None:
    fl = layer_flops(MIXTRAL, QB, 1)
    # the MoE block re-runs the router (2·qb·h·E) and the experts (2·qb·k·3·h·f_e, SwiGLU's three matrices)
    assert (
        recompute_flops(MIXTRAL, fl, "selective", ("moe",))
        == 2 * QB * 4096 * 8 + 2 * QB * 2 * 3 * 4096 * 14336
    )
    assert recompute_flops(MIXTRAL, fl, "selective", ("mlp",)) == 0
    dense = DSV3.dense_part
    dense_fl = layer_flops(dense, QB, 1)
    assert recompute_flops(dense, dense_fl, "selective", ("mlp",)) == 2 * QB * 3 * 7168 * 18432
    assert recompute_flops(dense, dense_fl, "selective", ("moe",)) == 0

    def rerun(modules: tuple[str, ...]) -> float:
        return dict(layer_pass_times(MIXTRAL, H100, _plan(MIXTRAL, modules).shape).i)["recompute"]

    assert rerun(("core_attn", "mlp")) == pytest.approx(rerun(("core_attn",)), rel=1e-12)
    assert rerun(("core_attn", "moe")) > rerun(("core_attn",))


def test_a_dense_model_has_no_moe_block_to_recompute() -> None:
    with pytest.raises(ConfigError, match="moe recomputes part of a routed"):
        make_plan(load_model("llama3-8b"), PlanRequest(gpus=8, global_batch=8, recompute="selective",
                                                       recompute_modules=("moe",)))  # fmt: skip


def test_megatron_writes_the_modules() -> None:
    args = megatron_args(MIXTRAL, _plan(MIXTRAL, ("moe", "core_attn")))
    at = args.index("--recompute-modules")
    assert args[at + 1 : at + 3] == ["core_attn", "moe"]
