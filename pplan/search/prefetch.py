"""The periodic structures a search is about to need (pplan.schedules.periodic: a schedule's split into prefix,
period and suffix, the costliest thing a search builds), built ahead on the machine's second core.

A forked child walks the configurations in the order the search will (best cheap bound first), keeps the cuts
that may fit (the configuration, or its ZeRO-3 form, passes the memory lower bound) and, for each structure such a
cut's schedule needs and no store keeps (`pplan.schedules.periodic.STORES`: the search reads those itself),
announces it ("claim"), builds it and sends it back pickled. The search asks for a
structure through `pplan.schedules.periodic.PROVIDERS`: one already received is used; one the child has claimed
is waited for; any other is built in the search's own process as before, and the child is told so ("built
here", on a second pipe) and skips it instead of building it again. The structures are deterministic, so the
answer is the same with or without the child; only the wall time changes (the child is killed when the search
ends). Linux only (fork), and only with a second CPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable, Iterator

from pplan.schedules.periodic.structure import STORES, Structure, StructureKey, structure_cached

_HEADER = struct.Struct("<I")
_PIPE_BYTES = 1 << 20
"""Pipe capacity asked for (Linux F_SETPIPE_SZ): a few structures wait in it while the search is busy."""


def available() -> bool:
    """Whether a child can run beside the search: fork exists (Linux) and a second CPU is there."""
    return sys.platform == "linux" and hasattr(os, "fork") and len(os.sched_getaffinity(0)) >= 2


class Prefetch:
    """The child and what it has sent; a provider for pplan.schedules.periodic (`provide`)."""

    def __init__(self, keys: Callable[[], Iterator[StructureKey]]) -> None:
        """Fork the child, which builds the structures `keys()` names (evaluated in the child only)."""
        read, write = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        told, tell = os.pipe()  # the search → the child: keys built here
        self._pid = os.fork()
        if self._pid == 0:  # the child: build, send, never return
            os.close(read)
            os.close(tell)
            os.set_blocking(told, False)
            code = 0
            try:
                _child(keys, write, told)
            except BaseException:
                code = 1
            os._exit(code)
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
        """Stop the child and release the pipe."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        os.waitpid(self._pid, 0)
        os.close(self._fd)
        os.close(self._tell)
        self._open = False

    def _drain(self, block: bool) -> None:
        """Read what the child has written (at least one message when `block`), and file each message."""
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
