"""The rows a write inserts: a point's, a bulk of points', and a bundle's run merged into
the store point by point (:func:`import_run`), for :class:`~benchbench.store.store.Store`'s
transactions. Nothing here opens a connection or retries: :meth:`Store.write` does."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from benchbench.core.errors import StoreError
from benchbench.core.values import Result
from benchbench.machine.environment import Environment
from benchbench.store import schema as t
from benchbench.store.rows import (
    benchmark_row_for,
    bulk_insert,
    insert_ignore,
    measurement_row_for,
    summaries,
)


class RunRecord(Protocol):
    """A whole run to import (a validated bundle is one): the ``run`` row, its
    environment, its results and, per result, when it was first stored."""

    @property
    def run(self) -> Mapping[str, Any]: ...

    @property
    def environment(self) -> Environment: ...

    @property
    def results(self) -> Sequence[Result]: ...

    @property
    def created_at(self) -> Sequence[dt.datetime]: ...


#: A run's statuses in the order a run reaches them: a merge keeps the later one.
_STATUS_ORDER = ("running", "interrupted", "finished")


def import_run(conn: Connection, record: RunRecord) -> str:
    """Write ``record``'s run, or the points its stored run lacks: ``imported``,
    ``merged`` or ``skipped``."""
    run_id = record.run["id"]
    stored = conn.execute(
        sa.select(t.run.c.environment_id, t.run.c.status).where(t.run.c.id == run_id)
    ).first()
    env = record.environment
    if stored is not None and stored.environment_id != env.id:
        raise StoreError(
            f"run {run_id}: the store holds it measured in environment "
            f"{stored.environment_id}, the bundle in {env.id}; a run's points are never "
            "merged across machines: import the bundle into another store"
        )
    conn.execute(
        insert_ignore(t.environment, conn.dialect.name),
        [{"id": env.id, "machine": env.machine, "fields": env.fields,
          "info": env.info, "created_at": record.run["started_at"]}],
    )  # fmt: skip
    if stored is None:
        conn.execute(t.run.insert(), [dict(record.run)])
    have = {
        b for (b,) in conn.execute(
            sa.select(t.measurement.c.benchmark_id).where(t.measurement.c.run_id == run_id)
        )
    }  # fmt: skip
    new = [i for i, r in enumerate(record.results) if benchmark_row_for(r)["id"] not in have]
    benchmarks, measurements, telemetry = bulk_rows(
        run_id, [record.results[i] for i in new], [record.created_at[i] for i in new]
    )
    bulk_insert(conn, t.benchmark, list(benchmarks.values()), ignore=True)
    bulk_insert(conn, t.measurement, measurements)
    insert_telemetry(conn, run_id, telemetry)
    if stored is None:
        return "imported"
    later = _STATUS_ORDER.index(record.run["status"]) > _STATUS_ORDER.index(stored.status)
    if later:
        conn.execute(
            t.run.update().where(t.run.c.id == run_id),
            [{"status": record.run["status"], "finished_at": record.run["finished_at"]}],
        )
    return "merged" if new or later else "skipped"


def bulk_rows(
    run_id: str, results: Sequence[Result], created_at: dt.datetime | Sequence[dt.datetime]
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Benchmark rows by id, measurement rows, and telemetry documents by benchmark id.

    ``created_at`` is one time for every row or one per result.
    """
    stamps = [created_at] * len(results) if isinstance(created_at, dt.datetime) else created_at
    benchmarks: dict[str, dict[str, Any]] = {}
    measurements: list[dict[str, Any]] = []
    telemetry: dict[str, dict[str, Any]] = {}
    for result, summary, stamp in zip(results, summaries(results), stamps, strict=True):
        b_row = benchmark_row_for(result)
        benchmarks[b_row["id"]] = b_row
        measurements.append(measurement_row_for(run_id, b_row["id"], result, summary, stamp))
        if result.telemetry is not None:
            telemetry[b_row["id"]] = dict(result.telemetry)
    return benchmarks, measurements, telemetry


def insert_telemetry(conn: Connection, run_id: str, telemetry: Mapping[str, Any]) -> None:
    """Telemetry rows for the run's stored measurements, from documents by benchmark id."""
    if not telemetry:
        return
    stored = conn.execute(
        sa.select(t.measurement.c.id, t.measurement.c.benchmark_id).where(
            t.measurement.c.run_id == run_id
        )
    )
    rows = [{"measurement_id": m_id, "data": telemetry[b_id]}
            for m_id, b_id in stored if b_id in telemetry]  # fmt: skip
    if rows:
        conn.execute(t.telemetry.insert(), rows)


def delete_measurements(conn: Connection, where: sa.ColumnElement[bool]) -> None:
    """Delete measurements (a point measured again) and the telemetry that refers to them."""
    ids = sa.select(t.measurement.c.id).where(where).scalar_subquery()
    conn.execute(t.telemetry.delete().where(t.telemetry.c.measurement_id.in_(ids)))
    conn.execute(t.measurement.delete().where(where))
