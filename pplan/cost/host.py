"""A routed layer's host side: kernels launched, device-host syncs, and what each CUDA-graph scope removes.

Sources: "facts §n" is section n of the public MoE facts collected for issue 46 (each figure there with its
primary source: repository file at a commit, release page, paper or maintainer comment, named beside it below). Per routed layer and micro-batch:

- Kernels (facts §4, §2): about 151 per layer per micro-batch, forward and backward, for Qwen3-30B-A3B with
  HybridEP, permute and router fusion and router/preprocess graphs (463,348 kernels per step / (64 micro-batches ×
  48 layers) [D]). Of them the router's 31 fused (72 unfused: `ROUTER_KERNELS`, TE PR #1883), the permutation's
  `PERMUTE_KERNELS` (fused 2 per direction; unfused the sort, index and scatter kernels, assumed 8), the rest the
  attention block (`ATTN_KERNELS`) and the expert path (`EXPERT_KERNELS`: dispatch, grouped GEMMs, activation,
  quantisation, combine), split forward/backward about 1 : 2 [assumed].
- Host time: each eager kernel costs the host `LAUNCH_S` (eager small kernels ≈ 3.9 µs each, facts §4). A pass's
  host time runs ahead of the GPU's; the pass waits for the host only where host time exceeds GPU time,
  t = max(t_GPU, N_eager·c_launch) (facts §8.5).
- Syncs: the alltoall dispatcher copies tokens-per-expert to the host and synchronises once per forward dispatch
  (megatron-core `_maybe_dtoh_and_synchronize`, facts §1); the flex dispatchers (DeepEP, HybridEP, NCCL EP)
  likewise size their outputs on the host unless the whole step is one graph with paged stash (`full_iteration`,
  megatron-core 0.18, sync-free). A sync drains the GPU's queue: the kernels after it start only as the host
  launches them (`SYNC_S`, fitted once across all published MoE runs, `pplan validate --recent`; HybridEP's
  "metadata-preprocess" NVTX range, the sync's wait included, measured 1.01 ms per layer and micro-batch on H100,
  facts §5).
- Graph scopes (facts §4): `attn` captures the attention block, `moe_router` the router (and shared expert),
  `moe_preprocess` the dispatch preprocessing and permutation; the expert path stays eager; `full_layer` (legacy
  `--enable-cuda-graph`) captures every layer but keeps the sync; `full_iteration` captures the whole step, no
  eager kernel and no sync.
"""

from __future__ import annotations

from dataclasses import dataclass

from pplan.plan.shape import LayerSetting

LAUNCH_S = 4e-6
"""Host time per eagerly launched kernel (facts §4: ≈3.9 µs per small eager kernel, 15.5 µs / 4)."""
ROUTER_KERNELS = {False: (36, 36), True: (16, 15)}
"""Router kernels forward and backward, unfused and fused (72 → 31 per layer, facts §2)."""
PERMUTE_KERNELS = {False: (8, 8), True: (2, 2)}
"""(Un)permutation kernels forward and backward, unfused (assumed) and fused (one permute and one un-permute)."""
ATTN_KERNELS = (15, 25)
EXPERT_KERNELS = (25, 45)
"""The attention block's and the expert path's kernels, forward and backward: the 151 of facts §4 less the fused
router's 31 and the fused permutation's 4, split 40 : 70 between them and 1 : 2 forward : backward [assumed]."""
SYNC_S = 1.0e-3
"""Exposed time per device-host sync of a routed layer's dispatch (module docstring): fitted once across every
published MoE run of `pplan validate --recent` (MoE mean absolute error 20.7 % at 0, 19.8 % at 0.4 ms, 19.4 % at
1.0 ms, 19.4 % at 1.6 ms: a flat minimum at 1.0–1.6 ms), taken at 1.0 ms, the HybridEP metadata-preprocess time
measured per layer and micro-batch on H100 (1.01 ms, facts §5)."""
SYNCING_DISPATCHERS = frozenset({"alltoall", "deepep", "hybridep", "ncclep"})


@dataclass(frozen=True, slots=True)
class HostTerms:
    """A routed layer's host side per micro-batch: eager kernels forward and backward, and syncs in the forward."""

    eager: tuple[int, int]
    """Kernels the host launches, forward and backward (those outside the CUDA graphs)."""
    syncs: int
    """Device-host syncs per forward."""

    def host_s(self, backward: bool) -> float:
        """The host's launch time of a pass."""
        return self.eager[backward] * LAUNCH_S

    @property
    def sync_s(self) -> float:
        """The forward's exposed sync time."""
        return self.syncs * SYNC_S


def routed_kernels(
    plan: LayerSetting,
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(attention, router, permutation, expert path) kernels of a routed layer, forward and backward."""
    knobs = plan.moe_knobs
    return (
        ATTN_KERNELS,
        ROUTER_KERNELS[knobs.router_fusion],
        PERMUTE_KERNELS[knobs.permute_fusion],
        EXPERT_KERNELS,
    )


def host_terms(plan: LayerSetting) -> HostTerms:
    """The eager kernels and syncs of one routed layer under the plan's graph scope (module docstring)."""
    knobs = plan.moe_knobs
    scope = set(knobs.graph_scope)
    if "full_iteration" in scope:
        return HostTerms((0, 0), 0)
    syncs = 1 if knobs.dispatcher in SYNCING_DISPATCHERS else 0
    if "full_layer" in scope:
        return HostTerms((0, 0), syncs)
    attn, router, permute, expert = routed_kernels(plan)
    parts = (
        (attn, "attn" in scope),
        (router, "moe_router" in scope),
        (permute, "moe_preprocess" in scope),
        (expert, False),
    )
    eager = tuple(sum(k[i] for k, captured in parts if not captured) for i in (0, 1))
    return HostTerms((eager[0], eager[1]), syncs)


def exposed_host_s(terms: HostTerms, gpu_s: float, backward: bool) -> float:
    """What a pass waits for the host beyond its GPU time: max(0, host − GPU)."""
    return max(0.0, terms.host_s(backward) - gpu_s)
