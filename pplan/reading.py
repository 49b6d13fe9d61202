"""Reading a file a user names, bounded: the one reader every input goes through (profiles, reports, logs).

`read_bounded` reads at most the cap plus one byte from the stream itself and never trusts the size `stat`
reports (0 for `/dev/zero`, a pipe or a process substitution `<(...)`, and a file may grow while it is read), so an
endless or huge input costs at most the cap in memory before it is refused. Each caller turns `TooLarge` and
`OSError` into its own one-line error naming the flag and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

CHUNK_BYTES = 1 << 20


class TooLarge(Exception):
    """The input holds more than the cap."""

    def __init__(self, cap_bytes: int) -> None:
        self.cap_bytes = cap_bytes
        super().__init__(f"more than {cap_bytes:,} bytes")


def read_bounded(path: Path, cap_bytes: int) -> bytes:
    """At most `cap_bytes` of `path`'s bytes, read from the stream; `TooLarge` when there are more (read no
    further); `OSError` as the system raises it (a folder: `IsADirectoryError`)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    pieces: list[bytes] = []
    got = 0
    try:
        while got <= cap_bytes:
            piece = os.read(fd, min(CHUNK_BYTES, cap_bytes + 1 - got))
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
    finally:
        os.close(fd)
    if got > cap_bytes:
        raise TooLarge(cap_bytes)
    return b"".join(pieces)
