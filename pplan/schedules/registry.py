"""The schedule-family registry: one record per pipeline-schedule family, the single source of what pplan knows
about it. Adding a schedule touches its generator module and its record here.

A record (`ScheduleFamily`) holds the family's names (canonical name, torch's class names and short forms as
aliases), its title, its generator and its rules on p and m (one function each, which the generator, the planner
`pplan.plan.configuration`, the launchers and the search all call), how it places model chunks on ranks, whether it splits the
backward, the published closed form of its bubble (with citations), what each rank holds when its first backward
starts (the search's proven lower bound on memory), the period its lists repeat with (pplan.schedules.periodic), whether
`recommend` searches it by default, the torch.distributed.pipelining class that runs it and whether Megatron-LM
main does.

The rules on m, for reference:
- gpipe, 1f1b, looped-bfs, zb-h1, zb-h2, zbv: any m ≥ 1 (with m < p a stage holds at most m micro-batches; ZB-H1/H2
  are Qi et al. 2024's handcrafted schedules for m ≥ p, and zbv's lists are cut from 2p − 1 micro-batches).
- interleaved-1f1b, interleaved-zb: v ≥ 2 chunks per rank in the loop placement; m a multiple of torch's rounds
  max(1, m // p) (a multiple of p, Megatron-LM's rule, always is; see `pplan.schedules.families.interleaved`).
- dualpipev: DualPipe folded into a V, two chunks per rank; m ≥ 2p (torch's ScheduleDualPipeV).
- dualpipe: bidirectional, p even, rank r holds stage r and stage p−1−r (two copies of the parameters), m even
  and m ≥ 2p (DeepSeek-V3 technical report §3.2.1; the reference implementation's assertion).

`get_schedule(name, p, m, v=None)` returns the `Schedule` for p ranks, m micro-batches and v stages per rank
(None = the family's `default_v`). Names are case-insensitive; torch's class names (`Schedule1F1B`,
`ScheduleInterleaved1F1B`, ...) and their short forms (`1F1B`, `Interleaved1F1B`, ...) are accepted. Generation is
cached by (name, p, v, m), so repeated planning loops reuse the same object (and the timeline's compiled form).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pplan.errors import ConfigError
from pplan.schedules.actions import Schedule, dual_placement, loop_placement, v_placement
from pplan.schedules.auto import AUTO_NAME, auto_m_problem, auto_schedule
from pplan.schedules.families.dualpipe import (
    dualpipe,
    dualpipe_m_problem,
    dualpipe_p_problem,
    dualpipev,
    dualpipev_m_problem,
)
from pplan.schedules.families.gpipe import gpipe
from pplan.schedules.families.interleaved import (
    default_group,
    interleaved_1f1b,
    interleaved_m_problem,
    interleaved_zb,
    looped_bfs,
    table_prefix_counts,
)
from pplan.schedules.families.one_f_one_b import one_f_one_b
from pplan.schedules.families.zbv import zbv
from pplan.schedules.families.zero_bubble import zb_h1, zb_h2
from pplan.schedules.limits import MAX_AUTO_STAGE_MICROBATCHES
from pplan.schedules.rules import MRule, PRule, any_m, any_p, need_positive, need_v

Generator = Callable[[int, int, int | None], Schedule]
"""(p, m, v or None) → the checked schedule."""
Placement = Literal["loop", "v", "dual"]
BubbleForm = Callable[[int, int, int, float, float, float], float]
"""(p, v, m, F, I, W) → idle time per rank per step, in the unit of F, I, W."""
Warmup = tuple[tuple[int, ...], ...]
WarmupForm = Callable[[int, int, int], Warmup]
"""(p, v, m) → per rank, per stage it holds (in increasing stage order), the micro-batches in flight when the
rank's first backward starts."""


