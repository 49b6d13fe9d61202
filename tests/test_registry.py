"""Each schedule family's record (pplan.schedules.registry) against facts found elsewhere: what its generator
accepts and builds, what the simulated timeline measures, hand derivations, and torch's own names."""

from __future__ import annotations

import itertools

import pytest

from pplan.errors import ConfigError
from pplan.plan.configuration import make_plan
from pplan.plan.layout import make_layout, split_layers, uneven_ends
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_model
from pplan.schedules import FAMILIES, SCHEDULE_NAMES, ScheduleFamily, canonical_name, schedule_family
from pplan.schedules.closed_forms import bubble_fractions
from pplan.schedules.timeline import Durations, simulate
from tests.cli_run import run_pplan

EQUAL = Durations(1.0, 1.0, 1.0)
FAMILY_LIST = list(FAMILIES.values())


def _ids(f: ScheduleFamily) -> str:
    return f.name


def _v(f: ScheduleFamily) -> int:
    """The chunks per rank a plan would use (2 where the user chooses)."""
    return 2 if f.fixed_v is None else f.fixed_v


@pytest.mark.parametrize("family", FAMILY_LIST, ids=_ids)
def test_rules_on_p_and_m_agree_with_what_the_generator_accepts(family: ScheduleFamily) -> None:
    for p, m in itertools.product(range(1, 9), range(1, 30)):
        try:
            family.generator(p, m, None)
            accepted, field = True, ""
        except ConfigError as err:
            accepted, field = False, err.field
        assert accepted == (family.m_problem(p, m) is None), (p, m)
        if family.p_problem(p) is not None:
            assert field == "--pp", (p, m)  # no m runs on such a p, and the generator says so on --pp
        elif not accepted:
            assert field == "--microbatches", (p, m)


@pytest.mark.parametrize("family", FAMILY_LIST, ids=_ids)
def test_a_refused_m_suggests_only_m_the_generator_accepts(family: ScheduleFamily) -> None:
    for p, m in itertools.product(range(2, 7), range(1, 20)):
        if family.p_problem(p) is not None or family.m_problem(p, m) is None:
            continue
        with pytest.raises(ConfigError) as info:
            family.generator(p, m, None)
        words = info.value.fix.replace(",", " ").replace("(", " ").split()
        suggested = [int(w) for w in words if w.isdigit()]
        assert suggested, info.value.fix
        for c in suggested:
            if c != p:  # "a multiple of p always works"
                family.generator(p, c, None)


@pytest.mark.parametrize("family", FAMILY_LIST, ids=_ids)
def test_name_default_and_fixed_v_agree_with_the_generator(family: ScheduleFamily) -> None:
    p, m = 4, 16
    built = family.generator(p, m, None)
    assert built.v == family.default_v
    assert built.name == family.name
    if family.fixed_v is None:
        assert family.generator(p, m, 3).v == 3
        with pytest.raises(ConfigError) as err:
            family.generator(p, m, 1)
        assert err.value.field == "--vp" and "--vp 2 or more" in err.value.fix
    else:
        with pytest.raises(ConfigError) as err:
            family.generator(p, m, family.default_v + 1)
        # the generator's v counts stages per rank (DualPipe's two copies too): its default is the one it accepts
        assert err.value.field == "--vp" and f"--vp {family.default_v} " in err.value.fix + " "


@pytest.mark.parametrize("family", FAMILY_LIST, ids=_ids)
def test_splits_backward_agrees_with_the_generated_passes(family: ScheduleFamily) -> None:
    schedule = family.generator(4, 16, None)
    kinds = {a.kind for row in schedule.actions for a in row}
    assert ({"I", "W"} <= kinds) == family.splits_backward
    if not family.splits_backward:
        assert kinds == {"F", "B"}


