"""Profiles in the store: saved per environment and device, newest first, on SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest

from benchbench.core.errors import StoreError
from benchbench.machine.environment import Environment
from benchbench.store import open_store
from benchbench.store.profiles import latest_profile, save_profile


def _check(url: str) -> None:
    store = open_store(url)
    env = Environment(fields={"machine": "m1", "threads": 2})
    store.save_environment(env)
    assert latest_profile(store, env.id, "cpu") is None
    first = save_profile(store, env.id, "cpu", {"n": 1})
    second = save_profile(store, env.id, "cpu", {"n": 2})
    save_profile(store, env.id, "cuda", {"n": 3})
    assert second > first
    newest = latest_profile(store, env.id, "cpu")
    assert newest is not None and newest["data"] == {"n": 2} and newest["id"] == second
    gpu = latest_profile(store, env.id, "cuda:0")  # cuda:N falls back to the cuda profile
    assert gpu is not None and gpu["data"] == {"n": 3}
    assert latest_profile(store, "other-env", "cpu") is None
    with pytest.raises(StoreError, match="no environment 'missing'"):
        save_profile(store, "missing", "cpu", {})


def test_profiles_on_sqlite(tmp_path) -> None:
    _check(str(tmp_path / "s.db"))


@pytest.mark.postgres
def test_profiles_on_postgresql(pg_database: str) -> None:
    _check(pg_database)