@dataclass(frozen=True, slots=True, eq=False)
class ScheduleFamily:
    """Everything pplan knows about one schedule family. One record per family (`FAMILIES`), so records compare
    and hash by identity: they key the cost caches, and hashing every field on each lookup was a search hot spot."""

    name: str
    """Canonical name (lower case, hyphenated): what `--schedule` lists and plans print."""
    title: str
    """Human title for reports."""
    generator: Generator
    placement: Placement
    """How model chunks sit on ranks (pplan.plan.layout): loop (chunk c on rank c mod p), v (rank r holds chunks r and
    2p−1−r) or dual (p stages, rank r holds stage r and p−1−r: two parameter copies)."""
    fixed_v: int | None
    """Model chunks per rank the planner uses (None: the user's --vp, at least 2). DualPipe's two stage copies
    count as one chunk of the down pipeline."""
    default_v: int
    """Stages per rank the generator builds when given none (the `Schedule`'s v; DualPipe counts both copies)."""
    splits_backward: bool
    """True when the backward runs as separate input-gradient (I) and weight-gradient (W) passes."""
    bubble_idle: BubbleForm
    """The closed form of the bubble: idle time per rank per step for uniform stages and free communication
    (fraction of ideal = idle / (m·(F+I+W))). Citations on each form below; derived here where none is
    published (`bubble_derived`)."""
    warmup_in_flight: WarmupForm
    """Closed form, read off the generator: per rank and stage, the micro-batches in flight when the rank's first
    backward starts. No peak is lower, so the search screens memory with it as a proven lower bound (the exact
    peak comes off the schedule, pplan.schedules.periodic.in_flight_profile)."""
    aliases: tuple[str, ...] = ()
    """Other accepted names (torch's class names and short forms among them); matched like the name:
    case-insensitive, with '_' or '-' or neither."""
    p_problem: PRule = any_p
    """The rule on p alone: None when the family runs on p ranks, else what is wrong."""
    m_problem: MRule = any_m
    """The rule on m: (p, m) → None when the family runs m ≥ 1 micro-batches on p ≥ 1 ranks, else what is wrong
    (worded to follow the family's name). The generator checks m with this same function."""
    m_rule: str = ""
    """`m_problem` in words, without numbers ("" when every m runs), for reasons a search counts by."""
    searched_by_default: bool = True
    """`recommend` tries it unless --schedule says otherwise (GPipe runs as long as 1F1B with more memory, and
    looped BFS holds every micro-batch: both only when asked for)."""
    steady: Callable[[int], tuple[int, int]] | None = None
    """p → (m0, Δ): for m ≥ m0 in m0's class mod Δ, each rank's list is a prefix, then copies of one period
    (Δ more micro-batches per copy), then a suffix (pplan.schedules.periodic finds and checks the split from here); None
    when the lists are blocks of every micro-batch instead (every F, then every B)."""
    torch_class: str | None = None
    """The torch.distributed.pipelining class that runs it (so torchtitan can name it), or None."""
    megatron: bool = False
    """Megatron-LM main runs it."""
    why_not_megatron: str = ""
    """Why Megatron-LM main cannot run it (when `megatron` is False)."""
    why_not_torch: str = ""
    """Why torchtitan cannot name it (when `torch_class` is None)."""
    fix_not_torch: str = ""
    """What to use instead under torchtitan (when `torch_class` is None)."""
    overlaps_expert_comm: bool = False
    """Each forward chunk runs paired with another micro-batch's backward chunk, so one's expert all-to-all runs
    behind the other's compute (DeepSeek-V3 report §3.2.1: DualPipe's overlapped forward-backward chunk pairs)."""
    bubble_derived: bool = False
    """`bubble_idle` is derived here (and checked against the simulated timeline), no source publishing one."""
    tuned: bool = False
    """Its lists are built for a plan's own pass times and memory limit (pplan.schedules.auto), not fixed by
    (p, v, m): a plan's step and peaks come from the lists built for it (pplan.cost.autoplan); the generator
    gives the lists for F = I = W = 1, free hops and 1F1B's memory (what `pplan schedule show` draws)."""

    def __post_init__(self) -> None:
        assert self.megatron != bool(self.why_not_megatron), self.name
        assert (self.torch_class is None) == bool(self.why_not_torch) == bool(self.fix_not_torch), self.name

    def generator_v(self, v: int) -> int | None:
        """The v to give the generator for a plan with v model chunks per rank (None: the family's own)."""
        return None if self.placement == "dual" else v

    def stage_ranks(self, p: int, v: int) -> tuple[int, ...]:
        """The rank holding each virtual stage, for p ranks and v model chunks per rank."""
        return _stage_ranks(self.placement, p, v)

    def rank_stages(self, p: int, v: int) -> tuple[tuple[int, ...], ...]:
        """Per rank, the virtual stages it holds, in increasing order."""
        return _rank_stages(self.placement, p, v)

    def chains(self, p: int, v: int) -> tuple[tuple[int, ...], ...]:
        """The stage sequences micro-batches flow along: one chain, or DualPipe's two directions."""
        return _chains(self.placement, p, v)

    @property
    def torch_short_name(self) -> str | None:
        """torch's short name for the class (`get_schedule_class`'s key; what torchtitan's config takes)."""
        return None if self.torch_class is None else self.torch_class.removeprefix("Schedule")

    @property
    def launchers(self) -> tuple[str, ...]:
        """The launchers (pplan.launchers) that run it."""
        runs = {"megatron": self.megatron, "torchtitan": self.torch_class is not None}
        return tuple(launcher for launcher, ok in runs.items() if ok)


