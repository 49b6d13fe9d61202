"""A routed layer's token dispatch and combine, by dispatcher and fabric; its grouped-GEMM efficiency and EP overlap.

Sources: "facts §n" is section n of the public MoE facts collected for issue 46 (each figure there with its
primary source: repository file at a commit, release page, paper or maintainer comment, named beside it below). Symbols per routed layer, per
micro-batch, per GPU: n tokens the rank routes (`experts.routed_tokens`), h hidden, k experts per token, E routed
experts, ep expert-parallel ranks, E_l = E/ep experts per rank, OF the overload factor (busiest rank's tokens over
the balanced share: 1 with forced balancing, `MoeKnobs.overload`).

- Volume (facts §8.1). NCCL all-to-all (`alltoall`): the global permutation copies each token k times, so one
  dispatch sends n·k·h·2 bytes, (ep−1)/ep of it to other ranks (`experts.all_to_all_s`). Deduplicating kernels
  (`deepep`, `hybridep`, `ncclep`) send a token once per destination rank: n·k_eff·h·2 with k_eff the expected
  number of distinct ranks among a token's k experts under uniform routing, ep·(1 − C(E−E_l, k)/C(E, k))
  (`distinct_ranks`; 5.3 for E=256, k=8, ep=8, as facts §8.1). `allgather` gathers every token of the ep group
  (n·h·2 per rank, ep−1 peers) and reduce-scatters the outputs.
- Bandwidth (facts §1): NCCL at the profile's achievable NVLink rate within the NVLink domain (8 GPUs on DGX, 72
  on GB200 NVL72) and one NIC per GPU across domains (NCCL cannot aggregate NICs for all-to-all, nccl-tests#267).
  The dispatch kernels reach `KERNEL_NVLINK_FRACTION` of the NVLink line rate through their Torch API (HybridEP
  536 GB/s of 900 on B200 EP8, 550 on GB200 EP8, 484 at EP32; DeepEP 348 with 16 SMs on B200; DeepEP V2 over NCCL
  726 kernel-only × 0.75 API), and the NIC's achievable rate across domains (HybridEP 41–58 GB/s on 50 GB/s NICs).
  Each call has a latency: NCCL's ~10 µs floor for small all-to-alls (`A2A_LATENCY_S`, facts §1).
- Across NVLink domains DeepEP's internode kernels are hierarchical (`DOMAIN_DEDUP_DISPATCHERS`): a token crosses
  the network once per destination domain (to the rank of the same local index there) and is fanned out to that
  domain's ranks over NVLink (DeepSeek-V3 report §3.2.2: "first transmitted via IB to the GPUs with the same
  in-node index on its target nodes ... then forwarded via NVLink"; DeepEP's normal kernels, facts §1, whose
  internode figure is the RDMA bottleneck's bandwidth). So the network carries n·D_rem·h·2 per rank, D_rem =
  (N−1)·(1 − C(E−E/N, k)/C(E, k)) the expected distinct remote domains of a token's k experts under uniform
  routing, N the group's domains (`remote_domains`; 2.7 for DeepSeek-V3 at ep 32 over four 8-GPU nodes, against
  5.5 remote rank copies); the NVLink share is the local ranks' copies, as within a domain. HybridEP keeps one copy
  per destination rank on the network: its measured dispatch on 16 H100 (1.38 ms per layer and micro-batch with
  the permute, facts §5) is the per-rank volume's (1.2 ms at the NIC's rate), where one copy per node would take
  0.4 ms.
- EP overlap (`moe_ep_overlap`, facts §5): `EP_OVERLAP_HIDDEN` of the dispatch and combine time runs behind another
  micro-batch's compute (36.55 % measured, Qwen3-30B on 16 H100), at most that compute; while it does, the
  dispatcher's `DISPATCH_SMS` of the GPU's SMs are lost to the GEMMs, which take hidden·s/(S − s) longer.
- Grouped GEMM (facts §3): the profile's grouped-GEMM efficiency at large groups, times r/(r + `ROWS_HALF`) for r
  = n·k·OF/E_l rows per local expert (DeepGEMM FP8: 41–47 % of peak at 256 rows against 55–66 % at 4–8K rows,
  so r½ ≈ 110 rows [D]); the fused CuTeDSL grouped MLP (`moe_fused_grouped_mlp`) runs the segment
  `FUSED_MLP_SPEEDUP` faster (1.3× forward, 2.1× backward, NVIDIA's fused-kernel blog, 2026-06-15). The busiest
  rank's OF sets the layer's time (the straggler rule, DeepEP#170).
"""

from __future__ import annotations

from math import comb

from pplan.cost.experts import ACT_BYTES, ExpertComm, all_to_all_s, ep_group, routed_tokens
from pplan.cost.links import GroupShape, all_gather_s
from pplan.plan.shape import LayerSetting
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

