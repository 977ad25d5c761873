"""History in the store: series to judge, alerts and annotations (reads and writes only).

What a series means, and which alerts it raises, is decided above the store, by
:func:`benchbench.analysis.regressions.detect`; the values both sides exchange
(:class:`HistoryPoint` read, :class:`Alert` written) are defined here, with the
tables they come from and go to.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlalchemy as sa

from benchbench.core.errors import NotFoundError, UsageError
from benchbench.store import schema as t
from benchbench.store.rows import bulk_insert
from benchbench.store.scan import STATUS_CODES, scan
from benchbench.store.store import Store, now

#: Annotation kinds and the alert status each one sets.
ANNOTATION_STATUS = {"acknowledge": "acknowledged", "ignore": "ignored", "expected": "expected"}

SeriesKey = tuple[str, str]  # (benchmark_id, environment_id)


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

    def without_runs(self, run_ids: set[str]) -> SeriesTable:
        """These series with the values of ``run_ids`` as gaps (NaN), as a failed point's."""
        if not run_ids:
            return self
        gone = np.array([r in run_ids for r in self.run_ids], dtype=bool)
        values = np.where(gone[self.run_numbers], np.nan, self.all_values)
        return dataclasses.replace(self, all_values=values)


def series_table(store: Store, metric: str = "time") -> SeriesTable:
    """Every series of the store in run order; failed points are gaps (NaN).

    ``metric``: ``time`` (the median per-call time, ``median_s``) or ``instructions``
    (``instructions_per_call``; a run that did not count the point leaves a gap).

    One :func:`~benchbench.store.scan.scan` of the ok and error rows' ``(benchmark, run,
    status, value)``, which ``ix_measurement_series`` holds, so a fleet's year (15
    million rows of ~2 KB) is read from its index and never sorted by the database; then
    put in series and run order by one sort of integer keys. A run without an
    environment belongs to no series.
    """
    column = "instructions_per_call" if metric == "instructions" else "median_s"
    rows = scan(store, [column], ("ok", "error"))
    series = rows.series_order(rows.with_environment())
    ok = rows.status[series.order] == STATUS_CODES["ok"]
    return SeriesTable(
        run_ids=rows.run_ids,
        started_at=rows.started_at,
        git_shas=rows.git_shas,
        keys=[
            (rows.benchmarks[b], rows.environments[e])
            for b, e in zip(series.bench.tolist(), series.environment.tolist(), strict=True)
        ],
        run_numbers=rows.run[series.order],
        all_values=np.where(ok, rows.values[column][series.order], np.nan),
        offsets=series.offsets,
    )


def runs_counted_by(store: Store, counter: str) -> set[str]:
    """The runs whose instructions ``counter`` counted (``config.counter``, written by
    ``run --metric instructions --counter``; older runs say nothing: callgrind)."""
    query = sa.select(t.run.c.id).where(t.run.c.config["counter"].as_string() == counter)
    with store.engine.connect() as conn:
        return {str(row[0]) for row in conn.execute(query)}


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


def judgements(store: Store, metric: str) -> dict[SeriesKey, tuple[str, str]]:
    """The detector's stored verdicts on ``metric``: ``(digest, analysis)`` per series."""
    j = t.series_judgement.c
    query = sa.select(j.benchmark_id, j.environment_id, j.digest, j.analysis).where(
        j.metric == metric
    )
    with store.engine.connect() as conn:
        return {(b, e): (d, a) for b, e, d, a in conn.execute(query)}


def save_verdicts(
    store: Store,
    alerts: list[Alert],
    metric: str = "time",
    verdicts: Sequence[tuple[SeriesKey, str, str]] = (),
) -> int:
    """Store new alerts (an alert already stored keeps its status) and, in the same
    transaction, the ``(series, digest, analysis)`` judgements of ``metric`` they came
    from; returns how many alerts were new."""
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
    judged_at = now()
    judged = [
        {
            "benchmark_id": bench,
            "environment_id": env,
            "metric": metric,
            "digest": digest,
            "analysis": analysis,
            "judged_at": judged_at,
        }
        for (bench, env), digest, analysis in verdicts
    ]
    if not rows and not judged:
        return 0

    def write(conn: sa.Connection) -> int:
        bulk_insert(conn, t.series_judgement, judged, replace=True)
        if not rows:
            return 0
        before = conn.execute(sa.select(sa.func.count()).select_from(t.alert)).scalar_one()
        conn.execute(store._insert_ignore(t.alert), rows)
        after = conn.execute(sa.select(sa.func.count()).select_from(t.alert)).scalar_one()
        return int(after - before)

    return store.write(write)


def list_alerts(
    store: Store, *, since: dt.datetime | None = None, statuses: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """Alerts joined with their benchmark and first bad run, newest first; each one's
    ``detail`` with its keys in order."""
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
        rows = [dict(row._mapping) for row in conn.execute(query)]
    # PostgreSQL's JSONB keeps an object's keys in its own order (by length), SQLite's JSON
    # as written: sorted, an alert reads the same from either (`regressions --json`).
    return [{**row, "detail": dict(sorted((row["detail"] or {}).items()))} for row in rows]


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
