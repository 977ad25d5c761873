"""A real PostgreSQL store stopped as a crash would (``pg_ctl stop -m immediate``) under a
running `benchbench run`: no point is lost, none is written twice."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.integration.cli import SUITES, benchbench, env
from tests.pgserver import PgServer, PostgresUnavailable, find_binaries

pytestmark = pytest.mark.postgres

#: 6 of grid.py's cheap sqrt points.
FILTER = r"/sqrt:.*n=(64|128|192|256|320|384)\)"
POINTS = 6


@pytest.fixture
def server() -> Iterator[PgServer]:
    """A server of the test's own: it is stopped and started under the run."""
    try:
        own = PgServer(find_binaries(os.environ), crash_safe=True)
    except PostgresUnavailable as exc:
        if exc.must_fail:
            pytest.fail(f"CI=true and PostgreSQL is unavailable: {exc.reason}", pytrace=False)
        pytest.skip(exc.reason)
    with own:
        yield own


def _start(url: str, cwd: Path, retry_s: float) -> subprocess.Popen[str]:
    environ = {**env(), "BENCHBENCH_STORE_RETRY_S": str(retry_s)}
    argv = ["run", str(SUITES / "grid.py"), "--filter", FILTER, "--store", url, "--json"]
    return subprocess.Popen(
        [sys.executable, "-m", "benchbench", *argv],
        cwd=cwd,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stored(url: str) -> list[tuple[str, str]]:
    """(run id, benchmark id) of every stored point; [] while the server is away."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT run_id, benchmark_id FROM measurement"))
            return [(r, b) for r, b in rows]
    except sa.exc.SQLAlchemyError:
        return []
    finally:
        engine.dispose()


def _wait(what: str, ready, proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in {timeout_s} s")
        time.sleep(0.1)


def _halt_under_the_run(server: PgServer, url: str, cwd: Path, proc: subprocess.Popen[str]) -> None:
    """Stop the server once the run stored 2 points; return once it spooled one."""
    _wait("2 points stored", lambda: len(_stored(url)) >= 2, proc)
    server.halt()
    spool = cwd / "results" / "spool"
    _wait("a point spooled", lambda: any(spool.glob("run-*.json.gz")), proc)


def test_a_server_stopped_and_started_under_a_run_loses_no_point(server, tmp_path):
    url = server.create_database("outage")
    proc = _start(url, tmp_path, retry_s=60)
    try:
        _halt_under_the_run(server, url, tmp_path, proc)
        time.sleep(0.5)  # more points measured into the spool
        server.restart()
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    stored = _stored(url)
    assert len(stored) == POINTS and len(set(stored)) == POINTS, err
    said = " ".join(err.split())  # rich wraps long lines
    assert "measuring on: the points go to" in said and "back; the spooled points" in said, err
    assert not list((tmp_path / "results" / "spool").glob("*.json.gz"))  # written, then gone


def test_a_server_away_past_the_run_leaves_a_bundle_that_import_merges(server, tmp_path):
    url = server.create_database("away")
    proc = _start(url, tmp_path, retry_s=1)
    try:
        _halt_under_the_run(server, url, tmp_path, proc)
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    lines = [line for line in err.splitlines() if line.startswith("benchbench: error:")]
    assert len(lines) == 1 and "`benchbench import /" in lines[0], err
    assert "/results/spool/run-" in lines[0]
    bundle = next((tmp_path / "results" / "spool").glob("run-*.json.gz"))
    before = _stored_after_restart(server, url)
    done = benchbench("import", str(bundle), "--store", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    stored = _stored(url)
    assert len(stored) == POINTS and len(set(stored)) == POINTS
    assert set(before) < set(stored)
    again = benchbench("import", str(bundle), "--store", url, cwd=tmp_path)
    assert again.returncode == 0 and sorted(_stored(url)) == sorted(stored)
    assert "finished" in _statuses(url)


def _stored_after_restart(server: PgServer, url: str) -> list[tuple[str, str]]:
    server.restart()
    return _stored(url)


def _statuses(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [s for (s,) in conn.execute(sa.text("SELECT status FROM run"))]
    finally:
        engine.dispose()
