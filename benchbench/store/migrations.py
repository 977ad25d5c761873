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

from benchbench.core.errors import SchemaVersionError, StoreError
from benchbench.store import schema as t
from benchbench.store.store import Store, normalize_url, safe_url

MIGRATIONS: dict[int, Callable[[Connection], None]] = {}


#: Key of the PostgreSQL advisory lock that serialises schema creation and migration
#: between processes opening the same new store at once (any constant works: it only
#: has to be the same in every benchbench).
_SCHEMA_LOCK_KEY = 0x62656E6368


def _sqlite_pragmas(dbapi_conn: object, _record: object) -> None:
    # Take transactions out of the sqlite3 module's hands (it would not BEGIN before DDL,
    # so a half-created schema could be seen by another process); ``_sqlite_begin`` emits
    # BEGIN itself. This is SQLAlchemy's documented recipe for pysqlite.
    dbapi_conn.isolation_level = None  # type: ignore[attr-defined]
    cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
    # WAL lets readers run beside one writer; the busy timeout makes a writer wait
    # for the lock instead of failing at once with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    # Writers ask for BEGIN IMMEDIATE (execution option ``sqlite_begin``): the write lock
    # is taken at the start, where the busy timeout waits for it. A deferred transaction
    # that reads first and then writes fails at once with "database is locked" when
    # another writer got there in between, whatever the timeout.
    mode = conn.get_execution_options().get("sqlite_begin", "")
    conn.exec_driver_sql(f"BEGIN {mode}".strip())


def make_engine(url: str) -> Engine:
    """An engine for ``url``: SQLite in WAL mode with a busy timeout, or PostgreSQL."""
    url = normalize_url(url)
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _sqlite_begin)
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
    store = Store(engine)
    try:
        with engine.connect() as conn:
            current = _current_version(conn)
        if current != t.SCHEMA_VERSION:
            # Create or migrate under an exclusive lock, then look again: another process
            # opening the same new store at the same moment may have done it already.
            store.write(_locked_ensure_schema)
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise StoreError(
            f"cannot open store {store.url}: {store.scrub(_first_line(exc))}; "
            "check the URL, that the server runs and the credentials"
        ) from None
    except sa.exc.DBAPIError as exc:
        message = store.scrub(_first_line(exc))
        raise StoreError(f"cannot open store {store.url}: {message}") from None
    return store


def _first_line(exc: sa.exc.DBAPIError) -> str:
    lines = str(exc.orig).strip().splitlines()
    return lines[0] if lines else type(exc.orig).__name__


def _current_version(conn: Connection) -> int | None:
    """The store's schema version, or None when the schema does not exist yet."""
    if not sa.inspect(conn).has_table("schema_version"):
        return None
    version = conn.execute(sa.select(sa.func.max(t.schema_version.c.version))).scalar_one()
    if version is not None and version > t.SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the store has schema version {version}, newer than this benchbench "
            f"understands ({t.SCHEMA_VERSION}); upgrade benchbench to read it"
        )
    return int(version) if version is not None else None


def _locked_ensure_schema(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK_KEY)))
    _ensure_schema(conn)


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
