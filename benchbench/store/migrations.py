"""Opening a store: create it, refuse a newer one, migrate an older one.

Each entry of ``MIGRATIONS`` takes a store from version ``v`` to ``v + 1`` inside
one transaction. Version 1 is the first; later versions add their step here and a
checked-in store of the previous version to ``tests/fixtures/``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from benchbench.errors import SchemaVersionError, StoreError
from benchbench.store import schema as t
from benchbench.store.store import Store, normalize_url, safe_url

MIGRATIONS: dict[int, Callable[[Connection], None]] = {}


def _sqlite_pragmas(dbapi_conn: object, _record: object) -> None:
    cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
    # WAL lets readers run beside one writer; the busy timeout makes a writer wait
    # for the lock instead of failing at once with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    try:
        return sa.create_engine(url, pool_pre_ping=True)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise StoreError(f"store URL {safe_url(url)!r} is not usable: {exc}") from None


def open_store(url: str | None = None) -> Store:
    """Open (creating or migrating as needed) the store at ``url``.

    ``url`` defaults to ``$BENCHBENCH_STORE``, then ``results/benchbench.db``.
    """
    engine = make_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            _ensure_schema(conn)
    except sa.exc.OperationalError as exc:
        first_line = str(exc.orig).strip().splitlines()[0]
        raise StoreError(f"cannot open store {safe_url(str(engine.url))}: {first_line}") from None
    return Store(engine)


def _ensure_schema(conn: Connection) -> None:
    inspector = sa.inspect(conn)
    if not inspector.has_table("schema_version"):
        if inspector.has_table("run"):
            raise StoreError(
                "the database has a 'run' table but no schema_version: not a benchbench store"
            )
        t.metadata.create_all(conn)
        conn.execute(t.schema_version.insert(), [{"version": t.SCHEMA_VERSION}])
        return
    version = conn.execute(sa.select(sa.func.max(t.schema_version.c.version))).scalar_one()
    if version is None:
        raise StoreError("the store's schema_version table is empty: the store is damaged")
    if version > t.SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the store has schema version {version}, newer than this benchbench "
            f"understands ({t.SCHEMA_VERSION}); upgrade benchbench to read it"
        )
    while version < t.SCHEMA_VERSION:
        MIGRATIONS[version](conn)
        version += 1
        conn.execute(t.schema_version.delete())
        conn.execute(t.schema_version.insert(), [{"version": version}])
