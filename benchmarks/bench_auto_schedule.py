"""The automatic scheduler (pplan.schedules.auto) against 1F1B, ZB-H1 and ZB-H2: bubbles, memory, gap to the
lower bound and the scheduler's own run time. Prints a table; asserts nothing.

    python benchmarks/bench_auto_schedule.py [--p 4 8 16 32] [--profiles equal qi plan]

Grid: p ranks (one stage each), m ∈ {2p, 4p, 8p} micro-batches (p = 32, m = 256 is the run-time budget case).
Profiles:
- equal: F = I = W = 1 on every stage, no latency;
- qi: one stage = 4 layers of h = 4096, s = 2048, b = 1 with Qi et al. 2024's Table 1 FLOPs per layer
  (F = sbh(24h + 4s), I = sbh(24h + 8s), W = 24sbh²) at 400 TFLOP/s, and a per-hop latency of 2 % of F;
- plan: pplan's own analytic stage inputs (pplan.cost.pipeline.stage_inputs) for Llama 3 8B (32 layers, h = 4096,
  s = 8192, b = 1) on p H100s at t = 1 with a split backward: per-stage F, I, W with the embedding on the first
  stage and the output layer and loss on the last, in the layer split (layers on the first and the last stage)
  whose busiest stage is least busy (so the stages still differ), and each hop's P2P message time on the link
  between the two ranks (NVLink within a node of 8, the NIC across nodes).
Columns, per schedule (1F1B, ZB-H1, ZB-H2, auto at ZB-H1's memory, auto at ZB-H2's memory), "step/win":
- step: bubble as a fraction of the step, (makespan − busiest rank's compute) / makespan, in %;
- win: idle time inside a rank's own window ÷ busiest compute (`bubble.in_window_fraction_of_ideal`), in %.
Then per auto run: K, the memory limit (`auto.memory_of` of ZB-H1 or ZB-H2: micro-batches in flight per stage);
gap, (makespan − lower bound) / lower bound in %; vs, auto's makespan against the hand-made schedule's at the same
memory, in % (negative: auto is faster), marked `<` where auto is faster, `=` where they tie and `=lb` where they
tie with the hand-made lists already at the proven lower bound (`bounds.makespan_lower_bound`: no schedule can
beat them there); s, the scheduler's wall time (`time.perf_counter`, one call).
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Sequence

from pplan.cost.pipeline import stage_inputs
from pplan.errors import PplanError
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.schedules.auto import AutoResult, auto_schedule, memory_of
from pplan.schedules.bubble import in_window_fraction_of_ideal
from pplan.schedules.families.one_f_one_b import one_f_one_b
from pplan.schedules.families.zero_bubble import zb_h1, zb_h2
from pplan.schedules.timeline import Durations, Timeline, simulate

HIDDEN, SEQUENCE, MICRO_BATCH, LAYERS_PER_STAGE = 4096, 2048, 1, 4
RATE_FLOP_S = 400e12
LATENCY_OF_F = 0.02
BUDGET_CASE = (32, 256)
BUDGET_S = 1.0
"""The run time the scheduler must stay within for p = 32, m = 256."""

Profile = tuple[list[float], list[float], list[float], float | list[list[float]]]
PLAN_MODEL, PLAN_HARDWARE = "llama3-8b", "h100-sxm-80gb"


def plan_profile(p: int, m: int) -> Profile:
    """The `plan` profile (module docstring): pplan's analytic stage inputs for Llama 3 8B on p H100s, with the
    layer split (layers on the first and on the last stage, the rest even) whose busiest stage is least busy."""
    model, hardware = load_model(PLAN_MODEL), load_hardware(PLAN_HARDWARE)
    best: tuple[float, Durations, tuple[tuple[float, ...], ...]] | None = None
    for first, last in itertools.product(range(1, model.num_layers // p + 2), repeat=2):
        try:
            plan = make_plan(
                model,
                PlanRequest(gpus=p, global_batch=m, tp=1, pp=p, schedule="zb-h1", first_stage_layers=first,
                            last_stage_layers=last),
            )  # fmt: skip
        except PplanError:
            continue
        inputs = stage_inputs(model, hardware, plan)
        d = inputs.durations
        assert not isinstance(d.f, float) and not isinstance(d.i, float) and not isinstance(d.w, float)
        busiest = max(map(sum, zip(d.f, d.i, d.w, strict=True)))
        if best is None or busiest < best[0]:
            best = (busiest, d, inputs.latency)
    assert best is not None
    _, d, latency = best
    assert not isinstance(d.f, float) and not isinstance(d.i, float) and not isinstance(d.w, float)
    return list(d.f), list(d.i), list(d.w), [list(row) for row in latency]


def profile(name: str, p: int, m: int) -> Profile:
    """Per-stage F, I, W and the hop latency, in seconds (module docstring)."""
    if name == "equal":
        return [1.0] * p, [1.0] * p, [1.0] * p, 0.0
    if name == "plan":
        return plan_profile(p, m)
    s, b, h = SEQUENCE, MICRO_BATCH, HIDDEN
    f, i, w = (
        LAYERS_PER_STAGE * flops / RATE_FLOP_S
        for flops in (s * b * h * (24 * h + 4 * s), s * b * h * (24 * h + 8 * s), 24 * s * b * h * h)
    )
    return [f] * p, [i] * p, [w] * p, LATENCY_OF_F * f


def bubbles(timeline: Timeline) -> str:
    """ "step/win" in % (module docstring)."""
    return f"{100 * timeline.bubble_fraction_of_step:4.1f}/{100 * in_window_fraction_of_ideal(timeline):4.1f}"


def timed_auto(p: int, m: int, k: int, prof: Profile) -> tuple[AutoResult, float]:
    """The scheduler's result and its wall time in seconds."""
    t0 = time.perf_counter()
    res = auto_schedule(p, m, k, *prof)
    return res, time.perf_counter() - t0


