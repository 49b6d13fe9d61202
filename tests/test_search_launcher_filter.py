"""The search's launcher filter (pplan.launchers.support.SearchFilter) refuses exactly what the launcher refuses of
each configuration's whole request (`request_unsupported_reason`), checked over every enumerated configuration,
and a search through it keeps brute force's top n, brute force asking each request whole."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pplan.launchers.support import SearchFilter, request_unsupported_reason
from pplan.profiles.catalog import load_hardware, load_model
from pplan.search import Query, SearchRequest, brute_force, top_configurations
from pplan.search.rank import distinct
from pplan.search.space import enumerate_candidates, enumerate_cuts

H100 = load_hardware("h100-sxm-80gb")

QUERIES = [
    # Megatron: interleaved m % p, ZeRO-2/3 with a shard group, tensor-parallel overlap, uneven first/last stages
    (
        "llama3-8b",
        "megatron",
        SearchRequest(gpus=16, global_batch=48, launcher="megatron", tp_comm_overlap=True),
    ),
    # torchtitan on a dense model: ZeRO-1/2, BF16 gradients, selective and partial recompute, torch's rules on m
    (
        "llama3-8b",
        "torchtitan",
        SearchRequest(gpus=16, global_batch=40, launcher="torchtitan", stack="torchtitan"),
    ),
    # torchtitan on a routed model it ships: ep dividing dp_shard·cp·t, experts split over t, DualPipeV with EP
    (
        "qwen3-30b-a3b",
        "torchtitan",
        SearchRequest(gpus=16, global_batch=64, launcher="torchtitan", stack="torchtitan"),
    ),
    # torchtitan 0.2.x on a routed flavour: etp = t beside EP (0.3.x refuses it), ep dividing dp_shard·cp·tp / etp,
    # no pipeline for qwen3's flavour (DualPipeV with EP: `test_dualpipev_with_experts_for_torchtitan_02_only_...`)
    (
        "qwen3-30b-a3b",
        "torchtitan@0.2",
        SearchRequest(gpus=8, global_batch=32, launcher="torchtitan@0.2", stack="torchtitan"),
    ),
    # FP8 and offload asked: refused by torchtitan, cut by cut
    (
        "llama3-8b",
        "torchtitan@0.2",
        SearchRequest(
            gpus=8,
            global_batch=32,
            launcher="torchtitan@0.2",
            stack="torchtitan",
            precisions=("bf16", "fp8"),
            offload=((), ("core_attn",)),
        ),
    ),
]


SAMPLE_SHARE = 0.03
"""The fast tier asks the whole request of a seeded sample of this share of the enumerated configurations (up to
830k of them: 15 s to ask every one, which the acceptance tier does)."""


@pytest.mark.parametrize(
    "share",
    [pytest.param(1.0, id="every", marks=pytest.mark.acceptance), pytest.param(SAMPLE_SHARE, id="sample")],
)
@pytest.mark.parametrize(("model_name", "launcher", "req"), QUERIES)
def test_the_filter_refuses_exactly_what_each_whole_request_is_refused(
    model_name: str, launcher: str, req: SearchRequest, share: float
) -> None:
    model = load_model(model_name)
    state = Query(model, H100, req)
    shown = SearchFilter(launcher, model, req.tp_comm_overlap, req.recompute_modules)
    verdicts: Counter[tuple[bool, bool]] = Counter()
    rng = random.Random(f"{model_name} {launcher}")
    for cand in enumerate_candidates(model, H100, req, state.seq, Counter()):
        if share < 1 and rng.random() >= share:
            continue
        whole = request_unsupported_reason(
            launcher, cand.request(req, state.seq), cand.m, model.num_layers, model
        )
        split = state.launcher_refuses(cand, shown)
        assert split == (whole is not None), (cand.summary(), whole)
        verdicts[split, state.cut_refused(cand, shown)] += 1
    # both kinds of refusal occur, and so do configurations that pass (the check is not vacuous)
    assert verdicts[False, False] and verdicts[True, False] + verdicts[True, True]
    if launcher != "megatron":
        assert verdicts[True, False]  # cell rules (ZeRO-1/2, BF16 gradients, recompute) on a cut that passes


@pytest.mark.parametrize(("model_name", "launcher", "req"), QUERIES)
def test_a_cuts_remembered_cell_refusals_are_its_cells_own(
    model_name: str, launcher: str, req: SearchRequest
) -> None:
    """`Query.cell_refusals` (asked of a cut, remembered across cuts alike) against the filter asked of each cell
    made, on every cut the launcher does not refuse whole."""
    model = load_model(model_name)
    state = Query(model, H100, req)
    shown = SearchFilter(launcher, model, req.tp_comm_overlap, req.recompute_modules)
    both: Counter[bool] = Counter()
    for cut in enumerate_cuts(model, H100, req, state.seq, Counter(), every_partial=False):
        if state.cut_refused(cut, shown):
            continue
        refusals = state.cell_refusals(cut, shown)
        assert refusals == tuple(state.launcher_refuses(cut.cell(i), shown) for i in range(len(cut)))
        both.update(refusals)
    # Megatron's cell rules read the overlaps, shard groups and resharding, which a cut's own cells leave at
    # their defaults: none of its cells is refused alone
    assert both[False] and (both[True] > 0) == (launcher != "megatron")


@pytest.mark.parametrize(
    ("model_name", "launcher", "req"),
    [pytest.param(*q, marks=pytest.mark.acceptance) if q[0] != "llama3-8b" or q[1] == "megatron" else q
     for q in QUERIES[:3]],
)  # fmt: skip
def test_a_filtered_search_keeps_the_brute_force_top_n(
    model_name: str, launcher: str, req: SearchRequest
) -> None:
    model = load_model(model_name)
    found = top_configurations(model, H100, req, launcher=SearchFilter(launcher, model, req.tp_comm_overlap))
    assert found.candidates
    reference, _ = distinct(
        brute_force(
            model,
            H100,
            req,
            lambda name, r, m: request_unsupported_reason(name, r, m, model.num_layers, model),
        ),
        req.top_n,
    )
    seq = Query(model, H100, req).seq
    assert [r.request for r in found.candidates] == [s.candidate.request(req, seq) for s in reference]


def test_dualpipev_with_experts_for_torchtitan_02_only_without_recompute() -> None:
    """torchtitan 0.2.2 overlaps DualPipeV's expert all-to-all only with activation checkpointing off
    (`get_dual_pipe_v_flag`): a rule on the cut's schedule and the cell's recompute, which the filter checks per
    cell with the schedule's flag. On torchtitan's DeepSeek-V3 flavour (no MTP module, ε 1e-5), every enumerated
    configuration is refused exactly when its whole request is; DualPipeV with ep > 1 passes at recompute none and
    is refused with recompute; 0.3.x refuses it at any recompute."""
    model = load_model("deepseek-v3").model_copy(update={"mtp_layers": 0, "norm_epsilon": None})
    req = SearchRequest(
        gpus=512, global_batch=1024, tp=1, pp=8, cp=1, schedules=("dualpipev",), zero_stages=(3,),
        grad_dtypes=("fp32",), launcher="torchtitan@0.2", stack="torchtitan", recompute=("none", "full"),
        partial_recompute=False,
    )  # fmt: skip
    state = Query(model, H100, req)
    reasons: dict[tuple[str, str, str], str | None] = {}
    for launcher in ("torchtitan@0.2", "torchtitan"):
        shown = SearchFilter(launcher, model)
        for cand in enumerate_candidates(model, H100, req, state.seq, Counter()):
            if cand.ep == 1:
                continue
            whole = request_unsupported_reason(
                launcher, cand.request(req, state.seq), cand.m, model.num_layers, model
            )
            split = state.launcher_refuses(cand, shown)
            assert split == (whole is not None), (launcher, cand.summary(), whole)
            cut = cand.summary().replace("recompute=full", "recompute=none")
            reasons[launcher, cut, cand.recompute] = None if whole is None else str(whole)
    rule = "without activation checkpointing only"
    runs = [
        key for (launcher, key, rc), why in reasons.items() if launcher == "torchtitan@0.2" and why is None
    ]
    assert runs and all(rc == "none" for (launcher, _, rc), why in reasons.items() if why is None)
    assert all(rule in str(reasons["torchtitan@0.2", key, "full"]) for key in runs)
    assert all(rule not in str(why) for (_, _, rc), why in reasons.items() if rc == "none")
    assert all(reasons["torchtitan", key, rc] is not None for key in runs for rc in ("none", "full"))