@pytest.mark.parametrize("family", FAMILY_LIST, ids=_ids)
def test_placement_agrees_with_the_ranks_the_generator_uses(family: ScheduleFamily) -> None:
    p = 4
    schedule = family.generator(p, 16, None)
    layout = make_layout(family, 48, p, _v(family))
    for r in range(p):
        stages = {a.stage for a in schedule.actions[r]}
        if family.placement == "dual":
            stages = {s if s < p else s - p for s in stages}  # up stage p + k runs chunk k's layers
            assert stages == {r, p - 1 - r}
        assert stages == set(layout.rank_chunks[r]), r


def test_launchers_are_the_documented_ones() -> None:
    """Megatron-LM main runs 1F1B and interleaved 1F1B (`megatron/core/pipeline_parallel/schedules.py` at
    core_v0.16.1); torchtitan runs torch's classes (PyTorch 2.13 `torch/distributed/pipelining/schedules.py`)."""
    megatron = {f.name for f in FAMILY_LIST if "megatron" in f.launchers}
    torchtitan = {f.name for f in FAMILY_LIST if "torchtitan" in f.launchers}
    assert megatron == {"1f1b", "interleaved-1f1b"}
    assert torchtitan == {
        "gpipe",
        "1f1b",
        "interleaved-1f1b",
        "looped-bfs",
        "interleaved-zb",
        "zbv",
        "dualpipev",
    }


@pytest.mark.acceptance  # imports torch
def test_torch_classes_exist_and_torch_maps_their_short_names_to_them() -> None:
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    for f in FAMILY_LIST:
        if f.torch_class is None:
            continue
        cls = getattr(pipelining, f.torch_class)
        assert f.torch_short_name is not None
        assert schedules.get_schedule_class(f.torch_short_name) is cls
        assert canonical_name(f.torch_class) == canonical_name(f.torch_short_name) == f.name


@pytest.mark.acceptance  # imports torch
def test_every_torch_schedule_class_is_some_familys() -> None:
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    exported = {n for n in dir(pipelining) if n.startswith("Schedule")}
    assert exported == {f.torch_class for f in FAMILY_LIST if f.torch_class is not None}


def test_names_and_aliases_resolve_to_their_own_family_only() -> None:
    seen: dict[str, str] = {}
    for f in FAMILY_LIST:
        for alias in (f.name, *f.aliases):
            assert canonical_name(alias) == f.name
            assert canonical_name(alias.upper()) == f.name
            assert schedule_family(alias.replace("-", "_")) is f
            key = alias.lower().replace("-", "").replace("_", "")
            assert seen.setdefault(key, f.name) == f.name, alias
    assert tuple(FAMILIES) == SCHEDULE_NAMES
    with pytest.raises(ConfigError) as err:
        schedule_family("pipedream-2bw")
    assert err.value.field == "--schedule" and "pipedream-2bw" in str(err.value)
    assert all(name in err.value.fix for name in SCHEDULE_NAMES), err.value.fix


# --- closed forms -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 30), (8, 16)])
def test_1f1b_and_gpipe_bubble_by_hand(p: int, m: int) -> None:
    """A rank waits p−1 forward slots before its first forward and p−1 backward slots after its last backward:
    idle (p−1)(F+B) against ideal m(F+B), so (p−1)/m of ideal and (p−1)/(m+p−1) of the step."""
    for name in ("1f1b", "gpipe"):
        of_ideal, of_step = bubble_fractions(FAMILIES[name], p, 1, m, 1.0, 0.6, 1.4)
        assert of_ideal == pytest.approx((p - 1) / m)
        assert of_step == pytest.approx((p - 1) / (m + p - 1))


def test_interleaved_bubble_by_hand() -> None:
    """Each of the p−1 fill and drain slots is a chunk pass, 1/v of a stage: (p−1)/(v·m) of ideal."""
    assert bubble_fractions(FAMILIES["interleaved-1f1b"], 4, 2, 8)[0] == pytest.approx(3 / 16)
    assert bubble_fractions(FAMILIES["interleaved-1f1b"], 8, 4, 32)[0] == pytest.approx(7 / 128)


