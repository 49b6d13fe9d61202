"""Fuzz where output goes, with signals at random delays (pplan.cli, pplan.cli.app, pplan.cli.files): a random
command writes to a random destination (a closed stdout or stderr, /dev/full, a file past `ulimit -f`, a
read-only file, a file with a hard link, links to devices, `/dev/stdout` redirected to a file), sometimes with
SIGINT or SIGTERM sent at a random moment. Each case asserts the documented exit code, at most one stderr line
(the documented one), and no partial file: every output file is as it was or whole, stdout cut back, no
temporary file left.

The expected outcome of each destination is written down here from the rules (pplan.cli's exit codes and
`os.strerror`), not taken from a run. The fast tier runs a small seeded sample; the acceptance tier many more.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from pplan.cli import EXIT_OUTPUT, EXIT_USAGE, INTERRUPTED
from tests.processes import signal_group_once_held

OLD = "the old contents, which must survive\n"
LIMIT = 4096
"""`ulimit -f` for the cases that hit it, in bytes: well below every output here (14 KB and up)."""

JSON_COMMANDS = [
    ["profiles", "--json"],
    ["schedule", "1f1b", "--pp", "8", "--microbatches", "16", "--json"],
    ["explain", "--tp", "8", "--pp", "4", "--json"],
]
SVG_COMMANDS = [
    ["schedule", "1f1b", "--pp", "8", "--microbatches", "16", "--svg"],
    ["explain", "--tp", "8", "--pp", "4", "--svg"],
]


@dataclass
class Case:
    """One run: its arguments, how its descriptors are set up, and what must come of it."""

    args: list[str]
    code: int
    line: Callable[[str], bool] | None  # the one stderr line's test, or None: no line
    stdout_file: bool = True  # stdout to folder/stdout (else a pipe read here)
    close: int | None = None  # descriptor closed in the child (1: `>&-`, 2: `2>&-`)
    stdout_device: str | None = None
    limit: int | None = None
    svg: Path | None = None  # an output file, holding OLD before the run
    kept: list[Path] = field(
        default_factory=list
    )  # files that must hold OLD after the run, whatever happened
    stdout_whole_json: bool = False  # on success: stdout holds one whole JSON document


def _is(expected: str) -> Callable[[str], bool]:
    return lambda line: line == expected


def _refusal(*needles: str) -> Callable[[str], bool]:
    return lambda line: line.startswith("pplan: error: --svg: ") and all(n in line for n in needles)


def _case(rng: random.Random, folder: Path) -> Case:  # one branch per destination, read as a table
    kind = rng.choice(
        ["stdout closed", "stdout full", "stdout limit", "stderr closed", "read-only", "hard link",
         "link to full", "link to null", "dev stdout", "svg limit"]
    )  # fmt: skip
    stdout_cmd, svg_cmd = rng.choice(JSON_COMMANDS), rng.choice(SVG_COMMANDS)
    svg = folder / "out.svg"
    svg.write_text(OLD)
    if kind == "stdout closed":
        return Case(
            stdout_cmd, EXIT_OUTPUT, _is(f"pplan: cannot write stdout: {os.strerror(errno.EBADF)}"), close=1
        )
    if kind == "stdout full":
        line = _is(f"pplan: cannot write stdout: {os.strerror(errno.ENOSPC)}")
        return Case(stdout_cmd, EXIT_OUTPUT, line, stdout_device="/dev/full")
    if kind == "stdout limit":
        return Case(stdout_cmd, EXIT_OUTPUT, _is(f"pplan: cannot write stdout: {os.strerror(errno.EFBIG)}"),
                    limit=LIMIT)  # fmt: skip
    if kind == "stderr closed":  # nothing can be said; the document must be whole and alone on stdout
        return Case(stdout_cmd, 0, None, close=2, stdout_whole_json=True)
    if kind == "read-only":
        svg.chmod(0o444)
        return Case([*svg_cmd, str(svg)], EXIT_USAGE, _refusal("read-only"), stdout_file=False, kept=[svg])
    if kind == "hard link":
        os.link(svg, folder / "twin.svg")
        args = [*svg_cmd, str(svg), *(["--force"] if rng.random() < 0.5 else [])]
        return Case(
            args, EXIT_USAGE, _refusal("hard link"), stdout_file=False, kept=[svg, folder / "twin.svg"]
        )
    if kind in ("link to full", "link to null"):
        link = folder / "device.svg"
        link.symlink_to("/dev/full" if kind == "link to full" else "/dev/null")
        ok = kind == "link to null"
        said = None if ok else _is(f"pplan: cannot write {link}: {os.strerror(errno.ENOSPC)}")
        return Case(
            [*svg_cmd, str(link), "--force"], 0 if ok else EXIT_OUTPUT, said, stdout_file=False, kept=[svg]
        )
    if kind == "dev stdout":  # stdout redirected to folder/stdout: outside /dev
        return Case([*svg_cmd, "/dev/stdout", "--force"], EXIT_USAGE, _refusal("/dev/stdout", "outside"),
                    kept=[svg])  # fmt: skip
    line = _is(f"pplan: cannot write {svg}: {os.strerror(errno.EFBIG)}")  # "svg limit"
    return Case([*svg_cmd, str(svg)], EXIT_OUTPUT, line, stdout_file=False, limit=LIMIT, svg=svg, kept=[svg])


def _launch(case: Case, folder: Path, signum: int | None, delay: float) -> tuple[int, str]:
    """Start the case as a shell would, signal its group after `delay` (once pplan holds the signal); its exit
    code and stderr."""
    limit, close = case.limit, case.close

    def prepare() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        if close is not None:
            os.close(close)

    with contextlib.ExitStack() as stack:
        if case.stdout_device is not None:
            out: IO[str] | int = stack.enter_context(open(case.stdout_device, "w"))
        elif case.stdout_file:
            out = stack.enter_context(open(folder / "stdout", "w"))
        else:
            out = subprocess.DEVNULL
        proc = subprocess.Popen(
            [sys.executable, "-m", "pplan", *case.args],
            stdout=out,
            stderr=subprocess.PIPE,
            preexec_fn=prepare,
            env={**os.environ, "PPLAN_CACHE_DIR": "off"},
            start_new_session=True,
        )
    if signum is not None:
        signal_group_once_held(proc, signum, delay)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err.decode("utf-8", "replace")


def check(seed: int, folder: Path) -> None:
    rng = random.Random(seed)
    case = _case(rng, folder)
    signum = rng.choice([signal.SIGINT, signal.SIGTERM]) if rng.random() < 0.4 else None
    code, err = _launch(case, folder, signum, rng.uniform(0, 0.8))
    lines = err.splitlines()
    described = (seed, case.args, code, err)
    stdout = folder / "stdout"
    if signum is not None and code == 128 + signum:  # interrupted: one line unless stderr is closed
        assert lines == ([] if case.close == 2 else [INTERRUPTED]), described
        assert not stdout.exists() or stdout.read_bytes() == b"", described
    else:
        assert code == case.code, described
        assert len(lines) == (0 if case.line is None else 1), described
        assert case.line is None or case.line(lines[0]), described
        if case.stdout_whole_json and code == 0:
            json.loads(stdout.read_text())
        elif case.stdout_file and stdout.exists() and code != 0:
            assert stdout.read_bytes() == b"", described  # cut back, or never written
    for path in case.kept:
        assert path.read_text() == OLD, described
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == [], described


@pytest.mark.parametrize("seed", [3, 11])
def test_a_seeded_sample(tmp_path: Path, seed: int) -> None:
    check(seed, tmp_path)


@pytest.mark.acceptance
@pytest.mark.parametrize("seed", range(100, 160))
def test_destinations_and_signals(tmp_path: Path, seed: int) -> None:
    check(seed, tmp_path)
