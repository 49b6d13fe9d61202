"""Where collectives run (pplan.cost.links): NVLink inside a node; across nodes on the NICs of the group's members in
each node (rails), capped by NVLink; 1/oversubscription above a pod; checked against hand derivations and the
published multi-node bus bandwidth; and pipeline sends that block the sender where the stack's do."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pplan.cost.chunktimes import chunk_pass_times
from pplan.cost.links import GroupShape, all_reduce_s
from pplan.cost.pipeline import stage_inputs
from pplan.cost.steptime import step_time
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.hardware_spec import PodSpec

A100 = load_hardware("a100-sxm-80gb")
H100 = load_hardware("h100-sxm-80gb")


def test_a_group_inside_a_node_runs_on_nvlink() -> None:
    assert GroupShape(8, 1).link(H100) == H100.intra_node
    assert GroupShape(2, 4).link(H100) == H100.intra_node


def test_one_member_per_node_gets_one_nic() -> None:
    # stride 8 = one member per 8-GPU node: every hop of the ring crosses nodes on that member's NIC
    assert GroupShape(32, 8).link(H100) == H100.inter_node
    assert GroupShape(32, 8).rails(8) == 1


def test_eight_members_per_node_reach_the_published_bus_bandwidth() -> None:
    # DGX A100: 8 HDR NICs of ≈24 GB/s per node give ≈192 GB/s all-reduce bus bandwidth across nodes
    # (NVIDIA/nccl#412, #812): a 32-GPU group of stride 1 runs 8 channels, one per NIC
    link = GroupShape(32, 1).link(A100)
    assert link.achievable_bytes_per_s == pytest.approx(8 * A100.inter_node.achievable_bytes_per_s)
    assert link.achievable_bytes_per_s / 1e9 == pytest.approx(192, rel=0.01)
    # the ring then takes 2(n−1)/n of the buffer at that rate, plus 2(n−1) inter-node latencies
    n, nbytes = 32, 4e9
    expected = 2 * (n - 1) * A100.inter_node.latency_s + 2 * (n - 1) / n * nbytes / (8 * 24e9)
    assert all_reduce_s(link, nbytes, n) == pytest.approx(expected)


def test_rails_are_capped_by_nvlink() -> None:
    # H100: 8 × 48.5 GB/s of NICs exceed NVLink's 369 GB/s achievable: each GPU's share still crosses NVLink
    link = GroupShape(16, 1).link(H100)
    assert link.achievable_bytes_per_s == pytest.approx(H100.intra_node.achievable_bytes_per_s)
    # two members per node (stride 4): two NICs
    two = GroupShape(16, 4).link(H100)
    assert two.achievable_bytes_per_s == pytest.approx(2 * H100.inter_node.achievable_bytes_per_s)


def test_groups_spanning_pods_share_the_oversubscribed_uplinks() -> None:
    # Llama 3's fabric: 3,072-GPU pods, 1:7 above (Dubey et al. 2024 §3.3.1)
    podded = H100.model_copy(update={"pod": PodSpec(gpus=3072, oversubscription=7)})
    inside = GroupShape(384, 8).link(podded)  # 384 × 8 = 3,072 GPUs: one pod
    across = GroupShape(768, 8).link(podded)
    assert inside.achievable_bytes_per_s == pytest.approx(H100.inter_node.achievable_bytes_per_s)
    assert across.achievable_bytes_per_s == pytest.approx(H100.inter_node.achievable_bytes_per_s / 7)


def test_blocking_sends_are_part_of_the_sending_pass() -> None:
    # megatron-core's 1F1B waits on each batched send: stage 0's forward ends when its activation has reached
    # rank 1 (another node at t = 8), stage 1's input gradient when its gradient has reached rank 0; the hop then
    # costs nothing more. torch.distributed.pipelining (torchtitan) sends asynchronously: the hop costs the message.
    model = load_model("llama3-8b")
    req = PlanRequest(gpus=16, global_batch=8, tp=8, pp=2, seq_len=4096)
    plan = make_plan(model, req)
    got = stage_inputs(model, H100, plan)
    times = chunk_pass_times(model, H100, plan)
    msg = H100.inter_node.latency_s + 4096 * 4096 * 2 / 8 / H100.inter_node.achievable_bytes_per_s
    assert got.durations.f == pytest.approx((times[0].f_s + msg, times[1].f_s))
    assert got.durations.i == pytest.approx((times[0].i_s, times[1].i_s + msg))
    assert got.latency == ((0.0, 0.0), (0.0, 0.0))
    titan_plan = make_plan(model, replace(req, stack="torchtitan"))
    titan = stage_inputs(model, H100, titan_plan)
    titan_times = chunk_pass_times(model, H100, titan_plan)  # its own: it runs RoPE unfused, no main gradient
    assert titan.durations.f == pytest.approx((titan_times[0].f_s, titan_times[1].f_s))
    assert titan.latency[0][1] == pytest.approx(msg)
    # the blocked time is reported as P2P, not compute: the breakdown still sums to the step
    st = step_time(model, H100, plan)
    assert st.breakdown_s["p2p"] >= plan.num_microbatches * msg
    assert sum(st.breakdown_s.values()) == pytest.approx(st.step_s)


def test_interleaved_sends_block_only_without_overlap() -> None:
    model = load_model("llama3-8b")
    req = PlanRequest(gpus=16, global_batch=8, tp=8, pp=2, vp=2, schedule="interleaved-1f1b", seq_len=4096)
    overlapped = stage_inputs(model, H100, make_plan(model, req))
    blocking = stage_inputs(model, H100, make_plan(model, replace(req, overlap_p2p_comm=False)))
    assert overlapped.latency[0][1] > 0.0
    assert blocking.latency[0][1] == 0.0
    assert not isinstance(blocking.durations.f, float) and not isinstance(overlapped.durations.f, float)
    assert sum(blocking.durations.f) > sum(overlapped.durations.f)
