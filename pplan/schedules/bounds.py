"""Proven lower bounds on a pipeline step's makespan, from per-stage pass times alone (no schedule simulated).

These let `recommend` rank thousands of configurations without simulating them and still return the exact top
N: a configuration whose bound is slower than the N-th simulated one cannot be faster when simulated.

Setting (the simulator's model, pplan.schedules.timeline): virtual stages s with forward F_s, input-gradient I_s and
weight-gradient W_s seconds (a full backward B_s = I_s + W_s); stage s lives on rank ρ(s); micro-batches flow
along chains (one chain 0..S−1, two for DualPipe) and n_s micro-batches pass through stage s (m, or m/2 per
DualPipe direction); a hop from rank a to rank b costs λ(a, b) (0 on the same rank); a rank runs one action at a
time.

Definitions, for each stage s with chain predecessors s_0, ..., s_{k−1} (s_k = s):
- arrival(s) = Σ_{j<k} (F_{s_j} + λ(ρ(s_j), ρ(s_{j+1}))): the earliest any forward of s can start, since F(s, μ)
  waits for F(s_{k−1}, μ) and its hop, recursively;
- drain(s) = Σ_{j<k} (B_{s_j} + λ(ρ(s_{j+1}), ρ(s_j))): after a full backward B(s, μ) ends, the backwards of the
  stages before s for μ still have to run, one after another;
- busy_r = Σ_{s on r} n_s (F_s + I_s + W_s), the work rank r must do.
Claims, for every valid schedule of any family:
1. end_r ≥ head_r + busy_r with head_r = min_{s on r} arrival(s): rank r's first action is a forward (every other
   pass of a stage needs that stage's forward first, on the same rank) of some stage s on r, it cannot start
   before arrival(s), and from then on the rank still has busy_r of work to run, one action at a time.
2. makespan ≥ end_r + min_{s on r} drain(s) when the schedule has only full backwards: rank r's last action is
   then a B of some stage s on r (every F is followed by its B on the same rank), and the backward chain of its
   micro-batch must still run. With split backwards the last action may be a W that nobody waits for, so the
   tail is 0.
Hence makespan ≥ max_r (head_r + busy_r + tail_r). For uniform stages and free hops this is exact for 1F1B
((m + p − 1)(F + B)) and interleaved 1F1B ((m + (p − 1)/v)(F + B) per full stage), and ZB-H1's bound is
m(F + I + W) + (p − 1)F against its (p − 1)(F + I − W) bubble: equal when I = W.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MakespanBound:
    makespan_s: float
    """A lower bound on the simulated makespan."""
    end_per_rank_s: tuple[float, ...]
    """Per rank, a lower bound on the end of its last action (head_r + busy_r)."""


def makespan_lower_bound(
    placement: Sequence[int],
    chains: Sequence[Sequence[int]],
    microbatches: int,
    f: Sequence[float],
    i: Sequence[float],
    w: Sequence[float],
    latency: Sequence[Sequence[float]],
    split_backward: bool,
) -> MakespanBound:
    """The bound of the module docstring for one schedule's stages (per-stage durations in seconds)."""
    p = max(placement) + 1
    n_s = microbatches / len(chains)
    arrival = [0.0] * len(placement)
    drain = [0.0] * len(placement)
    for chain in chains:
        fwd = bwd = 0.0
        prev = -1
        for s in chain:
            if prev >= 0:
                a, b = placement[prev], placement[s]
                fwd += f[prev] + (latency[a][b] if a != b else 0.0)
                bwd += i[prev] + w[prev] + (latency[b][a] if a != b else 0.0)
            arrival[s], drain[s] = fwd, bwd
            prev = s
    head = [float("inf")] * p
    tail = [float("inf")] * p
    busy = [0.0] * p
    for s, r in enumerate(placement):
        head[r] = min(head[r], arrival[s])
        tail[r] = min(tail[r], drain[s])
        busy[r] += n_s * (f[s] + i[s] + w[s])
    ends = tuple(head[r] + busy[r] for r in range(p))
    span = max(ends[r] + (0.0 if split_backward else tail[r]) for r in range(p))
    return MakespanBound(span, ends)


