"""The prefetch child (pplan.search.prefetch) is a helper, never a point of failure: a search whose child cannot
start (no process or file descriptor left) or dies gives the answer of a search without one; the child stops when
asked (leaving no temporary file in the structure cache) and when its parent dies."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import pplan.search.engine as engine
from pplan.cli.cache import install
from pplan.profiles.catalog import load_hardware, load_model
from pplan.recommend import recommendations
from pplan.schedules import periodic
from pplan.schedules.periodic import STORES, StructureKey, structure_key
from pplan.search import SearchRequest
from pplan.search.prefetch import STOP_WAIT_S, Prefetch, available, start

pytestmark = pytest.mark.skipif(not available(), reason="needs fork and a second CPU")

KEYS = [structure_key("zbv", 8, 2, 64), structure_key("1f1b", 4, 1, 32)]


def _keys() -> list[StructureKey]:
    assert all(k is not None for k in KEYS)
    return [k for k in KEYS if k is not None]


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _answer(req: SearchRequest) -> list[Any]:
    model, hw = load_model("llama3-8b"), load_hardware("h100-sxm-80gb")
    periodic.clear_caches()
    ranking = recommendations(model, hw, req)
    return [(r.request, r.report.performance) for r in ranking.candidates]


def test_no_process_left_means_no_child_and_nothing_leaked(monkeypatch: pytest.MonkeyPatch) -> None:
    """fork failing as under `prlimit --nproc=1` (EAGAIN), or a pipe as under `--nofile` (EMFILE): no child, no
    descriptor left open."""
    before = _open_fds()

    def no_process() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_process)
    assert start(lambda: iter(_keys())) is None
    monkeypatch.undo()

    def no_descriptor() -> tuple[int, int]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_descriptor)
    assert start(lambda: iter(_keys())) is None
    assert _open_fds() == before


def test_a_search_whose_child_cannot_start_gives_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    req = SearchRequest(gpus=64, global_batch=256, launcher=None)
    without = _answer(replace(req, prefetch=False))
    started: list[object] = []

    def counted(keys: Any) -> Any:
        started.append(keys)
        return start(keys)

    monkeypatch.setattr(engine, "PREFETCH_FROM_HEADS", 1)  # a child even for this small query
    monkeypatch.setattr(engine, "start_child", counted)

    def no_process() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_process)
    assert _answer(req) == without
    assert started, "the search did try to start a child"


def test_a_child_that_dies_leaves_the_search_to_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child dies after claiming a key: asking for it neither hangs nor fails; the caller builds it."""
    first, second = _keys()

    def keys() -> Iterator[StructureKey]:
        yield first
        os.kill(os.getpid(), signal.SIGKILL)  # in the child: dies before the second key
        yield second

    prefetch = Prefetch(keys)
    try:
        deadline = time.monotonic() + 60
        while not prefetch.claimed(first) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert prefetch.provide(first) is not None
        assert prefetch.provide(second) is None  # never sent: built here
    finally:
        prefetch.close()
        periodic.clear_caches()


def test_a_child_stopped_mid_write_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child is writing a structure to the on-disk cache when the search ends: it stops at once (well before
    it would be killed) and its temporary file is gone."""
    periodic.clear_caches()
    store = install({"PPLAN_CACHE_DIR": str(tmp_path)})
    assert store is not None and store.usable
    gate = os.pipe()
    real_dump = json.dump

    def slow_dump(document: Any, f: Any, **kwargs: Any) -> None:
        f.write("{")
        f.flush()
        os.write(gate[1], b"x")  # the temporary file exists now
        time.sleep(30)
        real_dump(document, f, **kwargs)

    monkeypatch.setattr(json, "dump", slow_dump)  # as pplan.cli.cache calls it
    try:
        prefetch = Prefetch(lambda: iter(_keys()))
        os.read(gate[0], 1)
        assert list(store.directory.glob(".*.tmp"))  # mid-write
        began = time.monotonic()
        prefetch.close()
        assert time.monotonic() - began < STOP_WAIT_S
        assert list(store.directory.glob(".*.tmp")) == []
    finally:
        STORES.clear()
        periodic.clear_caches()
        os.close(gate[0])
        os.close(gate[1])


ORPHAN = """
import os, sys, time
from pplan.search.prefetch import Prefetch
gate = os.pipe()
def keys():
    os.read(gate[0], 1)  # blocks: the child waits for ever
    yield from ()
p = Prefetch(keys)
print(p._pid, flush=True)
time.sleep(0.2)
os._exit(0)  # the parent dies without stopping its child
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_child_dies_with_its_parent() -> None:
    out = subprocess.run(
        [sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60, check=True
    )
    child = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _gone(child)


@pytest.mark.acceptance
def test_recommend_under_a_descriptor_limit_answers_as_without_one() -> None:
    """The reproduction: `prlimit --nofile=6 pplan recommend --include-unrunnable --format json` (a query big
    enough for the child) exits 0 with the document a run without the limit prints."""
    argv = [sys.executable, "-m", "pplan", "recommend", "--include-unrunnable", "--format", "json"]
    env = {**os.environ, "PPLAN_CACHE_DIR": "off"}

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (6, 6))

    free = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    tight = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, preexec_fn=limited)
    assert free.returncode == 0, free.stderr
    assert (tight.returncode, tight.stderr) == (0, "")
    assert json.loads(tight.stdout) == json.loads(free.stdout)