@lru_cache(maxsize=1024)
def _stage_ranks(placement: Placement, p: int, v: int) -> tuple[int, ...]:
    if placement == "loop":
        return loop_placement(p, v)
    return v_placement(p) if placement == "v" else dual_placement(p)


@lru_cache(maxsize=1024)
def _rank_stages(placement: Placement, p: int, v: int) -> tuple[tuple[int, ...], ...]:
    ranks = _stage_ranks(placement, p, v)
    return tuple(tuple(s for s, r in enumerate(ranks) if r == rank) for rank in range(p))


@lru_cache(maxsize=1024)
def _chains(placement: Placement, p: int, v: int) -> tuple[tuple[int, ...], ...]:
    if placement == "dual":
        return (tuple(range(p)), tuple(range(p, 2 * p)))
    return (tuple(range(p * v if placement == "loop" else 2 * p)),)


# ------------------------------------------------------------------------------------- closed forms of the bubble
# Durations F (forward), I (input-gradient backward, Qi et al.'s B) and W (weight-gradient backward) are per stage;
# a full backward is I + W. Uniform stages, free communication.


def _flush_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """GPipe and 1F1B: (p−1)(F+I+W), i.e. (p−1)/m of ideal (Narayanan et al. 2021 §2.2)."""
    return (p - 1) * (f + i + w)


def _interleaved_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """Interleaved 1F1B: (p−1)(F+I+W)/v (Narayanan et al. 2021 §2.2; Llama 3 §3.3.2 writes (PP−1)/(V·M))."""
    return (p - 1) * (f + i + w) / v


def _zb_h1_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """ZB-H1: (p−1)(F+I−W), floored at 0 (Qi et al. 2024, arXiv 2401.10241, Table 2)."""
    return max(0.0, (p - 1) * (f + i - w))


def _zb_h2_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """ZB-H2: (p−1)(F+I−2W), floored at 0 (Qi et al. 2024, Table 2); its warm-up needs m ≥ 2p − 1 extra
    forwards, so with fewer micro-batches it is ZB-H1's."""
    if m < 2 * p - 1:
        return _zb_h1_bubble(p, v, m, f, i, w)
    return max(0.0, (p - 1) * (f + i - 2 * w))


def _zbv_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """ZB-V: (p−1)(F+I−2W)/2 with each chunk half a stage, floored at 0 (≈ 0 when F = I = W; Qi et al. 2024 §5)."""
    return max(0.0, (p - 1) * (f + i - 2 * w) / 2)


def _dual_pair(f: float, i: float, w: float) -> float:
    """DeepSeek's F&B + B − 3W with B = I + W the full backward and F&B = F + B (no forward-backward overlap)."""
    full_b = i + w
    return (f + full_b) + full_b - 3 * w


def _dualpipe_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """DualPipe: (p/2 − 1)(F&B + B − 3W), floored at 0 (DeepSeek-V3 report, arXiv 2412.19437, Table 2)."""
    return max(0.0, (p / 2 - 1) * _dual_pair(f, i, w))


def _dualpipev_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """DualPipeV on p ranks is DualPipe on 2p half-stages: (p − 1)(F&B + B − 3W)/2, floored at 0."""
    return max(0.0, (p - 1) * _dual_pair(f, i, w) / 2)


def _auto_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """auto: no closed form (its lists follow the times); ZB-H1's (p−1)(F+I−W) is what it is held to, at ZB-H1's
    memory or more, where it is never slower (ZB-H1's lists are one of its candidates: pplan.schedules.auto)."""
    return _zb_h1_bubble(p, v, m, f, i, w)


def _looped_bfs_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """Looped BFS: no published form; derived here as interleaved 1F1B's (p−1)(F+I+W)/v: the fill and the drain
    are p − 1 chunk passes each way, a chunk being 1/v of a stage. Equal to the simulated timeline's idle for
    uniform stages at any F, I, W (tests/test_registry.py)."""
    return _interleaved_bubble(p, v, m, f, i, w)


