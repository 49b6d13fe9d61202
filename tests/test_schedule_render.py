"""Structure of the schedule drawings: the SVG parses and has one rect per action; the terminal view fits."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from pplan.render.schedule import (
    _nice_ticks,
    bubble_curves_svg,
    bubble_group,
    timeline_renderable,
    timeline_svg,
)
from pplan.schedules import get_schedule
from pplan.schedules.bubble import bubble_curves, in_window_fraction_of_ideal
from pplan.schedules.timeline import Durations, simulate

SVG = "{http://www.w3.org/2000/svg}"
CASES = [
    ("1f1b", 4, 8, None),
    ("zb-h1", 4, 8, None),
    ("interleaved-1f1b", 4, 8, 2),
    ("dualpipev", 4, 8, None),
    ("dualpipe", 4, 8, None),
    ("zbv", 2, 6, None),
]


@pytest.mark.parametrize(("name", "p", "m", "v"), CASES)
def test_timeline_svg_has_one_rect_per_action(name: str, p: int, m: int, v: int | None) -> None:
    t = simulate(get_schedule(name, p, m, v), Durations(1.0, 0.8, 0.6), latency=0.05)
    root = ET.fromstring(timeline_svg(t, unit="ms"))
    assert root.tag == f"{SVG}svg"
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "action"]
    assert len(rects) == t.schedule.num_actions
    titles = sorted(r.find(f"{SVG}title").text.split()[0] for r in rects)  # type: ignore[union-attr]
    assert titles == sorted(str(a) for row in t.schedule.actions for a in row)
    width = float(root.get("width", "0"))
    for r in rects:
        assert 0 <= float(r.get("x", "-1")) <= width
    legend = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "legend"]
    assert len(legend) == len({a.kind for row in t.schedule.actions for a in row})
    text = "".join(e.text or "" for e in root.iter(f"{SVG}text"))
    assert "rank 0" in text and f"rank {p - 1}" in text and "(ms)" in text


@pytest.mark.parametrize("width", [60, 100, 160])
def test_terminal_view_fits_the_width_and_shows_every_rank(width: int) -> None:
    t = simulate(get_schedule("zb-h1", 4, 8), Durations(1.0, 1.0, 1.0))
    console = Console(width=width, record=True, color_system=None)
    console.print(timeline_renderable(t))
    lines = console.export_text().splitlines()
    assert all(len(line) <= width for line in lines)
    for r in range(4):
        assert any(line.startswith(f"rank {r}") for line in lines)
    assert "weight grad" in " ".join(lines)
    rank3 = next(line for line in lines if line.startswith("rank 3"))
    assert "·" in rank3  # the last stage idles while the pipeline fills


def test_bubble_chart_is_computed_by_simulation() -> None:
    curves = bubble_curves(4, [4, 8, 16])
    by = {c.label: dict(zip(c.microbatches, c.bubble_of_ideal, strict=True)) for c in curves}
    assert by["1F1B"][16] == pytest.approx(3 / 16)
    assert by["interleaved v=2"][16] == pytest.approx(3 / 32)
    assert by["interleaved v=4"][8] == pytest.approx(3 / 32)
    assert by["ZB-H1"][16] == pytest.approx(1 / 16)
    assert by["ZB-H2"][16] == pytest.approx(0.0)
    step = {c.label: c for c in bubble_curves(4, [16], measure="step")}
    assert step["ZB-H2"].bubble_of_ideal[0] == pytest.approx(3 / 48)  # the (p−1)·F start skew


def test_bubble_svg_and_table() -> None:
    root = ET.fromstring(bubble_curves_svg(bubble_curves(4, [4, 8, 16, 32]), 4))
    assert len([e for e in root.iter(f"{SVG}polyline") if e.get("class") == "curve"]) == 5
    assert len(list(root.iter(f"{SVG}circle"))) == 5 * 4
    console = Console(width=120, record=True, color_system=None)
    console.print(bubble_group(bubble_curves(4, [4, 8, 16, 32]), 4))
    out = console.export_text()
    assert "18.8%" in out and "ZB-H2" in out and "interleaved v=4" in out


@pytest.mark.parametrize("durations", [(0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)])
def test_all_zero_durations_draw_with_zero_fractions(durations: tuple[float, float, float, float]) -> None:
    """Nothing computes: every fraction of the ideal is 0 (not a division by zero), and both drawings work."""
    f, i, w, latency = durations
    t = simulate(get_schedule("zb-h2", 4, 8), Durations(f, i, w), latency=latency)
    assert in_window_fraction_of_ideal(t) == 0.0
    assert ET.fromstring(timeline_svg(t)).tag == f"{SVG}svg"
    console = Console(width=100, record=True, color_system=None)
    console.print(timeline_renderable(t))
    assert "rank 3" in console.export_text()


@pytest.mark.parametrize("top", [math.nan, math.inf, -math.inf, 0.0, -1.0])
def test_axis_ticks_of_a_degenerate_span_are_just_zero(top: float) -> None:
    assert _nice_ticks(top, 5) == [0.0]


def test_one_simulation_feeds_the_table_and_the_svg() -> None:
    curves = bubble_curves(4, [4, 8])
    console = Console(width=120, record=True, color_system=None)
    console.print(bubble_group(curves, 4))
    assert "37.5%" in console.export_text()  # 1F1B at m = 8: 3/8
    assert bubble_curves_svg(curves, 4) == bubble_curves_svg(bubble_curves(4, [4, 8]), 4)
