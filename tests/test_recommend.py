"""`pplan recommend`: the ranking, the constraints, the launcher filter and formats, and that screening does not
lose the best configuration (checked against a brute-force explain of every configuration of a small case)."""

from __future__ import annotations

import itertools
import tomllib
from typing import Any

import pytest

from pplan.errors import PplanError
from pplan.explain import explain
from pplan.plan.records import PlanRequest
from pplan.profiles.catalog import load_hardware, load_model
from pplan.recommend import Recommendations, recommendations
from pplan.search import Rejection, SearchRequest, top_configurations
from tests.cli_run import run_pplan

H100 = load_hardware("h100-sxm-80gb")


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    res = run_pplan(capsys, "recommend", "--format", "json", *args)
    assert res.code == 0, res.err
    return res.json()  # type: ignore[no-any-return]


def test_default_recommend_gives_a_ranked_answer(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "recommend")
    assert res.code == 0, res.err
    assert "Why the rest were rejected" in res.out and "Mtok/s" in res.out
    doc = _json(capsys)
    cands = doc["candidates"]
    assert len(cands) == 10
    speeds = [c["performance"]["tokens_per_s"] for c in cands]
    assert speeds == sorted(speeds, reverse=True)
    assert all(c["memory"]["fits"] for c in cands)
    assert doc["schema"] == "pplan.recommend/2" and doc["rejected"]


def test_top_candidate_is_what_explain_prints(capsys: pytest.CaptureFixture[str]) -> None:
    best = _json(capsys, "--top", "1")["candidates"][0]
    plan = best["plan"]
    args = ["explain", "--json", "--gpus", "2048", "--global-batch", "1024", "--tp", str(plan["tp"]), "--pp",
            str(plan["pp"]), "--cp", str(plan["cp"]), "--micro-batch", str(plan["micro_batch"]), "--schedule",
            plan["schedule"], "--recompute", plan["recompute"], "--zero-stage", str(plan["zero_stage"]),
            "--grad-dtype", plan["grad_dtype"]]  # fmt: skip
    if plan["vp"] > 1 and plan["schedule"] not in ("zbv", "dualpipev"):
        args += ["--vp", str(plan["vp"])]
    layers = plan["layers_per_chunk"]
    if layers[0] != layers[len(layers) // 2]:
        args += ["--first-stage-layers", str(layers[0]), "--last-stage-layers", str(layers[-1])]
    if plan["shard_group"] is not None:
        args += ["--shard-group", str(plan["shard_group"])]
    policy = plan["recompute_policy"]
    if policy["layers"] is not None:
        args += ["--recompute-method", policy["method"], "--recompute-layers", str(policy["layers"])]
    if not plan["reshard_after_forward"]:
        args.append("--no-reshard-after-forward")
    doc = run_pplan(capsys, *args).json()
    assert doc["performance"]["tokens_per_s"] == pytest.approx(best["performance"]["tokens_per_s"])


def test_fixed_axes_and_limits(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "--tp", "8", "--schedule", "1f1b,interleaved-1f1b", "--max-vp", "2", "--min-microbatches",
                "16", "--headroom", "0.2")  # fmt: skip
    assert doc["candidates"]
    for c in doc["candidates"]:
        p = c["plan"]
        assert p["tp"] == 8 and p["schedule"] in ("1f1b", "interleaved-1f1b") and p["vp"] <= 2
        assert p["num_microbatches"] >= 16
        assert all(s["headroom_bytes"] >= 0.2 * c["memory"]["usable_bytes"] for s in c["memory"]["stages"])


@pytest.mark.parametrize(("launcher", "allowed"), [("megatron", {"1f1b", "interleaved-1f1b"}),
                                                   ("torchtitan", {"gpipe", "1f1b", "interleaved-1f1b", "looped-bfs",
                                                                   "interleaved-zb", "zbv", "dualpipev"})])  # fmt: skip
@pytest.mark.acceptance  # a whole search per launcher through the CLI (seconds)
def test_launcher_filter(capsys: pytest.CaptureFixture[str], launcher: str, allowed: set[str]) -> None:
    doc = _json(capsys, "--launcher", launcher)
    assert doc["candidates"] and {c["plan"]["schedule"] for c in doc["candidates"]} <= allowed


@pytest.mark.acceptance  # two whole searches through the CLI (seconds)
def test_megatron_and_torchtitan_formats(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "recommend", "--format", "megatron")
    assert res.code == 0, res.err
    for flag in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--micro-batch-size",
                 "--global-batch-size 1024"):  # fmt: skip
        assert flag in res.out
    res = run_pplan(capsys, "recommend", "--format", "torchtitan")  # torchtitan 0.3.x: arguments
    assert res.code == 0, res.err
    assert "--training.global_batch_size 1024" in res.out and "--module llama3" in res.out
    res = run_pplan(capsys, "recommend", "--format", "torchtitan@0.2")  # torchtitan 0.2.x: a TOML job config
    assert res.code == 0, res.err
    toml = tomllib.loads(res.out)
    assert toml["training"]["global_batch_size"] == 1024
    if (
        toml["parallelism"]["pipeline_parallel_degree"] > 1
    ):  # the default query's best is t 8, FSDP (ZeRO-3), no pipeline
        assert toml["parallelism"]["pipeline_parallel_schedule"] in ("1F1B", "Interleaved1F1B", "ZBVZeroBubble",
                                                                     "InterleavedZeroBubble", "DualPipeV", "GPipe")  # fmt: skip


