"""History in the store: series to judge, alerts and annotations (reads and writes only).

What a series means, and which alerts it raises, is decided above the store, by
:func:`benchbench.analysis.regressions.detect`; the values both sides exchange
(:class:`HistoryPoint` read, :class:`Alert` written) are defined here, with the
tables they come from and go to.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

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


def load_series(store: Store, metric: str = "time") -> dict[SeriesKey, list[HistoryPoint]]:
    """Every series of the store, oldest run first; failed points are gaps (None).

    ``metric``: ``time`` (the median per-call time, ``median_s``) or ``instructions``
    (``instructions_per_call``; a run that did not count the point leaves a gap). The
    value is carried in :attr:`HistoryPoint.median_s` either way.

    Two reads and a join here: the runs (thousands of rows), then the measurements'
    ``(benchmark, run, status, value)`` alone, which ``ix_measurement_series`` holds, so
    a fleet's year (15 million rows of ~2 KB) is read from its ~1.5 GB index and never
    sorted by the database; each series is put in run order here (a sort of ~365).
    """
    m, r = t.measurement.c, t.run.c
    value = m.instructions_per_call if metric == "instructions" else m.median_s
    runs_query = sa.select(r.id, r.started_at, r.git_sha, r.environment_id).where(
        r.environment_id.is_not(None)
    )
    query = sa.select(m.benchmark_id, m.run_id, m.status, value).where(
        m.status.in_(("ok", "error"))
    )
    series: dict[SeriesKey, list[HistoryPoint]] = defaultdict(list)
    with store.engine.connect() as conn:
        runs = {row[0]: row for row in conn.execute(runs_query).all()}
        # Streamed in batches (a server-side cursor on PostgreSQL), so that a fleet's
        # year is never all in memory as rows as well as points: ~1 us a row either way.
        rows = conn.execution_options(yield_per=_BATCH).execute(query)
        for benchmark_id, run_id, status, median in rows:
            run = runs.get(run_id)
            if run is None:
                continue  # a run without an environment belongs to no series
            series[(benchmark_id, run[3])].append(
                HistoryPoint(run_id, run[1], run[2], median if status == "ok" else None)
            )
    for points in series.values():
        points.sort(key=_run_order)
    return dict(series)


def _run_order(point: HistoryPoint) -> tuple[dt.datetime, str]:
    """Oldest run first; runs started at the same moment in id order."""
    return point.started_at, point.run_id


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
