"""The NVLink-domain rows of `explain`'s configuration table, from the document's `placement` block."""

from __future__ import annotations

from pplan.documents.placement import GroupPlacementOut, PlacementOut

GROUP_WORDS = {
    "tp": "tp",
    "cp": "cp",
    "ep": "ep",
    "dp": "dp grads",
    "expert_dp": "expert dp",
    "pp": "pp neighbours",
}


def domains_text(p: PlacementOut) -> str:
    """How many domains the GPUs occupy, and whether that is a whole number."""
    if p.whole:
        return f"{p.gpus:,} GPUs = {p.domains:,} domains of {p.domain_gpus} ({p.in_domain_link})"
    full = p.domains - 1
    if full == 0:
        return f"{p.gpus:,} GPUs: part of one {p.domain_gpus}-GPU domain ({p.in_domain_link})"
    return (
        f"{p.gpus:,} GPUs = {p.gpus / p.domain_gpus:.2f} domains of {p.domain_gpus}: not a whole number "
        f"({full:,} full, {p.last_domain_gpus} GPUs on the last; {full * p.domain_gpus:,} or "
        f"{p.domains * p.domain_gpus:,} GPUs fill whole domains)"
    )


def _group_text(g: GroupPlacementOut, p: PlacementOut) -> str:
    price = f"{g.link}, {g.bandwidth_gb_per_s:,.0f} GB/s"
    if g.crossing == 0:
        text = f"within a domain: {price}"
    else:
        whole = "every" if g.crossing == g.groups else f"{g.crossing:,} of {g.groups:,}"
        unit = "boundary" if g.group == "pp" else "group"
        text = (
            f"crosses domains ({whole} {unit}{'' if whole == 'every' else 's'}, up to {g.max_domains} domains): "
            f"{price} against {p.in_domain_gb_per_s:,.0f} in a domain"
        )
    if g.mispriced and g.crossing and g.crossing_link is not None and g.crossing_gb_per_s is not None:
        text += (
            f"; in Megatron-LM's rank order the crossing ones run on {g.crossing_link}, "
            f"{g.crossing_gb_per_s:,.0f} GB/s: the step time assumes every group placed within one domain "
            "(whole groups per domain, leftover GPUs idle)"
        )
    elif g.mispriced:
        text += (
            "; the step time prices it on NVLink though some cross a domain"
            if g.crossing
            else "; the step time prices some across domains though none crosses"
        )
    return text


def placement_rows(p: PlacementOut | None) -> list[tuple[str, str]]:
    """The rows: the domains, then one per parallel group (size > 1)."""
    if p is None:
        return []
    rows = [("NVLink domains", domains_text(p))]
    rows += [(f"  {GROUP_WORDS[g.group]} {g.size}", _group_text(g, p)) for g in p.groups if g.size > 1]
    return rows
