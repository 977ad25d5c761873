"""A store's disk that fills mid-run, or a folder that is read-only: one line naming the
folder and the space needed, the store whole (``PRAGMA integrity_check``), every
finished point kept, and ``--resume`` completes the run.

A size-limited tmpfs is the store's folder, which needs root (``mount -t tmpfs``):
elsewhere these tests are skipped, saying so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchbench.store import open_store
from benchbench.store.failures import MIN_FREE_BYTES
from tests.integration.cli import SUITES, benchbench, env

FILTER = r"/sqrt:.*n=(64|128|192|256|320|384)\)"  # 6 of grid.py's cheap sqrt points
POINTS = 6


@contextlib.contextmanager
def _tmpfs(size_mib: int) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("a size-limited tmpfs needs root to mount (mount -t tmpfs); run as root")
    folder = Path(tempfile.mkdtemp(prefix="bbfull-"))
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(folder)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): the test needs one")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        with contextlib.suppress(OSError):
            folder.rmdir()


def _points(db: Path) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT run_id, benchmark_id FROM measurement").fetchall()


def _integrity(db: Path) -> str:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def _fill(folder: Path) -> Path:
    """A file taking every free byte of ``folder``'s file system."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(fd)
    return filler


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("benchbench: error:")]


def test_a_disk_that_fills_mid_run_keeps_the_store_whole_and_resume_completes(tmp_path):
    with _tmpfs(MIN_FREE_BYTES // 2**20 + 4) as folder:
        db = folder / "store.db"
        argv = ["run", str(SUITES / "grid.py"), "--filter", FILTER, "--store", str(db)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchbench", *argv, "--json"],
            cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not (db.exists() and _has_points(db, 2)):
                assert time.monotonic() < deadline and proc.poll() is None, "no 2 points"
                time.sleep(0.1)
            filler = _fill(folder)
            _out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == 1, err
        lines = _error_lines(err)
        assert len(lines) == 1, err
        assert f"store {db}: its disk is full" in lines[0]
        assert f"{folder} has " in lines[0] and "a run needs 16.0 MiB" in lines[0]
        assert _integrity(db) == "ok"
        kept = _points(db)
        assert len(kept) >= 2 and len(set(kept)) == len(kept)
        filler.unlink()
        run_id = kept[0][0]
        done = benchbench("run", "--resume", run_id, "--store", str(db), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        stored = _points(db)
        assert len(stored) == POINTS and len(set(stored)) == POINTS
        assert set(kept) <= set(stored) and _integrity(db) == "ok"


def _has_points(db: Path, count: int) -> bool:
    try:
        return len(_points(db)) >= count
    except sqlite3.Error:
        return False


def test_a_folder_short_of_space_is_refused_before_measuring(tmp_path):
    with _tmpfs(MIN_FREE_BYTES // 2**20 // 2) as folder:
        db = folder / "store.db"
        done = benchbench("run", str(SUITES / "grid.py"), "--filter", FILTER, "--store", str(db),
                          cwd=tmp_path)  # fmt: skip
        assert done.returncode == 1
        (line,) = _error_lines(done.stderr)
        assert f"store {db}: its disk is full" in line and "checked before measuring" in line
        assert f"{folder} has " in line and "a run needs 16.0 MiB" in line
        assert _points(db) == [] and _integrity(db) == "ok"


def test_a_read_only_folder_is_refused_before_measuring(tmp_path):
    with _tmpfs(MIN_FREE_BYTES // 2**20 + 4) as folder:
        db = folder / "store.db"
        open_store(str(db)).engine.dispose()  # an existing, empty store
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        for store in (db, folder / "new.db"):
            done = benchbench("run", str(SUITES / "grid.py"), "--filter", FILTER,
                              "--store", str(store), cwd=tmp_path)  # fmt: skip
            assert done.returncode == 1
            (line,) = _error_lines(done.stderr)
            assert f"store {store}: it cannot be written here" in line, line
            assert "writable" in line
        subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
        assert _points(db) == [] and _integrity(db) == "ok"
