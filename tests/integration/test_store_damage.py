"""A damaged store: a truncated SQLite file, a file that is not SQLite, a store whose
folder vanished mid-run. Each is one line naming the store and the fix, and nothing is
"repaired" by deleting rows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from benchbench.store import open_store
from tests.integration.cli import SUITES, benchbench, env
from tests.storedata import add_run, point, result

FILTER = r"/sqrt:.*n=(64|128|192|256|320|384)\)"  # 6 of grid.py's cheap sqrt points


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("benchbench: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture
def truncated(tmp_path):
    db = tmp_path / "store.db"
    store = open_store(str(db))
    add_run(store, [result(point(size=2**k), seed=k) for k in range(6, 16)], label="base")
    store.engine.dispose()  # a clean close: the write-ahead log checkpointed into the file
    with open(db, "r+b") as handle:
        handle.truncate(os.path.getsize(db) // 2)
    return db


@pytest.mark.parametrize("command", [["runs"], ["show", "base"], ["regressions"]])
def test_a_truncated_store_is_one_line_naming_it_and_the_fix(truncated, tmp_path, command):
    size = os.path.getsize(truncated)
    done = benchbench(*command, "--store", str(truncated), cwd=tmp_path)
    assert done.returncode == 1
    line = _error_line(done.stderr)
    assert f"store {truncated}: the file is damaged" in line
    assert "restore" in line and ".recover" in line and "never repairs" in line
    assert os.path.getsize(truncated) == size  # left as it was


def test_a_file_that_is_not_sqlite_is_refused_before_measuring(tmp_path):
    notes = tmp_path / "notes.db"
    text = "these are notes, not a database, but long enough to have a header\n" * 8
    notes.write_text(text)
    for argv in (["runs"], ["run", str(SUITES / "grid.py"), "--filter", "/sqrt:.*n=64\\)"]):
        done = benchbench(*argv, "--store", str(notes), cwd=tmp_path)
        assert done.returncode == 1
        line = _error_line(done.stderr)
        assert f"store {notes}: the file is damaged (file is not a database)" in line
    assert notes.read_text() == text


def test_a_store_whose_folder_vanishes_mid_run_stops_with_one_line(tmp_path):
    folder = tmp_path / "results"
    db = folder / "store.db"
    argv = ["run", str(SUITES / "grid.py"), "--filter", FILTER, "--store", str(db)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchbench", *argv],
        cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _has_points(db):
            assert time.monotonic() < deadline and proc.poll() is None, "no point stored"
            time.sleep(0.1)
        shutil.rmtree(folder)
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    line = _error_line(err)
    assert f"store {db}: the file is gone while benchbench had it open" in line
    assert f"folder {folder} deleted or moved" in line and "--resume RUN" in line
    assert not folder.exists()  # nothing written where a deleted store was


def _has_points(db) -> bool:
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return bool(conn.execute("SELECT count(*) FROM measurement").fetchone()[0])
    except sqlite3.Error:
        return False
