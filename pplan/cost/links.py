"""Where each parallel group sits on the cluster, and how long its messages and collectives take.

Rank order is Megatron-LM's default (tp fastest, then cp, then dp, then pp): global rank
g = tp_rank + t·(cp_rank + cp·(dp_rank + d·pp_rank)), node = g // G with G GPUs per node. So a group of n ranks
with stride k spans n·k consecutive ranks, and stays inside one node when n·k ≤ G.

Link time is the alpha-beta model (Hockney; Calculon uses it): latency + bytes / (bandwidth × efficiency).
Ring collectives over n ranks (Thakur et al. 2005; NCCL's ring algorithm): all-reduce 2(n−1) steps moving
2(n−1)/n of the buffer per rank; all-gather and reduce-scatter n−1 steps moving (n−1)/n. A group that spans
nodes runs at the inter-node rate: on DGX nodes each GPU has its own NIC, so the ring's slowest hop gets one NIC.
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.profiles.specs import HardwareSpec, LinkSpec


@dataclass(frozen=True, slots=True)
class GroupShape:
    """A communicator: `size` ranks spaced `stride` global ranks apart."""

    size: int
    stride: int

    def link(self, hardware: HardwareSpec) -> LinkSpec:
        """The link tier the group's ring runs on."""
        inside = self.size * self.stride <= hardware.gpus_per_node
        return hardware.intra_node if inside else hardware.inter_node


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


def all_reduce_s(link: LinkSpec, nbytes: float, n: int) -> float:
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * link.latency_s + 2 * (n - 1) / n * nbytes / link.achievable_bytes_per_s


def all_gather_s(link: LinkSpec, nbytes: float, n: int) -> float:
    """All-gather (or reduce-scatter) of a buffer of `nbytes` in total."""
    if n <= 1:
        return 0.0
    return (n - 1) * link.latency_s + (n - 1) / n * nbytes / link.achievable_bytes_per_s
