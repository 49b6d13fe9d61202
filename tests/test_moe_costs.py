"""Routed (mixture-of-experts) models through the cost model, each figure derived by hand from published shapes.

DeepSeek-V3 (arXiv 2412.19437 §4.2, config.json): h 7168, 128 heads, MLA ranks q 1536 / kv 512, head widths
content 128 / rotary 64 / value 128, 256 routed experts of width 2048 + 1 shared, top-8, first 3 layers dense
(MLP width 18432), 61 layers. GPT-OSS-120b (arXiv 2508.10925): h 2880, 128 experts of width 2880, top-4.
"""

from __future__ import annotations

import dataclasses

import pytest

from pplan.cost import experts
from pplan.cost.links import GroupShape, cp_group, message_s
from pplan.cost.memory import bytes_per_param, plan_rank_expert_params
from pplan.cost.passtime import _layer_compute_times, layer_pass_times, with_offload
from pplan.model.flops import ATTENTION_CORE, kv_elements_per_token, layer_flops
from pplan.model.precision import Precision
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import OffloadModule, Recompute
from pplan.plan.records import PlanRequest
from pplan.plan.shape import Shape
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.model_spec import ModelSpec

DSV3 = load_model("deepseek-v3")
OSS = load_model("gpt-oss-120b")
H100 = load_hardware("h100-sxm-80gb")

# DeepSeek-V3's published cut (report §3.2): 2,048 GPUs, PP16, EP64, no TP, ZeRO-1 data parallel, DualPipe.
DSV3_CUT = PlanRequest(
    gpus=2048, global_batch=15360, tp=1, pp=16, ep=64, schedule="dualpipe", seq_len=4096, zero_stage=1,
    first_stage_layers=3, last_stage_layers=2,
)  # fmt: skip


def test_dispatch_bytes_are_n_k_h_2() -> None:
    """One rank routes s·b/(cp·t) = 4096 tokens, 8 copies each, 7168 BF16 elements: 469,762,048 bytes."""
    plan = make_plan(DSV3, DSV3_CUT)
    assert experts.dispatch_bytes(DSV3, plan) == 4096 * 8 * 7168 * 2 == 469_762_048


def test_all_to_all_inside_a_node_moves_seven_eighths_over_nvlink() -> None:
    nbytes = 1e9
    got = experts.all_to_all_s(H100, GroupShape(8, 1), nbytes)
    assert got == pytest.approx(3e-6 + nbytes * 7 / 8 / (450e9 * 0.82))


def test_all_to_all_across_eight_nodes_is_bound_by_the_nic_share() -> None:
    """EP64 over 8 nodes of 8: 7/64 of the bytes over NVLink, 56/64 over the GPU's own 50 GB/s NIC (slower)."""
    nbytes = 469_762_048
    near = nbytes * 7 / 64 / (450e9 * 0.82)
    far = nbytes * 56 / 64 / (50e9 * 0.97)
    assert far > near
    assert experts.all_to_all_s(H100, GroupShape(64, 1), nbytes) == pytest.approx(5e-6 + far)


def test_routed_layer_gemm_flops_are_twice_its_active_weights_per_token() -> None:
    """Per token, a routed layer's GEMMs (all but the attention core) run 2 FLOPs per active weight: MLA's
    projections, the router, 8 routed + 1 shared experts of 3 matrices each."""
    h, a, r_q, r_kv, dn, dr, dv = 7168, 128, 1536, 512, 128, 64, 128
    attention = h * r_q + r_q * a * (dn + dr) + h * (r_kv + dr) + r_kv * a * (dn + dv) + a * dv * h
    active = attention + h * 256 + 9 * 3 * h * 2048
    fl = layer_flops(DSV3, 4096, 1).f
    gemms = fl.total - sum(fl.get(n) for n in ATTENTION_CORE)
    assert gemms == pytest.approx(2 * 4096 * active, rel=1e-12)


def test_expert_states_shard_over_ep_and_the_expert_data_parallel_group() -> None:
    """Rank 1 of DualPipe holds stages 1 and 14: 8 routed layers × 256/64 experts × 3·7168·2048 weights; their
    optimizer states shard over t·cp·d/ep = 128/64 = 2 ranks, the rest over d = 128."""
    plan = make_plan(DSV3, DSV3_CUT)
    assert plan.expert_dp == 2
    assert plan_rank_expert_params(DSV3, plan)[1] == 8 * 4 * 3 * 7168 * 2048
    assert bytes_per_param(plan, expert=True).optimizer == 12 / 2
    assert bytes_per_param(plan).optimizer == 12 / 128


