"""`pplan.render.size_chart`: the sizing sweep's SVG (time and cost against GPUs, log–log) and its terminal chart,
drawn from a `SizeDocument` built here by hand (two hardware, one count that does not fit).

Positions are read back from the SVG's `data-*` hooks, so the checks are on what the drawing says (order along
the axes, which points are ringed, whether the deadline is there), not on its bytes.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from rich.cells import cell_len

from pplan.documents.size import SizeAnswersOut, SizeDocument, SizeInputs, SizePointOut
from pplan.render.size_chart import LogAxis, size_svg, size_terminal

SVG = "{http://www.w3.org/2000/svg}"
H100, B200 = "h100-sxm-80gb", "b200-180gb"
PRICE = {H100: 2.5, B200: 4.0}
TOKENS = 15e12


def point(hardware: str, gpus: int, days: float | None, priced: bool = True) -> SizePointOut:
    """A point whose wall time is `days` (None: nothing fits at this count); GPU-hours follow from the days."""
    if days is None:
        return SizePointOut(
            hardware=hardware,
            gpus=gpus,
            global_batch=1024,
            fits=False,
            reason="no plan fits in memory",
            forced_model_parallel=1,
            awkward_batch=False,
            plan=None,
            explain=None,
            step_s=None,
            step_interval_s=None,
            tokens_per_s=None,
            tokens_per_s_per_gpu=None,
            mfu=None,
            scaling_efficiency=None,
            steps=None,
            work_days=None,
            wall_days=None,
            wall_interval_days=None,
            goodput=None,
            gpu_hours=None,
            cost_usd=None,
            energy_kwh=None,
            calibrated=False,
        )
    steps = 1_000_000
    tokens_per_s = TOKENS / (days * 0.95 * 86_400)
    gpu_hours = days * 24 * gpus
    return SizePointOut(
        hardware=hardware,
        gpus=gpus,
        global_batch=1024,
        fits=True,
        reason=None,
        forced_model_parallel=1,
        awkward_batch=False,
        plan=f"8·4·{gpus // 32}·1·1 1f1b 1×32",
        explain=f"pplan explain llama3-70b --gpus {gpus}",
        step_s=days * 0.95 * 86_400 / steps,
        step_interval_s=(days * 0.9 * 86_400 / steps, days * 1.0 * 86_400 / steps),
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / gpus,
        mfu=0.4,
        scaling_efficiency=1.0,
        steps=steps,
        work_days=days * 0.95,
        wall_days=days,
        wall_interval_days=(days * 0.9, days * 1.1),
        goodput=None,
        gpu_hours=gpu_hours,
        cost_usd=gpu_hours * PRICE[hardware] if priced else None,
        energy_kwh=gpu_hours * 1.0,
        calibrated=True,
    )


POINTS = [
    point(H100, 256, None),
    point(H100, 512, 90.0),
    point(H100, 1024, 48.0),
    point(H100, 4096, 14.0),
    point(B200, 256, 60.0),
    point(B200, 1024, 17.0),
    point(B200, 16384, 1.6),
]
# B200 × 16384 is the fastest (1.6 d, $2.5M); B200 × 1024 ($1.7M) and × 256 ($1.5M) are each cheaper than every
# faster point; every H100 point is slower and dearer ($2.8M to $3.4M) than B200 × 16384.
PARETO = [f"{B200} × 16384", f"{B200} × 1024", f"{B200} × 256"]


def document(
    points: list[SizePointOut] | None = None,
    deadline: float | None = 30.0,
    pareto: list[str] | None = None,
    budget: float | None = None,
) -> SizeDocument:
    return SizeDocument(
        inputs=SizeInputs(
            model="llama3-70b",
            hardware=[H100, B200],
            gpus_per_node={H100: 8, B200: 8},
            train_tokens=TOKENS,
            seq_len=8192,
            batch_policy="fixed at 1024 sequences",
            deadline_days=deadline,
            budget_usd=budget,
            prices_usd_per_gpu_hour=PRICE,
            pue=1.2,
            interruptions_per_gpu_hour=1e-5,
            restart_s=600.0,
        ),
        assumptions=[],
        points=POINTS if points is None else points,
        answers=SizeAnswersOut(
            least_gpus_that_fit={H100: 512, B200: 256},
            knee={H100: 1024, B200: 1024},
            fewest_gpus_meeting_deadline={H100: 4096, B200: 1024} if deadline is not None else None,
            cheapest_meeting_deadline=f"{B200} × 1024" if deadline is not None else None,
            fastest_within_budget=None,
            nearest_miss=None,
            pareto=PARETO if pareto is None else pareto,
        ),
    )


def parse(doc: SizeDocument) -> ET.Element:
    return ET.fromstring(size_svg(doc))


def marks(root: ET.Element, cls: str, panel: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}circle") if e.get("class") == cls and e.get("data-panel") == panel]


def spot(root: ET.Element, panel: str, hardware: str, gpus: int) -> tuple[float, float]:
    (e,) = [
        e
        for e in marks(root, "point", panel)
        if e.get("data-hardware") == hardware and e.get("data-gpus") == str(gpus)
    ]
    return float(e.get("cx", "nan")), float(e.get("cy", "nan"))


def all_text(root: ET.Element) -> str:
    return "\n".join("".join(e.itertext()) for e in root.iter(f"{SVG}text"))


def test_svg_parses_with_one_line_per_hardware_in_each_panel() -> None:
    root = parse(document())
    assert root.tag == f"{SVG}svg"
    for panel in ("time", "cost"):
        lines = [
            e
            for e in root.iter(f"{SVG}polyline")
            if e.get("class") == "series" and e.get("data-panel") == panel
        ]
        assert sorted(e.get("data-hardware", "") for e in lines) == sorted([H100, B200])
        for e in lines:
            fitted = [p for p in POINTS if p.hardware == e.get("data-hardware") and p.fits]
            assert len(e.get("points", "").split()) == len(fitted)


def test_only_fitted_points_are_drawn_each_with_a_tooltip() -> None:
    root = parse(document())
    fitted = sorted((p.hardware, str(p.gpus)) for p in POINTS if p.fits)
    for panel in ("time", "cost"):
        drawn = marks(root, "point", panel)
        assert sorted((e.get("data-hardware", ""), e.get("data-gpus", "")) for e in drawn) == fitted
    for e in marks(root, "point", "time"):
        tip = e.find(f"{SVG}title")
        assert tip is not None and tip.text is not None
        p = next(
            p for p in POINTS if p.hardware == e.get("data-hardware") and str(p.gpus) == e.get("data-gpus")
        )
        assert f"{p.hardware} × {p.gpus} GPUs" in tip.text
        assert "days" in tip.text and "GPU-hours" in tip.text and "$" in tip.text
        assert p.plan is not None and p.plan in tip.text
        assert math.isclose(float(e.get("data-value", "nan")), p.wall_days or 0.0, rel_tol=1e-5)


def test_legend_and_title_name_the_hardware_model_and_tokens() -> None:
    root = parse(document())
    legend = {e.get("data-hardware") for e in root.iter(f"{SVG}line") if e.get("class") == "legend"}
    assert legend == {H100, B200}
    words = all_text(root)
    assert H100 in words and B200 in words
    assert "llama3-70b" in words and "15T tokens" in words


def test_axes_run_right_with_gpus_and_up_with_days_and_cost() -> None:
    root = parse(document())
    for panel in ("time", "cost"):
        x512, _ = spot(root, panel, H100, 512)
        x4096, _ = spot(root, panel, H100, 4096)
        x256, _ = spot(root, panel, B200, 256)
        assert x256 < x512 < x4096
    # Longer wall time is drawn higher (smaller y), across hardware too.
    ys = {(p.hardware, p.gpus): spot(root, "time", p.hardware, p.gpus)[1] for p in POINTS if p.fits}
    by_days = sorted((p for p in POINTS if p.fits), key=lambda p: p.wall_days or 0.0)
    heights = [ys[(p.hardware, p.gpus)] for p in by_days]
    assert heights == sorted(heights, reverse=True)
    # Cost: H100 × 4096 ($3.4M) costs more than H100 × 512 ($2.8M), so it sits higher.
    assert spot(root, "cost", H100, 4096)[1] < spot(root, "cost", H100, 512)[1]
    # The same GPU count has the same x in both panels' own frames.
    dx_time = spot(root, "time", B200, 16384)[0] - spot(root, "time", B200, 256)[0]
    dx_cost = spot(root, "cost", B200, 16384)[0] - spot(root, "cost", B200, 256)[0]
    assert math.isclose(dx_time, dx_cost, abs_tol=0.2)


def test_pareto_points_are_ringed_in_each_panel() -> None:
    root = parse(document())
    for panel in ("time", "cost"):
        rings = marks(root, "pareto", panel)
        assert len(rings) == len(PARETO)
        assert {f"{e.get('data-hardware')} × {e.get('data-gpus')}" for e in rings} == set(PARETO)
        for e in rings:
            hw, gpus = e.get("data-hardware", ""), int(e.get("data-gpus", "0"))
            assert (float(e.get("cx", "nan")), float(e.get("cy", "nan"))) == spot(root, panel, hw, gpus)
    assert not marks(parse(document(pareto=[])), "pareto", "time")


def test_deadline_line_only_with_a_deadline_and_at_its_height() -> None:
    root = parse(document(deadline=30.0))
    (dead,) = [e for e in root.iter(f"{SVG}line") if e.get("class") == "deadline"]
    y = float(dead.get("y1", "nan"))
    assert y == float(dead.get("y2", "nan"))
    assert spot(root, "time", B200, 256)[1] < y < spot(root, "time", B200, 1024)[1]  # 60 d above, 17 d below
    assert "deadline 30 days" in all_text(root)
    none = parse(document(deadline=None))
    assert not [e for e in none.iter(f"{SVG}line") if e.get("class") == "deadline"]
    assert "deadline" not in all_text(none)


def test_cost_panel_says_its_unit() -> None:
    priced = all_text(parse(document()))
    assert "US dollars" in priced and "$2M" in priced and "$3M" in priced
    unpriced_points = [point(H100, 512, 90.0, priced=False), point(B200, 256, 60.0)]
    root = parse(document(points=unpriced_points, pareto=[]))
    words = all_text(root)
    assert "GPU-hours" in words and "US dollars" not in words
    values = {e.get("data-hardware"): float(e.get("data-value", "nan")) for e in marks(root, "point", "cost")}
    assert math.isclose(
        values[H100], 90.0 * 24 * 512, rel_tol=1e-5
    )  # GPU-hours for every point, priced or not
    assert math.isclose(values[B200], 60.0 * 24 * 256, rel_tol=1e-5)


def test_budget_line_with_a_budget_in_dollars() -> None:
    root = parse(document(budget=3e6))
    assert [e for e in root.iter(f"{SVG}line") if e.get("class") == "budget"]
    assert not [e for e in parse(document()).iter(f"{SVG}line") if e.get("class") == "budget"]


def test_svg_is_deterministic() -> None:
    assert size_svg(document()) == size_svg(document())


def test_nothing_fits_gives_a_small_svg_saying_so() -> None:
    doc = document(points=[point(H100, 64, None), point(B200, 64, None)], pareto=[], deadline=None)
    root = ET.fromstring(size_svg(doc))
    assert [e for e in root.iter(f"{SVG}text") if e.get("class") == "nothing-fits"]
    assert "nothing fits" in all_text(root)
    assert not list(root.iter(f"{SVG}polyline")) and not list(root.iter(f"{SVG}circle"))
    assert int(root.get("height", "0")) < 200


def test_single_point_and_identical_values_still_draw() -> None:
    for points in ([point(H100, 64, 5.0)], [point(H100, 64, 5.0), point(B200, 64, 5.0)]):
        root = ET.fromstring(size_svg(document(points=points, pareto=[], deadline=None)))
        assert len(marks(root, "point", "time")) == len(points)
        for e in root.iter(f"{SVG}circle"):
            assert all(math.isfinite(float(e.get(k, "0"))) for k in ("cx", "cy"))
        assert size_terminal(document(points=points, pareto=[], deadline=None), 60).plain


def test_log_axis_ticks() -> None:
    assert LogAxis.around([64, 16384]).ticks() == [100.0, 1000.0, 10000.0]
    assert LogAxis.around([0.8, 3000]).ticks() == [1.0, 10.0, 100.0, 1000.0]
    small = LogAxis.around([1.2, 8.0]).ticks()
    assert 2.0 in small and 5.0 in small
    assert len(LogAxis.around([5.0]).ticks()) >= 2


def test_terminal_fits_the_width_with_legend_and_deadline_row() -> None:
    for width in (60, 80, 132):
        text = size_terminal(document(), width).plain
        lines = text.split("\n")
        assert max(cell_len(line) for line in lines) <= width
        assert len(lines) <= 20
        assert f"o {H100}" in text and f"x {B200}" in text
        assert any(line.count("-") >= (width - 10) * 0.8 for line in lines)  # the deadline row
        assert "deadline 30 days" in text
        assert "llama3-70b" in lines[0]
    no_deadline = size_terminal(document(deadline=None), 80).plain
    assert "---" not in no_deadline and "deadline" not in no_deadline


def test_terminal_places_longer_times_higher() -> None:
    lines = size_terminal(document(deadline=None), 80).plain.split("\n")
    rows = [k for k, line in enumerate(lines) if "│" in line or "┤" in line]
    slow = next(k for k in rows if "o" in lines[k].split("│")[-1].split("┤")[-1])  # H100 × 512: 90 days, top
    fast = max(k for k in rows if "x" in lines[k].split("│")[-1].split("┤")[-1])  # B200 × 16384: 1.6 days
    assert slow < fast


def test_terminal_nothing_fits() -> None:
    doc = document(points=[point(H100, 64, None)], pareto=[], deadline=None)
    assert "nothing fits" in size_terminal(doc, 60).plain