def test_rejections_account_for_every_configuration() -> None:
    model = load_model("llama3-70b")
    res = top_configurations(model, H100, SearchRequest(gpus=256, global_batch=256, top_n=5))
    after_enumeration = (
        Rejection.DOMINATED, Rejection.HIGHER_STAGE, Rejection.MORE_RECOMPUTE, Rejection.MEMORY, Rejection.BOUND, Rejection.BELOW_TOP, Rejection.EQUIVALENT, Rejection.INVALID,
    )  # fmt: skip
    assert res.enumerated == len(res.candidates) + sum(res.rejected[r] for r in after_enumeration)
    assert res.bounded >= res.rejected[Rejection.MEMORY] + res.simulated
    # every simulated configuration is shown, folded into a shown one, or ranked below the top
    simulated_out = res.rejected[Rejection.EQUIVALENT] + res.rejected[Rejection.BELOW_TOP]
    assert res.simulated == len(res.candidates) + simulated_out


def test_search_is_deterministic() -> None:
    model = load_model("llama3-8b")
    a = top_configurations(model, H100, SearchRequest(gpus=16, global_batch=64))
    b = top_configurations(model, H100, SearchRequest(gpus=16, global_batch=64))
    assert [c.request for c in a.candidates] == [c.request for c in b.candidates]


def test_screening_keeps_the_brute_force_best() -> None:
    # Explain every configuration of a small space and compare the best with the search's best.
    model = load_model("llama3-8b")
    gpus, batch = 32, 64
    space: dict[str, tuple[Any, ...]] = dict(
        tp=(1, 2, 4, 8), pp=(1, 2, 4, 8), cp=(1, 2), micro_batch=(1, 2, 4), recompute=("none", "full"),
        zero_stage=(0, 1), schedule=("1f1b", "zbv"),
    )  # fmt: skip
    best = 0.0
    for t, p, cp, b, rc, z, sched in itertools.product(*space.values()):
        if sched == "zbv" and p == 1:
            continue
        try:
            rep = explain(model, H100, PlanRequest(gpus=gpus, global_batch=batch, tp=t, pp=p, cp=cp, micro_batch=b,
                                                   recompute=rc, zero_stage=z, schedule=sched),
                          with_sensitivity=False)  # fmt: skip
        except PplanError:
            continue
        if rep.memory.fits and rep.performance:
            best = max(best, rep.performance.tokens_per_s)
    found = top_configurations(model, H100, SearchRequest(gpus=gpus, global_batch=batch, schedules=("1f1b", "zbv"), micro_batch=None,
                                              recompute=("none", "full"), zero_stages=(0, 1)))  # fmt: skip
    assert found.candidates
    top = found.candidates[0].scored
    assert top.tokens_per_s >= best * 0.999


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--headroom", "1.5"), "--headroom"),
        (("--jitter", "-0.1"), "--jitter"),
        (("--top", "0"), "--top"),
        (("--schedule", "bogus"), "--schedule"),
        (("--recompute", "sometimes"), "--recompute"),
        (("--model", "nope"), "model"),
        (("--gpus", "0"), "--gpus"),
    ],
)
def test_recommend_errors(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str) -> None:
    res = run_pplan(capsys, "recommend", *args)
    assert res.code == 2 and needle in res.err and len(res.err.strip().splitlines()) == 1, res.err


