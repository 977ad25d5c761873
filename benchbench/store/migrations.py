"""Opening a store: create it, refuse a newer one, migrate an older one.

Each entry of ``MIGRATIONS`` takes a store from version ``v`` to ``v + 1`` inside
one transaction. Version 1 is the first; later versions add their step here and a
checked-in store of the previous version to ``tests/fixtures/``.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import weakref
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from benchbench.core.errors import SchemaVersionError, StoreError, UsageError
from benchbench.store import schema as t
from benchbench.store.failures import describe
from benchbench.store.store import Store, normalize_url, safe_url


def _add_columns(table: sa.Table, names: tuple[str, ...]) -> Callable[[Connection], None]:
    """A step that appends ``names`` (as declared in :mod:`benchbench.store.schema`)."""

    def step(conn: Connection) -> None:
        for name in names:
            kind = table.c[name].type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind}")

    return step


def _series_index(conn: Connection) -> None:
    """Version 4: the covering ``ix_measurement_series`` replaces the two-column index it
    extends (a fleet's year of 15 million rows takes minutes to index, once)."""
    index = next(i for i in t.measurement.indexes if i.name == "ix_measurement_series")
    index.create(conn, checkfirst=True)
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_measurement_benchmark_run")


def _judgements(conn: Connection) -> None:
    """Version 5: the detector's verdicts, ``series_judgement`` (empty: the next
    `regressions` fills it)."""
    t.series_judgement.create(conn, checkfirst=True)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _add_columns(t.measurement, ("max_abs_error", "process_samples", "process_medians_s")),
    2: _add_columns(t.measurement, ("instructions_per_call", "instruction_counts")),
    3: _series_index,
    4: _judgements,
}


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


#: Store URL schemes benchbench opens (SQLAlchemy's ``dialect+driver``) and the package
#: each driver comes from, for the message when it is missing. A plain path and
#: ``sqlite:///`` use Python's own sqlite3; ``postgresql://`` and ``postgres://`` mean
#: psycopg 3 (see ``normalize_url``). Other engines are not supported: the schema, the
#: upserts (``insert_ignore``) and the write retries are written for these two.
DRIVERS: dict[str, str | None] = {
    "sqlite": None,
    "sqlite+pysqlite": None,
    "postgresql+psycopg": "psycopg[binary]",
    "postgresql+psycopg2": "psycopg2-binary",
}

#: What ``--store`` accepts, for messages.
SUPPORTED = "an SQLite file path or sqlite:///PATH, or postgresql://USER@HOST/DATABASE"


#: libpq settings of every PostgreSQL connection unless the URL gives its own
#: (``?connect_timeout=30``): a server that does not answer is noticed in seconds, not
#: hours. ``connect_timeout`` bounds a connection attempt; TCP keepalives probe an idle
#: connection after 30 s and give up after 3 unanswered probes 10 s apart;
#: ``tcp_user_timeout`` drops a connection whose sent data goes unacknowledged for 60 s
#: (a server host that vanished mid-statement); the server cancels a statement that
#: runs past 10 minutes (a fleet's bulk import takes ~1 minute).
PG_CONNECT_ARGS: dict[str, str | int] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,
}
PG_STATEMENT_TIMEOUT_MS = 600_000


def _pg_connect_args(url: str) -> dict[str, str | int]:
    """:data:`PG_CONNECT_ARGS` and the statement timeout, less what ``url`` sets itself."""
    given = sa.make_url(url).query
    args = {key: value for key, value in PG_CONNECT_ARGS.items() if key not in given}
    if "options" not in given:
        args["options"] = f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}"
    return args


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


#: The engines this process made, each closed at exit by the process that made it (a
#: forked child leaves its parent's connections alone): SQLite folds its write-ahead log
#: back into the store when the last connection closes, and a PostgreSQL server sees a
#: clean goodbye, even when the CLI ends without tearing its modules down.
_ENGINES: weakref.WeakKeyDictionary[Engine, int] = weakref.WeakKeyDictionary()


@atexit.register
def _dispose_engines() -> None:
    for engine, pid in list(_ENGINES.items()):
        if pid == os.getpid():
            engine.dispose()


def make_engine(url: str) -> Engine:
    """An engine for ``url``: SQLite in WAL mode with a busy timeout, or PostgreSQL.

    Raises :class:`UsageError` (exit 2) for a scheme benchbench does not support, e.g.
    ``mysql://``, and :class:`StoreError` (exit 1) when the PostgreSQL driver is not
    installed, naming the package to install.
    """
    url = normalize_url(url)
    scheme = _scheme(url)
    if scheme not in DRIVERS:
        raise UsageError(
            f"store URL {safe_url(url)!r}: engine {scheme!r} is not supported; give {SUPPORTED}"
        )
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _sqlite_begin)
        _ENGINES[engine] = os.getpid()
        return engine
    try:
        engine = sa.create_engine(url, pool_pre_ping=True, connect_args=_pg_connect_args(url))
        _ENGINES[engine] = os.getpid()
        return engine
    except ImportError as exc:
        # SQLAlchemy imports the driver here: psycopg is a dependency of benchbench,
        # so this is an environment that left it out (or a psycopg2 URL).
        raise StoreError(
            f"store URL {safe_url(url)!r} needs the PostgreSQL driver {exc.name or scheme!r}, "
            f"which is not installed: pip install {DRIVERS[scheme]!r}"
        ) from None
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise StoreError(f"store URL {safe_url(url)!r} is not usable: {exc}") from None


