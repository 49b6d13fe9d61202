"""Where collectives run (pplan.cost.links): NVLink inside a node; across nodes on the NICs of the group's members in
each node (rails), capped by NVLink; 1/oversubscription above a pod; checked against hand derivations and the
published multi-node bus bandwidth."""

from __future__ import annotations

import pytest

from pplan.cost.links import GroupShape, all_reduce_s
from pplan.profiles.catalog import load_hardware
from pplan.profiles.specs import PodSpec

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