def _interleaved_zb_bubble(p: int, v: int, m: int, f: float, i: float, w: float) -> float:
    """Interleaved zero bubble: no published form; derived here as ZB-H1's (p−1)(F+I−W) (Qi et al. 2024, Table 2)
    with each slot a chunk pass, 1/v of a stage: the fill waits p − 1 chunk forwards, and in the drain each of the
    p − 1 chunk input-gradient waits is filled by a deferred weight gradient up to W, so (p−1)(F + max(0, I−W))/v
    (when W ≥ I the fill's (p−1)·F/v is what is left). Equal to the simulated timeline's idle for uniform stages
    at any F, I, W (tests/test_registry.py)."""
    return (p - 1) * (f + max(0.0, i - w)) / v


# ------------------------------------------------------------------------------------------- peak in flight


def _all_m(p: int, v: int, m: int) -> Warmup:
    """GPipe and looped BFS: every forward of every chunk before the first backward."""
    return tuple((m,) * v for _ in range(p))


def _one_each(p: int, v: int, m: int) -> Warmup:
    """auto: at least the micro-batch whose backward comes first (its lists depend on the times and the limit)."""
    return tuple((1,) for _ in range(p))


def _auto_unit(p: int, m: int, v: int | None) -> Schedule:
    """auto's lists for F = I = W = 1, free hops and 1F1B's memory (p micro-batches per stage); a plan's own come
    from pplan.cost.autoplan. One stage per rank: v must be 1 (or None)."""
    need_positive(p, m)
    need_v(AUTO_NAME, v, "1", 1)
    problem = auto_m_problem(p, m)
    if problem is not None:
        raise ConfigError("--microbatches", f"{AUTO_NAME} {problem}", "use fewer micro-batches or ranks")
    return auto_schedule(p, m, p, 1.0, 1.0, 1.0).schedule


def _flush_warmup(p: int, v: int, m: int) -> Warmup:
    """1F1B and ZB-H1: min(p − r − 1, m) warm-up forwards, then one more forward before the first B (or I)."""
    return tuple((min(p - r, m),) for r in range(p))


def _zb_h2_warmup(p: int, v: int, m: int) -> Warmup:
    """ZB-H2: min(2(p − r) − 1, m) warm-up forwards (within its 2p − 1 cap), then the first I."""
    return tuple((min(2 * (p - r) - 1, m),) for r in range(p))


def _interleaved_warmup(p: int, v: int, m: int) -> Warmup:
    """Interleaved 1F1B: 2(p − r − 1) + (v − 1)·G warm-up forwards, then one more, in Megatron's table order."""
    g = default_group(p, m)
    return tuple(
        table_prefix_counts(m, v, g, min(2 * (p - r - 1) + (v - 1) * g + 1, m * v)) for r in range(p)
    )


def _interleaved_zb_warmup(p: int, v: int, m: int) -> Warmup:
    """Interleaved zero bubble: (v − 1)·G + (p − 1 − r) warm-up forwards, then one more, then the first I."""
    g = default_group(p, m)
    return tuple(table_prefix_counts(m, v, g, min((v - 1) * g + (p - r), m * v)) for r in range(p))


def _zbv_warmup(p: int, v: int, m: int) -> Warmup:
    """ZB-V (rank r holds chunks r and 2p − 1 − r): 2(p − r) − 1 forwards of the first chunk, r pairs of both,
    then one more of the second before its first I (passes of micro-batches ≥ m dropped)."""
    return tuple((min(2 * p - r - 1, m), min(r + 1, m)) for r in range(p))


def _dualpipev_warmup(p: int, v: int, m: int) -> Warmup:
    """DualPipeV: DeepSeek's steps 1-2, 2(p − r − 1) + r + 1 forwards of the first chunk and r + 1 of the second,
    then the first backward; the last rank first runs one more forward (its first pair is not overlapped)."""
    return tuple((2 * p - r - 1 + (r == p - 1), r + 1) for r in range(p))


def _dualpipe_warmup(p: int, v: int, m: int) -> Warmup:
    """DualPipe: each half of the ranks runs DualPipeV's program on p/2 ranks per direction; rank r's stages
    (r, 2p − 1 − r) are (its own direction's, the other's) on the first half and the reverse on the second."""
    n = p // 2
    out = []
    for r in range(p):
        h = min(r, p - 1 - r)
        own, other = 2 * n - h - 1 + (h == n - 1), h + 1
        out.append((own, other) if r < n else (other, own))
    return tuple(out)


