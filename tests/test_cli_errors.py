"""Bad input: one line naming the field and the fix, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_run import CliResult, run_pplan


def _one_line_error(res: CliResult, *needles: str) -> None:
    assert res.code == 2, (res.code, res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith("pplan: error: ")
    assert "Traceback" not in res.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


BAD_ARGS = [
    (("--model", "no-such-model"), ("model", "llama3-70b", "gpt3-175b")),  # lists the known ones
    (("--hardware", "no-such-gpu"), ("hardware", "h100-sxm-80gb")),
    (("--tp", "3"), ("--tp", "64 attention heads", "[1, 2, 4]")),
    (("--tp", "16", "--gpus", "4096"), ("--tp", "key/value heads")),
    (("--pp", "100", "--gpus", "3200", "--global-batch", "100"), ("--pp", "80 layers")),
    (("--pp", "3", "--gpus", "1536"), ("--pp", "do not split evenly", "--first-stage-layers")),
    (("--global-batch", "1000"), ("--global-batch", "[960, 1024]")),
    (("--gpus", "2000"), ("--gpus", "[1984, 2016]")),
    (("--gpus", "0"), ("--gpus", "from 1 to")),
    (("--gpus", "-8"), ("--gpus", "from 1 to")),
    (("--micro-batch", "0"), ("--micro-batch",)),
    (
        ("--schedule", "interleaved-1f1b", "--vp", "2", "--global-batch", "576"),
        ("--global-batch", "m = 9", "--global-batch 512 (m=8)", "--global-batch 640 (m=10)"),
    ),
    (
        ("--schedule", "dualpipev", "--global-batch", "448"),
        ("dualpipev", "m ≥ 2p", "--global-batch 512 (m=8)"),
    ),
    (("--schedule", "dualpipe", "--global-batch", "576"), ("dualpipe", "even")),
    (("--schedule", "dualpipe", "--pp", "5", "--gpus", "2560"), ("--pp", "even")),
    (
        (
            "--schedule",
            "interleaved-1f1b",
        ),
        ("--vp", "--vp 2"),
    ),
    (("--schedule", "zbv", "--vp", "3"), ("--vp",)),
    (("--schedule", "nonesuch"), ("--schedule", "1f1b", "dualpipev")),
    (("--recompute", "sometimes"), ("--recompute",)),
    (("--zero-stage", "5"), ("--zero-stage",)),
    (("--cp", "3"), ("--cp",)),
    (("--unknown-flag",), ("--unknown-flag",)),
]


BAD_ISSUE_15_ARGS = [
    (("explain", "--precision", "fp9"), ("--precision", "'fp8'")),
    (("explain", "--moment-dtype", "fp16"), ("--moment-dtype", "'bf16'")),
    (("explain", "--ep", "2"), ("--ep", "no routed experts")),
    (("explain", "--model", "mixtral-8x7b", "--gpus", "64", "--tp", "1", "--ep", "3"), ("--ep", "[1, 2, 4]")),
    (("explain", "--model", "mixtral-8x7b", "--gpus", "64", "--tp", "1", "--etp", "3"), ("--etp", "14336")),
    (("explain", "--fp8-param-gather"), ("--fp8-param-gather", "--precision fp8")),
    (("explain", "--precision", "fp8", "--fp8-swiglu-input"), ("--fp8-swiglu-input", "no routed experts")),
    (("explain", "--hardware", "a100-sxm-80gb", "--precision", "fp8"), ("--precision", "no FP8")),
    (("explain", "--precision", "mxfp8"), ("--precision", "Blackwell")),
    (("explain", "--recompute", "selective", "--recompute-modules", "mla_up_proj"), ("--recompute-modules",)),
    (("recommend", "--precision", "fp9"), ("--precision", "bf16, fp8, mxfp8")),
    (("recommend", "--ep", "4"), ("--ep", "no routed experts")),
    (
        ("recommend", "--model", "mixtral-8x7b", "--gpus", "64", "--global-batch", "512", "--ep", "3"),
        ("--ep",),
    ),
]


BAD_AUTO_SCHEDULE_ARGS = [
    (("schedule", "1f1b", "--memory-limit", "4"), ("--memory-limit", "only the auto schedule")),
    (("schedule", "auto", "--vp", "2"), ("--vp", "one stage per rank")),
    (("schedule", "auto", "--pp", "64", "--microbatches", "1024"), ("--microbatches", "16,384")),
    (("schedule", "auto", "--pp", "300"), ("--pp", "256")),
    (("schedule", "auto", "--memory-limit", "0"), ("--memory-limit", "at least 1")),
    (("schedule", "auto", "--microbatches", "0"), ("--microbatches", "at least 1")),
    (("bench", "--schedule", "auto", "--memory-limit", "0"), ("--memory-limit", "at least 1")),
    (("bench", "--schedule", "zb-h1", "--memory-limit", "4"), ("--memory-limit", "only the auto schedule")),
    (("bench", "--schedule", "auto", "--vp", "2"), ("--vp", "one stage per rank")),
]


@pytest.mark.parametrize(("args", "needles"), BAD_AUTO_SCHEDULE_ARGS)
def test_bad_auto_schedule_arguments(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    _one_line_error(run_pplan(capsys, *args), *needles)


@pytest.mark.parametrize(("args", "needles"), BAD_ISSUE_15_ARGS)
def test_bad_precision_and_expert_arguments(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    _one_line_error(run_pplan(capsys, *args), *needles)


@pytest.mark.parametrize(("args", "needles"), BAD_ARGS)
def test_bad_arguments(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    _one_line_error(run_pplan(capsys, "explain", *args), *needles)


def test_schedule_names_are_case_insensitive_and_take_torch_aliases(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("1F1B", "Schedule1F1B", "ScheduleInterleaved1F1B", "ZBVZeroBubble", "DualPipeV", "ZB-H1"):
        extra = ("--vp", "2") if "Interleaved" in name else ()
        res = run_pplan(capsys, "explain", "--json", "--schedule", name, "--global-batch", "1024", *extra)
        assert res.code == 0, (name, res.err)


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


LLAMA_TOML = """
name = "tiny"
num_layers = 4
hidden_size = 256
num_attention_heads = 8
ffn_hidden_size = 1024
mlp = "swiglu"
norm = "rmsnorm"
vocab_size = 1000
tied_embeddings = false
seq_len = 128
"""


def test_malformed_toml_names_file_and_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.toml", LLAMA_TOML + "oops = = 3\n")
    _one_line_error(run_pplan(capsys, "explain", "--model", path), "broken.toml", "line 12")


def test_malformed_json_names_file_and_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, "config.json", '{\n  "model_type": "llama",\n  "hidden_size": ,\n}\n')
    _one_line_error(run_pplan(capsys, "explain", "--model", path), "config.json", "line 3")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda t: t.replace("num_layers = 4\n", ""), "num_layers"),  # missing
        (lambda t: t.replace("num_layers = 4", "num_layers = 0"), "num_layers"),  # zero
        (lambda t: t.replace("hidden_size = 256", "hidden_size = -256"), "hidden_size"),  # negative
    ],
)
def test_bad_model_fields(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, edit: object, needle: str
) -> None:
    path = _write(tmp_path, "m.toml", edit(LLAMA_TOML))  # type: ignore[operator]
    _one_line_error(
        run_pplan(capsys, "explain", "--model", path, "--tp", "1", "--pp", "1", "--gpus", "1"), needle
    )


def test_a_user_model_file_works(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, "m.toml", LLAMA_TOML)
    res = run_pplan(capsys, "explain", "--json", "--model", path, "--tp", "2", "--pp", "2", "--gpus", "8",
                    "--global-batch", "8")  # fmt: skip
    assert res.code == 0, res.err
    assert res.json()["plan"]["dp"] == 2


def test_an_unexpected_exception_is_one_line_and_exit_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pplan.cli.recommend as command

    def broken(*_: object, **__: object) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(command, "search", broken)
    monkeypatch.delenv("PPLAN_DEBUG", raising=False)
    res = run_pplan(capsys, "recommend", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8")
    assert res.code == 3
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.err
    assert lines[0].startswith("pplan: internal error in pplan.cli.recommend:")
    assert "ZeroDivisionError" in lines[0] and "PPLAN_DEBUG=1" in lines[0]
    monkeypatch.setenv("PPLAN_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run_pplan(capsys, "recommend", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8")


def test_an_error_a_library_made_of_an_interrupt_is_the_interrupt(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic-core builds a schema and wraps the KeyboardInterrupt a signal raised inside it as a SchemaError:
    once a signal has come, an error is the interrupt's (exit 130, one line), not an internal error."""
    import signal
    import time

    import pplan.cli
    import pplan.cli.recommend as command

    def interrupted_inside(*_: object, **__: object) -> None:
        pplan.cli._received.append((signal.SIGINT, time.monotonic()))
        raise RuntimeError("SchemaError: Error building `literal` serializer: KeyboardInterrupt")

    monkeypatch.setattr(command, "search", interrupted_inside)
    monkeypatch.setattr(pplan.cli, "_received", [])
    res = run_pplan(capsys, "recommend", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8")
    assert (res.code, res.err.splitlines()) == (130, [pplan.cli.INTERRUPTED])


def test_control_characters_in_an_error_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_pplan(capsys, "explain", "--model", "evil\x1b[2Jname\nsecond")
    assert res.code == 2
    assert "\x1b" not in res.err and res.err.count("\n") == 1
    assert "\\x1b[2J" in res.err and "\\n" in res.err


def test_json_output_is_strict() -> None:
    import math

    from pplan.cli.app import json_text

    assert json_text({"bubble": 0.25}) == '{\n  "bubble": 0.25\n}'
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            json_text({"x": bad})


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--tp", "0"), "--tp"), (("--pp", "-4"), "--pp"), (("--cp", "0"), "--cp"),
        (("--micro-batch", "0"), "--micro-batch"), (("--seq-len", "0"), "--seq-len"), (("--vp", "0"), "--vp"),
        (("--gpus", "1000000000"), "--gpus"), (("--headroom", "nan"), "--headroom"), (("--top", "0"), "--top"),
        (("--zero-stage", "4"), "--zero-stage"), (("--min-microbatches", "0"), "--min-microbatches"),
    ],
)  # fmt: skip
def test_recommend_refuses_zero_negative_and_absurd_values(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], flag: str
) -> None:
    # Zero and negative values were read as "not set"; 10^9 GPUs spun for ever.
    _one_line_error(run_pplan(capsys, "recommend", *args), flag)


