"""History in the store: series to judge, alerts and annotations (reads and writes only).

What a series means, and which alerts it raises, is decided above the store, by
:func:`benchbench.analysis.regressions.detect`; the values both sides exchange
(:class:`HistoryPoint` read, :class:`Alert` written) are defined here, with the
tables they come from and go to.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlalchemy as sa

from benchbench.core.errors import NotFoundError, UsageError
from benchbench.store import schema as t
from benchbench.store.store import Store, now

#: Annotation kinds and the alert status each one sets.
ANNOTATION_STATUS = {"acknowledge": "acknowledged", "ignore": "ignored", "expected": "expected"}

SeriesKey = tuple[str, str]  # (benchmark_id, environment_id)

#: Rows fetched at a time when every series is read (~15 MB of rows in memory at once).
_BATCH = 100_000


@dataclass(frozen=True)
class HistoryPoint:
    """One run's result for a series: ``median_s`` is None when the point failed."""

    run_id: str
    started_at: dt.datetime
    git_sha: str | None
    median_s: float | None


@dataclass(frozen=True)
class Alert:
    """A regression in one series, with the runs (and commits) around it."""

    benchmark_id: str
    environment_id: str
    last_good_run_id: str | None
    first_bad_run_id: str
    rel_change: float
    severity: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SeriesTable:
    """Every series of a store as arrays, read without an object per measurement.

    Runs are numbered in run order (oldest first, ties by id): ``run_ids[k]``,
    ``started_at[k]`` and ``git_shas[k]`` describe run number ``k``. Series ``i`` is
    ``keys[i]`` = (benchmark_id, environment_id); :meth:`runs` gives its run numbers
    (ascending) and :meth:`values` its values (NaN where the point failed, or where the
    metric was not measured).
    """

    run_ids: list[str]
    started_at: list[dt.datetime]
    git_shas: list[str | None]
    keys: list[SeriesKey]
    run_numbers: np.ndarray  # every series' run numbers, one series after another
    all_values: np.ndarray  # the matching values
    offsets: np.ndarray  # series i is [offsets[i], offsets[i + 1])

    def __len__(self) -> int:
        return len(self.keys)

    def runs(self, i: int) -> np.ndarray:
        return self.run_numbers[self.offsets[i] : self.offsets[i + 1]]

    def values(self, i: int) -> np.ndarray:
        return self.all_values[self.offsets[i] : self.offsets[i + 1]]

    def point(self, i: int, position: int) -> HistoryPoint:
        """The ``position``-th run of series ``i`` as a :class:`HistoryPoint`."""
        k = int(self.runs(i)[position])
        value = float(self.values(i)[position])
        median = None if math.isnan(value) else value
        return HistoryPoint(self.run_ids[k], self.started_at[k], self.git_shas[k], median)

    def history(self, i: int) -> list[HistoryPoint]:
        return [self.point(i, j) for j in range(self.offsets[i + 1] - self.offsets[i])]