# ------------------------------------------------------------------------------------------------ the records

_ZB_NOT_ON_MEGATRON = "zero-bubble schedules are in the sail-sg fork, not Megatron-LM main"
_DUALPIPE_NOT_ON_MEGATRON = "DualPipe is not a Megatron-LM schedule"
_NOT_ON_MEGATRON = "Megatron-LM main runs 1F1B and interleaved 1F1B only"
_INTERLEAVED_M_RULE = "m divisible by max(1, m // p)"

FAMILIES: dict[str, ScheduleFamily] = {
    f.name: f
    for f in (
        ScheduleFamily(
            "gpipe", "GPipe", gpipe, "loop", 1, 1, False, _flush_bubble, _all_m,
            searched_by_default=False,
            aliases=("ScheduleGPipe",),
            torch_class="ScheduleGPipe",
            why_not_megatron=_NOT_ON_MEGATRON,
        ),
        ScheduleFamily(
            "1f1b", "1F1B (PipeDream-Flush)", one_f_one_b, "loop", 1, 1, False, _flush_bubble, _flush_warmup,
            aliases=("Schedule1F1B", "pipedream-flush"),
            steady=lambda p: (max(1, p - 1), 1),
            torch_class="Schedule1F1B",
            megatron=True,
        ),
        ScheduleFamily(
            "interleaved-1f1b", "Interleaved 1F1B", interleaved_1f1b, "loop", None, 2, False,
            _interleaved_bubble, _interleaved_warmup,
            aliases=("ScheduleInterleaved1F1B", "Interleaved1F1B", "interleaved"),
            steady=lambda p: (2 * p, p),
            m_problem=interleaved_m_problem,
            m_rule=_INTERLEAVED_M_RULE,
            torch_class="ScheduleInterleaved1F1B",
            megatron=True,
        ),
        ScheduleFamily(
            "interleaved-zb", "Interleaved zero bubble", interleaved_zb, "loop", None, 2, True,
            _interleaved_zb_bubble, _interleaved_zb_warmup,
            aliases=("ScheduleInterleavedZeroBubble", "InterleavedZeroBubble"),
            steady=lambda p: (p, p),
            m_problem=interleaved_m_problem,
            m_rule=_INTERLEAVED_M_RULE,
            bubble_derived=True,
            torch_class="ScheduleInterleavedZeroBubble",
            why_not_megatron=_ZB_NOT_ON_MEGATRON,
        ),
        ScheduleFamily(
            "looped-bfs", "Looped BFS", looped_bfs, "loop", None, 2, False, _looped_bfs_bubble, _all_m,
            searched_by_default=False,
            bubble_derived=True,
            aliases=("ScheduleLoopedBFS", "LoopedBFS"),
            torch_class="ScheduleLoopedBFS",
            why_not_megatron=_NOT_ON_MEGATRON,
        ),
        ScheduleFamily(
            "zb-h1", "Zero Bubble ZB-H1", zb_h1, "loop", 1, 1, True, _zb_h1_bubble, _flush_warmup,
            steady=lambda p: (max(1, p - 1), 1),
            why_not_megatron=_ZB_NOT_ON_MEGATRON,
            why_not_torch="torch has no ZB-H1/ZB-H2 class, so torchtitan's pipeline_parallel_schedule cannot name it",
            fix_not_torch="use --schedule zbv or interleaved-zb, or --launcher megatron with --schedule 1f1b",
        ),
        ScheduleFamily(
            "zb-h2", "Zero Bubble ZB-H2", zb_h2, "loop", 1, 1, True, _zb_h2_bubble, _zb_h2_warmup,
            steady=lambda p: (2 * p, 1),
            why_not_megatron=_ZB_NOT_ON_MEGATRON,
            why_not_torch="torch has no ZB-H1/ZB-H2 class, so torchtitan's pipeline_parallel_schedule cannot name it",
            fix_not_torch="use --schedule zbv or interleaved-zb, or --launcher megatron with --schedule 1f1b",
        ),
        ScheduleFamily(
            "zbv", "Zero Bubble ZB-V", zbv, "v", 2, 2, True, _zbv_bubble, _zbv_warmup,
            aliases=("ScheduleZBVZeroBubble", "ZBVZeroBubble", "zb-v"),
            steady=lambda p: (2 * p - 1, 1),
            torch_class="ScheduleZBVZeroBubble",
            why_not_megatron=_ZB_NOT_ON_MEGATRON,
        ),
        ScheduleFamily(
            "dualpipev", "DualPipeV", dualpipev, "v", 2, 2, True, _dualpipev_bubble, _dualpipev_warmup,
            aliases=("ScheduleDualPipeV", "DualPipe-V"),
            steady=lambda p: (2 * p, 1),
            m_problem=dualpipev_m_problem,
            m_rule="m ≥ 2p",
            torch_class="ScheduleDualPipeV",
            why_not_megatron=_DUALPIPE_NOT_ON_MEGATRON,
            overlaps_expert_comm=True,
        ),
        ScheduleFamily(
            "dualpipe", "DualPipe (bidirectional)", dualpipe, "dual", 1, 2, True, _dualpipe_bubble, _dualpipe_warmup,
            steady=lambda p: (2 * p, 2),
            p_problem=dualpipe_p_problem,
            m_problem=dualpipe_m_problem,
            m_rule="p even, m even and m ≥ 2p",
            why_not_megatron=_DUALPIPE_NOT_ON_MEGATRON,
            why_not_torch="torch has no bidirectional DualPipe (its DualPipeV is the one-direction V variant)",
            fix_not_torch="use --schedule dualpipev",
            overlaps_expert_comm=True,
        ),
        ScheduleFamily(
            AUTO_NAME, "Automatic (pplan's ZB-1p/2p-style scheduler)", _auto_unit, "loop", 1, 1, True,
            _auto_bubble, _one_each,
            aliases=("zb-auto",),
            m_problem=auto_m_problem,
            m_rule=f"p·m ≤ {MAX_AUTO_STAGE_MICROBATCHES:,}",
            searched_by_default=False,
            why_not_megatron=_NOT_ON_MEGATRON,
            why_not_torch="torch has no class for it: its lists run through torch's _PipelineScheduleRuntime from "
            "the CSV pplan writes, which the torchtitan output does not carry",
            fix_not_torch="write its lists with `pplan explain --csv` for torch's _PipelineScheduleRuntime, or use "
            "--schedule zbv",
            tuned=True,
        ),
    )
}  # fmt: skip
"""The families by canonical name, in the order a listing should show them."""

