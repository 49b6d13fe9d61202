"""The periodic structures a search is about to need (pplan.schedules.periodic: a schedule's split into prefix,
period and suffix, the costliest thing a search builds), built ahead on the machine's second core.

A forked child walks the configurations in the order the search will (best cheap bound first), keeps the cuts
that may fit (the configuration, or its ZeRO-3 form, passes the memory lower bound) and, for each structure such a
cut's schedule needs and no store keeps (`pplan.schedules.periodic.STORES`: the search reads those itself),
announces it ("claim"), builds it and sends it back pickled. The search asks for a
structure through `pplan.schedules.periodic.PROVIDERS`: one already received is used; one the child has claimed
is waited for; any other is built in the search's own process as before, and the child is told so ("built
here", on a second pipe) and skips it instead of building it again. The structures are deterministic, so the
answer is the same with or without the child; only the wall time changes. Linux only (fork), and only with a
second CPU.

The child is a helper, never a point of failure: when it cannot start (no process or file descriptor left:
`ulimit -u`, `prlimit --nofile`) `start` returns None and the search builds everything itself; when it dies, what
it had not sent is built in the search's process. It is stopped with its parent: asked to stop (SIGTERM) when the
search ends, killed if it does not within `STOP_WAIT_S`, and sent SIGTERM by the kernel if the parent dies first
(Linux's parent-death signal). On SIGINT or SIGTERM it unwinds, so a structure it was writing to the on-disk cache
(pplan.cli.cache) leaves no temporary file, and exits without a word: the parent reports the interrupt.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType

from pplan.schedules.periodic.structure import STORES, Structure, StructureKey, structure_cached

_HEADER = struct.Struct("<I")
_PIPE_BYTES = 1 << 20
"""Pipe capacity asked for (Linux F_SETPIPE_SZ): a few structures wait in it while the search is busy."""
STOP_WAIT_S = 1.0
"""How long `Prefetch.close` waits for the child to stop on SIGTERM before it kills it."""
_STOPS = frozenset((signal.SIGINT, signal.SIGTERM))
_PR_SET_PDEATHSIG = 1


def available() -> bool:
    """Whether a child can run beside the search: fork exists (Linux) and a second CPU is there."""
    return sys.platform == "linux" and hasattr(os, "fork") and len(os.sched_getaffinity(0)) >= 2


class Prefetch:
    """The child and what it has sent; a provider for pplan.schedules.periodic (`provide`)."""

    def __init__(self, keys: Callable[[], Iterator[StructureKey]]) -> None:
        """Fork the child, which builds the structures `keys()` names (evaluated in the child only); an `OSError`
        (no pipe or process to be had) leaves nothing behind."""
        fds: list[int] = []
        try:
            read, write = os.pipe()
            fds += (read, write)
            with contextlib.suppress(OSError):
                fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            told, tell = os.pipe()  # the search → the child: keys built here
            fds += (told, tell)
            self._pid = _fork(keys, read, write, told, tell)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        os.close(write)
        os.close(told)
        os.set_blocking(read, False)
        os.set_blocking(tell, False)
        self._tell = tell
        self._fd = read
        self._buffer = bytearray()
        self._claimed: set[StructureKey] = set()
        self._done: dict[StructureKey, Structure | None] = {}
        self._open = True
        self._running = True

    def provide(self, key: StructureKey) -> tuple[Structure | None] | None:
        """The structure of `key` if the child sent it or is building it (waiting for it then), else None."""
        self._drain(block=False)
        while key in self._claimed and key not in self._done and self._open:
            self._drain(block=True)
        if key in self._done:
            return (self._done.pop(key),)
        if self._open:  # built here: the child need not (a full pipe only loses the hint)
            data = pickle.dumps(key, protocol=pickle.HIGHEST_PROTOCOL)
            with contextlib.suppress(BlockingIOError, BrokenPipeError):
                os.write(self._tell, _HEADER.pack(len(data)) + data)  # below PIPE_BUF: written whole or not
        return None

    def claimed(self, key: StructureKey) -> bool:
        """Whether the child has announced `key` (or sent it) so far; reads what it has written, without
        waiting. Unlike `provide`, asking does not tell the child the search builds it."""
        self._drain(block=False)
        return key in self._claimed or key in self._done

    def poll(self) -> None:
        """File what the child has sent so far, without waiting (so its pipe does not fill)."""
        self._drain(block=False)

    def close(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after `STOP_WAIT_S`) and release the pipes."""
        if not self._running:
            return
        self._running = False
        self._open = False
        os.close(self._fd)  # a child blocked writing to the search is woken (broken pipe) and stops
        os.close(self._tell)
        _stop(self._pid)

    def _drain(self, block: bool) -> None:
        """Read what the child has written (at least one message when `block`), and file each message."""
        if not self._open:  # the child is gone (what it sent is filed) or stopped
            return
        os.set_blocking(self._fd, block)
        try:
            while self._open:
                try:
                    chunk = os.read(self._fd, 1 << 20)
                except BlockingIOError:
                    break
                if not chunk:  # the child is gone
                    self._open = False
                    break
                self._buffer += chunk
                if self._parse() and block:
                    break
        finally:
            if self._open:
                os.set_blocking(self._fd, False)

    def _parse(self) -> bool:
        """File every complete message in the buffer; whether there was one."""
        got = False
        while len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            if len(self._buffer) < _HEADER.size + size:
                break
            kind, key, structure = pickle.loads(self._buffer[_HEADER.size : _HEADER.size + size])
            del self._buffer[: _HEADER.size + size]
            if kind == "claim":
                self._claimed.add(key)
            else:
                self._done[key] = structure
            got = True
        return got


