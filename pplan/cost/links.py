"""Where each parallel group sits on the cluster, and how long its messages and collectives take.

Rank order is Megatron-LM's default (tp fastest, then cp, then dp, then pp): global rank
g = tp_rank + t·(cp_rank + cp·(dp_rank + d·pp_rank)), node = g // G with G GPUs per node. So a group of n ranks
with stride k spans n·k consecutive ranks, and stays inside one node when n·k ≤ G.

Link time is the alpha-beta model (Hockney; Calculon uses it): latency + bytes / (bandwidth × efficiency).
Ring collectives over n ranks (Thakur et al. 2005; NCCL's ring algorithm): all-reduce 2(n−1) steps moving
2(n−1)/n of the buffer per rank; all-gather and reduce-scatter n−1 steps moving (n−1)/n. A group that spans
nodes runs at the inter-node rate of its rails: on DGX nodes each GPU has its own NIC, and a group with k members
in a node runs k ring channels, each crossing nodes on its own NIC with 1/k of the data, so the ring moves at
k × one NIC's rate, capped by NVLink (`GroupShape.rails`); one member per node gets one NIC. Above a pod of
full-bisection fabric the profile's oversubscription divides that (`[pod]`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from pplan.profiles.fields import GB
from pplan.profiles.hardware_spec import HardwareSpec, LinkSpec


@dataclass(frozen=True, slots=True)
class GroupShape:
    """A communicator: `size` ranks spaced `stride` global ranks apart."""

    size: int
    stride: int

    def link(self, hardware: HardwareSpec) -> LinkSpec:
        """The link the group's collectives run on: NVLink inside a node; across nodes, the k NICs (rails) of the
        group's k members per node in parallel, capped by NVLink (`rails`), and 1/oversubscription of that where
        the group spans pods (`[pod]` in the profile)."""
        if self.size * self.stride <= hardware.gpus_per_node:
            return hardware.intra_node
        return _across_nodes(self, hardware)

    def rails(self, gpus_per_node: int) -> int:
        """Members of the group in one node, each with its own NIC: a ring across nodes runs that many channels,
        each crossing nodes on a different NIC and carrying 1/k of the data (NCCL's multi-node all-reduce reaches
        192 GB/s bus bandwidth on DGX A100 nodes of 8 × 24 GB/s NICs, NVIDIA/nccl#412, #812)."""
        if self.stride >= gpus_per_node:
            return 1
        return max(1, min(self.size, gpus_per_node // self.stride))


@lru_cache(maxsize=1024)
def _across_nodes(group: GroupShape, hardware: HardwareSpec) -> LinkSpec:
    """`GroupShape.link` for a group that spans nodes (remembered: a search asks for the same few often)."""
    return rails_link(hardware, group.rails(hardware.gpus_per_node), group.size * group.stride)


def rails_link(hardware: HardwareSpec, k: int, span: int) -> LinkSpec:
    """The link of a group crossing nodes with `k` members on a node (its k NICs in parallel, capped by NVLink)
    whose ranks span `span` consecutive global ranks (over a pod: the pod's oversubscription)."""
    inter, intra = hardware.inter_node, hardware.intra_node
    achievable = min(k * inter.achievable_bytes_per_s, intra.achievable_bytes_per_s if k > 1 else math.inf)
    pod = hardware.pod
    if pod is not None and span > pod.gpus:
        achievable /= pod.oversubscription
    if k == 1 and achievable == inter.achievable_bytes_per_s:
        return inter
    return inter.model_copy(
        update={"name": f"{inter.name} × {k} rails", "bandwidth_gb_per_s": achievable / GB, "efficiency": 1.0}
    )


def tp_group(t: int) -> GroupShape:
    return GroupShape(t, 1)


def cp_group(t: int, cp: int) -> GroupShape:
    return GroupShape(cp, t)


def dp_group(t: int, cp: int, d: int) -> GroupShape:
    """The gradient-reduction group: d replicas × cp context ranks (Megatron reduces over dp × cp)."""
    return GroupShape(d * cp, t)


def pipeline_node(hardware: HardwareSpec, t: int, cp: int, d: int, rank: int) -> int:
    """The node holding the first GPU of pipeline rank `rank` (pp is the outermost rank dimension)."""
    return rank * t * cp * d // hardware.gpus_per_node


def p2p_message_matrix(
    hardware: HardwareSpec, t: int, cp: int, d: int, p: int, nbytes: float
) -> list[list[float]]:
    """Seconds for one `nbytes` message between every pair of pipeline ranks."""
    node = [pipeline_node(hardware, t, cp, d, r) for r in range(p)]
    intra, inter = message_s(hardware.intra_node, nbytes), message_s(hardware.inter_node, nbytes)
    return [[intra if node[a] == node[b] else inter for b in range(p)] for a in range(p)]


def message_s(link: LinkSpec, nbytes: float) -> float:
    """One point-to-point message."""
    return link.latency_s + nbytes / link.achievable_bytes_per_s


def all_reduce_s(link: LinkSpec, nbytes: float, n: int, calls: int = 1) -> float:
    """Ring all-reduce of `nbytes` in total, issued as `calls` collectives (buckets, layers): each pays the ring's
    2(n−1) step latencies."""
    if n <= 1:
        return 0.0
    return calls * 2 * (n - 1) * link.latency_s + 2 * (n - 1) / n * nbytes / link.achievable_bytes_per_s


def all_gather_s(link: LinkSpec, nbytes: float, n: int, calls: int = 1) -> float:
    """All-gather (or reduce-scatter) of a buffer of `nbytes` in total, issued as `calls` collectives: each pays
    the ring's n − 1 step latencies."""
    if n <= 1:
        return 0.0
    return calls * (n - 1) * link.latency_s + (n - 1) / n * nbytes / link.achievable_bytes_per_s
