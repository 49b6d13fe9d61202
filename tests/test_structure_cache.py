"""The on-disk structure cache (pplan.cli.cache): what it reads back is what building gives, a command's answer is
the same with and without it; a bad, planted or retyped file, a pipe, a link, a read-only directory, a directory
others may write or another pplan's files are never used; it removes only what it made."""

from __future__ import annotations

import json
import os
import pickle
import random
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pplan.cli.cache import (
    FORMAT,
    MARKER,
    PREFIX,
    STALE_VERSION_S,
    DiskStore,
    cache_root,
    code_version,
    install,
    structure_digest,
)
from pplan.schedules import periodic
from pplan.schedules.periodic import STORES, StructureKey, structure_key
from pplan.schedules.periodic.codec import structure_from_data, structure_to_data
from pplan.schedules.periodic.structure import STRUCTURES, _structure, structure_cached
from pplan.schedules.timeline import Durations
from pplan.search.prefetch import Prefetch
from pplan.search.prefetch import available as prefetch_available

CASES = [("zbv", 8, 2, 64), ("1f1b", 4, 1, 32), ("dualpipe", 8, None, 128), ("interleaved-1f1b", 4, 2, 64)]


def _same(a: object, b: object) -> bool:
    """Equal content (a structure's `Rules` defines no equality: compared as pickled bytes, sharing included; the
    tests pickle, the cache does not)."""
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
    for off in ("off", "", "OFF", "0", "none", "false"):
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


def _write(path: Path, document: object) -> None:
    path.write_text(json.dumps(document), encoding="utf-8")


def _signed(document: dict[str, object]) -> dict[str, object]:
    """`document` with the digest of its key and structure (so that another check is what refuses it)."""
    return {**document, "sha256": structure_digest(document["key"], document["structure"])}


def test_a_bad_or_foreign_file_is_built_again_and_rewritten(store: DiskStore) -> None:
    first, second = _keys()[:2]
    path = store.path(first)
    assert path is not None and store.usable
    path.write_bytes(b"not json")
    assert store.has(first) and store.get(first) is None
    good = _signed({"format": FORMAT, "key": list(first), "structure": structure_to_data(_structure(*first))})
    _write(path, _signed({**good, "key": list(second)}))  # another key's document under this key's name
    assert store.get(first) is None
    _write(
        path, _signed({**good, "structure": structure_to_data(_structure(*second))})
    )  # another key's structure
    assert store.get(first) is None
    _write(path, {**good, "format": "pplan.structure/0"})
    assert store.get(first) is None
    _write(path, {**good, "extra": 1})
    assert store.get(first) is None
    _write(path, {**good, "sha256": "0" * 64})  # well-formed, but not these bytes' digest
    assert store.get(first) is None
    _write(path, good)
    got = store.get(first)
    assert got is not None and _same(
        got[0], _structure(*first)
    )  # the checks above are not refusing everything
    built = structure_cached(*first)
    path.write_bytes(b"{")  # truncated: built, and the file rewritten with it
    periodic.clear_caches()
    built = structure_cached(*first)
    got = store.get(first)
    assert got is not None and _same(got[0], built) and _same(built, _structure(*first))


def _retyped(data: object, path: tuple[int, ...], value: object) -> object:
    """`data` (nested lists) with the element at `path` replaced by `value`."""
    if not path:
        return value
    assert isinstance(data, list)
    return [_retyped(x, path[1:], value) if i == path[0] else x for i, x in enumerate(data)]