def start(keys: Callable[[], Iterator[StructureKey]]) -> Prefetch | None:
    """A child building the structures `keys()` names, or None when it cannot start (no process or file descriptor
    left): the search then builds them itself, with the same answer."""
    try:
        return Prefetch(keys)
    except OSError:
        return None


def _fork(keys: Callable[[], Iterator[StructureKey]], read: int, write: int, told: int, tell: int) -> int:
    """Fork the child, with SIGINT and SIGTERM held until it has its own handlers (the search's must never run in
    it: they would unwind into the search's own code); the child's pid."""
    parent = os.getpid()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        pid = os.fork()
        if pid == 0:  # the child: build, send, never return
            _child_main(keys, parent, (write, told), (read, tell))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return pid


class _Stopped(BaseException):
    """Raised in the child by SIGINT or SIGTERM (once): it unwinds and exits."""


def _stopped(signum: int, frame: FrameType | None) -> None:
    for number in _STOPS:
        signal.signal(
            number, _ignore
        )  # not SIG_IGN: a second signal already caught would print a "race condition"
    raise _Stopped


def _ignore(signum: int, frame: FrameType | None) -> None:
    """A handler that does nothing: the signals after the one that stops the child."""


def _child_main(
    keys: Callable[[], Iterator[StructureKey]], parent: int, mine: tuple[int, int], theirs: tuple[int, int]
) -> None:
    """The child's whole life: its own signal handlers, the parent-death signal, the work, then `os._exit`, whatever
    happens (a `_Stopped` can be raised at most once, so neither `except` lets anything out)."""
    code = 1
    try:
        try:
            for number in _STOPS:
                signal.signal(number, _stopped)
            _die_with(parent)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
            for fd in theirs:
                os.close(fd)
            write, told = mine
            os.set_blocking(told, False)
            _child(keys, write, told)
            code = 0
        except BaseException:
            code = 1
    except BaseException:
        code = 1
    os._exit(code)


def _die_with(parent: int) -> None:
    """Have the kernel send this process SIGTERM when its parent dies (Linux); leave now if it already has."""
    import ctypes  # the child only: the search never pays for it

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        raise _Stopped


def _stop(pid: int) -> None:
    """Ask the child to stop, wait up to `STOP_WAIT_S`, then kill it; reap it either way."""
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
            time.sleep(0.0005)
    except (ProcessLookupError, ChildProcessError):  # already gone, or reaped by someone else
        return


def _built_there(fd: int, buffer: bytearray) -> Iterator[StructureKey]:
    """The keys the search has said it built itself since the last call (`fd` non-blocking)."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        buffer += chunk
    while len(buffer) >= _HEADER.size:
        (size,) = _HEADER.unpack_from(buffer)
        if len(buffer) < _HEADER.size + size:
            break
        yield pickle.loads(buffer[_HEADER.size : _HEADER.size + size])
        del buffer[: _HEADER.size + size]


def _child(keys: Callable[[], Iterator[StructureKey]], fd: int, told: int) -> None:
    def send(message: tuple[str, StructureKey, Structure | None]) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        os.write(fd, _HEADER.pack(len(data)))  # both writes block until the search reads
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    sent: set[StructureKey] = set()  # and those the search built
    heard = bytearray()
    for key in keys():
        sent.update(_built_there(told, heard))
        if key in sent or any(store.has(key) for store in STORES):  # kept: the search reads it itself
            continue
        sent.add(key)
        send(("claim", key, None))
        send(("done", key, structure_cached(*key)))
