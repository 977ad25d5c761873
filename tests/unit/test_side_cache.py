"""The cache of sides built from commits: its folder, key, size bound and eviction
(entries written by hand as folders: no git, no build)."""

from __future__ import annotations

import fcntl
import os
import time

import pytest

from benchbench.core.errors import UsageError
from benchbench.run import side_cache


def test_the_folder_comes_from_the_variable_else_the_xdg_cache(tmp_path):
    assert side_cache.cache_root({"BENCHBENCH_SIDES_CACHE": str(tmp_path)}) == tmp_path
    assert side_cache.cache_root({"XDG_CACHE_HOME": "/c"}) == (
        side_cache.Path("/c") / "benchbench" / "sides"
    )


def test_the_size_bound_reads_gigabytes_and_names_a_bad_value():
    assert side_cache.size_bound_bytes({}) == int(side_cache.DEFAULT_SIZE_GB * 1e9)
    assert side_cache.size_bound_bytes({"BENCHBENCH_SIDES_CACHE_GB": "0.5"}) == 500_000_000
    with pytest.raises(UsageError, match=r"BENCHBENCH_SIDES_CACHE_GB='lots'"):
        side_cache.size_bound_bytes({"BENCHBENCH_SIDES_CACHE_GB": "lots"})
    with pytest.raises(UsageError, match="> 0"):
        side_cache.size_bound_bytes({"BENCHBENCH_SIDES_CACHE_GB": "0"})


def test_the_key_changes_with_the_tree_and_the_install_only():
    key = side_cache.side_key("tree-a", "pip install --no-deps .")
    assert key == side_cache.side_key("tree-a", "pip install --no-deps .")
    assert key != side_cache.side_key("tree-b", "pip install --no-deps .")
    assert key != side_cache.side_key("tree-a", "pip install -e .")


def _entry(root, key, size, used_at):
    folder = root / key
    folder.mkdir(parents=True)
    (folder / "blob").write_bytes(b"x" * size)
    entry = side_cache.Entry(folder)
    entry.mark_ready({"commit": key})
    os.utime(folder / side_cache.READY, (used_at, used_at))
    return entry


def test_eviction_removes_the_least_recently_used_until_under_the_bound(tmp_path):
    now = time.time()
    for k, key in enumerate(("old", "mid", "new")):
        _entry(tmp_path, key, 1000, now - 100 + 10 * k)
    removed = side_cache.evict(tmp_path, 2500)
    assert removed == ["old"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["mid", "new"]
    assert side_cache.evict(tmp_path, 10_000) == []


def test_eviction_spares_the_entries_kept_and_those_another_process_holds(tmp_path):
    now = time.time()
    for k, key in enumerate(("a", "b", "c")):
        _entry(tmp_path, key, 1000, now - 100 + 10 * k)
    with open(tmp_path / "b.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        removed = side_cache.evict(tmp_path, 0, keep=frozenset({"a"}))
    assert removed == ["c"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["a", "b"]


def test_an_unfinished_entry_is_not_ready_and_goes_first(tmp_path):
    now = time.time()
    _entry(tmp_path, "done", 1000, now)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "blob").write_bytes(b"x" * 1000)
    assert side_cache.Entry(tmp_path / "half").ready is None
    assert side_cache.evict(tmp_path, 1500) == ["half"]
