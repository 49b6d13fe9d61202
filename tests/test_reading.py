"""The one bounded reader (pplan.reading) and the inputs that go through it: a pipe reads as a file does, a size
`stat` does not report is still bounded, and each input refuses in one line."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pplan.errors import ConfigError, ProfileError
from pplan.reading import TooLarge, read_bounded


def test_reads_at_most_the_cap_from_a_stream_stat_calls_empty() -> None:
    # /dev/zero: stat says 0 bytes, the stream never ends; the reader stops one byte past the cap
    with pytest.raises(TooLarge):
        read_bounded(Path("/dev/zero"), 4096)


def test_a_file_at_the_cap_is_read_whole_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_bounded(path, 100) == b"x" * 100
    with pytest.raises(TooLarge):
        read_bounded(path, 99)


def test_a_pipe_reads_as_a_file_does(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    text = b"iteration 1 | elapsed time per iteration (ms): 1000.0\n" * 3

    def feed() -> None:
        with fifo.open("wb") as out:
            out.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    assert read_bounded(fifo, 1 << 20) == text
    writer.join()


def test_a_log_over_its_cap_is_one_line_without_trusting_stat(monkeypatch: pytest.MonkeyPatch) -> None:
    from pplan.logs import files

    monkeypatch.setattr(files, "MAX_LOG_BYTES", 1 << 20)
    with pytest.raises(ConfigError, match="over 1 MiB"):
        files.read_text("/dev/zero", "--from-log")


def test_a_log_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    from pplan.logs.files import read_text

    with pytest.raises(ConfigError, match="is a folder"):
        read_text(str(tmp_path), "--from-log")


def test_a_profile_from_an_endless_stream_is_refused(tmp_path: Path) -> None:
    from pplan.profiles.catalog import load_hardware

    link = tmp_path / "endless.toml"
    link.symlink_to("/dev/zero")
    with pytest.raises(ProfileError):
        load_hardware(str(link))
