"""The results store: open, migrate, write each point in its own transaction, read back.

The rows each write inserts, and a bundle's run merged point by point, are built by
:mod:`benchbench.store.writes`; the reads are one-line delegations to ``lookup`` and
``queries``."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from benchbench.core.errors import StoreError, StoreUnavailable
from benchbench.core.values import Result
from benchbench.machine.environment import Environment
from benchbench.store import lookup, queries, writes
from benchbench.store import schema as t
from benchbench.store.failures import describe, server_gone
from benchbench.store.rows import (
    benchmark_row_for,
    bulk_insert,
    insert_ignore,
    measurement_row_for,
    now,
)

if TYPE_CHECKING:
    import pandas as pd

Filter = queries.Filter

DEFAULT_PATH = Path("results") / "benchbench.db"
T = TypeVar("T")


def normalize_url(url: str | None) -> str:
    """A SQLAlchemy URL from ``--store`` / ``BENCHBENCH_STORE`` / the default file.

    A plain path means an SQLite file; ``postgresql://`` uses the psycopg driver.
    """
    url = url or os.environ.get("BENCHBENCH_STORE") or str(DEFAULT_PATH)
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    return url


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages and listings."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable store URL>"


class Store:
    """A results store on SQLite or PostgreSQL. Use :func:`open_store`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.url = engine.url.render_as_string(hide_password=True)
        # An SQLite file and its inode, once written: a file deleted (or its folder) under
        # an open connection still takes writes, into an inode nobody will read again.
        database = engine.url.database
        self._file = Path(database) if self.dialect == "sqlite" and database else None
        self._inode: int | None = None

    # -- plumbing ---------------------------------------------------------------

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    def write(self, fn: Callable[[Connection], T], attempts: int = 8) -> T:
        """Run ``fn`` in one transaction, retrying when SQLite reports a lock.

        WAL mode and a 30 s busy timeout absorb most contention; the retries (with
        jittered back-off) cover the lock upgrade races WAL still reports at once. A
        PostgreSQL server that cannot be reached raises :class:`StoreUnavailable` at once
        (its caller decides how long to wait: :mod:`benchbench.interchange.spool`).
        """
        self._check_file()
        for attempt in range(attempts):
            try:
                with (
                    self.engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn,
                    conn.begin(),
                ):
                    return fn(conn)
            except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
                message = str(exc.orig).strip()
                locked = "locked" in message or "busy" in message or "deadlock" in message
                if not locked or attempt == attempts - 1:
                    first = self.scrub(message).splitlines()[0] if message else "no message"
                    line = describe(self.url, f"write failed: {first}")
                    if self.dialect == "postgresql" and server_gone(exc):
                        raise StoreUnavailable(line) from None
                    raise StoreError(line) from None
                time.sleep(0.05 * 2**attempt * random.uniform(0.5, 1.5))
        raise StoreError(f"store {self.url}: write failed: no attempt made (attempts={attempts})")

    def _check_file(self) -> None:
        """Refuse to write when the SQLite file written before is gone or replaced (its
        folder deleted or moved mid-run): the write would land in a deleted file."""
        if self._file is None or str(self._file) == ":memory:":
            return
        try:
            inode = os.stat(self._file).st_ino
        except FileNotFoundError:
            inode = None
        if self._inode is None:  # the first write (a new store's file may not exist yet)
            self._inode = inode
            return
        if inode != self._inode:
            folder = self._file.resolve().parent
            state = "is gone" if inode is None else "was replaced by another file"
            raise StoreError(
                f"store {self._file}: the file {state} while benchbench had it open (its "
                f"folder {folder} deleted or moved?); nothing more is written to it: restore "
                "the store from a backup (or give --store PATH of a new one) and run the "
                "command again (a run: `benchbench run --resume RUN` measures what the "
                "restored store lacks)"
            )

    def scrub(self, text: str) -> str:
        """``text`` with the store's password (should a driver echo it) masked."""
        password = self.engine.url.password
        return text.replace(str(password), "***") if password else text

    def _insert_ignore(self, table: sa.Table) -> Any:
        return insert_ignore(table, self.dialect)

    # -- writing ----------------------------------------------------------------

    def save_environment(self, env: Environment) -> str:
        row = {
            "id": env.id,
            "machine": env.machine,
            "fields": env.fields,
            "info": env.info,
            "created_at": now(),
        }
        self.write(lambda c: c.execute(self._insert_ignore(t.environment), [row]))
        return env.id

    def create_run(self, run: Mapping[str, Any]) -> None:
        self.write(lambda c: c.execute(t.run.insert(), [dict(run)]))

    def update_run(self, run_id: str, **values: Any) -> None:
        self.write(lambda c: c.execute(t.run.update().where(t.run.c.id == run_id), [values]))

    def write_result(
        self, run_id: str, result: Result, created_at: dt.datetime | None = None
    ) -> None:
        """Store one point (benchmark row if new, measurement, telemetry) atomically.

        Idempotent: the run's row of the point is replaced, so a write retried after a
        commit whose acknowledgement was lost leaves one row. ``created_at``: when it
        was measured (default: now).
        """
        benchmark_row = benchmark_row_for(result)
        measurement = measurement_row_for(run_id, benchmark_row["id"], result, None, created_at)

        def write(conn: Connection) -> None:
            conn.execute(self._insert_ignore(t.benchmark), [benchmark_row])
            writes.delete_measurements(
                conn,
                (t.measurement.c.run_id == run_id)
                & (t.measurement.c.benchmark_id == benchmark_row["id"]),
            )
            new_id = conn.execute(t.measurement.insert(), [measurement]).inserted_primary_key
            if result.telemetry is not None and new_id is not None:
                conn.execute(
                    t.telemetry.insert(),
                    [{"measurement_id": new_id[0], "data": dict(result.telemetry)}],
                )

        self.write(write)

    def write_results(self, run_id: str, results: Sequence[Result], chunk: int = 5000) -> int:
        """Store many points of one run in one transaction (bulk import, benchmarks).

        Same rows as :meth:`write_result` point by point, but with ``executemany``
        and statistics computed in bulk: 100,000 points in seconds instead of minutes.
        A point already stored for the run is replaced. Returns the number written.
        """
        benchmarks, measurements, telemetry = writes.bulk_rows(run_id, results, now())
        if len({m["benchmark_id"] for m in measurements}) != len(measurements):
            raise StoreError(f"run {run_id}: write_results got the same point twice")

        def write(conn: Connection) -> None:
            ids = list(benchmarks)
            for start in range(0, len(ids), chunk):
                part = ids[start : start + chunk]
                bulk_insert(conn, t.benchmark, [benchmarks[i] for i in part], ignore=True)
                writes.delete_measurements(
                    conn,
                    (t.measurement.c.run_id == run_id) & t.measurement.c.benchmark_id.in_(part),
                )
            for start in range(0, len(measurements), chunk):
                bulk_insert(conn, t.measurement, measurements[start : start + chunk])
            writes.insert_telemetry(conn, run_id, telemetry)

        self.write(write)
        return len(measurements)

    def import_runs(self, runs: Sequence[writes.RunRecord]) -> dict[str, list[str]]:
        """Write every run's points the store lacks, with its environment, in one
        transaction: all of them or, on any error, none.

        A run not in the store is written whole; a run already there gets the points it
        lacks (a point it holds is left as it is), so importing the same bundle twice
        changes nothing, and a bundle a run spooled while its store's server was away
        (:mod:`benchbench.interchange.spool`) completes that run. Returns ``{"imported":
        [new run ids], "merged": [run ids that gained points or their end], "skipped":
        [run ids with nothing new]}``. Rows are built by the same code as a live run's
        (statistics derived from the samples); each point keeps its recorded
        ``created_at``.
        """
        report: dict[str, list[str]] = {"imported": [], "merged": [], "skipped": []}

        def write(conn: Connection) -> None:
            for key in report:  # a retried transaction starts the report again
                report[key].clear()
            for record in runs:
                report[writes.import_run(conn, record)].append(record.run["id"])

        self.write(write)
        return report

    # -- reading (each method is a query of :mod:`.lookup` or :mod:`.queries`) --

    def runs(self, limit: int | None = None, *, counts: bool = True) -> list[dict[str, Any]]:
        """Runs, newest first, with their machine and (unless ``counts=False``, which
        spares a pass over every measurement) point counts by status."""
        return lookup.runs(self.engine, limit, counts=counts)

    def resolve_run(self, ref: str, environment: str | None = None) -> dict[str, Any]:
        """A run by id, unique id prefix, label (newest with it), ``latest`` or ``latest~N``.

        ``latest~1`` is the run before the latest (the base of a nightly comparison).
        ``environment`` (an environment id, a prefix of one, or a machine label)
        restricts the candidates: ``latest`` then means the newest run there.
        """
        return lookup.resolve_run(self.engine, ref, environment)

    def earlier_runs(self, run: Mapping[str, Any], count: int) -> list[dict[str, Any]]:
        """Up to ``count`` finished runs before ``run`` of its suites on its environment,
        newest first."""
        return lookup.earlier_runs(self.engine, run, count)

    def environment_ids(self, ref: str) -> list[str]:
        """Ids of the environments ``ref`` names: an id, an id prefix or a machine label.

        Raises :class:`NotFoundError` listing the known machines when nothing matches.
        """
        return lookup.environment_ids(self.engine, ref)

    def environment(self, env_id: str) -> dict[str, Any] | None:
        """The environment row ``env_id``, or None."""
        return lookup.environment(self.engine, env_id)

    def environments(self) -> list[dict[str, Any]]:
        """Every environment row (id, machine, fields, info, created_at), oldest first."""
        return lookup.environments(self.engine)

    def group_runs(
        self, group_ids: Sequence[str], prefix: str | None = None
    ) -> list[dict[str, Any]]:
        """Runs of the groups ``group_ids`` (or whose group id starts with ``prefix``),
        oldest first."""
        return lookup.group_runs(self.engine, group_ids, prefix)

    def recent_finished_runs(self, limit: int, exclude_group: str | None = None) -> list[str]:
        """Ids of the ``limit`` newest finished runs not in group ``exclude_group``."""
        return lookup.recent_finished_runs(self.engine, limit, exclude_group)

    def measurements(self, run_id: str) -> list[dict[str, Any]]:
        """Every stored point of a run, joined with its benchmark, in run order."""
        return queries.measurements(self.engine, run_id)

    def telemetry(self, run_id: str) -> dict[int, Any]:
        """The telemetry documents of a run's measurements, by measurement id."""
        return queries.telemetry(self.engine, run_id)

    def done_benchmark_ids(self, run_id: str) -> set[str]:
        """Benchmark ids the run has stored a point of (``--resume`` skips them)."""
        return queries.done_benchmark_ids(self.engine, run_id)

    def device_extras(
        self,
        prefix: str,
        run_ids: Sequence[str] | None = None,
        keys: Sequence[str] | None = None,
    ) -> dict[tuple[str, str], tuple[str, Any]]:
        """See :func:`benchbench.store.queries.device_extras`."""
        return queries.device_extras(self.engine, prefix, run_ids, keys)

    def counted_extras(self, run_ids: Sequence[str] | None = None) -> dict[tuple[str, str], Any]:
        """See :func:`benchbench.store.queries.counted_extras`."""
        return queries.counted_extras(self.engine, run_ids)

    def process_medians(
        self, run_ids: Sequence[str] | None = None, ok_only: bool = False
    ) -> dict[tuple[str, str], list[float]]:
        """See :func:`benchbench.store.queries.process_medians`."""
        return queries.process_medians(self.engine, run_ids, ok_only)

    def benchmarks(self) -> list[dict[str, Any]]:
        """Every benchmark row: id, the point's keys (suite, workload, variant, device,
        dtype, size, shape, params) and code version."""
        return queries.benchmarks(self.engine)

    def ok_durations(self, run_ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored ``duration_s`` of the ok points of ``run_ids``, by benchmark id."""
        return queries.ok_durations(self.engine, run_ids)

    def annotations(self) -> list[dict[str, Any]]:
        """Every annotation row, oldest first."""
        return queries.annotation_rows(self.engine)

    def dataframe(
        self,
        *,
        suite: Filter = None,
        workload: Filter = None,
        variant: Filter = None,
        device: Filter = None,
        dtype: Filter = None,
        run: Filter = None,
        run_ids: Sequence[str] | None = None,
        environment: Filter = None,
        since: dt.datetime | str | None = None,
        until: dt.datetime | str | None = None,
        samples: bool = False,
        columns: Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """Measurements joined with their benchmark, run and environment, oldest first.

        Every filter takes one value or a list (``device=["cpu", "cuda"]``); ``run``
        takes ids, prefixes, labels or ``latest``; ``run_ids`` exact run ids, any number
        of them, read through the ``(run_id, benchmark_id)`` index (the dashboard reads
        the runs its pages show this way); ``environment`` ids, prefixes or machine
        labels; ``since``/``until`` datetimes or ISO strings (UTC when naive)
        bound the run's start. Columns: :data:`benchbench.store.queries.DATAFRAME_COLUMNS`
        (plus ``samples_s`` with ``samples=True``), or those of them named in ``columns``
        (each costs ~0.5 us a row to read); times are per call, in seconds.
        """
        return queries.dataframe(
            self.engine,
            suite=suite,
            workload=workload,
            variant=variant,
            device=device,
            dtype=dtype,
            run=run,
            run_ids=run_ids,
            environment=environment,
            since=since,
            until=until,
            samples=samples,
            columns=columns,
        )

    def history(self, benchmark_id: str, environment_id: str) -> list[dict[str, Any]]:
        """One benchmark's results in one environment, oldest run first (dashboard, alerts)."""
        return queries.history(self.engine, benchmark_id, environment_id)

    def counts(self) -> dict[str, int]:
        """Row count of every table (used to prove a rejected write changed nothing)."""
        return queries.counts(self.engine)


__all__ = [
    "DEFAULT_PATH",
    "Store",
    "benchmark_row_for",
    "measurement_row_for",
    "normalize_url",
    "now",
    "safe_url",
]
