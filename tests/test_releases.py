"""A stack's releases (pplan.profiles.releases, data written by scripts/import_bridge_recipes.py from each
Megatron-Bridge release's benchmark harness): the releases known, the knobs a release's recipe runs, and `explain`
pricing a named release's knobs where no flag sets them, said as an assumption, with recommend's lines reading
back as the plan they rank."""

from __future__ import annotations

from typing import Any

import pytest

from pplan.profiles.releases import RELEASE_KNOBS, release_defaults, release_of, releases
from tests.cli_run import run_pplan

EXPLAIN = (
    "explain",
    "--model",
    "llama3-70b",
    "--gpus",
    "64",
    "--global-batch",
    "128",
    "--tp",
    "4",
    "--pp",
    "2",
)


def test_the_bridge_releases_are_the_nemo_containers_oldest_first() -> None:
    # NVIDIA-NeMo/Megatron-Bridge docs/versions1.json: 25.09 (v0.1.0rc3) ... 26.08 (v0.6.0)
    names = [r.name for r in releases("megatron-bridge")]
    assert names == ["25.09", "25.11", "26.02", "26.02.01", "26.04", "26.04.01", "26.06", "26.06.01", "26.08"]
    assert release_of("megatron-bridge", None) is releases("megatron-bridge")[-1]
    assert release_of("megatron-bridge", "26.06").tag == "v0.5.0"  # type: ignore[union-attr]
    assert releases("megatron-core") == () and release_of("megatron-core", None) is None


def test_a_release_recipe_is_the_published_one() -> None:
    """bridge-recipes.md's table of MoE knobs per release: DeepSeek-V3 on GB200 in MXFP8 ran HybridEP with TE-scoped
    graphs (attn, moe_router, moe_preprocess) in 26.04.01 and HybridEP, EP A2A overlap and full-iteration graphs in
    26.06."""
    old, new = release_of("megatron-bridge", "26.04.01"), release_of("megatron-bridge", "26.06")
    assert old is not None and new is not None
    before = release_defaults(old, "deepseek-v3", "gb200-nvl72", "mxfp8", True)
    after = release_defaults(new, "deepseek-v3", "gb200-nvl72", "mxfp8", True)
    assert before["moe_dispatcher"] == after["moe_dispatcher"] == "hybridep"
    assert (
        before["cuda_graph_scope"] == ["attn", "moe_preprocess", "moe_router"]
        and not before["moe_ep_overlap"]
    )
    assert after["cuda_graph_scope"] == ["full_iteration"] and after["moe_ep_overlap"]
    assert set(after) <= RELEASE_KNOBS


def test_a_model_without_a_recipe_takes_the_release_s_common_knobs() -> None:
    """No recipe for Mixtral: the most common value among the release's routed recipes on that GPU."""
    release = release_of("megatron-bridge", "26.06")
    assert release is not None
    got = release_defaults(release, "mixtral-8x7b", "gb200-nvl72", "bf16", True)
    routed = [
        r for k, r in release.recipes.items() if k.split()[1] == "gb200-nvl72" and "moe_dispatcher" in r
    ]
    dispatchers = [r["moe_dispatcher"] for r in routed]
    assert got["moe_dispatcher"] == max(set(dispatchers), key=dispatchers.count)