def test_the_first_chunk_counts_deepseeks_three_dense_layers() -> None:
    plan = make_plan(DSV3, DSV3_CUT)
    assert [c.dense_layers for c in plan.layout.chunks] == [3] + [0] * 15
    assert [c.layers for c in plan.layout.chunks] == [3] + [4] * 14 + [2]


def _oss(schedule: str, pp: int = 4, ep: int = 8) -> PlanRequest:
    return PlanRequest(
        gpus=64, global_batch=512, micro_batch=4, tp=1, pp=pp, ep=ep, schedule=schedule, seq_len=4096
    )


def test_dualpipe_hides_the_all_to_all_behind_the_pass_and_1f1b_does_not() -> None:
    """1F1B exposes dispatch + combine (2 all-to-alls of n·k·h·2 bytes inside a node); DualPipeV exposes only
    what outlasts the layer's own compute in that pass."""
    one = make_plan(OSS, _oss("1f1b"))
    dual = make_plan(OSS, _oss("dualpipev", pp=2))
    a2a = experts.all_to_all_s(H100, GroupShape(8, 1), 16384 * 4 * 2880 * 2)
    exposed = dict(layer_pass_times(OSS, H100, one.shape).f)["ep-comm"]
    assert exposed == pytest.approx(2 * a2a)
    times = layer_pass_times(OSS, H100, dual.shape)
    compute = sum(x for name, x in times.f if name != "ep-comm")
    assert dict(times.f)["ep-comm"] == pytest.approx(max(0.0, 2 * a2a - compute))


@pytest.mark.parametrize("flag", ["ep", "etp"])
def test_expert_parallelism_on_a_dense_model_is_refused(flag: str) -> None:
    from pplan.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        ep, etp = (2, 1) if flag == "ep" else (1, 2)
        make_plan(load_model("llama3-8b"), PlanRequest(gpus=8, global_batch=8, ep=ep, etp=etp))
    assert info.value.field == f"--{flag}"


def test_ep_must_divide_the_experts_and_the_stage_ranks() -> None:
    from pplan.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        make_plan(OSS, _oss("1f1b", ep=3))
    assert info.value.field == "--ep"
    with pytest.raises(ConfigError):
        make_plan(OSS, PlanRequest(gpus=8, global_batch=8, pp=4, ep=4))  # 4 does not divide t·cp·d = 2


def test_moe_act_and_mla_up_proj_recompute_drop_what_they_re_run() -> None:
    """moe_act drops the experts' activation output: 2 bytes × k·n rows × f_e = 2·8·4096·2048; mla_up_proj drops
    the attention core's q, k (128 heads × (128 + 64)) and v (128 × 128): 2·4096·128·(192 + 192 + 128)."""
    from pplan.model.activations import layer_activations

    def saved(modules: tuple[str, ...]) -> int:
        req = PlanRequest(
            gpus=2048, global_batch=15360, tp=1, pp=16, ep=64, schedule="dualpipe", seq_len=4096,
            first_stage_layers=3, last_stage_layers=2, recompute="selective",
            recompute_modules=modules,  # type: ignore[arg-type]
        )  # fmt: skip
        return layer_activations(DSV3, make_plan(DSV3, req)).total_bytes

    base = saved(("core_attn",))
    assert base - saved(("core_attn", "moe_act")) == 2 * 8 * 4096 * 2048
    assert base - saved(("core_attn", "mla_up_proj")) == 2 * 4096 * 128 * (192 + 192 + 128)


def test_model_specific_recompute_modules_are_refused_where_the_model_lacks_them() -> None:
    from pplan.errors import ConfigError

    req = PlanRequest(gpus=8, global_batch=8, recompute="selective", recompute_modules=("mla_up_proj",))
    with pytest.raises(ConfigError) as info:
        make_plan(OSS, req)
    assert info.value.field == "--recompute-modules"


def test_torchtitan_refuses_routed_models_rather_than_build_a_dense_one() -> None:
    from pplan.errors import ConfigError
    from pplan.launchers.support import check_model

    with pytest.raises(ConfigError) as info:
        check_model("torchtitan", load_model("mixtral-8x7b"))
    assert "routed experts" in str(info.value)


def test_megatron_refuses_what_it_cannot_write_of_gpt_oss() -> None:
    from pplan.errors import ConfigError
    from pplan.launchers.megatron import megatron_args

    plan = make_plan(OSS, _oss("1f1b"))
    with pytest.raises(ConfigError) as info:
        megatron_args(OSS, plan)
    assert "attention sinks" in str(info.value) and "router bias" in str(info.value)


