"""Helpers for tests that run `python -m pplan` as a child process and signal it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def _handles(pid: int, signum: int) -> bool:
    """Whether process `pid` handles `signum` itself (its SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except FileNotFoundError:
        pass
    return False


def signal_group_once_held(proc: subprocess.Popen[bytes], signum: int, delay: float) -> None:
    """Once pplan has taken SIGTERM (or the process has ended, or 60 s passed), wait `delay` seconds and send
    `signum` to the process group `proc` leads."""
    deadline = time.monotonic() + 60
    while not _handles(proc.pid, signal.SIGTERM) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)
