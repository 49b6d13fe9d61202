"""The terminal schedule drawing (`TimelineView`) stays legible at many micro-batches: every pass shows its
micro-batch number, and without colour its kind's letter and a mark to its end (`F12>>`, `B12<<<<`, `W12==`);
time is cut into bands drawn one under the other when the terminal is too narrow for that."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from pplan.render.schedule import MAX_BANDS, PLAIN_MARKS, timeline_renderable
from pplan.schedules import get_schedule
from pplan.schedules.timeline import Durations, Timeline, simulate
from tests.cli_run import run_pplan

PASS = re.compile(r"([FBIWfbiw])(\d+)([<>=]*)")


def one_f_one_b(p: int = 8, m: int = 32) -> Timeline:
    return simulate(get_schedule("1f1b", p, m), Durations(1.0, 1.0, 1.0))  # F = 1, B = I + W = 2


def draw(timeline: Timeline, width: int, colour: bool) -> tuple[str, Console]:
    console = Console(
        width=width,
        record=True,
        file=io.StringIO(),
        color_system="truecolor" if colour else None,
        force_terminal=colour,
    )
    console.print(timeline_renderable(timeline))
    return console.export_text(), console


def rows(text: str, p: int) -> dict[int, list[str]]:
    """Each rank's row bodies (its label cut off), band after band."""
    label_w = len(f"rank {p - 1}") + 1
    out: dict[int, list[str]] = {r: [] for r in range(p)}
    for line in text.splitlines():
        m = re.match(r"rank (\d+) ", line)
        if m:
            out[int(m.group(1))].append(line[label_w:])
    return out


@pytest.mark.parametrize("width", [80, 120, 200])
def test_without_colour_every_pass_shows_its_kind_and_micro_batch_in_order(width: int) -> None:
    t = one_f_one_b()
    text, _ = draw(t, width, colour=False)
    assert all(len(line) <= width for line in text.splitlines())
    for r, bodies in rows(text, 8).items():
        shown = [(m.group(1), int(m.group(2))) for body in bodies for m in PASS.finditer(body)]
        assert shown == [(a.kind, a.microbatch) for a in t.schedule.actions[r]], r
        assert sorted(mb for kind, mb in shown if kind == "F") == list(range(32))
        assert sorted(mb for kind, mb in shown if kind == "B") == list(range(32))
    assert "F7>> forward" in text and "B7<< backward" in text  # the legend says how to read a pass


def test_widths_are_proportional_and_wide_enough_for_every_label() -> None:
    """F takes 1 unit and B 2: every whole F block is at least its label plus one mark wide ("F31>"), every
    whole B block about twice as wide; bands are as wide as the terminal allows."""
    t = one_f_one_b()
    text, _ = draw(t, 120, colour=False)
    bands = [line for line in text.splitlines() if line.startswith("rank 0")]
    assert 1 < len(bands) <= MAX_BANDS
    widths: dict[str, list[int]] = {"F": [], "B": []}
    for bodies in rows(text, 8).values():
        for body in bodies:
            for m in PASS.finditer(body):
                if m.end() < len(body) and m.start() > 0:  # whole blocks (not cut by a band's edge)
                    widths[m.group(1)].append(len(m.group(0)))
    assert min(widths["F"]) >= 4 and max(widths["F"]) <= 5
    assert min(widths["B"]) >= 2 * 4 and max(widths["B"]) <= 2 * 5


def test_no_color_in_the_environment_draws_letters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    console = Console(width=120, record=True, file=io.StringIO(), force_terminal=True)
    console.print(timeline_renderable(one_f_one_b()))
    text = console.export_text()
    assert "F31>" in text and "B31<" in text


def test_with_colour_every_number_is_shown_and_colour_kept() -> None:
    t = one_f_one_b()
    text, console = draw(t, 120, colour=True)
    assert all(len(line) <= 120 for line in text.splitlines())
    for r, bodies in rows(text, 8).items():
        shown = [int(n) for body in bodies for n in re.findall(r"\d+", body)]
        assert shown == [a.microbatch for a in t.schedule.actions[r]], r
    assert "\x1b[" in console.file.getvalue()  # type: ignore[attr-defined]  # ANSI colour codes
    assert not PASS.search(" ".join(" ".join(b) for b in rows(text, 8).values()))  # no letters with colour


def test_zero_bubble_passes_are_told_apart_without_colour() -> None:
    t = simulate(get_schedule("zb-h1", 4, 12), Durations(1.0, 1.0, 1.0))
    text, _ = draw(t, 100, colour=False)
    for r, bodies in rows(text, 4).items():
        shown = [(m.group(1), int(m.group(2))) for body in bodies for m in PASS.finditer(body)]
        assert shown == [(a.kind, a.microbatch) for a in t.schedule.actions[r]]
    for kind in ("F", "I", "W"):
        assert f"{kind}11{PLAIN_MARKS[kind]}" in text


def test_a_later_chunk_is_lower_case_without_colour() -> None:
    t = simulate(get_schedule("interleaved-1f1b", 4, 8, 2), Durations(1.0, 1.0, 1.0))
    text, _ = draw(t, 100, colour=False)
    assert "f0>" in text and "b7<" in text and "lower case = a later chunk" in text


def test_a_step_too_long_for_the_bands_is_drawn_in_one() -> None:
    """Past `MAX_BANDS` the drawing falls back to one band of the terminal's width; passes too short for a
    number show their letter (the legend says so)."""
    t = simulate(get_schedule("1f1b", 4, 400), Durations(1.0, 1.0, 1.0))
    text, _ = draw(t, 80, colour=False)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert sum(line.startswith("rank 0") for line in lines) == 1
    assert "too short for a number" in text


def test_pplan_schedule_piped_shows_every_micro_batch(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "schedule", "1f1b", "--pp", "8", "--microbatches", "32")
    assert res.code == 0, res.err
    t = one_f_one_b()
    for r, bodies in rows(res.out, 8).items():
        shown = [(m.group(1), int(m.group(2))) for body in bodies for m in PASS.finditer(body)]
        assert shown == [(a.kind, a.microbatch) for a in t.schedule.actions[r]], r
