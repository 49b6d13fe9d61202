"""The data a pipeline schedule is made of: actions, placements and the `Schedule` itself.

An action is one pass of one micro-batch through one (virtual) stage, written in torch.distributed.pipelining's
notation: `2F0` is stage 2's forward of micro-batch 0, `1I3` its input-gradient backward (Qi et al.'s "B"),
`1W3` its weight-gradient backward, `0B5` a full backward (I and W as one pass). A `Schedule` is one ordered
action list per rank plus the stage → rank placement and the chains of stages micro-batches flow along.

This module is pure: it builds and checks data, nothing else.
"""

from __future__ import annotations

import itertools
import re
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Literal, NamedTuple

from pplan.errors import ConfigError

Kind = Literal["F", "I", "W", "B"]
ACTION_KINDS: tuple[Kind, ...] = ("F", "I", "W", "B")
_KIND_SET = frozenset(ACTION_KINDS)

_ACTION_RE = re.compile(r"^\s*(\d+)([FIWB])(\d+)\s*$")


class ScheduleError(ConfigError):
    """A schedule's action lists are malformed or cannot run (missing passes, wrong rank, deadlock)."""


class Action(NamedTuple):
    """One pass: `kind` (F, I, W or B) of `microbatch` through virtual `stage`. A named tuple: immutable and
    hashable like a frozen dataclass, and built twice as fast (a search generates hundreds of thousands)."""

    stage: int
    kind: Kind
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


def parse(text: str) -> Action:
    """Inverse of `str(action)`: `parse("2F0") == Action(2, "F", 0)`."""
    match = _ACTION_RE.match(text)
    if match is None:
        raise ScheduleError(
            "action", f"cannot read {text!r}", "write <stage><F|I|W|B><micro-batch>, e.g. 2F0 or 1I3"
        )
    kind = match.group(2)
    assert kind in ACTION_KINDS
    return Action(int(match.group(1)), kind, int(match.group(3)))


def loop_placement(p: int, v: int) -> tuple[int, ...]:
    """Megatron's interleaved placement: stage s lives on rank s mod p (rank r holds r, r + p, r + 2p, ...)."""
    return tuple(s % p for s in range(p * v))


def dual_placement(p: int) -> tuple[int, ...]:
    """DualPipe's two pipelines: down stage k on rank k, up stage p + k on rank p − 1 − k."""
    return tuple(range(p)) + tuple(p - 1 - k for k in range(p))


def v_placement(p: int) -> tuple[int, ...]:
    """The V placement of ZB-V and DualPipeV: rank r holds stages r and 2p − 1 − r (stages p − 1, p share a rank)."""
    return tuple(s if s < p else 2 * p - 1 - s for s in range(2 * p))


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Schedule:
    """A pipeline schedule as data.

    `p` ranks, `v` stages per rank, `m` micro-batches per step. `placement[s]` is the rank holding virtual stage
    s. `chains` lists the stage sequences a micro-batch flows through (forward in order, backward in reverse):
    one chain 0..S−1 for every schedule except the bidirectional DualPipe, which has two. `actions[r]` is rank
    r's list, run in order, one action at a time.
    """

    name: str
    p: int
    v: int
    m: int
    placement: tuple[int, ...]
    actions: tuple[tuple[Action, ...], ...]
    chains: tuple[tuple[int, ...], ...]
    splits_backward: bool
    """True when the schedule uses I and W passes (for at least some micro-batches) instead of only B."""
    overlaps: tuple[tuple[int, ...], ...] = ()
    """Per rank, the positions k where actions k (an F) and k + 1 (a B or I of another stage) form DeepSeek's
    overlapped F&B pair: the pair starts only when both passes' inputs have arrived (torch's OVERLAP_F_B)."""

    @property
    def num_stages(self) -> int:
        return len(self.placement)

    @property
    def num_actions(self) -> int:
        return sum(len(row) for row in self.actions)

    def stages_of(self, rank: int) -> tuple[int, ...]:
        """The virtual stages rank `rank` holds, in increasing order."""
        return tuple(s for s, r in enumerate(self.placement) if r == rank)

    def rows(self) -> tuple[tuple[str, ...], ...]:
        """Each rank's actions as text (`2F0`, ...)."""
        return tuple(tuple(str(a) for a in row) for row in self.actions)


def make_schedule(
    name: str,
    p: int,
    v: int,
    m: int,
    placement: Sequence[int],
    actions: Iterable[Iterable[Action]],
    chains: Sequence[Sequence[int]] | None = None,
    overlaps: Sequence[Sequence[int]] | None = None,
) -> Schedule:
    """Freeze the lists into a `Schedule` and check that they are complete and consistent (see `check`)."""
    rows = tuple(tuple(row) for row in actions)
    chain_t = tuple(tuple(c) for c in chains) if chains is not None else (tuple(range(len(placement))),)
    split = any(a.kind in ("I", "W") for row in rows for a in row)
    pairs = tuple(tuple(sorted(o)) for o in overlaps) if overlaps is not None else ()
    schedule = Schedule(name, p, v, m, tuple(placement), rows, chain_t, split, pairs)
    check(schedule)
    _CHECKED[id(schedule)] = weakref.ref(schedule)
    return schedule


_CHECKED: dict[int, weakref.ref[Schedule]] = {}
"""Schedules `make_schedule` has checked, by identity (a hash would walk every action)."""


def is_checked(schedule: Schedule) -> bool:
    """Whether `check` already passed for this very object (built by `make_schedule`)."""
    ref = _CHECKED.get(id(schedule))
    return ref is not None and ref() is schedule


