"""What the search shares between configurations gives each the figure it would get alone: the first queue made a
group of layouts at a time holds exactly the cuts a walk of every cut pushes, at the same indices; the pass times
kept without the expert fields are the pass-time functions' own; a configuration's sync bound with its sharding
variants is the largest of their sync bounds, each asked alone; a memory bound whose warm-up peaks another
expert-parallel degree computed is the configuration's own."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pplan.cost.passtime import layer_pass_times, output_pass_times
from pplan.cost.pipeline import warmup_peaks
from pplan.launchers.support import SearchFilter
from pplan.model.flops import layer_kinds
from pplan.plan.configuration import make_plan
from pplan.plan.knobs import Recompute
from pplan.plan.shape import Shape
from pplan.profiles.catalog import load_hardware, load_model
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.search import Query, SearchRequest
from pplan.search.engine import CutEntry, Engine
from pplan.search.rank import fitted
from pplan.search.space import Cut, Rejection, enumerate_cuts, sharding_variants

H100 = load_hardware("h100-sxm-80gb")
H800 = load_hardware("h800-sxm-80gb")


@pytest.mark.parametrize(
    ("model_name", "req"),
    [
        ("llama3-8b", SearchRequest(gpus=16, global_batch=48, launcher="megatron", tp_comm_overlap=True)),
        ("qwen3-30b-a3b", SearchRequest(gpus=16, global_batch=64, launcher="torchtitan", stack="torchtitan")),
        ("mixtral-8x7b", SearchRequest(gpus=16, global_batch=32, seq_len=4096)),
    ],
)
def test_the_first_queue_is_a_walk_of_every_cut(model_name: str, req: SearchRequest) -> None:
    """Walking every cut in enumeration order, its first cell's index is the cells before it; a cut its launcher
    refuses (whole, or by its rule on m) is counted, every other is pushed. The engine's queue and launcher count
    must be exactly that."""
    model = load_model(model_name)
    launcher = SearchFilter(req.launcher, model, req.tp_comm_overlap) if req.launcher else None
    engine = Engine(model, H100, req, launcher=launcher)
    engine.enumerate()
    query = Query(model, H100, req)
    expected: list[tuple[int, object]] = []
    refused = base = 0
    for cut in enumerate_cuts(model, H100, req, query.seq, Counter(), every_partial=False):
        if query.cut_refused(cut, launcher):
            refused += len(cut)
        else:
            expected.append((base, cut.prefix))
        base += len(cut)
    pushed = [(e[4].base, e[4].cut.prefix) for e in engine.heap if isinstance(e[4], CutEntry)]
    assert pushed == expected and len(pushed) == len(engine.heap)
    assert engine.result.enumerated == base
    assert engine.result.rejected[Rejection.LAUNCHER] == refused
    assert expected and (refused > 0) == (launcher is not None)


@pytest.mark.parametrize(
    ("model_name", "hw"), [("deepseek-v3", H800), ("mixtral-8x7b", H100), ("llama3-8b", H100)]
)
def test_layer_times_are_the_pass_time_functions_own(model_name: str, hw: HardwareSpec) -> None:
    """DeepSeek-V3 (dense layers, routed layers, a routed MTP layer), Mixtral (every layer routed) and a dense
    model: `Query._layer_times` on a seeded sample of shapes, against layer_pass_times and output_pass_times asked
    of the full shape (every expert field set) directly."""
    model = load_model(model_name)
    req = SearchRequest(gpus=64, global_batch=64, seq_len=4096)
    query = Query(model, hw, req)
    rng = random.Random(5)
    routed = model.moe is not None
    for _ in range(40):
        t, cp, b = rng.choice([1, 2, 4, 8]), rng.choice([1, 2]), rng.choice([1, 2, 4])
        recompute: Recompute = rng.choice(["none", "selective", "full"])
        split = rng.random() < 0.5
        ep, etp = (rng.choice([1, 2, 4, 8]), rng.choice([1, t])) if routed else (1, 1)
        overlap = routed and rng.random() < 0.5
        shape = Shape(
            t, cp, query.seq, b, t > 1, True, recompute, "itemised", stack=req.stack, splits_backward=split,
            tp_comm_overlap=req.tp_comm_overlap and t > 1, ep=ep, etp=etp, expert_comm_overlap=overlap,
            moe_knobs=query.moe_knobs,
        )  # fmt: skip
        layers = [layer_pass_times(kind, hw, shape) for kind, _ in layer_kinds(model)]
        out = output_pass_times(model, hw, shape)
        whole = [x.f_s + x.i_s + x.w_s for x in layers]
        assert query._layer_times(t, cp, b, recompute, split, ep, "bf16", overlap, etp) == (
            min(x.f_s for x in layers), min(x.i_s + x.w_s for x in layers), whole[0], whole[-1],
            out.f_s + out.i_s + out.w_s,
        )  # fmt: skip


def test_sync_bound_with_variants_is_the_largest_of_their_sync_bounds() -> None:
    """Llama 3 70B on 64 GPUs with ZeRO 1-3, hybrid sharding and kept weights: for a seeded sample of cells (asked
    in random order, so that the floors are remembered from other micro-batch sizes and recomputes), the figure
    is the largest `sync_bound` of the cell and of every variant it leads to, walked here by hand."""
    model = load_model("llama3-70b")
    req = SearchRequest(gpus=64, global_batch=256, seq_len=4096, zero_stages=(1, 2, 3))
    query = Query(model, H100, req)
    cuts = list(enumerate_cuts(model, H100, req, query.seq, Counter()))
    rng = random.Random(11)
    with_variants = 0
    for cut in rng.sample(cuts, 24):
        cell = cut.cell(rng.randrange(len(cut)))
        walked, more = [cell], sharding_variants(cell, req, H100.gpus_per_node)
        while more:
            variant = more.pop()
            walked.append(variant)
            more += sharding_variants(variant, req, H100.gpus_per_node)
        with_variants += len(walked) > 1
        alone = Query(model, H100, req)  # nothing remembered from another cell
        assert query.sync_bound_with_variants(cell) == max(alone.sync_bound(c) for c in walked), (
            cell.summary()
        )
    assert with_variants >= 8


def test_a_memory_bound_shared_across_ep_is_each_configurations_own() -> None:
    """Mixtral on 64 GPUs: for a seeded sample of cuts, one cell at every expert-parallel degree of its cut,
    bounded through one Query (the warm-up peaks remembered across ep), against `fitted` of each cell's own plan
    with its own warm-up peaks."""
    model = load_model("mixtral-8x7b")
    req = SearchRequest(gpus=64, global_batch=256, seq_len=4096)
    query = Query(model, H100, req)
    by_ep: dict[tuple[object, ...], list[Cut]] = {}
    for cut in enumerate_cuts(model, H100, req, query.seq, Counter()):
        by_ep.setdefault((*cut.prefix[:8], *cut.prefix[9:]), []).append(cut)
    rng = random.Random(17)
    shared = 0
    for cuts in rng.sample(sorted(by_ep.values(), key=lambda x: x[0].prefix), 12):
        i = rng.randrange(len(cuts[0]))
        for cut in cuts:
            cell = cut.cell(i)
            plan = make_plan(model, cell.request(req, query.seq))
            own = fitted(model, H100, plan, cell, 0, False, warmup_peaks(model, plan))
            assert query.fit(cell, 0).totals == own.totals, cell.summary()
        shared += len(cuts) > 1
    assert shared >= 6
