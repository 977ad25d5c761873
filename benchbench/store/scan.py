"""Every measurement's series columns as arrays: the one scan of ``ix_measurement_series``
that the regression detector (:func:`benchbench.store.history.series_table`) and the
dashboard's history (:func:`benchbench.store.series.series_rows`) are built from.

A fleet's year is ~14 million measurements. The scan reads only columns the covering
index holds (:data:`benchbench.store.schema.SERIES_COLUMNS`), so neither engine touches
the ~2 KB rows, and turns each batch of rows into NumPy arrays at once: the driver's own
cursor hands over plain tuples (SQLAlchemy's result rows and a DataFrame built from them
cost ~9 us a row more here, 308,000 rows read in 4.0 s instead of 1.4 s), which become
one 2-D array whose columns are the arrays, a hash join numbers the runs and one
factorisation the benchmarks. No Python object is built per measurement beyond the
driver's tuple and its values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlalchemy as sa

from benchbench.core.errors import StoreError
from benchbench.store import schema as t
from benchbench.store.store import Store

#: Status codes of the arrays: what the dashboard's pages use too (``s`` in its data).
STATUS_CODES: dict[str, int] = {"ok": 0, "skipped": 1, "error": 2}

#: Rows fetched at a time (~15 MB of tuples in memory at once).
BATCH = 100_000

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
        sort = np.argsort(group * n_run + self.run[rows])
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
    status_index = pd.Index(list(STATUS_CODES))
    benches: dict[str, int] = {}
    parts: list[list[np.ndarray]] = []
    with store.engine.connect() as conn:
        runs = conn.execute(runs_query).all()
        run_index = pd.Index([row[0] for row in runs])
        envs, run_env = np.unique([row[3] or NO_ENVIRONMENT for row in runs], return_inverse=True)
        # The driver's cursor (server-side on PostgreSQL, so a year is never all in
        # memory as rows): plain tuples, no SQLAlchemy row per measurement.
        driver = conn.connection.driver_connection
        if driver is None:  # only after the connection was closed, which it is not here
            raise StoreError(f"store {store.url}: its connection was closed while reading")
        # psycopg's binary rows are built in half the time of its text rows (1.9 against
        # 3.6 us a row of these columns here).
        how = {"name": "benchbench_scan", "binary": True} if store.dialect == "postgresql" else {}
        cursor = driver.cursor(**how)
        try:
            cursor.execute(sql)
            while batch := cursor.fetchmany(BATCH):
                # One 2-D array of the tuples, then its columns: 3-5 times faster than
                # zip(*batch) on 100,000 rows.
                cols = np.array(batch, dtype=object).reshape(len(batch), 3 + len(columns))
                codes, names = pd.factorize(cols[:, 0])
                to_global = np.array([benches.setdefault(n, len(benches)) for n in names])
                number = run_index.get_indexer(cols[:, 1])
                status = status_index.get_indexer(cols[:, 2])
                keep = number >= 0  # a run written after the runs were read: next time
                part = [to_global[codes][keep], number[keep], np.where(status < 0, 2, status)[keep]]
                part += [cols[keep, 3 + k].astype(np.float64) for k in range(len(columns))]
                parts.append(part)
        finally:
            cursor.close()

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