EXACT_BUBBLE = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "dualpipev", "dualpipe"]
"""Families whose closed form is the simulated bubble exactly at F = I = W (ZB-H2 and ZB-V state the idle
inside each rank's own window, which the step's makespan does not measure)."""


@pytest.mark.parametrize("name", EXACT_BUBBLE)
@pytest.mark.parametrize(("p", "m"), [(2, 8), (4, 8), (4, 16), (8, 16)])
def test_closed_form_bubble_matches_the_simulated_schedule(name: str, p: int, m: int) -> None:
    f = FAMILIES[name]
    measured = simulate(f.generator(p, m, None), EQUAL).bubble_fraction_of_ideal
    assert bubble_fractions(f, p, _v(f), m)[0] == pytest.approx(measured)


@pytest.mark.parametrize("name", ["looped-bfs", "interleaved-zb"])
@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (4, 3, 12), (8, 2, 16), (8, 4, 32)])
@pytest.mark.parametrize("fiw", [(1.0, 1.0, 1.0), (1.0, 1.2, 0.8), (1.0, 0.6, 1.4), (1.0, 2.0, 0.5)])
def test_derived_closed_forms_match_the_simulated_schedule(
    name: str, p: int, v: int, m: int, fiw: tuple[float, float, float]
) -> None:
    """The two families no source gives a form for carry derived ones (`bubble_derived`), equal to the idle the
    timeline measures on uniform stages at unequal F, I, W too (W > I included: interleaved zero bubble's weight
    gradients then fill only the input-gradient slack). Before, both printed DualPipeV's form."""
    f = FAMILIES[name]
    assert f.bubble_derived
    measured = simulate(f.generator(p, m, v), Durations(*fiw)).bubble_fraction_of_ideal
    assert bubble_fractions(f, p, v, m, *fiw)[0] == pytest.approx(measured)


def test_derived_closed_forms_by_hand() -> None:
    """p = 4, v = 2: looped BFS idles (p−1)(F+I+W)/v; interleaved zero bubble (p−1)(F + max(0, I−W))/v."""
    assert FAMILIES["looped-bfs"].bubble_idle(4, 2, 8, 1.0, 1.2, 0.8) == pytest.approx(3 * 3.0 / 2)
    assert FAMILIES["interleaved-zb"].bubble_idle(4, 2, 8, 1.0, 1.2, 0.8) == pytest.approx(3 * 1.4 / 2)
    assert FAMILIES["interleaved-zb"].bubble_idle(4, 2, 8, 1.0, 0.6, 1.4) == pytest.approx(3 * 1.0 / 2)
    assert not any(
        f.bubble_derived for f in FAMILIES.values() if f.name not in ("looped-bfs", "interleaved-zb")
    )


def test_zb_h2_needs_its_warm_up_micro_batches() -> None:
    """With m < 2p − 1 ZB-H2 cannot run its extra warm-up forwards: it is ZB-H1 (Qi et al. 2024 §3.1)."""
    h1, h2 = FAMILIES["zb-h1"], FAMILIES["zb-h2"]
    assert bubble_fractions(h2, 4, 1, 6) == bubble_fractions(h1, 4, 1, 6)
    assert bubble_fractions(h2, 4, 1, 7)[0] == 0.0 < bubble_fractions(h1, 4, 1, 7)[0]


