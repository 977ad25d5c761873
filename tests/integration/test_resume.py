"""`benchbench run --resume`: finish a killed run, every point exactly once."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from benchbench.run.runner import resume_config
from benchbench.store import open_store
from tests.integration.cli import SUITES, benchbench, env, json_of

GRID = SUITES / "grid.py"


def _labels(cwd: Path) -> list[str]:
    points = json_of(benchbench("list", str(GRID), "--json", cwd=cwd))["points"]
    return sorted(p["label"] for p in points)


def _stored_labels(db: Path, run_id: str) -> list[str]:
    rows = open_store(str(db)).measurements(run_id)
    return sorted(
        f"{r['workload']}:{r['variant']}[{r['dtype']}, {r['device']}](n={r['size']})" for r in rows
    )


def _stored(db: Path) -> tuple[str | None, int]:
    """(the latest run's id, its stored points), read with sqlite3 alone: this is polled
    every 20 ms while a run measures, and opening the store each time (~14 ms of CPU)
    would take a core from the run it waits for."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            latest = conn.execute("SELECT id FROM run ORDER BY started_at DESC LIMIT 1").fetchone()
            if latest is None:
                return None, 0
            (count,) = conn.execute(
                "SELECT count(*) FROM measurement WHERE run_id = ?", latest
            ).fetchone()
    except sqlite3.Error:  # the file is being created
        return None, 0
    return str(latest[0]), int(count)


def _run_and_kill(args: list[str], db: Path, cwd: Path, rng: random.Random) -> int | None:
    """Start `benchbench run ARGS`; SIGKILL it (whole group) at a random moment while it
    measures: after it stored one more point, plus 0-0.4 s. Returns the exit code if it
    finished first, else None."""
    _, before = _stored(db)
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchbench", "run", *args, "--store", str(db)],
        cwd=cwd,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
            if _stored(db)[1] > before:
                time.sleep(rng.uniform(0.0, 0.4))
                break
        if proc.poll() is not None:
            return proc.returncode
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


#: Kills at most: each costs a CLI start (seconds on a 2-core VM); the 50 of
#: benchmarks/fault_injection.py are the figure, these the check in every CI run.
KILLS = 5


@pytest.mark.slow
def test_random_sigkills_then_resume_store_every_point_exactly_once(tmp_path):
    rng = random.Random(20261122)
    expected = _labels(tmp_path)
    assert len(expected) == 40
    db = tmp_path / "store.db"
    # One process per point: every stored point is one more kill-free step (with rounds a
    # point is stored only when its last round is in; the next test covers that).
    first = ["--budget", "0.02", "--rounds", "1", str(GRID)]
    assert _run_and_kill(first, db, tmp_path, rng) is None, "the run finished before the kill"
    run_id, _ = _stored(db)
    assert run_id is not None
    kills = 1
    while kills < KILLS:
        code = _run_and_kill(["--resume", run_id], db, tmp_path, rng)
        if code is not None:
            break  # finished before this kill: everything is stored
        kills += 1
        stored = _stored_labels(db, run_id)
        assert len(stored) == len(set(stored))  # never twice, even half-way
        assert set(stored) <= set(expected)
    done = benchbench("run", "--resume", run_id, "--store", str(db), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _stored_labels(db, run_id) == expected  # every point, exactly once
    assert open_store(str(db)).resolve_run(run_id)["status"] == "finished"
    assert json_of(done)["run_id"] == run_id
    # How many kills land before the run is done depends on the machine's speed (a kill
    # waits for one more stored point, then 0-0.4 s); the first and at least one resumed
    # run's always do: 40 points cannot all be measured within 0.4 s.
    assert kills >= 2, f"only {kills} kill(s) landed before the run finished"


@pytest.mark.slow
def test_a_run_in_rounds_killed_midway_resumes_every_point_with_all_its_processes(tmp_path):
    rng = random.Random(7)
    expected = _labels(tmp_path)
    db = tmp_path / "store.db"
    # Two fixed rounds: a point is stored as its second process comes in. (With room for a
    # third, a loaded machine leaves most points open after round two, and they are all
    # written in one burst at the end, which a kill cannot land inside.)
    first = ["--budget", "0.02", "--rounds", "2", "--max-rounds", "2", str(GRID)]
    assert _run_and_kill(first, db, tmp_path, rng) is None, "the run finished before the kill"
    run_id, stored_before = _stored(db)
    assert run_id is not None and 0 < stored_before < len(expected)
    done = benchbench("run", "--resume", run_id, "--store", str(db), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _stored_labels(db, run_id) == expected
    rows = open_store(str(db)).measurements(run_id)
    assert all(len(r["process_samples"]) == 2 for r in rows if r["status"] == "ok")
    assert open_store(str(db)).resolve_run(run_id)["config"]["rounds"]["count"] == 2


def test_resume_reuses_the_runs_config_and_rejects_conflicting_flags(tmp_path):
    db = tmp_path / "store.db"
    done = benchbench(
        "run",
        str(SUITES / "tiny.py"),
        "--filter",
        "sum",
        "--budget",
        "0.05",
        "--outputs",
        "drop",
        "--store",
        str(db),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run_id = json_of(done)["run_id"]
    assert [r["extra"]["outputs"] for r in open_store(str(db)).measurements(run_id)] == ["drop"]
    conflict = benchbench(
        "run",
        str(SUITES / "tiny.py"),
        "--resume",
        run_id,
        "--budget",
        "2",
        "--filter",
        "sqrt",
        "--allocator",
        "tcmalloc",
        "--rounds",
        "5",
        "--outputs",
        "keep",
        "--store",
        str(db),
        cwd=tmp_path,
    )
    assert conflict.returncode == 2
    assert "--rounds 5 (the run has 1)" in conflict.stderr
    assert "--budget 2.0 (the run has 0.05)" in conflict.stderr
    assert "--filter sqrt (the run has sum)" in conflict.stderr
    assert "--allocator tcmalloc (the run has system)" in conflict.stderr
    assert "--outputs keep (the run has drop)" in conflict.stderr
    assert resume_config(open_store(str(db)), run_id).outputs == "drop"
    # Resuming a complete run measures nothing and keeps its one point.
    again = benchbench("run", "--resume", run_id[:8], "--store", str(db), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert [r["workload"] for r in json_of(again)["results"]] == ["sum"]
    missing = benchbench("run", "--resume", "nope", "--store", str(db), cwd=tmp_path)
    assert missing.returncode == 1 and "no run 'nope'" in missing.stderr
    no_suite = benchbench("run", "--store", str(db), cwd=tmp_path)
    assert no_suite.returncode == 2 and "--resume RUN_ID" in no_suite.stderr


def _machine(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return benchbench(*args, cwd=cwd, environ={**env(), "BENCHBENCH_MACHINE": name})


def _half_done(db: Path, run_id: str) -> None:
    """Drop the run's last point and mark it interrupted, as a kill would leave it."""
    import sqlalchemy as sa

    from benchbench.store import schema as t

    store = open_store(str(db))
    with store.transaction() as conn:
        last = conn.execute(
            sa.select(sa.func.max(t.measurement.c.id)).where(t.measurement.c.run_id == run_id)
        ).scalar_one()
        conn.execute(t.telemetry.delete().where(t.telemetry.c.measurement_id == last))
        conn.execute(t.measurement.delete().where(t.measurement.c.id == last))
        conn.execute(t.run.update().where(t.run.c.id == run_id).values(status="interrupted"))


@pytest.mark.slow
def test_a_resume_on_another_machine_is_refused_and_with_force_lands_under_its_own(tmp_path):
    db = tmp_path / "store.db"
    suite = tmp_path / "grid.py"
    suite.write_text(GRID.read_text())
    args = ("--budget", "0.02", "--filter", "/sqrt:.*n=(64|128)\\)", "--store", str(db))
    first = _machine("node-a", "run", str(suite), *args, "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    run_id = json_of(first)["run_id"]
    _half_done(db, run_id)
    before = _stored_labels(db, run_id)
    assert len(before) == 1

    refused = _machine("node-b", "run", "--resume", run_id, "--store", str(db), cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "environment machine 'node-a' -> 'node-b'" in refused.stderr
    assert f"--resume {run_id} --force" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _stored_labels(db, run_id) == before  # nothing filed under node-a's run

    forced = _machine(
        "node-b", "run", "--resume", run_id, "--force", "--store", str(db), "--json", cwd=tmp_path
    )
    assert forced.returncode == 0, forced.stderr
    store = open_store(str(db))
    new_id = json_of(forced)["run_id"]
    assert new_id != run_id and _stored_labels(db, run_id) == before
    first_row, new_row = store.resolve_run(run_id), store.resolve_run(new_id)
    assert new_row["group_id"] == first_row["group_id"]
    assert new_row["config"]["continues"] == run_id
    machines = {r: store.environment(store.resolve_run(r)["environment_id"])["machine"]
                for r in (run_id, new_id)}  # fmt: skip
    assert machines == {run_id: "node-a", new_id: "node-b"}
    assert len(_stored_labels(db, new_id)) == 1
    assert set(_stored_labels(db, new_id)).isdisjoint(before)

    # The continuation is resumed like any run: nothing is left, nothing is measured twice.
    again = _machine("node-b", "run", "--resume", new_id, "--store", str(db), "--json",
                     cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert len(_stored_labels(db, new_id)) == 1

    # Changed code is refused too, before any worker starts: here a suite file.
    suite.write_text(GRID.read_text() + "\n# changed\n")
    changed = _machine("node-a", "run", "--resume", run_id, "--store", str(db), cwd=tmp_path)
    assert changed.returncode == 2
    assert f"suite file {suite}" in changed.stderr and "hash" in changed.stderr
