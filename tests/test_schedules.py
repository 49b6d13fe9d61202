"""Schedules as data: notation, registry, the rules on p / v / m, and structural invariants of every family."""

from __future__ import annotations

import itertools

import pytest

from pplan.errors import ConfigError
from pplan.schedules import (
    SCHEDULE_NAMES,
    Action,
    Schedule,
    ScheduleError,
    canonical_name,
    get_schedule,
    make_schedule,
    parse,
    to_torch_csv,
)


def test_action_text_round_trip() -> None:
    for text in ("2F0", "1I3", "1W3", "0B5", "15F127"):
        assert str(parse(text)) == text
    assert parse("2F0") == Action(2, "F", 0)
    assert str(Action(1, "I", 3)) == "1I3"


@pytest.mark.parametrize("bad", ["", "F0", "2X0", "2F", "a2F0", "2F0x"])
def test_parse_rejects_malformed(bad: str) -> None:
    with pytest.raises(ScheduleError, match="action"):
        parse(bad)


def test_action_is_frozen_and_slotted() -> None:
    a = Action(0, "F", 0)
    with pytest.raises(AttributeError):
        a.stage = 1  # type: ignore[misc]
    assert not hasattr(a, "__dict__")


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("ScheduleGPipe", "gpipe"),
        ("GPipe", "gpipe"),
        ("Schedule1F1B", "1f1b"),
        ("1F1B", "1f1b"),
        ("ScheduleInterleaved1F1B", "interleaved-1f1b"),
        ("Interleaved1F1B", "interleaved-1f1b"),
        ("ScheduleInterleavedZeroBubble", "interleaved-zb"),
        ("InterleavedZeroBubble", "interleaved-zb"),
        ("ScheduleZBVZeroBubble", "zbv"),
        ("ZBVZeroBubble", "zbv"),
        ("ScheduleDualPipeV", "dualpipev"),
        ("DualPipeV", "dualpipev"),
        ("ScheduleLoopedBFS", "looped-bfs"),
        ("LoopedBFS", "looped-bfs"),
        ("ZB-H1", "zb-h1"),
        ("zb_h2", "zb-h2"),
        ("DualPipe", "dualpipe"),
    ],
)
def test_torch_class_names_are_aliases(alias: str, name: str) -> None:
    assert canonical_name(alias) == name


def test_unknown_schedule_names_the_field_and_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        get_schedule("pipedream-2bw", 4, 8)
    assert info.value.field == "--schedule"
    assert "1f1b" in info.value.fix


def test_generation_is_cached() -> None:
    assert get_schedule("1f1b", 4, 8) is get_schedule("Schedule1F1B", 4, 8)


@pytest.mark.parametrize(
    ("name", "p", "m", "v", "field", "fix_has"),
    [
        ("1f1b", 0, 8, None, "--pp", "--pp 1"),
        ("1f1b", 4, 0, None, "--microbatches", "--microbatches 1"),
        ("gpipe", 4, 8, 2, "--vp", "--vp 1"),
        ("zb-h1", 4, 8, 2, "--vp", "--vp 1"),
        ("interleaved-1f1b", 4, 8, 1, "--vp", "--vp 2"),
        ("interleaved-1f1b", 4, 9, 2, "--microbatches", "8 or 10"),
        ("interleaved-1f1b", 4, 13, 2, "--microbatches", "12 or 15"),
        ("interleaved-zb", 4, 9, 2, "--microbatches", "8 or 10"),
        ("zbv", 4, 8, 3, "--vp", "--vp 2"),
        ("dualpipev", 4, 7, None, "--microbatches", "--microbatches 8"),
        ("dualpipe", 3, 12, None, "--pp", "2 or 4"),
        ("dualpipe", 4, 9, None, "--microbatches", "8 or 10"),
        ("dualpipe", 4, 6, None, "--microbatches", "--microbatches 8"),
    ],
)
def test_rules_raise_config_error_with_field_and_fix(
    name: str, p: int, m: int, v: int | None, field: str, fix_has: str
) -> None:
    with pytest.raises(ConfigError) as info:
        get_schedule(name, p, m, v)
    assert info.value.field == field
    assert fix_has in info.value.fix
    assert "\n" not in str(info.value)


def test_interleaved_accepts_torch_relaxed_m() -> None:
    """torch's rule: m must be a multiple of its rounds max(1, m // p); p = 4: 6, 10 and 3 pass."""
    for m in (3, 6, 10, 12):
        assert get_schedule("interleaved-1f1b", 4, m, 2).m == m


GRID = [
    (name, p, m, v)
    for name, p, m, v in itertools.product(SCHEDULE_NAMES, (1, 2, 3, 4, 6), (1, 4, 8, 12, 16), (None,))
]