SCHEDULE_NAMES: tuple[str, ...] = tuple(FAMILIES)
"""Canonical names, in the order a listing should show them."""


def _squash(name: str) -> str:
    return name.strip().lower().replace("_", "").replace("-", "")


_LOOKUP: dict[str, str] = {
    _squash(alias): f.name for f in FAMILIES.values() for alias in (f.name, *f.aliases)
}


def canonical_name(name: str) -> str:
    """The registry name for `name` (case-insensitive; torch class names accepted), or a ConfigError."""
    found = _LOOKUP.get(_squash(name))
    if found is None:
        raise ConfigError(
            "--schedule", f"unknown schedule {name!r}", f"choose one of {', '.join(SCHEDULE_NAMES)}"
        )
    return found


DEFAULT_SCHEDULES: tuple[str, ...] = tuple(f.name for f in FAMILIES.values() if f.searched_by_default)
"""What `recommend` searches when --schedule is not given."""


def without_pipeline() -> ScheduleFamily:
    """The family a plan with one pipeline rank is written with: no schedule runs, and 1F1B is every launcher's
    default."""
    return FAMILIES["1f1b"]


def megatron_family(v: int | None) -> ScheduleFamily:
    """The family Megatron-LM runs for v model chunks per rank: interleaved 1F1B when v > 1, else 1F1B."""
    return FAMILIES["interleaved-1f1b"] if v and v > 1 else FAMILIES["1f1b"]


def schedule_family(name: str) -> ScheduleFamily:
    """The family named `name` (any name `canonical_name` accepts), or a ConfigError on --schedule."""
    return FAMILIES[canonical_name(name)]


def get_schedule(name: str, p: int, m: int, v: int | None = None) -> Schedule:
    """The schedule `name` for p ranks, m micro-batches, v stages per rank (checked; cached)."""
    return _cached(canonical_name(name), p, m, v)


@lru_cache(maxsize=512)
def _cached(name: str, p: int, m: int, v: int | None) -> Schedule:
    return FAMILIES[name].generator(p, m, v)
