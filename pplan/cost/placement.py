"""Where a plan's parallel groups sit against the hardware's NVLink domains, and the link each one is priced on.

pplan's "node" (`gpus_per_node`) is the NVLink domain: 8 GPUs on an HGX/DGX H100, 72 on a GB200 NVL72 rack
(hardware/gb200-nvl72.toml). A GPU count occupies ceil(G / D) domains of D GPUs, the last one partly when D does
not divide G. Ranks are placed in Megatron-LM's default order (`pplan.cost.links`: tp fastest, then cp, then dp,
then pp; experts: etp, then ep, then expert data parallel), so group member i of a group with stride k sits at
rank base + i·k, on domain rank // D. For each group kind this module enumerates every group and counts those
whose members span more than one domain, exactly; and it reports the link the cost model prices the kind on
(`GroupShape.link`, the same call the step time makes: NVLink inside a domain, the NICs' rails beyond it). Where
the two disagree (a group the cost model prices on NVLink because its span n·k is at most D, but which straddles
a domain boundary because D is not a multiple of n·k, e.g. t = 16 on 72-GPU domains), `mispriced` says so: the
explanation is data, the predicted numbers stay the cost model's.

Pipeline neighbours: stage r's GPU g sends to g + t·cp·d of stage r + 1 (and, with interleaving, the last stage
to the first); a boundary crosses a domain when any of its GPU pairs does. The cost model prices a boundary by the
domains of the two stages' first GPUs (`pplan.cost.links.p2p_message_matrix`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pplan.cost.experts import ep_group
from pplan.cost.links import GroupShape, cp_group, dp_group, pipeline_node, rails_link, tp_group
from pplan.plan.records import Plan
from pplan.profiles.fields import GB
from pplan.profiles.hardware_spec import HardwareSpec, LinkSpec

MAX_ENUMERATED_GPUS = 1 << 20
"""Above this many GPUs the groups are not enumerated one by one (a group's domains are then its span's)."""


@dataclass(frozen=True, slots=True)
class GroupPlacement:
    """One kind of parallel group: its shape, how many of its groups cross a domain boundary, and its price."""

    group: str
    """tp, cp, dp (data-parallel gradient group, d·cp ranks), ep, expert_dp, or pp (neighbouring stages)."""
    size: int
    stride: int
    groups: int
    """How many such groups the plan has (pp: stage boundaries, the wrap-around one included when interleaved)."""
    crossing: int
    """Of those, the groups (boundaries) with members on more than one domain."""
    max_domains: int
    """The most domains one group touches."""
    link: str
    """The link the cost model prices this kind on."""
    bandwidth_gb_per_s: float
    """That link's achievable bandwidth per GPU (nominal × efficiency; rails and pod oversubscription included)."""
    latency_us: float
    mispriced: bool
    """Some groups cross a domain but the cost model prices the kind on the in-domain link (or the reverse)."""
    crossing_link: str | None = None
    """Where the cost model prices a kind in-domain but some of its groups cross: the link the slowest crossing
    group runs on (the NICs of its fewest members on one domain, in parallel: `links.rails_link`); else None."""
    crossing_gb_per_s: float | None = None
    """That link's achievable bandwidth per GPU, one direction."""


@dataclass(frozen=True, slots=True)
class Placement:
    """A plan's GPUs against the hardware's NVLink domains."""

    gpus: int
    domain_gpus: int
    domains: int
    """Domains the GPUs occupy, the last one partly when `whole` is false."""
    whole: bool
    last_domain_gpus: int
    """GPUs on the last domain (domain_gpus when whole)."""
    in_domain_link: str
    in_domain_gb_per_s: float
    groups: tuple[GroupPlacement, ...]


def _achievable_gb(link: LinkSpec) -> float:
    return link.achievable_bytes_per_s / GB


def _count(shape: GroupShape, gpus: int, domain: int, limit: int) -> tuple[int, int, int, int]:
    """(groups, groups crossing a domain, most domains one group touches, fewest members a crossing group has on
    one domain: 0 when none crosses, or when the span exceeds a domain, where the cost model prices the kind
    across domains itself) for `shape` tiled over `gpus` ranks in blocks of size·stride consecutive ranks
    (`limit`: the ranks the groups tile, t·cp·d for a stage's groups, G for the rest; the tiling repeats per
    stage, which domains may cut differently, so every stage is counted)."""
    span = shape.size * shape.stride
    groups = gpus // shape.size
    if gpus > MAX_ENUMERATED_GPUS:
        touched = math.ceil(span / domain) if span > domain else 1
        piece = shape.rails(domain) if touched > 1 else 0
        return groups, groups if touched > 1 else 0, touched, piece
    crossing, most, fewest = 0, 1, 0
    for base in range(0, gpus, span):
        for offset in range(shape.stride):
            first = base + offset
            last = first + (shape.size - 1) * shape.stride
            touched = last // domain - first // domain + 1
            most = max(most, touched)
            if touched > 1:
                crossing += 1
                if span <= domain:
                    piece = _fewest_on_a_domain(first, shape.stride, shape.size, domain)
                    fewest = piece if not fewest else min(fewest, piece)
    return groups, crossing, most, fewest