@pytest.mark.parametrize("model_name", ["deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b"])
def test_megatron_reads_the_routed_model_pplan_planned(model_name: str) -> None:
    """Megatron-LM's own parser (core_v0.16.1 option table) and validate_args rules accept the flags, and read
    back the experts, top-k, widths, expert parallelism, MLA ranks and MTP modules of the profile and the plan."""
    from pplan.launchers.megatron import megatron_args, megatron_env, moe_layer_pattern
    from pplan.launchers.megatron_validate import validate_megatron

    model = load_model(model_name)
    moe = model.moe
    assert moe is not None
    if model_name == "deepseek-v3":
        req = dataclasses.replace(DSV3_CUT, schedule="1f1b")
    else:
        req = PlanRequest(gpus=64, global_batch=256, tp=2, pp=4, ep=8, seq_len=4096)
    plan = make_plan(model, req)
    check = validate_megatron(megatron_args(model, plan), plan.gpus, megatron_env(plan))
    assert check.failures == ()
    ns = check.namespace
    assert (ns.num_experts, ns.moe_router_topk, ns.moe_ffn_hidden_size) == (
        moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size,
    )  # fmt: skip
    assert (ns.expert_model_parallel_size, ns.expert_tensor_parallel_size) == (plan.ep, plan.etp)
    assert ns.qk_layernorm is model.qk_norm
    if model.mla is not None:
        assert ns.multi_latent_attention and (ns.q_lora_rank, ns.kv_lora_rank) == (1536, 512)
        assert (ns.qk_head_dim, ns.qk_pos_emb_head_dim, ns.v_head_dim) == (128, 64, 128)
        assert ns.mtp_num_layers == 1
        assert ns.moe_layer_freq == moe_layer_pattern(model) == "([0]*3+[1]*58)"
        assert eval(ns.moe_layer_freq) == [0] * 3 + [1] * 58  # what megatron-core's moe_freq_type evaluates


def _dsv3_report_cut(**changes: object) -> PlanRequest:
    """DeepSeek-V3's cut with the memory measures its report states (§3.3.2-3.3.3): norms and MLA up-projections
    recomputed (plus the SwiGLU output, recomputed from its cached input), FP8 Linears with the SwiGLU input cached
    in FP8, BF16 Adam moments, FP32 gradients; FP8 weights only (no BF16 copy)."""
    import dataclasses

    req = dataclasses.replace(
        DSV3_CUT, recompute="selective", recompute_modules=("layernorm", "moe_act", "mla_up_proj"),
        precision="fp8", fp8_swiglu_input=True, fp8_param_gather=True, moment_dtype="bf16",
    )  # fmt: skip
    return dataclasses.replace(req, **changes)  # type: ignore[arg-type]


def test_deepseek_v3_fits_in_80_gb_at_its_published_cut() -> None:
    from pplan.explain import explain

    report = explain(DSV3, load_hardware("h800-sxm-80gb"), _dsv3_report_cut())
    assert report.memory.fits
    assert max(s.total_bytes for s in report.memory.stages) <= 80 * 10**9
    assert report.experts is not None
    middle = report.experts.stage_params[1]
    # ranks 1 and 14 of DualPipe: stages 1 and 14, 8 routed layers; attention 187,107,328 per layer (MLA), routed
    # experts 4 of 256 per rank at 3·7168·2048 each
    assert middle["attention"] == 8 * 187_107_328
    assert middle["routed experts"] == 8 * 4 * 3 * 7168 * 2048
    assert report.experts.dispatch_bytes_per_microbatch == 4096 * 8 * 7168 * 2


def test_without_the_fp8_swiglu_cache_deepseek_v3_does_not_fit() -> None:
    """The one measure no launcher has is the one that makes the difference: its middle ranks' activations."""
    from pplan.explain import explain

    report = explain(DSV3, load_hardware("h800-sxm-80gb"), _dsv3_report_cut(fp8_swiglu_input=False))
    assert not report.memory.fits


def test_deepseek_v3_throughput_is_within_ten_percent_of_its_published_cost() -> None:
    """Out of the calibration: DeepSeek-V3's report (arXiv 2412.19437, §1) states 180K H800 GPU hours per
    trillion training tokens on its 2,048 GPUs, i.e. 10^12 / (180,000 × 3,600 / 2,048) = 3.16 M tokens/s.
    Predicted at its published cut with its stated measures (an extrapolation: H800 is uncalibrated)."""
    from pplan.explain import explain

    report = explain(DSV3, load_hardware("h800-sxm-80gb"), _dsv3_report_cut())
    assert report.performance is not None
    published = 1e12 / (180_000 * 3600 / 2048)
    assert report.performance.tokens_per_s == pytest.approx(published, rel=0.10)


