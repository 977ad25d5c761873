"""A store's failures as one line naming the store, what happened and the fix."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa

from benchbench.store.failures import explain


def _driver(message: str, kind: type[sa.exc.DBAPIError] = sa.exc.OperationalError) -> Exception:
    return kind("INSERT INTO measurement ...", {}, sqlite3.OperationalError(message))


@pytest.mark.parametrize(
    ("message", "meaning", "fix"),
    [
        ("database disk image is malformed", "the file is damaged", ".recover"),
        ("file is not a database", "the file is damaged", "restore results/x.db from a backup"),
        ("attempt to write a readonly database", "cannot be written here", "writable folder"),
        ("unable to open database file", "cannot be written here", "writable by this user"),
        ("database or disk is full", "disk is full or failing", "free space"),
        ("disk I/O error", "disk is full or failing", "--resume RUN"),
    ],
)
def test_each_sqlite_failure_names_the_file_what_happened_and_the_fix(message, meaning, fix):
    line = explain(_driver(message), "sqlite:///results/x.db")
    assert line is not None and "\n" not in line
    assert line.startswith("store results/x.db: ")
    assert meaning in line and f"({message})" in line and fix in line


def test_a_postgresql_server_that_goes_away_says_so_and_that_written_points_are_whole():
    gone = _driver("server closed the connection unexpectedly\nThis probably means ...")
    line = explain(gone, "postgresql+psycopg://bench:***@db.example/bench")
    assert line is not None and "\n" not in line and "secret" not in line
    assert "db.example" in line and "went away" in line and "--resume RUN" in line


def test_other_exceptions_are_not_store_failures():
    assert explain(ValueError("x"), "sqlite:///x.db") is None
    assert explain(KeyError("run"), "sqlite:///results/x.db") is None


def test_a_write_that_fails_on_a_full_disk_is_one_line_with_the_fix(tmp_path, monkeypatch):
    from benchbench.core.errors import StoreError
    from benchbench.store import open_store

    store = open_store(str(tmp_path / "s.db"))

    def full(_conn):
        raise _driver("database or disk is full")

    with pytest.raises(StoreError) as caught:
        store.write(full)
    line = str(caught.value)
    assert line.startswith(f"store {tmp_path / 's.db'}: its disk is full or failing")
    assert "free space" in line and "\n" not in line
