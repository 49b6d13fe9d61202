"""The on-disk structure cache (pplan.cli.cache): what it reads back is what building gives, a command's answer is
the same with and without it, and a bad file, a read-only directory or another pplan's files are never used."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pplan.cli.cache import PREFIX, DiskStore, cache_root, code_version, install
from pplan.schedules import periodic
from pplan.schedules.periodic import STORES, StructureKey, structure_key
from pplan.schedules.periodic.structure import STRUCTURES, _structure, structure_cached
from pplan.schedules.timeline import Durations
from pplan.search.prefetch import Prefetch
from pplan.search.prefetch import available as prefetch_available

CASES = [("zbv", 8, 2, 64), ("1f1b", 4, 1, 32), ("dualpipe", 8, None, 128), ("interleaved-1f1b", 4, 2, 64)]


def _same(a: object, b: object) -> bool:
    """Equal content (a structure's `Rules` defines no equality: compared as pickled bytes, sharing included)."""
    return pickle.dumps(a, protocol=pickle.HIGHEST_PROTOCOL) == pickle.dumps(
        b, protocol=pickle.HIGHEST_PROTOCOL
    )


def _keys() -> list[StructureKey]:
    keys = [structure_key(*case) for case in CASES]
    assert all(k is not None for k in keys)
    return [k for k in keys if k is not None]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DiskStore]:
    """A store on an empty directory, installed as the one `structure_cached` asks; caches cleared around it."""
    periodic.clear_caches()
    kept = install({"PPLAN_CACHE_DIR": str(tmp_path)})
    assert kept is not None
    try:
        yield kept
    finally:
        STORES.clear()
        periodic.clear_caches()


def test_where_the_cache_lives() -> None:
    home = Path.home()
    assert cache_root({}) == home / ".cache" / "pplan"
    assert cache_root({"XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/pplan")
    assert cache_root({"PPLAN_CACHE_DIR": "/y", "XDG_CACHE_HOME": "/x"}) == Path("/y")
    for off in ("off", "", "OFF", "0", "none"):
        assert cache_root({"PPLAN_CACHE_DIR": off}) is None
        assert install({"PPLAN_CACHE_DIR": off}) is None and not STORES


def test_a_kept_structure_plays_as_one_built_here(store: DiskStore) -> None:
    """Each structure built is written; read back in a cold process state it equals the one built and plays a
    step (unequal passes, a hop) exactly as it does."""
    durations = Durations(f=1.0, i=1.3, w=0.7)
    built = {}
    for (name, p, v, m), key in zip(CASES, _keys(), strict=True):
        built[key] = periodic.summarise(name, p, v, m, durations, 0.05)
        assert store.has(key)
    periodic.clear_caches()
    for (name, p, v, m), key in zip(CASES, _keys(), strict=True):
        got = store.get(key)
        assert got is not None and _same(got[0], _structure(*key))
        assert periodic.summarise(name, p, v, m, durations, 0.05) == built[key]
        assert _same(STRUCTURES[key], got[0])


def test_structure_cached_reads_before_it_builds(store: DiskStore, monkeypatch: pytest.MonkeyPatch) -> None:
    key = _keys()[0]
    structure_cached(*key)
    periodic.clear_caches()

    def refuse(*_: object) -> None:
        raise AssertionError("built although kept")

    monkeypatch.setattr("pplan.schedules.periodic.structure._structure", refuse)
    got = store.get(key)
    assert got is not None and _same(structure_cached(*key), got[0])


def test_a_bad_or_foreign_file_is_built_again_and_rewritten(store: DiskStore) -> None:
    first, second = _keys()[:2]
    path = store.path(first)
    assert path is not None
    store.directory.mkdir(parents=True)
    path.write_bytes(b"not a pickle")
    assert store.has(first) and store.get(first) is None
    with path.open("wb") as f:  # another key's structure under this key's name
        pickle.dump((second, _structure(*second)), f)
    assert store.get(first) is None
    with path.open("wb") as f:
        pickle.dump((first, "not a structure"), f)
    assert store.get(first) is None
    built = structure_cached(*first)  # the file is unusable: built, and the file rewritten with it
    got = store.get(first)
    assert got is not None and _same(got[0], built) and _same(built, _structure(*first))


def test_a_read_only_directory_keeps_nothing_and_fails_nothing(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    tmp_path.chmod(0o500)
    try:
        kept = DiskStore(tmp_path)
        key = _keys()[1]
        kept.put(key, _structure(*key))
        assert not kept.has(key) and kept.get(key) is None
    finally:
        tmp_path.chmod(0o700)


def test_a_full_disk_turns_the_cache_off_for_the_run(tmp_path: Path) -> None:
    """A directory that cannot be made (a file is in its way) stops the writes, without an error."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would go")
    kept = DiskStore(blocked)
    key = _keys()[1]
    kept.put(key, _structure(*key))
    kept.put(key, _structure(*key))  # asked again: not retried
    assert kept.get(key) is None and not kept._writable


def test_other_versions_files_are_removed_and_never_read(tmp_path: Path) -> None:
    old = tmp_path / f"{PREFIX}0123456789abcdef"
    old.mkdir()
    key = _keys()[1]
    with (old / "1f1b.p4.v1.r0.pickle").open("wb") as f:
        pickle.dump((key, None), f)  # an answer this version would never read
    kept = DiskStore(tmp_path)
    assert kept.directory.name == PREFIX + code_version() != old.name
    assert kept.get(key) is None
    kept.put(key, _structure(*key))
    assert not old.exists() and kept.has(key)


def _recommend(cache: str) -> subprocess.CompletedProcess[str]:
    args = ["--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "64", "--global-batch", "512"]
    return subprocess.run(
        [sys.executable, "-m", "pplan", "recommend", *args, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PPLAN_CACHE_DIR": cache},
    )


def test_recommend_answers_the_same_with_the_cache_cold_warm_and_off(tmp_path: Path) -> None:
    off = _recommend("off").stdout
    cold = _recommend(str(tmp_path)).stdout
    kept = sorted(p.name for p in tmp_path.glob(f"{PREFIX}*/*.pickle"))
    assert kept, "the first run keeps the structures it built"
    warm = _recommend(str(tmp_path)).stdout
    assert off == cold == warm
    assert set(kept) <= {p.name for p in tmp_path.glob(f"{PREFIX}*/*.pickle")}


@pytest.mark.skipif(not prefetch_available(), reason="needs fork and a second CPU")
def test_the_prefetch_child_skips_what_a_store_keeps(store: DiskStore) -> None:
    """The search reads a kept structure itself; the child builds only the others (it walks keys in order, so
    once the second is claimed the first was passed over)."""
    kept, missing = _keys()[:2]
    structure_cached(*kept)
    periodic.clear_caches()
    prefetch = Prefetch(lambda: iter([kept, missing]))
    try:
        deadline = time.monotonic() + 60
        while not prefetch.claimed(missing) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert prefetch.claimed(missing) and not prefetch.claimed(kept)
    finally:
        prefetch.close()