def series_table(store: Store, metric: str = "time") -> SeriesTable:
    """Every series of the store in run order; failed points are gaps (NaN).

    ``metric``: ``time`` (the median per-call time, ``median_s``) or ``instructions``
    (``instructions_per_call``; a run that did not count the point leaves a gap).

    Two reads: the runs (thousands of rows), then per measurement its benchmark's and
    run's numbers (joined in the database) and its value (NaN unless ``ok``). The
    measurement columns read are in ``ix_measurement_series``, so a fleet's year (15
    million rows of ~2 KB) is read from that index. No Python object is made per
    measurement: PostgreSQL packs each benchmark's (run number, value) pairs into one
    ``bytea`` (``string_agg`` of ``int8send || float8send``) that NumPy reads as it
    is; other databases stream tuples from the driver's cursor a batch at a time
    (SQLAlchemy's rows would cost ~4 us each more). One sort of integer keys then puts
    them in series and run order.
    """
    m, r, b = t.measurement.c, t.run.c, t.benchmark.c
    order = (r.started_at, r.id)
    runs_query = sa.select(r.id, r.started_at, r.git_sha, r.environment_id).where(
        r.environment_id.is_not(None)
    )
    numbered_runs = runs_query.with_only_columns(
        r.id, (sa.func.row_number().over(order_by=order) - 1).label("n")
    ).cte("numbered_run")
    numbered_benches = sa.select(
        b.id, (sa.func.row_number().over(order_by=b.id) - 1).label("n")
    ).cte("numbered_benchmark")
    measured = m.instructions_per_call if metric == "instructions" else m.median_s
    value = sa.case((m.status == "ok", sa.cast(measured, sa.Float(53))), else_=None)
    joined = t.measurement.join(numbered_runs, numbered_runs.c.id == m.run_id).join(
        numbered_benches, numbered_benches.c.id == m.benchmark_id
    )
    status = m.status.in_(("ok", "error"))
    with store.engine.connect() as conn:
        runs = conn.execute(runs_query.order_by(*order)).all()
        benches = list(conn.execute(sa.select(b.id).order_by(b.id)).scalars())
        if conn.dialect.name == "postgresql":
            number = {bench: i for i, bench in enumerate(benches)}
            columns = _packed(conn, number, numbered_runs, value, status)
        else:
            query = sa.select(numbered_benches.c.n, numbered_runs.c.n, value)
            columns = _streamed(conn, query.select_from(joined).where(status))
    bench_of, run_of, values = columns
    envs, run_env = np.unique([row[3] for row in runs], return_inverse=True)
    width = max(len(envs), 1)
    key = bench_of * width + run_env.reshape(-1)[run_of] if run_of.size else run_of
    # One key per measurement (series, then run): a stable sort of one int64 array is
    # ~5x faster than numpy.lexsort of the two on 14 million values.
    by_series = np.argsort(key * max(len(runs), 1) + run_of, kind="stable")
    key, run_of, values = key[by_series], run_of[by_series], values[by_series]
    starts = np.flatnonzero(np.diff(key)) + 1
    ends = [key.size] if key.size else []
    offsets = np.concatenate(([0], starts, ends)).astype(np.int64)
    keys = [(benches[k // width], str(envs[k % width])) for k in key[offsets[:-1]].tolist()]
    return SeriesTable(
        run_ids=[row[0] for row in runs],
        started_at=[row[1] for row in runs],
        git_shas=[row[2] for row in runs],
        keys=keys,
        run_numbers=run_of,
        all_values=values,
        offsets=offsets,
    )


_PACKED = np.dtype([("run", ">i8"), ("value", ">f8")])
#: ``work_mem`` of the packed series read (a limit, not an allocation).
_PACKED_WORK_MEM = "1GB"


def _packed(
    conn: sa.Connection, number: dict[str, int], runs: Any, value: Any, where: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PostgreSQL: (benchmark number, run number, value) per measurement, read as one
    row per benchmark whose (run number, value) pairs are one big-endian binary string.

    The groups are held in memory at once (~16 bytes a measurement: ~230 MB for a
    fleet's year), so the query gets a ``work_mem`` that holds them: with the default
    4 MB the aggregate spills to disk in ~100 batches and takes twice as long."""
    m = t.measurement.c
    pair = sa.func.int8send(runs.c.n).op("||")(
        sa.func.float8send(sa.func.coalesce(value, sa.literal_column("'NaN'::float8")))
    )
    query = (
        sa.select(m.benchmark_id, sa.func.string_agg(pair, sa.literal_column("''::bytea")))
        .select_from(t.measurement.join(runs, runs.c.id == m.run_id))
        .where(where)
        .group_by(m.benchmark_id)
    )
    conn.exec_driver_sql(f"SET LOCAL work_mem = '{_PACKED_WORK_MEM}'")
    bench_parts, run_parts, value_parts = [], [], []
    for bench, packed in conn.execute(query):
        pairs = np.frombuffer(packed, dtype=_PACKED)
        run_parts.append(pairs["run"].astype(np.int64))
        value_parts.append(pairs["value"].astype(np.float64))
        bench_parts.append(np.full(pairs.size, number[bench], dtype=np.int64))
    if not run_parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(bench_parts), np.concatenate(run_parts), np.concatenate(value_parts)


def _streamed(
    conn: sa.Connection, query: sa.Select[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Other databases: the same three columns from ``query``'s rows, a batch of the
    driver's tuples at a time (None as NaN)."""
    sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    driver = conn.connection.driver_connection
    if driver is None:
        raise RuntimeError("series_table: the store's connection has no driver connection")
    cursor = driver.cursor()
    try:
        cursor.execute(sql)
        parts = []
        while rows := cursor.fetchmany(_BATCH):
            parts.append(np.array(rows, dtype=np.float64))
    finally:
        cursor.close()
    rows = np.concatenate(parts) if parts else np.zeros((0, 3))
    return rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2]


def load_series(store: Store, metric: str = "time") -> dict[SeriesKey, list[HistoryPoint]]:
    """Every series of the store as :class:`HistoryPoint` lists, oldest run first;
    failed points are gaps (None). :func:`series_table` without the arrays."""
    table = series_table(store, metric)
    return {key: table.history(i) for i, key in enumerate(table.keys)}


def baselines(store: Store) -> dict[SeriesKey, str]:
    """The newest ``expected`` alert per series: history is judged from its bad run on."""
    a = t.alert.c
    query = sa.select(a.benchmark_id, a.environment_id, a.first_bad_run_id, a.created_at).where(
        a.status == "expected"
    )
    out: dict[SeriesKey, tuple[Any, str]] = {}
    with store.engine.connect() as conn:
        for row in conn.execute(query.order_by(a.created_at)):
            out[(row.benchmark_id, row.environment_id)] = (row.created_at, row.first_bad_run_id)
    return {key: run for key, (_, run) in out.items()}


def save_alerts(store: Store, alerts: list[Alert]) -> int:
    """Store new alerts (an alert already stored keeps its status); returns how many were new."""
    rows = [
        {
            "benchmark_id": a.benchmark_id,
            "environment_id": a.environment_id,
            "last_good_run_id": a.last_good_run_id,
            "first_bad_run_id": a.first_bad_run_id,
            "rel_change": a.rel_change,
            "severity": a.severity,
            "status": "open",
            "created_at": now(),
            "detail": a.detail,
        }
        for a in alerts
    ]
    if not rows:
        return 0

    def write(conn: sa.Connection) -> int:
        before = conn.execute(sa.select(sa.func.count()).select_from(t.alert)).scalar_one()
        conn.execute(store._insert_ignore(t.alert), rows)
        after = conn.execute(sa.select(sa.func.count()).select_from(t.alert)).scalar_one()
        return int(after - before)

    return store.write(write)


def list_alerts(
    store: Store, *, since: dt.datetime | None = None, statuses: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """Alerts joined with their benchmark and first bad run, newest first."""
    a, b, r = t.alert.c, t.benchmark.c, t.run.c
    query = (
        sa.select(
            t.alert,
            b.suite,
            b.workload,
            b.variant,
            b.device,
            b.dtype,
            b.size,
            r.started_at.label("first_bad_at"),
            r.label.label("first_bad_label"),
        )
        .select_from(
            t.alert.join(t.benchmark, b.id == a.benchmark_id).join(
                t.run, r.id == a.first_bad_run_id
            )
        )
        .order_by(r.started_at.desc(), a.id)
    )
    if since is not None:
        query = query.where(r.started_at >= since)
    if statuses:
        query = query.where(a.status.in_(statuses))
    with store.engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]


def annotate(store: Store, alert_id: int, kind: str, text: str = "") -> None:
    """Acknowledge, ignore, or mark as expected (resets the baseline) one alert."""
    if kind not in ANNOTATION_STATUS:
        raise UsageError(
            f"annotation kind must be one of {', '.join(ANNOTATION_STATUS)}, got {kind!r}"
        )

    def write(conn: sa.Connection) -> None:
        alert = conn.execute(sa.select(t.alert).where(t.alert.c.id == alert_id)).first()
        if alert is None:
            raise NotFoundError(
                f"no alert {alert_id} in store {store.url}; "
                "`benchbench regressions --all` lists them"
            )
        conn.execute(
            t.alert.update().where(t.alert.c.id == alert_id), [{"status": ANNOTATION_STATUS[kind]}]
        )
        conn.execute(
            t.annotation.insert(),
            [
                {
                    "benchmark_id": alert.benchmark_id,
                    "environment_id": alert.environment_id,
                    "run_id": alert.first_bad_run_id,
                    "alert_id": alert_id,
                    "kind": kind,
                    "text": text,
                    "created_at": now(),
                }
            ],
        )

    store.write(write)
