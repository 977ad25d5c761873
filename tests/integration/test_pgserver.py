"""The throwaway PostgreSQL server of tests/pgserver.py, exercised for real."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

try:
    from tests.pgserver import PgServer, PostgresUnavailable, find_binaries
except ImportError:
    from pgserver import PgServer, PostgresUnavailable, find_binaries  # type: ignore[no-redef]

TESTS_DIR = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.postgres


def _database_names(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT datname FROM pg_database"))
            return {row[0] for row in rows}
    finally:
        engine.dispose()


def test_table_round_trip_through_sqlalchemy(pg_database: str) -> None:
    assert pg_database.startswith("postgresql+psycopg://")
    engine = sa.create_engine(pg_database)
    metadata = sa.MetaData()
    points = sa.Table(
        "points",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("time_s", sa.Float, nullable=False),
    )
    try:
        metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(
                points.insert(),
                [{"name": "sqrt[float32]", "time_s": 3.3e-4}, {"name": "rsqrt", "time_s": 2.5}],
            )
        with engine.connect() as connection:
            rows = connection.execute(sa.select(points.c.name, points.c.time_s).order_by("id"))
            assert [tuple(row) for row in rows] == [("sqrt[float32]", 3.3e-4), ("rsqrt", 2.5)]
            assert connection.dialect.driver == "psycopg"
    finally:
        engine.dispose()


def test_each_test_gets_an_empty_database(pg_database: str, postgres_url: str) -> None:
    name = pg_database.rsplit("/", 1)[1]
    assert name in _database_names(postgres_url)
    engine = sa.create_engine(pg_database)
    try:
        assert sa.inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_drop_database_closes_open_connections(pg_server: PgServer, postgres_url: str) -> None:
    url = pg_server.create_database()
    name = url.rsplit("/", 1)[1]
    engine = sa.create_engine(url)
    connection = engine.connect()  # left open on purpose: a test that forgot to close
    try:
        pg_server.drop_database(name)
    finally:
        connection.invalidate()
        engine.dispose()
    assert name not in _database_names(postgres_url)


def test_stop_removes_the_server_and_its_directory() -> None:
    server = PgServer(find_binaries())
    server.start()
    root, port = server.root, server.port
    assert root is not None and port is not None
    assert (root / "data" / "postmaster.pid").exists()
    server.stop()
    server.stop()  # idempotent
    assert not root.exists()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_missing_binaries_fail_in_ci_and_skip_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(PostgresUnavailable) as in_ci:
        find_binaries()
    assert in_ci.value.must_fail
    assert "initdb" in in_ci.value.reason and "pg_ctl" in in_ci.value.reason
    monkeypatch.delenv("CI")
    with pytest.raises(PostgresUnavailable) as locally:
        find_binaries()
    assert not locally.value.must_fail


@pytest.mark.parametrize(
    ("ci", "expected_exit", "expected_line"),
    [("true", 1, "1 error"), (None, 0, "1 skipped")],
)
def test_fixture_fails_in_ci_and_skips_elsewhere_without_binaries(
    tmp_path: Path, ci: str | None, expected_exit: int, expected_line: str
) -> None:
    """Run the real conftest in a child pytest whose PATH has no PostgreSQL."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(TESTS_DIR / "conftest.py", project / "conftest.py")
    shutil.copy(TESTS_DIR / "pgserver.py", project / "pgserver.py")
    (project / "test_uses_postgres.py").write_text(
        "def test_needs_postgres(postgres_url):\n    assert postgres_url\n"
    )
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {"PATH": str(empty_bin), "PYTHONDONTWRITEBYTECODE": "1"}
    if ci is not None:
        env["CI"] = ci
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == expected_exit, output
    assert expected_line in output, output
    assert "PostgreSQL binaries not found on PATH: initdb, pg_ctl" in output, output