DEDUP_DISPATCHERS = frozenset({"deepep", "hybridep", "ncclep"})
"""Dispatchers that send a token once per destination rank (facts §1, §8.1)."""
DOMAIN_DEDUP_DISPATCHERS = frozenset({"deepep"})
"""Of those, the ones whose token crosses the network once per destination NVLink domain (module docstring)."""
KERNEL_NVLINK_FRACTION = {"deepep": 0.45, "hybridep": 0.58, "ncclep": 0.60}
"""Fraction of the NVLink line rate (per GPU, per direction) each dispatch kernel's Torch API reaches (facts §1:
HybridEP 536/900 B200 EP8, 550/900 GB200 EP8, 484/900 GB200 EP32 → 0.58; DeepEP 348/900 at 16 SMs, 646/900 at
48 → 0.45 at its default 20–24; NCCL EP (DeepEP V2 over NCCL Gin) 726/900 kernel-only × 0.75 API → 0.60)."""
A2A_LATENCY_S = 10e-6
"""Per-call latency of an all-to-all within a node: NCCL's 10.3–11.1 µs floor at 128 B–4 KB (facts §1)."""
EP_OVERLAP_HIDDEN = 0.37
"""Fraction of the dispatch and combine time hidden by `--overlap-moe-expert-parallel-comm`: 36.55 % measured
(Qwen3-30B-A3B, 16 H100, HybridEP; facts §0.2)."""
DISPATCH_SMS = {"alltoall": 8, "allgather": 8, "deepep": 20, "hybridep": 16, "ncclep": 16}
"""SMs a dispatcher's kernels occupy while they run beside compute: DeepEP 20 and HybridEP 16 (megatron-core
defaults, facts §1); NCCL all-to-all and NCCL EP: assumed 8 and 16 (NCCL channels; no published figure)."""
DEFAULT_SMS = 132
"""SMs of a GPU whose profile states none (H100 SXM's, the calibrated GPU)."""
ROWS_HALF = 110.0
"""r½: rows per local expert at which a grouped GEMM reaches half its large-group efficiency (DeepGEMM FP8 table,
facts §3: 0.72 of the 4–8K-row figure at 256 rows [D])."""
FUSED_MLP_SPEEDUP = (1.3, 2.1)
"""The fused grouped MLP's speed-up of the expert segment, forward and backward (facts §3, NVIDIA blog)."""


def distinct_ranks(num_experts: int, top_k: int, ep: int) -> float:
    """k_eff: expected distinct ranks among a token's k experts, uniform routing over E experts in ep equal blocks
    (module docstring)."""
    if ep <= 1:
        return 1.0
    local = num_experts // ep
    miss = comb(num_experts - local, top_k) / comb(num_experts, top_k)
    return ep * (1 - miss)


def dispatch_copies(model: ModelSpec, plan: LayerSetting) -> float:
    """Token copies one dispatch carries per routed token (k for NCCL all-to-all, k_eff when deduplicated), before
    the (ep−1)/ep that leaves the rank."""
    moe = model.moe
    assert moe is not None
    if plan.moe_knobs.dispatcher in DEDUP_DISPATCHERS:
        return distinct_ranks(moe.num_experts, moe.top_k, plan.ep)
    return float(moe.top_k)


def remote_domains(num_experts: int, top_k: int, domains: int) -> float:
    """D_rem: expected distinct NVLink domains other than its own among a token's k experts, uniform routing over
    E experts in `domains` equal blocks (module docstring)."""
    if domains <= 1:
        return 0.0
    local = num_experts // domains
    miss = comb(num_experts - local, top_k) / comb(num_experts, top_k)
    return (domains - 1) * (1 - miss)


def kernel_a2a_s(
    hardware: HardwareSpec, group: GroupShape, nbytes: float, fraction: float, far_bytes: float | None = None
) -> float:
    """One deduplicated dispatch (or combine) of `nbytes` per rank by a dispatch kernel: (n−1)/n of it over NVLink
    at `fraction` of the line rate within the NVLink domain; across domains the NVLink share (the local ranks'
    (k−1)/n) and the network's `far_bytes` (one copy per remote domain, module docstring; (n−k)/n of `nbytes`
    when not given) concurrently, the NIC at its achievable rate."""
    n = group.size
    if n <= 1:
        return 0.0
    intra, inter = hardware.intra_node, hardware.inter_node
    nvlink = intra.bandwidth_gb_per_s * 1e9 * fraction
    if n * group.stride <= hardware.gpus_per_node:
        return A2A_LATENCY_S + nbytes * (n - 1) / n / nvlink
    per_node = group.rails(hardware.gpus_per_node)
    near = nbytes * (per_node - 1) / n / nvlink
    if far_bytes is None:
        far_bytes = nbytes * (n - per_node) / n
    far = far_bytes / inter.achievable_bytes_per_s
    return A2A_LATENCY_S + max(near, far)


