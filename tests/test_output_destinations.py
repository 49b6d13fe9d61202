"""Where output goes (pplan.cli.app's stream guards, pplan.cli.files): a failed write on stdout or a file is one
line `pplan: cannot write DEST: OS error` and exit code 4 with no partial file; a closed stderr never sends an
error line to stdout; `--force` never writes through a link out of its folder nor truncates a device; a read-only
file or one with other hard links is refused, not replaced. The reproductions of issue 38 are re-run as written
(acceptance tier: each starts pplan in a fresh process).

Expected lines are built from the operating system's own words for the error (`os.strerror`), not copied from
pplan's output.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

import pytest

from pplan.cli import EXIT_OUTPUT, EXIT_READER_GONE, EXIT_USAGE
from pplan.cli.app import GuardedOutput, OutputError
from pplan.cli.files import check_outputs, write_output
from pplan.errors import ConfigError

ENV = {**os.environ, "PPLAN_CACHE_DIR": "off"}
OLD = "the old contents, which must survive\n"
SCHEDULE = ("schedule", "1f1b", "--pp", "8", "--microbatches", "16")
"""A quick command with a table on stdout and an SVG well over a few KiB."""


@dataclass
class Run:
    code: int
    out: bytes
    err: str

    @property
    def lines(self) -> list[str]:
        return self.err.splitlines()


def pplan(
    *args: str, stdout: int | IO[Any] = subprocess.PIPE, preexec: Callable[[], None] | None = None
) -> Run:
    """`python -m pplan ARGS` in a fresh process, as a shell would start it."""
    proc = subprocess.run(
        [sys.executable, "-m", "pplan", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        preexec_fn=preexec,
        env=ENV,
        timeout=300,
    )
    return Run(proc.returncode, proc.stdout or b"", proc.stderr.decode("utf-8", "replace"))


def cannot_write(dest: object, code: int) -> str:
    return f"pplan: cannot write {dest}: {os.strerror(code)}"


def leftovers(folder: Path) -> list[str]:
    """Temporary files a write left behind in `folder`."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".pplan-"))