def check(schedule: Schedule) -> None:
    """Raise `ScheduleError` unless every stage runs every micro-batch of its chain exactly once forward and
    once backward (one B, or one I and one W), on the rank the placement says, with F before I/B before W on
    that rank. Whether the lists can run without deadlock is the timeline's business (`pplan.schedules.timeline`).
    """
    s_count = len(schedule.placement)
    if len(schedule.actions) != schedule.p:
        raise ScheduleError("schedule", f"has {len(schedule.actions)} action rows for {schedule.p} ranks")
    if any(not 0 <= r < schedule.p for r in schedule.placement):
        raise ScheduleError(
            "schedule", f"placement {schedule.placement} names a rank outside 0..{schedule.p - 1}"
        )
    if schedule.overlaps:
        if len(schedule.overlaps) != schedule.p:
            raise ScheduleError(
                "schedule", f"has {len(schedule.overlaps)} overlap rows for {schedule.p} ranks"
            )
        for rank, positions in enumerate(schedule.overlaps):
            row = schedule.actions[rank]
            for a_pos, b_pos in itertools.pairwise(positions):
                if b_pos - a_pos < 2:
                    raise ScheduleError(
                        "schedule", f"rank {rank}: overlapped pairs at {a_pos} and {b_pos} share an action"
                    )
            for k in positions:
                if not (
                    0 <= k < len(row) - 1
                    and row[k].kind == "F"
                    and row[k + 1].kind in ("B", "I")
                    and row[k + 1].stage != row[k].stage
                ):
                    raise ScheduleError(
                        "schedule",
                        f"rank {rank}: position {k} is not an F followed by another stage's B or I",
                    )
    seen_stages = sorted(s for c in schedule.chains for s in c)
    if seen_stages != list(range(s_count)):
        raise ScheduleError(
            "schedule", f"chains {schedule.chains} must cover stages 0..{s_count - 1} once each"
        )
    if _passes(schedule):
        return
    done: dict[tuple[int, int], str] = {}
    for rank, row in enumerate(schedule.actions):
        for a in row:
            if not 0 <= a.stage < s_count:
                raise ScheduleError(
                    "schedule", f"rank {rank}: {a} names stage {a.stage}, outside 0..{s_count - 1}"
                )
            if schedule.placement[a.stage] != rank:
                raise ScheduleError(
                    "schedule",
                    f"rank {rank}: {a} runs on rank {rank} but stage {a.stage} lives on rank "
                    f"{schedule.placement[a.stage]}",
                )
            key = (a.stage, a.microbatch)
            state = done.get(key, "")
            if a.kind == "F":
                ok = state == ""
                done[key] = "F"
            elif a.kind in ("B", "I"):
                ok = state == "F"
                done[key] = "FB" if a.kind == "B" else "FI"
            else:
                ok = state == "FI"
                done[key] = "FB"
            if not ok:
                need = {
                    "F": "it runs twice",
                    "B": "it needs F first",
                    "I": "it needs F first",
                    "W": "it needs I first",
                }
                raise ScheduleError(
                    "schedule", f"rank {rank}: {a} is out of order or repeated ({need[a.kind]})"
                )
    by_stage: dict[int, set[int]] = {}
    for st, mb in done:
        by_stage.setdefault(st, set()).add(mb)
    all_mbs: list[int] = []
    for chain in schedule.chains:
        mbs = by_stage.get(chain[0], set())
        all_mbs += mbs
        for s in chain:
            got = by_stage.get(s, set())
            if got != mbs:
                raise ScheduleError(
                    "schedule",
                    f"stage {s} runs micro-batches {sorted(got)} but its chain starts with {sorted(mbs)}",
                )
    if sorted(all_mbs) != list(range(schedule.m)):
        raise ScheduleError(
            "schedule",
            f"the chains' micro-batches must be 0..{schedule.m - 1}, each in one chain exactly once",
        )
    unfinished = sorted(k for k, st in done.items() if st != "FB")
    if unfinished:
        s, mb = unfinished[0]
        raise ScheduleError(
            "schedule", f"stage {s} micro-batch {mb} never finishes its backward (no B, or I without W)"
        )


_KIND_OF = attrgetter("kind")
_SEQUENCES = frozenset(("FB", "FIW"))


def _passes(schedule: Schedule) -> bool:
    """Whether the per-action part of `check` passes, decided in one lighter pass (the walk below it stays the
    reference: any False here re-runs that walk, which raises the precise error). True exactly when every
    action's stage lives on its rank; each (stage, micro-batch)'s kinds, in the rank's list order, spell FB or
    FIW; every stage of a chain runs the micro-batches of the chain's first stage; and the chains' sets
    partition 0..m−1. (A stage's actions all sit on one rank, so list order there is `check`'s order.)"""
    spelt: list[dict[int, str]] = [{} for _ in schedule.placement]
    for rank, row in enumerate(schedule.actions):
        if not set(map(_KIND_OF, row)) <= _KIND_SET:
            return False
        mine = {s: spelt[s] for s, r in enumerate(schedule.placement) if r == rank}
        try:
            for a in row:
                d = mine[a.stage]
                mb = a.microbatch
                d[mb] = d.get(mb, "") + a.kind
        except (KeyError, TypeError):
            return False
    seen: set[int] = set()
    count = 0
    for chain in schedule.chains:
        mbs = spelt[chain[0]].keys()
        count += len(mbs)
        seen.update(mbs)
        for s in chain:
            if spelt[s].keys() != mbs or not set(spelt[s].values()) <= _SEQUENCES:
                return False
    return count == schedule.m and seen == set(range(schedule.m))