def test_the_api_refuses_what_the_cli_refuses() -> None:
    from pplan.errors import ConfigError
    from pplan.search import SearchRequest

    with pytest.raises(ConfigError) as err:
        SearchRequest(gpus=64, global_batch=64, tp=0)
    assert err.value.field == "--tp"


def test_the_internal_error_names_pplan_code_not_a_folder_called_pplan() -> None:
    """A clone is often called `pplan`: a frame of code outside the package (a test, under `…/pplan/tests/`) is not
    where the error happened. `_where` keeps the innermost frame of the package's own folder."""
    import os

    from pplan.cli import _where
    from pplan.plan.rules import check_count

    scope: dict[str, object] = {"check_count": check_count}
    fake = os.path.join(os.sep, "home", "me", "pplan", "tests", "test_x.py")
    exec(compile("def caller():\n    check_count('--tp', 0)\n", fake, "exec"), scope)
    try:
        scope["caller"]()  # type: ignore[operator]
    except Exception as err:
        assert _where(err) == "pplan.plan.rules:check_count"
    else:
        raise AssertionError("check_count accepted 0")


def test_a_failing_frame_in_a_folder_called_pplan_outside_the_package_is_not_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's own test in a clone named `pplan`: the innermost frame is the test's (under
    `…/pplan/tests/`), not pplan's; the error names the pplan function that called it (a path test on `/pplan/`
    named `pplan.tests.test_x:broken`)."""
    import os

    import pplan.cli.recommend as command

    fake = os.path.join(os.sep, "home", "me", "pplan", "tests", "test_x.py")
    scope: dict[str, object] = {}
    exec(
        compile(
            "def broken(*a, **k):\n    raise ZeroDivisionError('float division by zero')\n", fake, "exec"
        ),
        scope,
    )
    monkeypatch.setattr(command, "search", scope["broken"])
    monkeypatch.delenv("PPLAN_DEBUG", raising=False)
    res = run_pplan(capsys, "recommend", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8")
    assert res.code == 3
    assert res.err.startswith("pplan: internal error in pplan.cli.recommend:"), res.err
