"""Ctrl-C and SIGTERM stop a real `benchbench run` after the current sample."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from benchbench.run.rounds import order
from benchbench.store import open_store
from tests.integration.cli import SUITES, benchbench, env, json_of

#: A seed whose shuffled order visits slowish.py's three quick points (jobs 0-2 of 5)
#: before its two long ones.
QUICK_FIRST = next(s for s in range(1000) if set(order(5, 0, s)[:3]) == {0, 1, 2})


def _start(db: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchbench",
            "run",
            str(SUITES / "slowish.py"),
            "--store",
            str(db),
            "--target",
            "1e-9",
            "--seed",
            str(QUICK_FIRST),
            "--json",
        ],
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
    )


def run_id_of(out: str) -> str:
    return str(json_of(subprocess.CompletedProcess([], 0, out, ""))["run_id"])


def _wait_for_stored(db: Path, count: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:  # sqlite3 alone: opening the store each time would take CPU from the run
            with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
                (stored,) = conn.execute("SELECT count(*) FROM measurement").fetchone()
            if stored >= count:
                return
        except sqlite3.Error:
            continue
    raise AssertionError(f"the run did not store {count} points in {timeout_s} s")


@pytest.mark.parametrize(
    ("signum", "to_group", "exit_code"),
    [
        (signal.SIGINT, True, 130),  # Ctrl-C: the terminal signals the whole process group
        (signal.SIGTERM, False, 143),  # kill PID: only the runner gets it, it tells the worker
    ],
)
def test_signal_stops_after_the_current_sample_and_keeps_finished_points(
    tmp_path, signum, to_group, exit_code
):
    db = tmp_path / "store.db"
    proc = _start(db, tmp_path)
    try:
        _wait_for_stored(db, 3)  # the three quick points
        time.sleep(1.0)  # now inside a point that would sample for 60 s
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        # Without the stop the point in flight would take 60 s more.
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == exit_code, err
    assert "Traceback" not in err
    said = " ".join(err.split())  # rich wraps long lines
    assert f"interrupted by {signal.Signals(signum).name}: 3 point(s) stored" in said
    assert f"finish with: benchbench run --resume {run_id_of(out)}" in said
    store = open_store(str(db))
    run = store.runs()[0]
    assert run["status"] == "interrupted"
    rows = store.measurements(run["id"])
    # The three finished points are kept, whole; the one cut short is not stored.
    assert [r["workload"] for r in rows] == ["quick"] * 3
    assert all(r["status"] == "ok" and r["n"] >= 10 for r in rows)
    assert all(r["stop_reason"] != "interrupted" for r in rows)
    assert len(json_of(subprocess.CompletedProcess([], 0, out, err))["results"]) == 3
    # No process of the run is left behind (zygote and worker died with it).
    time.sleep(0.5)
    leftovers = subprocess.run(
        ["pgrep", "-g", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []


def test_run_s_reference_documents_the_exit_codes(tmp_path):
    """`run --help` is a synopsis, a paragraph and the options; its exit codes are on the
    CLI reference page, which `--help` points to."""
    from benchbench.cli.reference import markdown

    done = benchbench("run", "--help", cwd=tmp_path)
    assert done.returncode == 0 and "docs/reference/cli.md" in done.stdout
    page = markdown()
    for line in (
        "0    every point measured",
        "130  interrupted by SIGINT",
        "142  stopped at --deadline",
        "143  interrupted by SIGTERM",
    ):
        assert line in page
