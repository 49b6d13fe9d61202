"""The `placement` block of `pplan.explain/2`: a plan's GPUs and parallel groups against the NVLink domains.

Shapes only; `pplan.explain` fills it from `pplan.cost.placement` (which says how each number is counted).
"""

from __future__ import annotations

from pydantic import NonNegativeInt, PositiveInt

from pplan.documents.base import Out


class GroupPlacementOut(Out):
    """One kind of parallel group against the domains, and the link the cost model prices it on."""

    group: str
    """tp, cp, ep, dp (the gradient group: d·cp ranks), expert_dp, or pp (neighbouring pipeline stages)."""
    size: PositiveInt
    """Ranks in one group (pp: the pipeline stages)."""
    stride: PositiveInt
    """Global ranks between a group's members in Megatron-LM's rank order (pp: GPUs per stage, t·cp·d)."""
    groups: NonNegativeInt
    """Groups of this kind (pp: stage boundaries, the interleaved schedule's wrap from last to first included)."""
    crossing: NonNegativeInt
    """Groups (boundaries) whose members sit on more than one NVLink domain, counted rank by rank."""
    max_domains: PositiveInt
    """The most domains one group touches."""
    link: str
    """The link pplan's step time prices this kind on (pplan.cost.links.GroupShape.link)."""
    bandwidth_gb_per_s: float
    """That link's achievable bandwidth per GPU, one direction: nominal × efficiency, across domains the rails of
    the group's members in one domain, over the pod's oversubscription where the group spans pods."""
    latency_us: float
    """That link's per-message latency, µs."""
    mispriced: bool
    """Some groups cross a domain while the step time prices the kind on NVLink (its span fits a domain but the
    domain size is no multiple of it), or the reverse; the predicted numbers are the step time's."""
    crossing_link: str | None = None
    """Where the step time prices the kind on NVLink but some of its groups cross a domain: the link the slowest
    crossing group runs on once its ranks sit where Megatron-LM's rank order puts them (the NICs of its fewest
    members on one domain, in parallel, capped by NVLink); null otherwise."""
    crossing_gb_per_s: float | None = None
    """That link's achievable bandwidth per GPU, one direction; null with `crossing_link`."""


class PlacementOut(Out):
    """The plan's GPUs on the hardware's NVLink domains (pplan's `gpus_per_node`: 8 on an H100 node, 72 on a
    GB200 NVL72 rack) and where each parallel group runs."""

    gpus: PositiveInt
    """GPUs the plan runs on."""
    domain_gpus: PositiveInt
    """GPUs in one NVLink domain (the hardware profile's gpus_per_node)."""
    domains: PositiveInt
    """Domains the GPUs occupy: ceil(gpus / domain_gpus), the last one partly used unless `whole`."""
    whole: bool
    """Whether the GPUs fill whole domains."""
    last_domain_gpus: PositiveInt
    """GPUs the plan uses on its last domain."""
    in_domain_link: str
    """The link within one domain (NVLink and its switch)."""
    in_domain_gb_per_s: float
    """The in-domain link's achievable bandwidth per GPU, one direction."""
    groups: list[GroupPlacementOut]
    """Each kind of parallel group the plan has, and where it runs."""