def test_ring_attention_passes_mla_keys_and_values_at_their_up_projected_width() -> None:
    # DeepSeek-V3's config: 128 heads, keys of 128 content + 64 rotary dimensions, values of 128; ring attention
    # passes K and V after the up-projection: 128 × (128 + 64 + 128) = 40,960 elements per token (h/a = 56 would
    # give 2 × 128 × 56 = 14,336). Llama 3 70B: 8 key/value heads of 128, K and V: 2 × 8 × 128 = 2,048.
    assert kv_elements_per_token(DSV3) == 40_960
    assert kv_elements_per_token(load_model("llama3-70b")) == 2_048
    # the ring step a layer's forward exposes at cp = 8 (one rank's 512 tokens, BF16), by hand from the link
    plan = make_plan(DSV3, dataclasses.replace(DSV3_CUT, cp=8, ep=32, global_batch=7680))
    times = dict(layer_pass_times(DSV3, H100, plan).f)
    step = message_s(cp_group(1, 8).link(H100), 4096 // 8 * 40_960 * 2)
    assert times.get("cp-comm", 0.0) == pytest.approx(max(0.0, 7 * step - times["attention"]), rel=1e-9)


@pytest.mark.parametrize("model", [DSV3, OSS, load_model("llama3-8b")], ids=lambda m: m.name)
def test_a_dense_layer_reads_no_expert_field(model: ModelSpec) -> None:
    """`layer_pass_times` remembers a dense layer's shapes with ep, etp and the all-to-all overlap at their
    defaults: the figure computed from the shape as given is the same for every expert split and precision."""
    dense = model.dense_part
    cases: list[tuple[int, int, int, bool, Recompute, tuple[OffloadModule, ...], Precision]] = [
        (1, 64, 1, True, "none", (), "bf16"),
        (2, 8, 2, False, "selective", (), "fp8"),
        (4, 32, 4, True, "full", (), "bf16"),
        (2, 16, 1, True, "none", ("qkv_linear",), "fp8"),
    ]
    for t, ep, etp, overlap, recompute, offload, precision in cases:
        shape = Shape(
            t, 1, 4096, 1, t > 1, True, recompute, "itemised", offload_modules=offload, ep=ep, etp=etp,
            expert_comm_overlap=overlap, precision=precision, splits_backward=True,
        )  # fmt: skip
        assert layer_pass_times(dense, H100, shape) == with_offload(
            dense, H100, shape, _layer_compute_times(dense, H100, shape)
        )


@pytest.mark.parametrize("model_name", ["deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-120b"])
def test_a_routed_layer_shares_all_but_its_all_to_alls_across_ep(model_name: str) -> None:
    """`layer_pass_times` prices a routed layer at ep > 1 (or with its all-to-all overlapped) as the same shape at
    ep = 1 with the all-to-all items swapped in (their overlap and full recompute re-applied): bit for bit the
    figure computed from the shape as given, every item in place, for each split, precision, recompute, offload
    and context split sampled."""
    model = load_model(model_name)
    assert model.moe is not None
    experts_n = model.moe.num_experts
    cases: list[tuple[int, int, int, int, bool, Recompute, tuple[OffloadModule, ...], Precision]] = [
        (1, 1, 8, 1, False, "none", (), "bf16"),
        (2, 1, 4, 2, True, "none", (), "bf16"),
        (1, 2, 8, 1, True, "full", (), "fp8"),
        (4, 1, 2, 4, False, "full", (), "bf16"),
        (2, 2, 8, 1, False, "none", ("qkv_linear",), "fp8"),
        (1, 1, 4, 1, True, "none", ("qkv_linear",), "bf16"),
    ]
    checked = 0
    for t, cp, ep, etp, overlap, recompute, offload, precision in cases:
        if experts_n % ep or model.moe.expert_ffn_hidden_size % etp or model.num_attention_heads % t:
            continue
        shape = Shape(
            t, cp, 4096, 2, t > 1, True, recompute, "itemised", offload_modules=offload, ep=ep, etp=etp,
            expert_comm_overlap=overlap, precision=precision, splits_backward=True,
        )  # fmt: skip
        got = layer_pass_times(model, H100, shape)
        assert got == with_offload(model, H100, shape, _layer_compute_times(model, H100, shape))
        assert (got.f_s, got.i_s, got.w_s) == (
            sum(x for _, x in got.f),
            sum(x for _, x in got.i),
            sum(x for _, x in got.w),
        )
        checked += 1
    assert checked >= 4