def test_explain_prices_a_named_release_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, *EXPLAIN, "--stack", "megatron-bridge@26.06", "--precision", "fp8", "--zero-stage", "1",
                    "--json")  # fmt: skip
    assert res.code == 0, res.err
    notes = res.json()["assumptions"]
    knobs = next(n for n in notes if n.startswith("megatron-bridge 26.06's recipe knobs"))
    assert "--grad-dtype bf16" in knobs and "--fp8-param-gather" in knobs  # the 26.06 Llama 3 70B FP8 recipe
    assert any(n.startswith("stack release priced: megatron-bridge 26.06 (v0.5.0") for n in notes)
    again = run_pplan(capsys, *EXPLAIN, "--stack", "megatron-bridge", "--release", "26.06", "--precision", "fp8",
                      "--zero-stage", "1", "--grad-dtype", "fp32", "--json")  # fmt: skip
    knobs = next(n for n in again.json()["assumptions"] if "recipe knobs" in n)
    assert "--grad-dtype" not in knobs  # a flag given wins over the release's knob
    plain = run_pplan(capsys, *EXPLAIN, "--stack", "megatron-bridge", "--json")
    assert not any("recipe knobs where no flag" in n for n in plain.json()["assumptions"])
    assert any(n.startswith("stack release: none named") for n in plain.json()["assumptions"])


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--stack", "megatron-bridge@99.1"), "--release"),
        (("--stack", "torchtitan@26.06"), "--release"),
        (("--stack", "megatron-bridge@"), "--stack"),
        (("--release", "26.06"), "--release"),  # megatron-core has no releases
        (("--stack", "megatron-bridge@26.06", "--release", "26.04"), "--release"),
    ],
)
def test_a_bad_release_is_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], flag: str
) -> None:
    res = run_pplan(capsys, *EXPLAIN, *args)
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1 and flag in res.err, res.err


def test_recommend_carries_the_release_and_its_lines_read_back(capsys: pytest.CaptureFixture[str]) -> None:
    """recommend ranks with the release named but the knobs as given; its explain line spells every release knob,
    so explain prices the plan recommend ranked, not the release's recipe."""
    res = run_pplan(capsys, "recommend", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64",
                    "--stack", "megatron-bridge@26.06", "--top", "1", "--format", "json")  # fmt: skip
    assert res.code == 0, res.err
    best = res.json()["candidates"][0]
    line = best["explain_command"]
    assert "--release 26.06" in line and "--no-fp8-param-gather" in line and "--moment-dtype fp32" in line
    again = run_pplan(capsys, *line.split()[1:], "--json")
    assert again.code == 0, again.err
    assert not any("recipe knobs where no flag" in n for n in again.json()["assumptions"])
    assert again.json()["performance"]["step_s"] == pytest.approx(best["performance"]["step_s"])


def _recipe(release: str, key: str) -> dict[str, Any]:
    """The release's recipe as pplan/profiles/releases.json states it (read here, not through pplan's reader)."""
    import json
    from pathlib import Path

    import pplan.profiles

    data = json.loads((Path(pplan.profiles.__file__).parent / "releases.json").read_text())
    (row,) = [r for r in data["stacks"]["megatron-bridge"] if r["name"] == release]
    recipe: dict[str, Any] = row["recipes"][key]
    return recipe


QWEN_GB200 = dict(
    model="qwen3-30b-a3b",
    hardware="gb200-nvl72",
    gpus=64,
    global_batch=512,
    seq_len=4096,
    precision="mxfp8",
    top=3,
)


@pytest.mark.acceptance
def test_recommend_prices_a_named_release_s_recipe_knobs() -> None:
    """`--stack megatron-bridge@26.06`: every ranked plan runs the release's Qwen3-30B GB200 MXFP8 recipe knobs
    (HybridEP, EP overlap where the cut allows it, full-iteration graphs, the fused grouped MLP), as explain does; a
    knob given on the command line stays as given."""
    import pplan

    recipe = _recipe("26.06", "qwen3-30b-a3b gb200-nvl72 mxfp8")
    answer = pplan.recommend(stack="megatron-bridge@26.06", **QWEN_GB200)
    assert answer.candidates
    for c in answer.candidates:
        line = c.explain_command
        assert f"--moe-dispatcher {recipe['moe_dispatcher']}" in line
        assert "--cuda-graph-scope " + ",".join(recipe["cuda_graph_scope"]) in line
        assert ("--moe-fused-grouped-mlp" in line.split()) is recipe["moe_fused_grouped_mlp"]
    pinned = pplan.recommend(stack="megatron-bridge@26.06", moe_dispatcher="alltoall", **QWEN_GB200)
    assert all("--moe-dispatcher alltoall" in c.explain_command for c in pinned.candidates)
    plain = pplan.recommend(stack="megatron-bridge", **QWEN_GB200)  # no release named: no recipe
    assert all(
        "--release" not in c.explain_command and "hybridep" not in c.explain_command for c in plain.candidates
    )