def memory_limited_ends(
    microbatches: int,
    limits: Sequence[int],
    f: Sequence[float],
    i: Sequence[float],
    w: Sequence[float],
    latency: Sequence[Sequence[float]],
) -> tuple[float, ...]:
    """Per rank, a lower bound on the end of its last action when stage r = rank r of one chain (split backward)
    keeps at most K_r micro-batches in flight, from F's start to W's end (pplan's definition; torch keeps the
    graph until W). The larger of two bounds, with n = m, λ the hops, and

        down_r = Σ_{q>r} (λ(q−1, q) + F_q),  up_r = Σ_{q>r} (I_q + λ(q, q−1)),
        a_r = arrival of the first forward at r (Σ_{q<r} (F_q + λ(q, q+1))),  g_r = a_{p−1} + F_{p−1} + up_r,

    g_r being the earliest any gradient reaches rank r:
    1. Window (any order of passes): before g_r rank r can run only forwards (an I needs a gradient, a W its I),
       at most K_r of them, so it idles at least g_r − a_r − K_r·F_r there. When its last forward ends, the
       micro-batches in flight (at most K_r, that one included) are all that is left: at most K_r·(I_r + W_r)
       of work; and that last micro-batch's I can start only after its forward reached the last stage and its
       gradient came back, down_r + up_r later, then its I and W run. With K_r < m the last forward ends after
       g_r, so end_r ≥ a_r + max(0, g_r − a_r − K_r·F_r) + (busy_r − K_r·(I_r + W_r)) + down_r + up_r + I_r +
       W_r. For uniform stages and K = p this is m(F + I + W) + (p − 1)(F + I − W) on rank 0: ZB-H1's makespan,
       so at 1F1B's memory ZB-H1 is optimal (Qi et al. 2024, Table 2's bubble; the tests check it).
    2. Cycle (forwards and weight gradients in micro-batch order, as pplan.schedules.auto's and the hand-made
       lists run them): C_r = F_r + down_r + up_r + I_r + W_r is the least time from the start of F(r, μ) to the
       end of W(r, μ), and F(r, μ + K_r) cannot start before W(r, μ) ends, so the last W ends no earlier than
       ⌈m/K_r⌉·C_r.
    Where K_r ≥ m only the cycle bound applies (one cycle)."""
    p = len(limits)
    arrival = [0.0] * p
    for r in range(1, p):
        arrival[r] = arrival[r - 1] + f[r - 1] + latency[r - 1][r]
    down = [0.0] * p
    up = [0.0] * p
    for r in range(p - 2, -1, -1):
        down[r] = down[r + 1] + latency[r][r + 1] + f[r + 1]
        up[r] = up[r + 1] + i[r + 1] + latency[r + 1][r]
    first_gradient = [arrival[p - 1] + f[p - 1] + up[r] for r in range(p)]
    out = []
    for r in range(p):
        k = min(limits[r], microbatches)
        cycle_s = f[r] + down[r] + up[r] + i[r] + w[r]
        end = -(-microbatches // k) * cycle_s
        if k < microbatches:
            idle = max(0.0, first_gradient[r] - arrival[r] - k * f[r])
            busy = microbatches * (f[r] + i[r] + w[r])
            end = max(end, arrival[r] + idle + busy - k * (i[r] + w[r]) + down[r] + up[r] + i[r] + w[r])
        out.append(end)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RankCoefficients:
    """One rank's zero-latency bound as coefficients of the per-layer and output-layer pass times."""

    layers_before: float
    """min over the rank's stages of the layers before it on its chain: head_r = this × F_layer, and (full
    backwards only) tail_r = this × B_layer."""
    layers_per_microbatch: float
    """Σ over the rank's stages of its layers × n_s / m."""
    outputs_per_microbatch: float
    """Σ over the rank's stages holding the output layer of n_s / m."""
    other_per_microbatch: float = 0.0
    """Of `layers_per_microbatch`, the layers of a second kind (a routed model's dense layers): Σ × n_s / m."""


def zero_latency_coefficients(
    placement: Sequence[int],
    chains: Sequence[Sequence[int]],
    layers: Sequence[int],
    has_output: Sequence[bool],
    other: Sequence[int] | None = None,
) -> tuple[RankCoefficients, ...]:
    """`makespan_lower_bound` with free hops, for stages whose passes are L_s layers plus (on the output stage)
    the output layer: F_s = L_s·F_layer + o_s·F_out, and so on; with `other` (K_s ≤ L_s of the layers of a second
    kind, e.g. a routed model's dense layers), F_s = (L_s − K_s)·F_layer + K_s·F_other + o_s·F_out. No stage
    precedes the output layer on its chain, so head_r ≥ a_r·min(F_layer, F_other) and drain ≥ a_r·min(B_layer,
    B_other) with a_r the fewest layers before any of r's stages, and busy_r = m·(ℓ_r·(F+I+W)_layer +
    k_r·((F+I+W)_other − (F+I+W)_layer) + o_r·(F+I+W)_out). Ranks dominated in every coefficient by another
    (their layers of either kind, outputs and layers before) are dropped: with non-negative times they never set
    the maximum."""
    p = max(placement) + 1
    other = other or [0] * len(layers)
    before = [0] * len(placement)
    for chain in chains:
        total = 0
        for s in chain:
            before[s] = total
            total += layers[s]
    share = 1 / len(chains)
    head = [float("inf")] * p
    work = [0.0] * p
    second = [0.0] * p
    outs = [0.0] * p
    for s, r in enumerate(placement):
        head[r] = min(head[r], before[s])
        work[r] += layers[s] * share
        second[r] += other[s] * share
        outs[r] += share if has_output[s] else 0.0
    rows = {RankCoefficients(head[r], work[r], outs[r], second[r]) for r in range(p)}

    def dominates(b: RankCoefficients, a: RankCoefficients) -> bool:
        return (
            b.layers_before >= a.layers_before
            and b.layers_per_microbatch - b.other_per_microbatch
            >= a.layers_per_microbatch - a.other_per_microbatch
            and b.other_per_microbatch >= a.other_per_microbatch
            and b.outputs_per_microbatch >= a.outputs_per_microbatch
        )

    return tuple(
        sorted(
            (a for a in rows if not any(b != a and dominates(b, a) for b in rows)),
            key=lambda c: (
                c.layers_before,
                c.layers_per_microbatch,
                c.outputs_per_microbatch,
                c.other_per_microbatch,
            ),
        )
    )


def zero_latency_makespan(
    ranks: Sequence[RankCoefficients],
    microbatches: int,
    layer_f: float,
    layer_b: float,
    layer_total: float,
    output_total: float,
    split_backward: bool,
    other_total: float | None = None,
) -> float:
    """The free-hop makespan bound from `zero_latency_coefficients` (B = I + W; totals are F + I + W; `layer_f`
    and `layer_b` the lesser of the two kinds'; `other_total` the second kind's F + I + W, when there is one)."""
    lead = layer_f + (0.0 if split_backward else layer_b)
    extra = 0.0 if other_total is None else other_total - layer_total
    return max(
        c.layers_before * lead
        + microbatches
        * (
            c.layers_per_microbatch * layer_total
            + c.other_per_microbatch * extra
            + c.outputs_per_microbatch * output_total
        )
        for c in ranks
    )