def _build(name: str, p: int, m: int, v: int | None) -> Schedule | None:
    try:
        return get_schedule(name, p, m, v)
    except ConfigError:
        return None


@pytest.mark.parametrize(("name", "p", "m", "v"), GRID)
def test_every_stage_runs_every_microbatch_once(name: str, p: int, m: int, v: int | None) -> None:
    s = _build(name, p, m, v)
    if s is None:
        pytest.skip("outside this schedule's rules")
    counts: dict[tuple[int, str], int] = {}
    for rank, row in enumerate(s.actions):
        for a in row:
            assert s.placement[a.stage] == rank
            key = (a.stage, "F" if a.kind == "F" else "back" if a.kind in "BI" else "W")
            counts[key] = counts.get(key, 0) + 1
    per_chain_m = m // len(s.chains)
    for stage in range(s.num_stages):
        assert counts[(stage, "F")] == per_chain_m
        assert counts[(stage, "back")] == per_chain_m
    assert s.num_actions == sum(len(r) for r in s.actions)
    assert len(s.actions) == p


def test_placements() -> None:
    # Loop placement (B7): p = 8, v = 2, 16 chunks; rank 0 holds chunks 0 and 8.
    s = get_schedule("interleaved-1f1b", 8, 16, 2)
    assert s.stages_of(0) == (0, 8)
    assert s.placement == tuple(x % 8 for x in range(16))
    # V placement: rank r holds r and 2p − 1 − r.
    for name in ("zbv", "dualpipev"):
        v_s = get_schedule(name, 4, 8)
        assert [v_s.stages_of(r) for r in range(4)] == [(0, 7), (1, 6), (2, 5), (3, 4)]
    # DualPipe: down stage r and up stage 2p − 1 − r on rank r; two chains; halves of the micro-batches.
    d = get_schedule("dualpipe", 4, 8)
    assert [d.stages_of(r) for r in range(4)] == [(0, 7), (1, 6), (2, 5), (3, 4)]
    assert d.chains == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert {a.microbatch for a in d.actions[0] if a.stage == 0} == {0, 1, 2, 3}
    assert {a.microbatch for a in d.actions[0] if a.stage == 7} == {4, 5, 6, 7}


def test_one_f_one_b_warmup_is_megatrons() -> None:
    s = get_schedule("1f1b", 4, 8)
    for r, row in enumerate(s.actions):
        first_b = next(i for i, a in enumerate(row) if a.kind == "B")
        assert first_b == min(4 - r, 8)  # p − r − 1 warm-up forwards plus the first steady-state F


def test_interleaved_warmup_is_megatrons() -> None:
    """Rank r warms up with 2(p − r − 1) + (v − 1)·G forwards (G = p) before the steady state's first F."""
    p, v, m = 4, 3, 8
    s = get_schedule("interleaved-1f1b", p, m, v)
    for r, row in enumerate(s.actions):
        first_b = next(i for i, a in enumerate(row) if a.kind == "B")
        assert first_b == 2 * (p - r - 1) + (v - 1) * p + 1


def test_check_rejects_malformed_lists() -> None:
    with pytest.raises(ScheduleError, match="lives on rank"):
        make_schedule("x", 2, 1, 1, (0, 1), [[Action(1, "F", 0)], [Action(0, "F", 0)]])
    with pytest.raises(ScheduleError, match="never finishes"):
        make_schedule("x", 1, 1, 1, (0,), [[Action(0, "F", 0), Action(0, "I", 0)]])
    with pytest.raises(ScheduleError, match="needs I first"):
        make_schedule("x", 1, 1, 1, (0,), [[Action(0, "F", 0), Action(0, "W", 0), Action(0, "I", 0)]])
    with pytest.raises(ScheduleError, match="micro-batches"):
        make_schedule(
            "x",
            2,
            1,
            2,
            (0, 1),
            [[Action(0, "F", 0), Action(0, "B", 0)], [Action(1, "F", 1), Action(1, "B", 1)]],
        )


def test_torch_csv_is_one_row_per_rank_in_torch_notation() -> None:
    s = get_schedule("zb-h1", 2, 3)
    text = to_torch_csv(s)
    lines = text.splitlines()
    assert text.endswith("\n")
    assert len(lines) == 2
    assert lines[1].split(",") == [str(a) for a in s.actions[1]]
    assert lines[1].startswith("1F0,1I0,1F1,1I1,1W0")


def test_torch_csv_writes_overlapped_pairs_as_one_cell() -> None:
    s = get_schedule("dualpipev", 2, 4)
    cells = to_torch_csv(s).splitlines()[0].split(",")
    pairs = [c for c in cells if c.endswith("OVERLAP_F_B")]
    assert pairs and pairs[0] == "(0F3;3B1)OVERLAP_F_B"
    assert len(cells) == len(s.actions[0]) - len(s.overlaps[0])