@pytest.mark.parametrize(
    ("ep", "pp", "schedule", "recompute", "dispatcher", "taken"),
    [
        (8, 1, "1f1b", "none", "alltoall", True),
        (1, 1, "1f1b", "none", "alltoall", False),  # no expert parallelism
        (8, 2, "1f1b", "none", "alltoall", False),  # p > 1 without a virtual pipeline
        (8, 2, "interleaved-1f1b", "none", "hybridep", True),
        (8, 1, "1f1b", "full", "alltoall", False),  # full recompute
        (8, 1, "1f1b", "none", "allgather", False),  # allgather dispatcher
    ],
)
def test_ep_overlap_is_taken_only_where_megatron_core_allows_it(
    ep: int, pp: int, schedule: str, recompute: Any, dispatcher: Any, taken: bool
) -> None:
    """megatron-core 0.16's TransformerConfig asserts on `overlap_moe_expert_parallel_comm` without expert
    parallelism, with p > 1 and no virtual pipeline, with full recomputation or the allgather dispatcher: there
    the plan (which prices and launches) does not overlap, whatever the request or the release asked."""
    from pplan.plan.configuration import make_plan
    from pplan.plan.records import PlanRequest
    from pplan.profiles.catalog import load_model

    model = load_model("qwen3-30b-a3b")
    req = PlanRequest(
        gpus=64, global_batch=512, micro_batch=1, tp=1, pp=pp, cp=1, ep=ep, schedule=schedule, recompute=recompute,
        vp=2 if schedule == "interleaved-1f1b" else None,
        moe_dispatcher=dispatcher, moe_ep_overlap=True, seq_len=4096,
    )  # fmt: skip
    assert make_plan(model, req).moe_ep_overlap is taken


@pytest.mark.parametrize(
    ("release", "gpu", "expected"),
    [
        (
            "25.09",
            "H100 SXM5 80GB",
            ("allgather", "alltoall", "deepep"),
        ),  # megatron-core 0.14: no HybridEP yet
        ("26.02", "H100 SXM5 80GB", ("allgather", "alltoall", "hybridep")),  # its container lacks DeepEP
        (
            "26.06",
            "B200 (GB200) 186GB",
            ("allgather", "alltoall", "hybridep"),
        ),  # Bridge skips DeepEP on GB200
        ("26.06", "B200 180GB", ("allgather", "alltoall", "deepep", "hybridep")),
    ],
)
def test_the_dispatchers_a_release_has(release: str, gpu: str, expected: tuple[str, ...]) -> None:
    from pplan.profiles.releases import release_dispatchers

    found = release_of("megatron-bridge", release)
    assert found is not None and release_dispatchers(found, gpu) == expected