def versus(auto_s: float, hand_s: float, bound_s: float) -> str:
    """auto against the hand-made makespan in %, with `<`, `=` or `=lb` (module docstring)."""
    change = 100 * (auto_s - hand_s) / hand_s
    if auto_s < hand_s * (1 - 1e-9):
        return f"{change:+6.2f}<  "
    return f"{change:+6.2f}={'lb' if hand_s <= bound_s * (1 + 1e-9) else '  '}"


def row(p: int, m: int, name: str) -> tuple[str, float, int, int, int]:
    """One table line, the slower of the two scheduler run times, and of the two comparisons how many auto won,
    how many it tied with hand-made lists already at the proven lower bound, and how many it lost (it never
    should: the hand-made lists are among its candidates)."""
    prof = profile(name, p, m)
    durations = Durations(*prof[:3])
    hand = [simulate(g(p, m, None), durations, prof[3]) for g in (one_f_one_b, zb_h1, zb_h2)]
    cells = [bubbles(t) for t in hand]
    slowest = 0.0
    wins = losses = at_bound = 0
    for family, same_memory in (("zb-h1", hand[1]), ("zb-h2", hand[2])):
        k = memory_of(family, p, m)
        res, took = timed_auto(p, m, k, prof)
        slowest = max(slowest, took)
        mine = simulate(res.schedule, durations, prof[3])
        wins += mine.makespan < same_memory.makespan * (1 - 1e-9)
        losses += mine.makespan > same_memory.makespan * (1 + 1e-9)
        tied = not mine.makespan < same_memory.makespan * (1 - 1e-9)
        at_bound += tied and same_memory.makespan <= res.lower_bound_s * (1 + 1e-9)
        cells.append(
            f"{bubbles(mine)} {k:>3} {100 * res.gap:5.2f} "
            f"{versus(mine.makespan, same_memory.makespan, res.lower_bound_s)} {took:5.2f}"
        )
    return (
        f"{p:>3}{m:>5} {name:<6}" + "  ".join(f"{c:>9}" for c in cells[:3]) + "  " + "  ".join(cells[3:]),
        slowest,
        wins,
        at_bound,
        losses,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=int, nargs="+", default=[4, 8, 16, 32], help="pipeline ranks")
    parser.add_argument(
        "--profiles", nargs="+", choices=["equal", "qi", "plan"], default=["equal", "qi", "plan"]
    )
    args = parser.parse_args(argv)
    auto_head = "step/win   K  gap%  vs hand%     s"
    print(
        f"{'p':>3}{'m':>5} {'prof':<6}{'1F1B':>9}  {'ZB-H1':>9}  {'ZB-H2':>9}  "
        f"{'auto@ZB-H1 memory':<{len(auto_head)}}  auto@ZB-H2 memory"
    )
    print(f"{'':>15}{'step/win':>9}  {'step/win':>9}  {'step/win':>9}  {auto_head}  {auto_head}")
    budget_s: float | None = None
    tally: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in args.profiles}
    for p in args.p:
        for m in (2 * p, 4 * p, 8 * p):
            for name in args.profiles:
                line, slowest, wins, at_bound, losses = row(p, m, name)
                print(line, flush=True)
                counts = tally[name]
                counts[0] += 2
                counts[1] += wins
                counts[2] += at_bound
                counts[3] += losses
                if (p, m) == BUDGET_CASE:
                    budget_s = max(budget_s or 0.0, slowest)
    print()
    for name, (n, wins, at_bound, losses) in tally.items():
        print(f"{name}: of {n} comparisons with the hand-made schedule at its memory, auto faster in {wins}, tied "
              f"with lists already at the proven lower bound in {at_bound}, tied above it in "
              f"{n - wins - at_bound - losses}, slower in {losses}")  # fmt: skip
    if budget_s is not None:
        met = "within" if budget_s <= BUDGET_S else "OVER"
        print(f"\np = 32, m = 256: slowest scheduler call {budget_s:.2f} s  {met} budget ({BUDGET_S:g} s)")


if __name__ == "__main__":
    main()