def _fewest_on_a_domain(first: int, stride: int, size: int, domain: int) -> int:
    """The fewest members one domain holds of the group first, first + stride, … (size members): per domain
    between the first member's and the last's, the members below its end less those below its start (a domain
    a stride wider than it skips holds none and is not counted)."""

    def below(rank: int) -> int:
        return min(size, max(0, -(-(rank - first) // stride)))

    last = first + (size - 1) * stride
    pieces = (below((d + 1) * domain) - below(d * domain) for d in range(first // domain, last // domain + 1))
    return min(n for n in pieces if n)  # a stride above the domain skips some


def _group(name: str, shape: GroupShape, hw: HardwareSpec, gpus: int) -> GroupPlacement:
    groups, crossing, most, fewest = _count(shape, gpus, hw.gpus_per_node, gpus)
    link = shape.link(hw)
    priced_in_domain = link is hw.intra_node
    across = rails_link(hw, fewest, shape.size * shape.stride) if crossing and priced_in_domain else None
    return GroupPlacement(
        name, shape.size, shape.stride, groups, crossing, most, link.name, _achievable_gb(link),
        link.latency_us, (crossing > 0) == priced_in_domain and shape.size > 1,
        across.name if across is not None else None,
        _achievable_gb(across) if across is not None else None,
    )  # fmt: skip


def _pipeline(plan: Plan, hw: HardwareSpec) -> GroupPlacement:
    domain, stage = hw.gpus_per_node, plan.tp * plan.cp * plan.dp
    pairs = [(r, r + 1) for r in range(plan.pp - 1)]
    if plan.vp > 1 and plan.kind.placement == "loop" and plan.pp > 1:
        pairs.append((plan.pp - 1, 0))  # the interleaved schedule's wrap from the last stage to the first
    crossing = mispriced = 0
    for a, b in pairs:
        crosses = any((a * stage + g) // domain != (b * stage + g) // domain for g in range(stage))
        crossing += crosses
        priced_across = pipeline_node(hw, plan.tp, plan.cp, plan.dp, a) != pipeline_node(
            hw, plan.tp, plan.cp, plan.dp, b
        )
        mispriced += crosses != priced_across
    link = hw.inter_node if crossing else hw.intra_node
    return GroupPlacement(
        "pp", plan.pp, stage, len(pairs), crossing, 2 if crossing else 1, link.name, _achievable_gb(link),
        link.latency_us, mispriced > 0,
    )  # fmt: skip


def placement(hw: HardwareSpec, plan: Plan) -> Placement:
    """Every group kind of `plan` (those of size > 1, and tp always) against `hw`'s NVLink domains."""
    gpus, domain = plan.gpus, hw.gpus_per_node
    shapes: list[tuple[str, GroupShape]] = [("tp", tp_group(plan.tp))]
    if plan.cp > 1:
        shapes.append(("cp", cp_group(plan.tp, plan.cp)))
    if plan.ep > 1:
        shapes.append(("ep", ep_group(plan)))
    if plan.dp * plan.cp > 1:
        shapes.append(("dp", dp_group(plan.tp, plan.cp, plan.dp)))
    if plan.ep > 1 and plan.expert_dp > 1:
        shapes.append(("expert_dp", GroupShape(plan.expert_dp, plan.ep * plan.etp)))
    groups = [_group(name, shape, hw, gpus) for name, shape in shapes]
    if plan.pp > 1:
        groups.append(_pipeline(plan, hw))
    rest = gpus % domain
    return Placement(
        gpus=gpus,
        domain_gpus=domain,
        domains=math.ceil(gpus / domain),
        whole=rest == 0,
        last_domain_gpus=rest or min(domain, gpus),
        in_domain_link=hw.intra_node.name,
        in_domain_gb_per_s=_achievable_gb(hw.intra_node),
        groups=tuple(groups),
    )


def domains_sentence(hw: HardwareSpec, gpus: int) -> str:
    """One line: how many NVLink domains `gpus` GPUs occupy on `hw`, and whether that is a whole number."""
    domain = hw.gpus_per_node
    full, rest = divmod(gpus, domain)
    if rest == 0:
        return f"{gpus:,} GPUs = {full:,} NVLink domains of {domain}"
    if full == 0:
        return f"{gpus:,} GPUs: part of one {domain}-GPU NVLink domain ({gpus} of {domain})"
    return (
        f"{gpus:,} GPUs = {gpus / domain:.2f} NVLink domains of {domain}: not a whole number "
        f"({full:,} full and one with {rest}; {domain - rest} GPUs of the last domain idle, "
        f"{(full + 1) * domain:,} or {full * domain:,} GPUs fill whole domains)"
    )
