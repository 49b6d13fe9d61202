"""A bounded fuzz of the command line (issue 10): random command lines from `tests.cli_grammar`, run in-process.
Whatever the input: exit code 0 or 2, exactly one "pplan: error: " line on 2, strict JSON on 0, and a detectably
invalid value refused. `benchmarks/fuzz_inputs.py` runs the same grammar for minutes, as subprocesses, with the
time (10 s a command), memory and hang checks."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli_grammar import draw, is_json
from tests.cli_run import run_pplan


def _refuse_constant(name: str) -> float:
    raise ValueError(f"non-standard JSON constant {name}")


@pytest.mark.acceptance  # thirty command lines, some of them whole searches: about a second
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_any_command_line_is_answered_or_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        args, invalid = draw(random.Random(seed), Path(tmp))
        res = run_pplan(capsys, *args)
    assert res.code in (0, 1, 2), (args, res.code, res.err[-500:])  # 1: the documented "no answer"
    assert "Traceback" not in res.err
    if res.code == 2:
        lines = res.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pplan: error: "), (args, res.err)
    else:
        assert not invalid, f"accepted a detectably invalid value: {args}"
        if is_json(args):
            json.loads(res.out, parse_constant=_refuse_constant)