def test_the_release_s_other_knobs_are_priced_on_the_same_plan() -> None:
    """GPT-OSS-120B on 64 GB200 at 26.02's recipe (alltoall, no EP overlap): the note names the fastest other
    dispatcher the release has on GB200 with its gain, and EP overlap with its gain, each the step time of the same
    plan priced directly; a dispatcher slower than the plan's is never named."""
    from dataclasses import replace

    from pplan.cost.steptime import step_time
    from pplan.plan.configuration import make_plan
    from pplan.plan.records import PlanRequest
    from pplan.profiles.catalog import load_hardware, load_model
    from pplan.search.knobs import stack_knob_notes

    model, hw = load_model("gpt-oss-120b"), load_hardware("gb200-nvl72")
    req = PlanRequest(
        gpus=64, global_batch=1280, micro_batch=4, tp=1, pp=1, cp=1, ep=8, seq_len=4096, stack="megatron-bridge",
        release="26.02", moe_dispatcher="alltoall", moe_ep_overlap=False,
    )  # fmt: skip

    def step(r: PlanRequest) -> float:
        return step_time(model, hw, make_plan(model, r)).step_s

    base = step(req)
    gains = {d: 1 - step(replace(req, moe_dispatcher=d)) / base for d in ("allgather", "hybridep")}
    overlap = 1 - step(replace(req, moe_ep_overlap=True)) / base
    notes = stack_knob_notes(model, hw, req, make_plan(model, req), base)
    best = max(gains, key=gains.__getitem__)
    expected = []
    if gains[best] >= 0.005:
        expected.append(f"--moe-dispatcher {best} steps {gains[best] * 100:.1f} % faster than alltoall")
    if overlap >= 0.005:
        expected.append(f"--moe-ep-overlap steps {overlap * 100:.1f} % faster")
    assert expected, "the case must name at least one faster knob"
    assert [n.split(" (")[0] for n in notes] == expected
    assert "deepep" not in " ".join(notes)


@pytest.mark.acceptance
def test_size_prices_each_hardware_with_its_recipe_of_the_release() -> None:
    """`pplan size --stack megatron-bridge@26.06` over GB200 and H100: each hardware's best plan runs that release's
    recipe for that GPU (the two differ: the H100 recipe graphs no attention)."""
    import pplan

    doc = pplan.size(
        model="qwen3-30b-a3b", hardware="gb200-nvl72,h100-sxm-80gb", train_tokens=1e12, gpus="64", seq_len=4096,
        stack="megatron-bridge@26.06", jobs=1,
    )  # fmt: skip
    seen = set()
    for point in doc.points:
        assert point.explain is not None
        recipe = _recipe("26.06", f"qwen3-30b-a3b {point.hardware} bf16")
        assert f"--moe-dispatcher {recipe['moe_dispatcher']}" in point.explain
        assert "--cuda-graph-scope " + ",".join(sorted(recipe["cuda_graph_scope"])) in point.explain
        seen.add(point.hardware)
    assert seen == {"gb200-nvl72", "h100-sxm-80gb"}


def test_a_release_sets_the_dispatcher_list_a_search_was_not_given() -> None:
    """recommend's `--moe-dispatcher` is a list; not given, a named release's recipe sets it to its one dispatcher;
    given, it stays."""
    from pplan.cli.signature import release_search_changes

    values = {"stack": "megatron-bridge", "release": "26.06", "precisions": ("mxfp8",), "moe_dispatchers": ()}
    recipe = _recipe("26.06", "qwen3-30b-a3b gb200-nvl72 mxfp8")
    changes = release_search_changes(values, (), "qwen3-30b-a3b", "gb200-nvl72", True)
    assert changes["moe_dispatchers"] == (recipe["moe_dispatcher"],)
    assert "moe_dispatchers" not in release_search_changes(
        values, ("moe_dispatchers",), "qwen3-30b-a3b", "gb200-nvl72", True
    )


@pytest.mark.acceptance
def test_several_dispatchers_rank_the_union_of_their_searches() -> None:
    """`--moe-dispatcher alltoall,hybridep`: the answer is the union of the two single-dispatcher searches' top N,
    ordered by throughput, each configuration once (with its faster dispatcher); every plan in either search's top
    N that is faster than the last shown is shown, or is a shown configuration under the other dispatcher."""
    import pplan

    query = dict(
        model="qwen3-30b-a3b", hardware="h100-sxm-80gb", gpus=64, global_batch=512, seq_len=4096, top=5
    )
    both = pplan.recommend(moe_dispatcher="alltoall,hybridep", **query).candidates
    singles = {d: pplan.recommend(moe_dispatcher=d, **query).candidates for d in ("alltoall", "hybridep")}
    speeds = [c.performance.tokens_per_s for c in both]  # type: ignore[union-attr]
    assert len(both) == 5 and speeds == sorted(speeds, reverse=True)
    assert speeds[0] == max(c[0].performance.tokens_per_s for c in singles.values())  # type: ignore[union-attr]

    def config(line: str) -> str:
        return " ".join(w for w in line.split() if w not in ("--moe-dispatcher", "hybridep", "alltoall"))

    shown = [config(c.explain_command) for c in both]
    assert len(set(shown)) == len(shown)
    for plans in singles.values():
        for c in plans:
            if c.performance.tokens_per_s > speeds[-1]:  # type: ignore[union-attr]
                assert config(c.explain_command) in shown