def dispatch_s(model: ModelSpec, hardware: HardwareSpec, plan: LayerSetting) -> float:
    """One dispatch (the combine costs the same back) of one routed layer and micro-batch, on the busiest rank."""
    knobs = plan.moe_knobs
    tokens = routed_tokens(plan) * knobs.overload
    bytes_per_copy = tokens * model.hidden_size * ACT_BYTES
    if knobs.dispatcher == "allgather":
        group = ep_group(plan)
        if group.size <= 1:
            return 0.0
        return all_gather_s(group.link(hardware), bytes_per_copy * group.size, group.size)
    nbytes = bytes_per_copy * dispatch_copies(model, plan)
    if knobs.dispatcher in DEDUP_DISPATCHERS:
        group = ep_group(plan)
        per_domain = group.rails(hardware.gpus_per_node)
        far = None
        if (
            knobs.dispatcher in DOMAIN_DEDUP_DISPATCHERS
            and group.size * group.stride > hardware.gpus_per_node
            and group.size % per_domain == 0
        ):
            moe = model.moe
            assert moe is not None
            far = bytes_per_copy * remote_domains(moe.num_experts, moe.top_k, group.size // per_domain)
        return kernel_a2a_s(hardware, group, nbytes, KERNEL_NVLINK_FRACTION[knobs.dispatcher], far)
    return all_to_all_s(hardware, ep_group(plan), nbytes)


def overlap_tax(hardware: HardwareSpec, dispatcher: str) -> float:
    """s/(S − s): how much longer compute runs per second of dispatch it hides (module docstring)."""
    sms = hardware.gpu.sms or DEFAULT_SMS
    taken = DISPATCH_SMS[dispatcher]
    return taken / (sms - taken)


def exposed_comm(total: float, compute: float, hardware: HardwareSpec, plan: LayerSetting) -> float:
    """Of one pass's dispatch and combine time `total`, what the pass waits for: all of it, or with EP overlap the
    part `EP_OVERLAP_HIDDEN` does not hide (hiding at most the pass's `compute`), plus the SM tax the hidden part
    lays on that compute."""
    knobs = plan.moe_knobs
    if not knobs.ep_overlap or total <= 0:
        return total
    hidden = min(EP_OVERLAP_HIDDEN * total, compute)
    return total - hidden + hidden * overlap_tax(hardware, knobs.dispatcher)


def expert_comm_by_knobs(model: ModelSpec, hardware: HardwareSpec, plan: LayerSetting) -> ExpertComm:
    """Dispatch and combine of one routed layer per micro-batch, forward and input-gradient pass, before any EP
    overlap (the etp gathers as `experts.expert_comm`)."""
    one = dispatch_s(model, hardware, plan)
    gather = 0.0
    if plan.etp > 1:
        nbytes = routed_tokens(plan) * plan.moe_knobs.overload * model.hidden_size * ACT_BYTES
        nbytes *= model.moe.top_k if model.moe is not None else 1
        gather = 2 * all_gather_s(GroupShape(plan.etp, 1).link(hardware), nbytes * plan.etp, plan.etp)
    per_pass = 2 * one + gather
    return ExpertComm(per_pass, per_pass)


def rows_per_expert(model: ModelSpec, plan: LayerSetting) -> float:
    """r: token rows each local expert's grouped GEMM takes per micro-batch on the busiest rank, n·k·OF/E_l."""
    moe = model.moe
    assert moe is not None
    local = max(1, moe.num_experts // plan.ep)
    return routed_tokens(plan) * moe.top_k * plan.moe_knobs.overload / local


def grouped_efficiency(model: ModelSpec, plan: LayerSetting) -> float:
    """The grouped GEMM's efficiency relative to its large-group figure: r/(r + r½)."""
    rows = rows_per_expert(model, plan)
    return rows / (rows + ROWS_HALF)


def fused_mlp_speedup(plan: LayerSetting, backward: bool) -> float:
    """The fused grouped MLP's speed-up of the expert GEMMs in a pass (1 when unfused)."""
    return FUSED_MLP_SPEEDUP[backward] if plan.moe_knobs.fused_grouped_mlp else 1.0


def expert_gemm_s(
    model: ModelSpec, plan: LayerSetting, flops: float, rate: float, overhead_s: float
) -> tuple[float, float, float]:
    """The experts' grouped GEMMs of one pass each (F, I, W): `flops` per pass on the busiest rank (× OF) at `rate`
    (the profile's grouped-GEMM FLOP/s at large groups) × r/(r + r½), faster by the fused MLP's speed-up; two kernel
    overheads each."""
    base = flops * plan.moe_knobs.overload / (rate * grouped_efficiency(model, plan))
    return tuple(  # type: ignore[return-value]
        base / fused_mlp_speedup(plan, backward) + 2 * overhead_s for backward in (False, True, True)
    )
