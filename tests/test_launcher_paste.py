"""Launcher blocks paste whole after the launch command, and `recommend` prints the plan asked for: a stub
launch command (a shell function that prints its arguments) runs with each block pasted after it, in bash, and
must receive exactly the launcher's arguments; `--rank N` and `--pick safest` choose the plan, the header (after
the last flag) says which and why, and each JSON candidate carries the arguments `--format` prints."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.cli_run import run_pplan

QUERY = ("--model", "llama3-70b", "--gpus", "256", "--global-batch", "512", "--seq-len", "8192")
BASH = shutil.which("bash")
STUB = "launch() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\"; }\n"
"""The launch command the blocks are pasted after: prints the arguments it received as a JSON list."""


def _pasted(block: str) -> list[str]:
    """The arguments the stub receives with `block` pasted after `launch \\`, run by bash (checked with -n first)."""
    assert BASH is not None
    script = STUB + "launch \\\n" + block
    syntax = subprocess.run([BASH, "-n"], input=script, text=True, capture_output=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    done = subprocess.run([BASH], input=script, text=True, capture_output=True, check=False, timeout=60)
    assert done.returncode == 0 and "command not found" not in done.stderr, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout  # one command ran: nothing after a comment ran as a command
    return list(json.loads(lines[0]))


def _doc(capsys: pytest.CaptureFixture[str], *args: str, query: tuple[str, ...] = QUERY) -> Any:
    res = run_pplan(capsys, "recommend", *query, *args, "--format", "json")
    assert res.code == 0, res.err
    return res.json()


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize("launcher", ["megatron", pytest.param("torchtitan", marks=pytest.mark.acceptance)])
def test_recommend_blocks_paste_whole_and_equal_the_json_arguments(
    capsys: pytest.CaptureFixture[str], launcher: str
) -> None:
    doc = _doc(capsys, "--launcher", launcher)
    res = run_pplan(capsys, "recommend", *QUERY, "--format", launcher)
    assert res.code == 0, res.err
    assert _pasted(res.out) == doc["candidates"][0]["launchers"][launcher]["arguments"]
    assert res.out.rstrip("\n").splitlines()[-1].startswith("# pplan recommend: rank 1 of the plans")


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_explain_block_pastes_whole(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys)
    cand = doc["candidates"][1]
    args = cand["explain_command"].split()[2:]  # past "pplan explain"
    res = run_pplan(capsys, "explain", *args, "--format", "megatron")
    assert res.code == 0, res.err
    assert _pasted(res.out) == cand["launchers"]["megatron"]["arguments"]


def test_rank_and_pick_choose_the_plan_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys, query=())  # pplan's default example: #1 is not the safest of the tied
    safest = doc["safest_tied_rank"]
    assert safest is not None and safest > 1, "the query has a safest bet other than #1"
    best = run_pplan(capsys, "recommend", "--format", "megatron").out
    assert f"the safest bet tied with it is #{safest}: --pick safest" in best.splitlines()[-1]
    table = " ".join(run_pplan(capsys, "recommend").out.split())
    assert f"safest bet among them: #{safest} (" in table
    assert "--format megatron|megatron-bridge|torchtitan --pick safest prints its settings." in table
    for args, rank in ((("--pick", "safest"), safest), (("--rank", "3"), 3)):
        res = run_pplan(capsys, "recommend", "--format", "megatron", *args)
        assert res.code == 0, res.err
        head = res.out.rstrip("\n").splitlines()[-1]
        cand = doc["candidates"][rank - 1]
        assert head.startswith(
            f"# pplan recommend: rank {rank} of the plans megatron runs (chosen by {args[0]}"
        )
        assert cand["explain_command"] in head
        assert _pasted(res.out) == cand["launchers"]["megatron"]["arguments"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--rank", "2"), "--rank"),
        (("--format", "megatron", "--rank", "11"), "--rank"),
        (("--format", "megatron", "--rank", "2", "--pick", "safest"), "--rank"),
        (("--format", "megatron", "--pick", "worst"), "--pick"),
        (("--format", "torchtitan", "--json"), "--json"),
    ],
)
def test_bad_choices_are_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], field: str
) -> None:
    res = run_pplan(capsys, "recommend", *QUERY, *args)
    assert res.code == 2 and field in res.err and len(res.err.strip().splitlines()) == 1, res.err


def test_json_alias_prints_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    a = run_pplan(capsys, "recommend", *QUERY, "--top", "2", "--json").json()
    b = run_pplan(capsys, "recommend", *QUERY, "--top", "2", "--format", "json").json()
    assert a == b and a["schema"] == "pplan.recommend/2"
