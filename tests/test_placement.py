"""NVLink-domain placement (pplan.cost.placement): GPU counts against domains, and which groups cross one.

Each expected value is derived by hand from Megatron-LM's rank order (tp fastest, then cp, dp, pp) and the domain
size; the cost model's own link choice is compared, not restated.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from pplan.cost.placement import GroupPlacement, _fewest_on_a_domain, domains_sentence, placement
from pplan.explain import explain
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec
from pplan.render.placement import placement_rows
from tests.cli_run import run_pplan

NVL72 = load_hardware("gb200-nvl72")
H100 = load_hardware("h100-sxm-80gb")
GPT3 = load_model("gpt3-175b")  # 96 heads, no GQA: t = 16 divides them
LLAMA70 = load_model("llama3-70b")


def _groups(hw: HardwareSpec, model: ModelSpec, **kw: Any) -> dict[str, GroupPlacement]:
    plan = make_plan(model, PlanRequest(**kw))
    return {g.group: g for g in placement(hw, plan).groups}


def test_1024_gpus_are_not_a_whole_number_of_72_gpu_domains() -> None:
    plan = make_plan(LLAMA70, PlanRequest(gpus=1024, global_batch=1024, tp=8, pp=8))
    p = placement(NVL72, plan)
    assert (p.domains, p.whole, p.last_domain_gpus) == (15, False, 1024 - 14 * 72)  # 14 full + 16
    assert "not a whole number" in domains_sentence(NVL72, 1024)
    assert "56 GPUs of the last domain idle, 1,080 or 1,008 GPUs fill whole domains" in domains_sentence(
        NVL72, 1024
    )
    assert domains_sentence(NVL72, 1152) == "1,152 GPUs = 16 NVLink domains of 72"


def test_t16_straddles_72_gpu_domains_and_the_step_time_prices_it_on_nvlink() -> None:
    """tp groups are ranks [16k, 16k + 15]; one straddles domain boundary 72j unless 16 divides 72j, i.e. for odd
    j: j = 1, 3, ..., 15 on 1,152 GPUs, so 8 of the 72 groups cross, each touching 2 domains. The cost model
    prices t = 16 on NVLink (16 ≤ 72), which the placement reports as mispriced."""
    groups = _groups(NVL72, GPT3, gpus=1152, global_batch=1152, tp=16, pp=8)
    tp = groups["tp"]
    assert (tp.groups, tp.crossing, tp.max_domains) == (72, 8, 2)
    assert tp.link == NVL72.intra_node.name and tp.mispriced


def test_a_straddling_group_is_given_the_price_of_its_crossing() -> None:
    """Each straddling t = 16 group of the case above holds 8 ranks on either side of the boundary 72j (72 = 4.5 ×
    16), so across the boundary it runs on 8 NICs in parallel: 8 × the NIC's achievable rate (below NVLink's).
    ep = 64 on 1,024 GPUs: block b holds ranks [64b, 64b + 63]; b = 1 keeps 8 ranks (64-71) on the first domain,
    the fewest of any crossing block, so again 8 rails; t = 8 groups never straddle and carry no crossing price."""
    tp = _groups(NVL72, GPT3, gpus=1152, global_batch=1152, tp=16, pp=8)["tp"]
    nic = NVL72.inter_node.achievable_bytes_per_s / 1e9
    assert tp.crossing_link is not None and "8 rails" in tp.crossing_link
    assert tp.crossing_gb_per_s == pytest.approx(8 * nic)
    ep = _groups(load_hardware("gb200-nvl72"), load_model("deepseek-v3"), gpus=1024, global_batch=4096, tp=1,
                 pp=4, ep=64, first_stage_layers=16, last_stage_layers=15)["ep"]  # fmt: skip
    assert (ep.groups, ep.crossing) == (16, 13) and ep.mispriced
    assert ep.crossing_gb_per_s == pytest.approx(8 * nic)
    assert _groups(NVL72, LLAMA70, gpus=1024, global_batch=1024, tp=8, pp=8)["tp"].crossing_link is None
    rows = dict(
        placement_rows(explain(GPT3, NVL72, PlanRequest(gpus=1152, global_batch=1152, tp=16, pp=8)).placement)
    )
    assert (
        f"8 rails, {8 * nic:,.0f} GB/s: the step time assumes every group placed within one domain"
        in " ".join(rows["  tp 16"].split())
    )


def test_the_fewest_members_on_a_domain_match_a_count_member_by_member() -> None:
    """A seeded sample of groups (domain, stride, size, first rank) against counting each member's domain."""
    rng = random.Random(7)
    for _ in range(2000):
        domain, stride, size, first = (
            rng.choice((8, 16, 36, 72)),
            rng.randint(1, 100),
            rng.randint(2, 80),
            rng.randint(0, 3000),
        )
        counts = Counter((first + i * stride) // domain for i in range(size))
        assert _fewest_on_a_domain(first, stride, size, domain) == min(counts.values())


def test_t8_fits_72_gpu_domains_and_the_gradient_group_crosses() -> None:
    """t = 8 divides 72: no tp group straddles. The gradient group (d = 16 ranks, stride 8) spans 128 ranks, so
    every one crosses, at most ceil(128 / 72) + 1 = 3 domains when unaligned; the cost model prices it across
    domains on 72 / 8 = 9 rails."""
    groups = _groups(NVL72, LLAMA70, gpus=1024, global_batch=1024, tp=8, pp=8)
    assert groups["tp"].crossing == 0 and not groups["tp"].mispriced
    dp = groups["dp"]
    assert (dp.size, dp.stride, dp.groups, dp.crossing, dp.max_domains) == (16, 8, 64, 64, 3)
    assert "9 rails" in dp.link and not dp.mispriced
    pp = groups["pp"]
    assert (pp.groups, pp.crossing) == (7, 7)  # 128-GPU stages: every boundary changes domain


@pytest.mark.parametrize(
    "kw",
    [
        dict(gpus=64, global_batch=256, tp=8, pp=2),
        dict(gpus=64, global_batch=256, tp=4, pp=2, cp=2),
        dict(gpus=64, global_batch=256, tp=2, pp=4),
        dict(gpus=128, global_batch=256, tp=8, pp=4, vp=2, schedule="interleaved-1f1b"),
    ],
)
def test_power_of_two_domains_are_never_mispriced(kw: dict[str, Any]) -> None:
    """On 8-GPU domains every span is a power of two, so a span ≤ 8 never straddles and the step time's link is
    exact: within a domain iff no group crosses."""
    for g in _groups(H100, LLAMA70, **kw).values():
        assert not g.mispriced, g
        assert (g.crossing == 0) == (g.link == H100.intra_node.name or g.size == 1)


def test_explain_carries_and_renders_the_placement(capsys: pytest.CaptureFixture[str]) -> None:
    report = explain(LLAMA70, NVL72, PlanRequest(gpus=1024, global_batch=1024, tp=8, pp=8))
    assert report.placement is not None and report.placement.domains == 15
    rows = dict(placement_rows(report.placement))
    assert "not a whole number" in rows["NVLink domains"]
    assert rows["  dp grads 16"].startswith("crosses domains (every group")
    out = run_pplan(
        capsys, "recommend", "--model", "llama3-8b", "--hardware", "gb200-nvl72", "--gpus", "100",
        "--global-batch", "100", "--top", "1",
    )  # fmt: skip
    assert out.code == 0 and "100 GPUs = 1.39 NVLink domains of 72: not a whole number" in out.out