def file_size_limit(size: int) -> Callable[[], None]:
    """A `preexec_fn` for `ulimit -f`: files the process writes may not grow past `size` bytes."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def close_fd(fd: int) -> Callable[[], None]:
    """A `preexec_fn` for `>&-` (1) or `2>&-` (2)."""
    return lambda: os.close(fd)


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "old.svg"
    path.write_text(OLD)
    return path


# --- stdout's guard, in this process ------------------------------------------------------------------------------


def test_a_failed_write_cuts_a_redirected_file_back(tmp_path: Path) -> None:
    """`> plan.json` on a disk that fills: what the run wrote is cut off, what was there before it stays."""
    path = tmp_path / "plan.json"
    path.write_text("kept\n")
    with open(path, "r+", encoding="utf-8") as f:
        f.seek(0, os.SEEK_END)
        guard = GuardedOutput(f)
        guard.write('{"half": ')
        guard.flush()
        assert path.read_text() == 'kept\n{"half": '
        guard.discard()
        guard.write("dropped")
        guard.flush()
    assert path.read_text() == "kept\n"


def test_an_appended_file_is_never_cut(tmp_path: Path) -> None:
    """`>> log`: others may write to the same file, so nothing is cut."""
    path = tmp_path / "log"
    path.write_text("theirs\n")
    with open(path, "a", encoding="utf-8") as f:
        guard = GuardedOutput(f)
        guard.write("ours\n")
        guard.flush()
        guard.discard()
    assert path.read_text() == "theirs\nours\n"


@contextlib.contextmanager
def failing(stream: TextIO) -> Iterator[TextIO]:
    """`stream`, closed at the end without a word about the text its failed flush still holds (pplan leaves by
    `os._exit`, which never flushes it)."""
    try:
        yield stream
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def test_a_full_device_raises_once_then_drops() -> None:
    with failing(open("/dev/full", "w", encoding="utf-8")) as f:
        guard = GuardedOutput(f)
        guard.write("x" * 100)
        with pytest.raises(OutputError) as caught:
            guard.flush()
        assert caught.value.where == "stdout" and caught.value.err.errno == errno.ENOSPC
        assert str(caught.value) == f"cannot write stdout: {os.strerror(errno.ENOSPC)}"
        guard.write("more")  # dropped, never raised again
        guard.flush()
        assert guard.error is caught.value


def test_a_reader_gone_is_told_apart() -> None:
    read, write = os.pipe()
    os.close(read)
    with failing(open(write, "w", encoding="utf-8")) as f:
        guard = GuardedOutput(f)
        guard.write("line\n")
        with pytest.raises(OutputError) as caught:
            guard.flush()
        assert caught.value.reader_gone
        guard.discard()  # a pipe has nothing to cut: harmless
    assert EXIT_READER_GONE == 128 + 13  # as a shell reports a process SIGPIPE ended


# --- output files, in this process --------------------------------------------------------------------------------


def test_a_read_only_file_is_refused_and_kept(old_file: Path) -> None:
    old_file.chmod(0o444)
    for force in (False, True):
        with pytest.raises(ConfigError, match="read-only") as caught:
            check_outputs({"--svg": old_file}, force=force)
        assert "--svg" in caught.value.one_line()
    assert old_file.read_text() == OLD and stat.S_IMODE(old_file.stat().st_mode) == 0o444


def test_a_file_with_other_hard_links_is_refused_and_kept(old_file: Path) -> None:
    twin = old_file.with_name("twin.svg")
    os.link(old_file, twin)
    for force in (False, True):
        with pytest.raises(ConfigError, match="hard link"):
            write_output(old_file, "new\n", "--svg", force)
    assert old_file.read_text() == OLD and twin.read_text() == OLD
    assert os.path.samefile(old_file, twin) and leftovers(old_file.parent) == []


def test_force_never_follows_a_link_out_of_its_folder(tmp_path: Path) -> None:
    """Like `/dev/stderr` when the shell sends stderr to `build.log`: the link leads to a file in another folder."""
    elsewhere = tmp_path / "logs"
    elsewhere.mkdir()
    log = elsewhere / "build.log"
    log.write_text("line one\n")
    links = tmp_path / "dev"
    links.mkdir()
    (links / "stderr").symlink_to(log)
    with pytest.raises(ConfigError, match="outside its own folder") as caught:
        write_output(links / "stderr", "<svg/>\n", "--svg", force=True)
    assert "--svg" in caught.value.one_line() and "--force" in caught.value.one_line()
    assert log.read_text() == "line one\n" and leftovers(elsewhere) == []
    beside = links / "beside.svg"
    beside.write_text(OLD)
    (links / "link.svg").symlink_to(beside)
    write_output(links / "link.svg", "<svg/>\n", "--svg", force=True)  # within its folder: written
    assert beside.read_text() == "<svg/>\n" and (links / "link.svg").is_symlink()


def test_force_writes_a_device_in_place(tmp_path: Path) -> None:
    """A link to a character device is written into, never replaced by a file; a full one is a failed write."""
    (tmp_path / "null").symlink_to("/dev/null")
    write_output(tmp_path / "null", "<svg/>\n", "--svg", force=True)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and (tmp_path / "null").is_symlink()
    (tmp_path / "full").symlink_to("/dev/full")
    with pytest.raises(OutputError) as caught:
        write_output(tmp_path / "full", "<svg/>\n", "--svg", force=True)
    assert str(caught.value) == f"cannot write {tmp_path / 'full'}: {os.strerror(errno.ENOSPC)}"


def _block_devices() -> Iterator[Path]:
    for path in Path("/dev").iterdir():
        try:
            if stat.S_ISBLK(path.lstat().st_mode):
                yield path
        except OSError:
            continue


def test_a_block_device_is_refused() -> None:
    device = next(_block_devices(), None)
    if device is None:
        pytest.skip("no block device here")
    with pytest.raises(ConfigError, match="block device"):
        check_outputs({"--svg": device}, force=True)


# --- the reproductions of issue 38, each as written ---------------------------------------------------------------


@pytest.mark.acceptance
def test_stdout_on_a_full_device() -> None:
    """`pplan recommend --format json > /dev/full`: was "internal error ... please report it", exit 3."""
    with open("/dev/full", "w") as full:
        run = pplan("recommend", "--format", "json", stdout=full)
    assert (run.code, run.lines) == (EXIT_OUTPUT, [cannot_write("stdout", errno.ENOSPC)])


@pytest.mark.acceptance
def test_stdout_past_the_file_size_limit_leaves_no_partial_json(tmp_path: Path) -> None:
    """`ulimit -f 10; pplan recommend --format json > plan.json`: was exit 3 with 10 KiB of truncated JSON."""
    path = tmp_path / "plan.json"
    with open(path, "w") as f:
        run = pplan("recommend", "--format", "json", stdout=f, preexec=file_size_limit(10 * 1024))
    assert (run.code, run.lines) == (EXIT_OUTPUT, [cannot_write("stdout", errno.EFBIG)])
    assert path.read_bytes() == b""


@pytest.mark.acceptance
def test_stdout_closed() -> None:
    """`pplan recommend --format json >&-`: was a traceback."""
    run = pplan("recommend", "--format", "json", preexec=close_fd(1))
    assert (run.code, run.lines) == (EXIT_OUTPUT, [cannot_write("stdout", errno.EBADF)])


@pytest.mark.acceptance
def test_stderr_closed_keeps_errors_out_of_stdout(tmp_path: Path) -> None:
    """`pplan recommend --model nope --format json 2>&- > out.json`: the error line landed in out.json."""
    path = tmp_path / "out.json"
    with open(path, "w") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "pplan", "recommend", "--model", "nope", "--format", "json"],
            stdout=f,
            preexec_fn=close_fd(2),
            env=ENV,
            timeout=300,
        )
    assert proc.returncode == EXIT_USAGE
    assert path.read_bytes() == b""
    with open(path, "w") as f:  # and a run that works still prints its whole document
        proc = subprocess.run(
            [sys.executable, "-m", "pplan", "profiles", "--json"],
            stdout=f,
            preexec_fn=close_fd(2),
            env=ENV,
            timeout=300,
        )
    assert proc.returncode == 0 and json.loads(path.read_text())


@pytest.mark.acceptance
@pytest.mark.parametrize("device", ["/dev/stdout", "/dev/stderr"])
def test_force_on_a_redirected_standard_stream_replaces_nothing(tmp_path: Path, device: str) -> None:
    """`pplan schedule 1f1b --svg /dev/stderr --force 2>> build.log`: build.log was wiped and replaced."""
    log = tmp_path / "build.log"
    log.write_text("line one\n")
    with open(log, "a") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "pplan", *SCHEDULE, "--svg", device, "--force"],
            stdout=f if device == "/dev/stdout" else subprocess.DEVNULL,
            stderr=f if device == "/dev/stderr" else subprocess.PIPE,
            env=ENV,
            timeout=300,
        )
    assert proc.returncode == EXIT_USAGE
    text = log.read_text()
    assert text.startswith("line one\n") and "<svg" not in text
    line = text.splitlines()[1] if device == "/dev/stderr" else proc.stderr.decode().strip()
    assert line.startswith(f"pplan: error: --svg: {device} ") and "outside its own folder" in line
    assert leftovers(tmp_path) == []


@pytest.mark.acceptance
def test_a_read_only_output_and_a_hard_link_survive(tmp_path: Path, old_file: Path) -> None:
    """The atomic rename replaced a user's read-only file and broke hard links."""
    old_file.chmod(0o444)
    run = pplan(*SCHEDULE, "--svg", str(old_file))
    assert run.code == EXIT_USAGE and len(run.lines) == 1 and "read-only" in run.lines[0]
    assert run.lines[0].startswith("pplan: error: --svg: ")
    linked = tmp_path / "linked.svg"
    linked.write_text(OLD)
    os.link(linked, tmp_path / "other.svg")
    run = pplan(*SCHEDULE, "--svg", str(linked), "--force")
    assert run.code == EXIT_USAGE and len(run.lines) == 1 and "hard link" in run.lines[0]
    assert old_file.read_text() == OLD and (tmp_path / "other.svg").read_text() == OLD
    assert os.path.samefile(linked, tmp_path / "other.svg") and leftovers(tmp_path) == []


@pytest.mark.acceptance
def test_an_output_file_past_the_file_size_limit_keeps_the_old_one(old_file: Path) -> None:
    run = pplan(*SCHEDULE, "--svg", str(old_file), preexec=file_size_limit(4096))
    assert (run.code, run.lines) == (EXIT_OUTPUT, [cannot_write(old_file, errno.EFBIG)])
    assert old_file.read_text() == OLD and leftovers(old_file.parent) == []


@pytest.mark.acceptance
def test_a_reader_gone_is_quiet() -> None:
    """`pplan recommend --format json | head -1` (more than a pipe holds): no line, exit 141 (was exit 1, the
    documented "no answer")."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pplan", "recommend", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert (proc.wait(timeout=300), err) == (EXIT_READER_GONE, b"")
