"""The README's and docs' `console` blocks are true: each `$ pplan ...` command, run now, prints what the block
shows below it: exactly, or, where the block cuts the output at "..." lines, every line shown in order (trailing
spaces aside)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.cli_run import assert_shown_in_order, run_pplan

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```console\n\$ (pplan [^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def console_blocks(text: str) -> list[tuple[str, str]]:
    """(command, shown output) of every ```console block that starts with `$ pplan`."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def test_the_block_reader_finds_commands_and_their_output() -> None:
    text = "x\n```console\n$ pplan a --b\nline 1\nline 2\n```\n```\nplain\n```\n"
    assert console_blocks(text) == [("pplan a --b", "line 1\nline 2\n")]


EXAMPLES = [block for path in (README, *DOCS) for block in console_blocks(path.read_text(encoding="utf-8"))]
README_EXAMPLES = console_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_three_examples_one_per_main_job() -> None:
    assert [shlex.split(c)[1] for c, _ in README_EXAMPLES] == ["recommend", "explain", "size"]


def test_the_readme_has_one_example_per_launcher() -> None:
    formats = {
        shlex.split(cmd)[shlex.split(cmd).index("--format") + 1] for cmd, _ in EXAMPLES if "--format" in cmd
    }
    assert {"megatron", "torchtitan"} <= formats


@pytest.mark.parametrize(("command", "shown"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_readme_output_is_what_the_command_prints(
    command: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_pplan(capsys, *shlex.split(command)[1:])
    assert res.code == 0, res.err
    if "..." not in shown.splitlines():
        assert res.out.rstrip("\n") == shown.rstrip("\n")  # trailing blank lines aside
        return
    assert_shown_in_order(shown, res.out)