def sqlite_path(url: str) -> Path | None:
    """The file of an SQLite store URL, or None for PostgreSQL and in-memory SQLite."""
    url = normalize_url(url)
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///")
    return None if path in ("", ":memory:") else Path(path)


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """Open the store at ``url``, migrating an older schema; create it when ``create``.

    ``url`` defaults to ``$BENCHBENCH_STORE``, then ``results/benchbench.db``.

    ``create=False`` is for commands that only read (``runs``, ``show``, ``compare``,
    ``export``, ``regressions``, the dashboard ...): a store that does not exist (an
    SQLite file that is not there, or a database without benchbench's tables) raises
    :class:`StoreError` naming it instead of creating an empty store (and its folder)
    where a mistyped path points. It is not a read-only connection: a store of an older
    schema is still migrated, because every query is written against the current schema
    (reading old schemas would need a second set of queries), each migration runs in one
    transaction (a failure leaves the store as it was), and the next command that
    writes would migrate it anyway.
    """
    url = normalize_url(url)
    path = sqlite_path(url)
    if not create and path is not None and not _sqlite_has_schema(path):
        raise StoreError(_no_store(safe_url(url), path))
    engine = make_engine(url)
    store = Store(engine)
    try:
        with engine.connect() as conn:
            current = _current_version(conn)
        if current is None and not create:
            raise StoreError(_no_store(store.url, path))
        if current != t.SCHEMA_VERSION:
            # Create or migrate under an exclusive lock, then look again: another process
            # opening the same new store at the same moment may have done it already.
            store.write(_locked_ensure_schema)
    except SchemaVersionError as exc:
        raise SchemaVersionError(f"store {store.url}: {exc}") from None
    except sa.exc.DBAPIError as exc:
        message = f"cannot open store {store.url}: {store.scrub(_first_line(exc))}"
        if engine.dialect.name == "sqlite":
            # Server and credentials mean nothing for a file: what happened to it, the fix.
            message = describe(store.url, store.scrub(_first_line(exc)))
        elif isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)):
            message += "; check the URL, that the server runs and the credentials"
        raise StoreError(message) from None
    return store


def _sqlite_has_schema(path: Path) -> bool:
    """Whether ``path`` is an SQLite file with benchbench's tables, looked at read-only.

    Read-only so that a mistyped path to another program's database is left as it was:
    the engine's first connection would switch it to WAL mode, a lasting change. A file
    SQLite cannot read counts as having them, so that opening it reports SQLite's own
    error ("file is not a database") with the advice for SQLite.
    """
    if not path.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
    except sqlite3.Error:
        return True
    return found is not None


def _no_store(url: str, path: Path | None) -> str:
    if path is None:
        return (
            f"no store at {url}: the database has no benchbench tables; give --store URL "
            "of a database that holds a store, or run `benchbench run` (or import) first"
        )
    if path.is_dir():
        where, what = str(path), "it is a folder, not an SQLite file"
    elif path.exists():
        where, what = str(path), "the file has no benchbench tables"
    else:
        where, what = str(path), "no such file"
    return (
        f"no store at {where}: {what}; give --store PATH of an existing store, "
        "or run `benchbench run` first"
    )


def _first_line(exc: sa.exc.DBAPIError) -> str:
    lines = str(exc.orig).strip().splitlines()
    return lines[0] if lines else type(exc.orig).__name__


def _current_version(conn: Connection) -> int | None:
    """The store's schema version, or None when the schema does not exist yet."""
    if not sa.inspect(conn).has_table("schema_version"):
        return None
    version = conn.execute(sa.select(sa.func.max(t.schema_version.c.version))).scalar_one()
    if version is not None and version > t.SCHEMA_VERSION:
        raise _newer(version)
    return int(version) if version is not None else None


def _newer(version: int) -> SchemaVersionError:
    return SchemaVersionError(
        f"the store has schema version {version}, newer than this benchbench "
        f"understands ({t.SCHEMA_VERSION}); upgrade benchbench (pip install -U benchbench) "
        "to read it, or give --store PATH of another store"
    )


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
        raise _newer(version)
    while version < t.SCHEMA_VERSION:
        MIGRATIONS[version](conn)
        version += 1
        conn.execute(t.schema_version.delete())
        conn.execute(t.schema_version.insert(), [{"version": version}])