@pytest.mark.parametrize(
    "query",
    [
        ("--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--top", "1"),
        # the best recomputes the first 8 layers of every chunk (block): the command must say so
        ("--model", "llama3-70b", "--gpus", "64", "--global-batch", "128", "--tp", "8", "--pp", "2", "--cp", "1",
         "--micro-batch", "2", "--schedule", "1f1b", "--zero-stage", "1", "--grad-dtype", "fp32", "--top", "1"),
        # auto under a headroom: the derived memory limit, and so the lists, must be the same in explain
        ("--model", "llama3-70b", "--gpus", "64", "--global-batch", "256", "--tp", "8", "--pp", "8", "--cp", "1",
         "--micro-batch", "1", "--schedule", "auto", "--zero-stage", "1", "--grad-dtype", "fp32", "--headroom",
         "0.3", "--top", "1", "--include-unrunnable"),
        # a straggler allowance: the command must carry it
        ("--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--jitter", "0.02", "--top", "1"),
    ],
)  # fmt: skip
def test_printed_explain_command_reproduces_the_best(
    capsys: pytest.CaptureFixture[str], query: tuple[str, ...]
) -> None:
    import shlex

    res = run_pplan(capsys, "recommend", *query)
    line = res.out.strip().splitlines()[-1].strip()
    assert line.startswith("#1: pplan explain")
    command = line.removeprefix("#1: ")
    best = _json(capsys, *query)["candidates"][0]["performance"]["tokens_per_s"]
    doc = run_pplan(capsys, *shlex.split(command)[1:], "--json").json()
    assert doc["performance"]["tokens_per_s"] == pytest.approx(best)


def test_recommend_json_matches_its_schema(capsys: pytest.CaptureFixture[str]) -> None:
    from pplan.documents.recommend import RecommendReport

    doc = _json(capsys, "--top", "2")
    RecommendReport.model_validate(doc)  # the document parses back into its own schema
    schema = run_pplan(capsys, "schema", "recommend").json()
    assert {"schema", "inputs", "candidates", "rejected", "closest_misses"} <= schema["properties"].keys()
    assert doc["candidates"][0]["explain_command"].startswith("pplan explain --model llama3-70b")


def test_published_schemas_are_closed_and_require_their_version(capsys: pytest.CaptureFixture[str]) -> None:
    from pydantic import ValidationError

    from pplan.documents.recommend import RecommendReport

    for name in ("explain", "recommend"):
        schema = run_pplan(capsys, "schema", name).json()
        assert "schema" in schema["required"] and schema["additionalProperties"] is False
        assert all(d.get("additionalProperties") is False for d in schema.get("$defs", {}).values())
    doc = _json(capsys, "--top", "1")
    with pytest.raises(ValidationError):
        RecommendReport.model_validate({**doc, "unexpected": 1})


def _rendered(result: Recommendations, width: int) -> str:
    from rich.console import Console

    from pplan.render.recommend import candidates_table

    console = Console(width=width, record=True, color_system=None)
    console.print(candidates_table(result, "title", console.width))
    return console.export_text()


def test_the_table_leaves_columns_out_rather_than_cut_numbers_on_a_narrow_terminal() -> None:
    """At 80 columns (a default terminal, and what rich assumes when the output is piped) every cell shown is
    whole: the optional columns go first, each named in the caption; at 200 columns all of them are shown."""
    from pplan.render.recommend import OPTIONAL_COLUMNS

    result = recommendations(
        load_model("llama3-70b"), H100, SearchRequest(gpus=2048, global_batch=1024, top_n=5)
    )
    wide = _rendered(result, 200)
    header = next(line for line in wide.splitlines() if "Mtok/s" in line)
    assert all(col in header.split() for col in OPTIONAL_COLUMNS) and "Not shown" not in wide
    narrow = _rendered(result, 80)
    lines = narrow.splitlines()
    rows = lines[lines.index(next(line for line in lines if "Mtok/s" in line)) :][:7]
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert not any("…" in line for line in rows), rows
    dropped = [col for col in OPTIONAL_COLUMNS if col not in rows[0].split()]
    note = f"Not shown on this 80-column terminal: {', '.join(dropped)}"
    assert dropped and note in " ".join(narrow.split())
    # every figure shown at 80 columns is the one shown at 200
    wide_rows = wide.splitlines()[wide.splitlines().index(header) + 2 :][:5]
    for short, full in zip(rows[2:], wide_rows, strict=True):
        assert set(short.split()) <= set(full.split())