def _int_paths(data: object, path: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    if isinstance(data, list):
        for i, x in enumerate(data):
            yield from _int_paths(x, (*path, i))
    elif type(data) is int:
        yield path


@pytest.mark.parametrize("seed", range(4))
def test_the_reader_refuses_a_value_of_another_type_anywhere(seed: int) -> None:
    """A structure's plain form with one integer, chosen at random, made a float, a bool, a string, a list or
    null: the reader refuses it (ValueError), and reads the untouched form back exactly."""
    rng = random.Random(seed)
    key = _keys()[seed % len(CASES)]
    built = _structure(*key)
    data = structure_to_data(built)
    assert _same(structure_from_data(json.loads(json.dumps(data))), built)
    paths = list(_int_paths(data))
    for path in rng.sample(paths, 25):
        for value in (0.5, True, "1", [1], None):
            with pytest.raises(ValueError):
                structure_from_data(_retyped(data, path, value))
    with pytest.raises(ValueError):
        structure_from_data(data[:-1])
    with pytest.raises(ValueError):
        structure_from_data({"a": 1})


class _Planted:
    """A pickle that runs code when loaded: what a pickle-based cache would have run."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.sentinel}",))


def test_a_planted_code_running_file_never_runs(store: DiskStore, tmp_path: Path) -> None:
    """A pickle whose loading runs a command, at the key's file name, read as the store reads: refused, nothing
    run, and built again."""
    key = _keys()[1]
    sentinel = tmp_path / "RAN"
    path = store.path(key)
    assert path is not None and store.usable
    path.write_bytes(pickle.dumps(_Planted(sentinel)))
    path.with_suffix(".pickle").write_bytes(pickle.dumps(_Planted(sentinel)))  # the name older versions used
    assert store.get(key) is None
    assert _same(structure_cached(*key), _structure(*key))
    assert not sentinel.exists()


def test_a_named_pipe_or_a_link_is_skipped_without_being_opened(store: DiskStore, tmp_path: Path) -> None:
    """Opening a pipe for reading blocks until a writer comes: the store never opens one (the test would hang)."""
    first, second = _keys()[:2]
    pipe, link = store.path(first), store.path(second)
    assert pipe is not None and link is not None and store.usable
    os.mkfifo(pipe)
    target = tmp_path / "elsewhere.json"
    _write(
        target, {"format": FORMAT, "key": list(second), "structure": structure_to_data(_structure(*second))}
    )
    link.symlink_to(target)
    assert not store.has(first) and store.get(first) is None
    assert not store.has(second) and store.get(second) is None
    assert _same(structure_cached(*first), _structure(*first))  # built, and kept in a regular file
    assert store.get(first) is not None and pipe.is_file()


def test_directories_are_made_private(tmp_path: Path) -> None:
    root = tmp_path / "a" / "pplan"
    kept = DiskStore(root)
    key = _keys()[1]
    kept.put(key, _structure(*key))
    assert kept.has(key)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(kept.directory.stat().st_mode) == 0o700
    assert (kept.directory / MARKER).is_file()


def _shared_store(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[DiskStore, str]:
    kept = DiskStore(root)
    key = _keys()[1]
    kept.put(key, _structure(*key))
    assert not kept.has(key) and kept.get(key) is None and not kept.usable
    return kept, capsys.readouterr().err


def test_a_directory_others_may_write_turns_the_cache_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # as XDG_CACHE_HOME=/tmp would be, less the sticky bit
    _, err = _shared_store(shared, capsys)
    assert err.count("\n") == 1 and "writable by group or others" in err and str(shared) in err
    assert not any(shared.iterdir())  # nothing written there
    shared.chmod(0o1777)  # sticky: the cache may live in a folder of its own inside it
    fine = DiskStore(shared / "pplan")
    assert fine.usable and capsys.readouterr().err == ""
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)  # without the sticky bit others may rename the cache folder away and plant their own
    _, err = _shared_store(loose / "pplan", capsys)
    assert "without the sticky bit" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")
def test_a_directory_another_user_made_turns_the_cache_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another user (uid 65534) made this version's directory, private to them, with a planted pickle: refused."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    theirs = shared / "pplan"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    _, err = _shared_store(theirs, capsys)
    assert "belongs to another user" in err
    mine = shared / "mine"
    kept = DiskStore(mine)
    assert kept.usable
    kept.directory.chmod(0o700)
    os.chown(kept.directory, 65534, 65534)  # this version's folder taken over
    _, err = _shared_store(mine, capsys)
    assert "belongs to another user" in err


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
    assert kept.get(key) is None and not kept.usable


def test_only_its_own_stale_directories_and_files_are_removed(tmp_path: Path) -> None:
    """Other versions' directories go only when they carry the marker and have not been used for a month; a
    user's own `structures-notes`, an unmarked directory and a version in use stay; stale temporaries go."""
    old = time.time() - STALE_VERSION_S - 60
    stale = tmp_path / f"{PREFIX}0123456789abcdef"
    in_use = tmp_path / f"{PREFIX}fedcba9876543210"
    unmarked = tmp_path / f"{PREFIX}00000000000000aa"
    notes = tmp_path / f"{PREFIX}notes"
    for folder in (stale, in_use, unmarked, notes):
        folder.mkdir()
        (folder / "1f1b.p4.v1.r0.json").write_text("{}")
    for folder in (stale, in_use, notes):
        (folder / MARKER).write_text("")
    for folder in (stale, notes):
        os.utime(folder / MARKER, (old, old))
    os.utime(unmarked / "1f1b.p4.v1.r0.json", (old, old))
    kept = DiskStore(tmp_path)
    kept.directory.mkdir(mode=0o700)
    leftover, fresh = kept.directory / ".tmpold.tmp", kept.directory / ".tmpnew.tmp"
    leftover.write_text("half")
    fresh.write_text("being written")
    os.utime(leftover, (old, old))
    (kept.directory / MARKER).write_text("")
    assert kept.usable  # this version's directory existed: no other version is looked at
    assert not leftover.exists() and fresh.exists()
    assert stale.exists()
    kept.directory.joinpath(MARKER).unlink()
    kept.directory.joinpath(fresh.name).unlink()
    kept.directory.rmdir()
    again = DiskStore(tmp_path)
    assert again.usable  # a new version's directory made: stale ones of this cache go
    assert not stale.exists() and in_use.exists() and unmarked.exists() and notes.exists()


def test_other_versions_files_are_never_read(tmp_path: Path) -> None:
    old = tmp_path / f"{PREFIX}0123456789abcdef"
    old.mkdir()
    key = _keys()[1]
    _write(old / "1f1b.p4.v1.r0.json", {"format": FORMAT, "key": list(key), "structure": None})
    kept = DiskStore(tmp_path)
    assert kept.directory.name == PREFIX + code_version() != old.name
    assert kept.get(key) is None
    kept.put(key, _structure(*key))
    assert old.exists() and kept.has(key)


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
    kept = sorted(p.name for p in tmp_path.glob(f"{PREFIX}*/*.json"))
    assert kept, "the first run keeps the structures it built"
    warm = _recommend(str(tmp_path)).stdout
    assert off == cold == warm
    assert set(kept) <= {p.name for p in tmp_path.glob(f"{PREFIX}*/*.json")}


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


def test_explain_in_a_shared_cache_root_runs_nothing_planted(tmp_path: Path) -> None:
    """The reproduction: a shared (1777) cache root in which another user made `pplan/structures-<hash>` and
    planted, at every file name `explain` reads, a pickle that runs a command and a tampered document. `explain`
    warns once, runs nothing planted, and answers as it does with the cache off."""
    shared = tmp_path / "xdg"
    shared.mkdir()
    shared.chmod(0o1777)
    planted = shared / "pplan" / f"{PREFIX}{code_version()}"
    planted.mkdir(parents=True)
    sentinel = tmp_path / "RAN"
    key = structure_key("1f1b", 4, 1, 32)
    assert key is not None
    tampered = {"format": FORMAT, "key": list(key), "structure": structure_to_data(_structure(*_keys()[0]))}
    for name in ("1f1b", "interleaved-1f1b", "zbv", "gpipe"):
        for residue in range(8):
            stem = planted / f"{name}.p4.v{1 if name in ('1f1b', 'gpipe') else 2}.r{residue}"
            stem.with_suffix(".pickle").write_bytes(pickle.dumps(_Planted(sentinel)))
            _write(stem.with_suffix(".json"), tampered)
    if os.geteuid() == 0:
        for folder in (shared / "pplan", planted):
            os.chown(folder, 65534, 65534)  # the other user's
    else:
        (shared / "pplan").chmod(0o777)  # as another user would leave it for us to find: writable by them
    args = ["explain", "--model", "llama3-8b", "--gpus", "32", "--global-batch", "128", "--pp", "4", "--json"]

    def explain(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pplan", *args], capture_output=True, text=True, env={**os.environ, **env}
        )

    off = explain({"PPLAN_CACHE_DIR": "off"})
    env = {k: v for k, v in os.environ.items() if k != "PPLAN_CACHE_DIR"}
    shared_run = subprocess.run(
        [sys.executable, "-m", "pplan", *args],
        capture_output=True,
        text=True,
        env={**env, "XDG_CACHE_HOME": str(shared)},
    )
    assert off.returncode == shared_run.returncode == 0, shared_run.stderr
    assert shared_run.stdout == off.stdout
    assert shared_run.stderr.count("\n") == 1 and "structure cache off for this run" in shared_run.stderr
    assert not sentinel.exists()


def _mutated(raw: bytes, rng: random.Random) -> bytes:
    """`raw` with one random change: a bit flipped, a digit replaced by another, cut short, or a byte inserted."""
    kind = rng.randrange(4)
    if kind == 0:
        i = rng.randrange(len(raw))
        return raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1 :]
    if kind == 1:
        digits = [i for i, c in enumerate(raw) if 48 <= c <= 57]
        i = rng.choice(digits)
        return raw[:i] + str((raw[i] - 48 + rng.randrange(1, 10)) % 10).encode() + raw[i + 1 :]
    if kind == 2:
        return raw[: rng.randrange(len(raw))]
    i = rng.randrange(len(raw) + 1)
    return raw[:i] + bytes([rng.randrange(256)]) + raw[i:]


def _fuzz_store(store: DiskStore, seed: int, count: int) -> int:
    """Write each test structure, change its file `count` times at random, and check every read: the structure
    written, or None (built again); never another one. How many reads gave None."""
    rng = random.Random(seed)
    refused = 0
    for key in _keys():
        built = _structure(*key)
        store.put(key, built)
        path = store.path(key)
        assert path is not None
        raw = path.read_bytes()
        for _ in range(count):
            path.write_bytes(_mutated(raw, rng))
            got = store.get(key)
            if got is None:
                refused += 1
            else:
                assert _same(got[0], built), key
        path.write_bytes(raw)
    return refused


def test_a_changed_cache_file_is_never_read_as_another_structure(store: DiskStore) -> None:
    """Random changes to cache files (flipped bits, other digits, cut short, a byte inserted): each read gives the
    structure written or nothing, never a different one (the digest catches well-typed changes)."""
    assert _fuzz_store(store, seed=5, count=40) > 0


@pytest.mark.acceptance
@pytest.mark.parametrize("seed", range(6))
def test_cache_file_fuzz(store: DiskStore, seed: int) -> None:
    assert _fuzz_store(store, seed=100 + seed, count=400) > 0