# --- peak in flight (the search's screening) ---------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILY_LIST, ids=_ids)
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_warmup_in_flight_is_what_the_lists_hold_at_the_first_backward(
    family: ScheduleFamily, p: int
) -> None:
    """Read off the generator's own lists: per rank and stage, the forwards run before the first B or I."""
    checked = 0
    for m in range(1, 4 * p + 6):
        for v in [2, 3, 4] if family.fixed_v is None else [family.fixed_v]:
            if family.p_problem(p) or family.m_problem(p, m):
                continue
            schedule = family.generator(p, m, None if family.fixed_v else v)
            expected = []
            for r, row in enumerate(schedule.actions):
                stages = schedule.stages_of(r)
                count = dict.fromkeys(stages, 0)
                for a in row:
                    if a.kind in ("B", "I"):
                        break
                    count[a.stage] += 1
                expected.append(tuple(count[s] for s in stages))
            if family.tuned:  # its lists follow the times: the form is only a lower bound
                assert all(
                    a <= b
                    for got, want in zip(family.warmup_in_flight(p, v, m), expected, strict=True)
                    for a, b in zip(got, want, strict=True)
                ), (p, m, v)
            else:
                assert family.warmup_in_flight(p, v, m) == tuple(expected), (p, m, v)
            checked += 1
    assert checked or family.p_problem(p)


def test_uneven_ends_is_the_closest_split_a_brute_force_finds() -> None:
    """`uneven_ends` (the example the error prints) against every (a, b, q) with a + b + q·(n − 2) = L and
    1 ≤ b ≤ a ≤ q: the split exists exactly when it says so, it splits, and no other has ends closer to q."""
    for layers in range(3, 130):
        for chunks in range(3, 40):
            # every (a, b, q) with a + b + q·(n − 2) = L and 1 ≤ b ≤ a ≤ q: b is fixed by q and a
            splits = [
                (q - b, a, b)
                for q in range(1, layers + 1)
                for a in range(1, q + 1)
                if 1 <= (b := layers - a - q * (chunks - 2)) <= a
            ]
            got = uneven_ends(layers, chunks)
            if not splits:
                assert got is None, (layers, chunks)
                continue
            assert got is not None
            per_chunk = split_layers(layers, chunks, *got)
            assert sum(per_chunk) == layers and per_chunk[0] == got[0] and per_chunk[-1] == got[1]
            q = per_chunk[1]
            assert q - got[1] == min(gap for gap, _, _ in splits)


def test_an_uneven_model_is_told_a_split_that_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3's 61 layers over DualPipe's 16 chunks (its published p = 16): the error names a split, and the
    split it names explains."""
    args = ("explain", "--model", "deepseek-v3", "--hardware", "h800-sxm-80gb", "--gpus", "2048", "--global-batch",
            "15360", "--seq-len", "4096", "--tp", "1", "--pp", "16", "--ep", "64", "--schedule", "dualpipe",
            "--zero-stage", "1")  # fmt: skip
    res = run_pplan(capsys, *args)
    assert res.code == 2 and "(e.g. --first-stage-layers 3 --last-stage-layers 2)" in res.err
    res = run_pplan(capsys, *args, "--first-stage-layers", "3", "--last-stage-layers", "2")
    assert res.code == 0, res.err


def test_end_chunks_of_the_embedding_or_the_loss_alone() -> None:
    """Megatron's split with the embedding and the loss counted as layers: Llama 3.1 405B's 126 layers over
    p·v = 128 chunks leave the first chunk the embedding alone and the last the loss alone (0 layers each) and
    one layer in each of the 126 between; asked without end counts, more chunks than layers is refused."""
    assert split_layers(126, 128, 0, 0) == (0, *[1] * 126, 0)
    assert split_layers(126, 64, 1, 1) == (1, *[2] * 62, 1)
    with pytest.raises(ConfigError, match="leaves a chunk with no layer"):
        split_layers(126, 128, None, None)
    model = load_model("llama3-405b")
    req = PlanRequest(
        gpus=512, global_batch=512, tp=4, pp=16, vp=8, schedule="interleaved-1f1b", seq_len=8192,
        first_stage_layers=0, last_stage_layers=0,
    )  # fmt: skip
    chunks = make_plan(model, req).layout.chunks
    assert (chunks[0].layers, chunks[0].has_embedding, chunks[-1].layers, chunks[-1].has_output) == (
        0,
        True,
        0,
        True,
    )
