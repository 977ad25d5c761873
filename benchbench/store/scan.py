"""Every measurement's series columns as arrays: the one scan of ``ix_measurement_series``
that the regression detector (:func:`benchbench.store.history.series_table`) and the
dashboard's history (:func:`benchbench.store.series.series_rows`) are built from.

A fleet's year is ~14 million measurements. The scan reads only columns the covering
index holds (:data:`benchbench.store.schema.SERIES_COLUMNS`), so neither engine touches
the ~2 KB rows, and turns what it reads into NumPy arrays a batch at a time: on SQLite
the driver's own cursor hands over plain tuples (SQLAlchemy's result rows and a
DataFrame built from them cost ~9 us a row more here, 308,000 rows read in 4.0 s instead
of 1.4 s), which become one 2-D array whose columns are the arrays; on PostgreSQL each
benchmark's rows come as one row of packed bytes (:func:`_grouped`). A hash join numbers
the runs and one factorisation the benchmarks. No Python object is built per
measurement beyond the driver's tuple or run id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from benchbench.core.errors import StoreError, UsageError
from benchbench.store import schema as t
from benchbench.store.store import Store

#: Status codes of the arrays: what the dashboard's pages use too (``s`` in its data).
STATUS_CODES: dict[str, int] = {"ok": 0, "skipped": 1, "error": 2}

#: Rows fetched at a time (~15 MB of tuples in memory at once).
BATCH = 100_000

#: ``work_mem`` of PostgreSQL's grouped read (:func:`_grouped`).
GROUPED_WORK_MEM = "1GB"

#: The environment of a run that has none (a run whose environment was removed).
NO_ENVIRONMENT = ""


@dataclass(frozen=True)
class Scan:
    """Rows of the measurement table as arrays, in the order the index gave them.

    Runs are numbered in run order (oldest first, ties by id): ``run_ids[k]``,
    ``started_at[k]``, ``git_shas[k]`` and ``run_environment[k]`` (a number into
    ``environments``) describe run ``k``. Row ``j`` is benchmark ``benchmarks[bench[j]]``
    in run ``run[j]``, with ``status[j]`` (:data:`STATUS_CODES`; an unknown status is an
    error) and ``values[column][j]`` (NaN for NULL).
    """

    run_ids: list[str]
    started_at: list[dt.datetime]
    git_shas: list[str | None]
    environments: list[str]
    run_environment: np.ndarray
    benchmarks: list[str]
    bench: np.ndarray
    run: np.ndarray
    status: np.ndarray
    values: dict[str, np.ndarray]

    def with_environment(self) -> np.ndarray:
        """Per row: does its run have an environment (then it belongs to a series)?"""
        if NO_ENVIRONMENT not in self.environments:
            return np.ones(self.run.size, dtype=bool)
        none = self.environments.index(NO_ENVIRONMENT)
        return self.run_environment[self.run] != none

    def series_order(self, keep: np.ndarray | None = None) -> SeriesOrder:
        """The rows (those where ``keep``) grouped by (benchmark, environment), each
        group in run order.

        One sort of one integer key: ``np.lexsort`` of two keys took twice as long on
        14 million rows (9 s against 4.5 s on our loaded 2-core machine)."""
        rows = np.arange(self.run.size) if keep is None else np.flatnonzero(keep)
        if not rows.size:
            empty = np.zeros(0, np.int64)
            return SeriesOrder(empty, np.zeros(1, np.int64), empty, empty)
        n_env, n_run = max(len(self.environments), 1), max(len(self.run_ids), 1)
        group = self.bench[rows] * n_env + self.run_environment[self.run[rows]]
        # Stable: the rows come grouped by benchmark, which a merge sort uses (1.6x
        # faster than the default quicksort on a fleet's 14 million rows).
        sort = np.argsort(group * n_run + self.run[rows], kind="stable")
        group = group[sort]
        starts = np.flatnonzero(np.diff(group)) + 1
        offsets = np.concatenate(([0], starts, [group.size])).astype(np.int64)
        first = group[offsets[:-1]]
        return SeriesOrder(rows[sort], offsets, first // n_env, first % n_env)


@dataclass(frozen=True)
class SeriesOrder:
    """Rows in series order: series ``i`` is rows ``order[offsets[i]:offsets[i + 1]]``
    of benchmark number ``bench[i]`` in environment number ``environment[i]``."""

    order: np.ndarray
    offsets: np.ndarray
    bench: np.ndarray
    environment: np.ndarray


#: Rows read: ``(benchmark ids, each row's index into them, run numbers (-1 for a run
#: the runs read did not hold), status codes, values: one row per measurement, one column
#: per column read)``.
Batch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _rows(driver: Any, sql: str, width: int, run_index: pd.Index) -> Iterator[Batch]:
    """Batches of rows read through the driver's cursor: plain tuples, no SQLAlchemy
    row per measurement."""
    status_index = pd.Index(list(STATUS_CODES))
    cursor = driver.cursor()
    try:
        cursor.execute(sql)
        while batch := cursor.fetchmany(BATCH):
            # One 2-D array of the tuples, then its columns: 3-5 times faster than
            # zip(*batch) on 100,000 rows.
            cols = np.array(batch, dtype=object).reshape(len(batch), 3 + width)
            codes, names = pd.factorize(cols[:, 0])
            status = status_index.get_indexer(cols[:, 2])
            values = cols[:, 3:].astype(np.float64)
            runs = run_index.get_indexer(pd.Index(cols[:, 1]))
            yield np.asarray(names), codes, runs, np.where(status < 0, 2, status), values
    finally:
        cursor.close()


def _grouped(
    driver: Any, columns: Sequence[str], statuses: Sequence[str] | None
) -> Iterator[Batch]:
    """The rows of each benchmark as one PostgreSQL row, streamed: per measurement its
    run's number (joined in the database, in the order :func:`scan` numbers the runs),
    its status code and its values, packed in one ``bytea`` (big-endian, NaN for NULL)
    that NumPy reads in place.

    No Python object is made per measurement: on a fleet's year (14 million rows) an
    ``array_agg`` of the run ids, a string each, and their hash join in Python cost
    ~65 s; numbers packed by the database cost ~10 s. The groups are held in memory
    at once (~25 bytes a measurement), so the query gets a ``work_mem`` that holds
    them: with the default 4 MB the aggregate spills to disk in ~100 batches and takes
    twice as long (a limit, not an allocation)."""
    m, r = t.measurement.name, t.run.name
    code = "decode(CASE status WHEN 'ok' THEN '00' WHEN 'skipped' THEN '01' ELSE '02' END, 'hex')"
    values = [f"float8send(coalesce({c}, 'NaN'::float8))" for c in columns]
    packed = " || ".join(["int8send(numbered.n)", code, *values])
    where = ""
    if statuses is not None:
        where = "WHERE status IN (" + ", ".join(f"'{_status(s)}'" for s in statuses) + ")"
    sql = (
        f"WITH numbered AS (SELECT id, row_number() OVER (ORDER BY started_at, id) - 1 AS n "
        f"FROM {r}) "
        f"SELECT benchmark_id, string_agg({packed}, ''::bytea) "
        f"FROM {m} JOIN numbered ON numbered.id = {m}.run_id {where} GROUP BY benchmark_id"
    )
    record = np.dtype([("run", ">i8"), ("s", "u1"), ("v", ">f8", (len(columns),))])
    cursor = driver.cursor(binary=True)
    try:
        cursor.execute(f"SET LOCAL work_mem = '{GROUPED_WORK_MEM}'")
        for bench, data in cursor.stream(sql):
            rows = np.frombuffer(data, record)
            yield (
                np.array([bench], dtype=object),
                np.zeros(rows.size, dtype=np.int64),
                rows["run"].astype(np.int64),
                rows["s"].astype(np.int64),
                rows["v"].astype(np.float64).reshape(rows.size, len(columns)),
            )
    finally:
        cursor.close()


def _status(name: str) -> str:
    if name not in STATUS_CODES:
        raise UsageError(f"scan: status must be one of {list(STATUS_CODES)}, got {name!r}")
    return name


def scan(store: Store, columns: Sequence[str], statuses: Sequence[str] | None = None) -> Scan:
    """Every measurement (of ``statuses``, default all) with ``columns`` (float columns
    of :data:`~benchbench.store.schema.SERIES_COLUMNS`), and every run, as arrays."""
    m, r = t.measurement.c, t.run.c
    query = sa.select(m.benchmark_id, m.run_id, m.status, *(m[c] for c in columns))
    if statuses is not None:
        query = query.where(m.status.in_(list(statuses)))
    sql = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    runs_query = sa.select(r.id, r.started_at, r.git_sha, r.environment_id).order_by(
        r.started_at, r.id
    )
    benches: dict[str, int] = {}
    parts: list[list[np.ndarray]] = []
    with store.engine.connect() as conn:
        if store.dialect == "postgresql":
            # The runs and the rows from one snapshot: the rows' run numbers are the
            # runs' positions in the list read first.
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        runs = conn.execute(runs_query).all()
        run_index = pd.Index([row[0] for row in runs])
        envs, run_env = np.unique([row[3] or NO_ENVIRONMENT for row in runs], return_inverse=True)
        driver = conn.connection.driver_connection
        if driver is None:  # only after the connection was closed, which it is not here
            raise StoreError(f"store {store.url}: its connection was closed while reading")
        if store.dialect == "postgresql":
            rows = _grouped(driver, columns, statuses)
        else:
            rows = _rows(driver, sql, len(columns), run_index)
        for names, codes, number, status, values in rows:
            to_global = np.array([benches.setdefault(n, len(benches)) for n in names])
            # A run written after the runs were read: next time.
            keep = (number >= 0) & (number < len(runs))
            part = [to_global[codes][keep], number[keep], status[keep]]
            part += [values[keep, k] for k in range(len(columns))]
            parts.append(part)

    def joined(k: int, dtype: type) -> np.ndarray:
        return np.concatenate([p[k] for p in parts]).astype(dtype) if parts else np.zeros(0, dtype)

    return Scan(
        run_ids=[row[0] for row in runs],
        started_at=[row[1] for row in runs],
        git_shas=[row[2] for row in runs],
        environments=[str(e) for e in envs],
        run_environment=np.asarray(run_env, dtype=np.int64).reshape(-1),
        benchmarks=list(benches),
        bench=joined(0, np.int64),
        run=joined(1, np.int64),
        status=joined(2, np.int8),
        values={c: joined(3 + k, np.float64) for k, c in enumerate(columns)},
    )