def test_explain_says_when_ep_overlap_is_not_taken(capsys: pytest.CaptureFixture[str]) -> None:
    """`--moe-ep-overlap` on a p = 2 cut without interleaving: the plan does not overlap, and explain says why."""
    import json

    res = run_pplan(
        capsys, "explain", "--model", "qwen3-30b-a3b", "--gpus", "16", "--global-batch", "64", "--tp", "1", "--pp",
        "2", "--ep", "8", "--moe-ep-overlap", "--seq-len", "4096", "--json",
    )  # fmt: skip
    doc = json.loads(res.out)
    assert doc["plan"]["moe_ep_overlap"] is False
    (line,) = [a for a in doc["assumptions"] if "EP overlap" in a]
    assert "interleaved schedule (v > 1) when p > 1" in line


@pytest.mark.acceptance
def test_recommend_s_table_says_which_knobs_it_ranked_with(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = _recipe("26.06", "qwen3-30b-a3b gb200-nvl72 mxfp8")
    res = run_pplan(
        capsys, "recommend", "--model", "qwen3-30b-a3b", "--hardware", "gb200-nvl72", "--gpus", "64",
        "--global-batch", "512", "--seq-len", "4096", "--stack", "megatron-bridge@26.06", "--precision", "mxfp8",
        "--top", "2",
    )  # fmt: skip
    assert res.code == 0, res.err
    text = " ".join(res.out.split())
    assert "megatron-bridge 26.06: ranked with" in text
    assert f"--moe-dispatcher {recipe['moe_dispatcher']}" in text
    assert "--cuda-graph-scope " + ",".join(recipe["cuda_graph_scope"]) in text


@pytest.mark.parametrize(
    ("release", "hardware", "dispatcher", "why"),
    [
        ("26.02", "h100-sxm-80gb", "deepep", "its container lacks DeepEP"),
        ("26.04", "gb200-nvl72", "deepep", "skips DeepEP on GB200"),
        ("25.09", "h100-sxm-80gb", "hybridep", "predates hybridep"),
        ("26.04", "h100-sxm-80gb", "deepep", None),
    ],
)
def test_explain_says_when_the_release_does_not_run_the_dispatcher(
    capsys: pytest.CaptureFixture[str], release: str, hardware: str, dispatcher: str, why: str | None
) -> None:
    """A dispatcher the named release does not run on the GPU is priced as asked, and explain says so and names
    the ones it runs (`release_dispatchers`); one it runs draws no such line."""
    import json

    res = run_pplan(
        capsys, "explain", "--model", "qwen3-30b-a3b", "--hardware", hardware, "--gpus", "16", "--global-batch",
        "64", "--tp", "1", "--pp", "1", "--ep", "8", "--seq-len", "4096", "--stack", f"megatron-bridge@{release}",
        "--moe-dispatcher", dispatcher, "--json",
    )  # fmt: skip
    doc = json.loads(res.out)
    assert doc["plan"]["moe_dispatcher"] == dispatcher
    lines = [a for a in doc["assumptions"] if a.startswith("token dispatcher")]
    if why is None:
        assert lines == []
        return
    (line,) = lines
    assert why in line and f"megatron-bridge {release} will not run it" in line
    assert dispatcher not in line.split("--moe-dispatcher ")[1]
