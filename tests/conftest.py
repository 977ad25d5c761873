"""Shared fixtures: a real, throwaway PostgreSQL server for the tests that need one.

``postgres_url`` starts one server per test session (about 1 s) and gives the SQLAlchemy URL
(``postgresql+psycopg://``) of its ``postgres`` database; ``pg_database`` gives each test a
fresh empty database and drops it afterwards; ``store_url`` runs a test on a SQLite file and
on such a database. Without the PostgreSQL binaries these fixtures
skip the test, except in CI (``CI=true``) where a missing PostgreSQL fails it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# `tests/` is on sys.path under pytest's default import mode while it has no __init__.py;
# the package form keeps working if it ever gets one (repository root on sys.path).
try:
    from tests.pgserver import PgServer, PostgresUnavailable, find_binaries
except ImportError:
    from pgserver import PgServer, PostgresUnavailable, find_binaries  # type: ignore[no-redef]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (started on first use, stopped and deleted at the end)."""
    try:
        server = PgServer(find_binaries(os.environ))
    except PostgresUnavailable as exc:
        if exc.must_fail:
            pytest.fail(f"CI=true and PostgreSQL is unavailable: {exc.reason}", pytrace=False)
        pytest.skip(exc.reason)
    with server:
        yield server


@pytest.fixture(scope="session")
def postgres_url(pg_server: PgServer) -> str:
    """SQLAlchemy URL of the session server's ``postgres`` database (shared by all tests)."""
    return pg_server.url()


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """SQLAlchemy URL of a new empty database, dropped (connections closed) after the test."""
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL on each engine: a SQLite file in ``tmp_path``, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return str(request.getfixturevalue("pg_database"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first (stable otherwise): under ``-n auto --dist worksteal`` the
    long ones then start at once and the short ones fill the workers around them, instead
    of a bisect or a callgrind run starting last and holding one worker for minutes while
    the other waits (27 min against the sum of the tests' time over two workers)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (torch, numpy, SQLAlchemy, the tests' modules) lives until
    the worker ends: moved out of the collector's reach, so that the full collections the
    tests set off do not walk it again each time (their share of the unit tests' CPU: 21 %
    before, BENCHMARKS.md, "The integration tests' commands in their own process")."""
    gc.collect()
    gc.freeze()
