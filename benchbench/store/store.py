"""The results store: open, migrate, write each point in its own transaction, read back."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from benchbench.core.errors import NotFoundError, StoreError
from benchbench.core.values import Result
from benchbench.machine.environment import Environment
from benchbench.store import queries
from benchbench.store import schema as t
from benchbench.store.rows import (
    benchmark_row_for,
    bulk_insert,
    insert_ignore,
    measurement_row_for,
    now,
    summaries,
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
        jittered back-off) cover the lock upgrade races WAL still reports at once.
        """
        for attempt in range(attempts):
            try:
                with (
                    self.engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn,
                    conn.begin(),
                ):
                    return fn(conn)
            except sa.exc.OperationalError as exc:
                message = str(exc.orig).strip()
                locked = "locked" in message or "busy" in message or "deadlock" in message
                if not locked or attempt == attempts - 1:
                    raise StoreError(
                        f"store {self.url}: write failed: {self.scrub(message)}"
                    ) from None
                time.sleep(0.05 * 2**attempt * random.uniform(0.5, 1.5))
        raise StoreError(f"store {self.url}: write failed: no attempt made (attempts={attempts})")

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

    def write_result(self, run_id: str, result: Result) -> None:
        """Store one point (benchmark row if new, measurement, telemetry) atomically."""
        benchmark_row = benchmark_row_for(result)
        measurement = measurement_row_for(run_id, benchmark_row["id"], result)

        def write(conn: Connection) -> None:
            conn.execute(self._insert_ignore(t.benchmark), [benchmark_row])
            _delete_measurements(
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
        stamp = now()
        stats = summaries(results)
        benchmarks: dict[str, dict[str, Any]] = {}
        measurements: list[dict[str, Any]] = []
        telemetry: dict[str, dict[str, Any]] = {}
        for result, summary in zip(results, stats, strict=True):
            b_row = benchmark_row_for(result)
            benchmarks[b_row["id"]] = b_row
            measurements.append(measurement_row_for(run_id, b_row["id"], result, summary, stamp))
            if result.telemetry is not None:
                telemetry[b_row["id"]] = dict(result.telemetry)
        if len({m["benchmark_id"] for m in measurements}) != len(measurements):
            raise StoreError(f"run {run_id}: write_results got the same point twice")

        def write(conn: Connection) -> None:
            ids = list(benchmarks)
            for start in range(0, len(ids), chunk):
                part = ids[start : start + chunk]
                bulk_insert(conn, t.benchmark, [benchmarks[i] for i in part], ignore=True)
                _delete_measurements(
                    conn,
                    (t.measurement.c.run_id == run_id) & t.measurement.c.benchmark_id.in_(part),
                )
            for start in range(0, len(measurements), chunk):
                bulk_insert(conn, t.measurement, measurements[start : start + chunk])
            if telemetry:
                stored = conn.execute(
                    sa.select(t.measurement.c.id, t.measurement.c.benchmark_id).where(
                        t.measurement.c.run_id == run_id
                    )
                )
                rows = [
                    {"measurement_id": m_id, "data": telemetry[b_id]}
                    for m_id, b_id in stored
                    if b_id in telemetry
                ]
                conn.execute(t.telemetry.insert(), rows)

        self.write(write)
        return len(measurements)

    # -- reading ----------------------------------------------------------------

    def runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Runs, newest first, with their point counts by status."""
        counts = (
            sa.select(
                t.measurement.c.run_id,
                sa.func.count().label("points"),
                sa.func.sum(sa.case((t.measurement.c.status == "ok", 1), else_=0)).label("ok"),
                sa.func.sum(sa.case((t.measurement.c.status == "error", 1), else_=0)).label(
                    "errors"
                ),
                sa.func.sum(sa.case((t.measurement.c.status == "skipped", 1), else_=0)).label(
                    "skipped"
                ),
            )
            .group_by(t.measurement.c.run_id)
            .subquery()
        )
        query = (
            sa.select(
                t.run,
                t.environment.c.machine,
                sa.func.coalesce(counts.c.points, 0).label("points"),
                sa.func.coalesce(counts.c.ok, 0).label("ok"),
                sa.func.coalesce(counts.c.errors, 0).label("errors"),
                sa.func.coalesce(counts.c.skipped, 0).label("skipped"),
            )
            .select_from(
                t.run.outerjoin(counts, counts.c.run_id == t.run.c.id).outerjoin(
                    t.environment, t.environment.c.id == t.run.c.environment_id
                )
            )
            .order_by(t.run.c.started_at.desc(), t.run.c.id)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def resolve_run(self, ref: str, environment: str | None = None) -> dict[str, Any]:
        """A run by id, unique id prefix, label (newest with it), ``latest`` or ``latest~N``.

        ``latest~1`` is the run before the latest (the base of a nightly comparison).
        ``environment`` (an environment id, a prefix of one, or a machine label)
        restricts the candidates: ``latest`` then means the newest run there.
        """
        runs = sa.select(t.run)
        if environment is not None:
            runs = runs.where(t.run.c.environment_id.in_(self.environment_ids(environment)))
        with self.engine.connect() as conn:
            offset = _latest_offset(ref)
            if offset is not None:
                row = conn.execute(
                    runs.order_by(t.run.c.started_at.desc(), t.run.c.id).offset(offset).limit(1)
                ).first()
            else:
                row = conn.execute(runs.where(t.run.c.id == ref)).first()
                if row is None and len(ref) >= 4:
                    rows = conn.execute(
                        runs.where(t.run.c.id.startswith(ref, autoescape=True))
                    ).all()
                    if len(rows) > 1:
                        raise NotFoundError(
                            f"run id prefix {ref!r} is ambiguous: "
                            + ", ".join(r.id for r in rows[:5])
                        )
                    row = rows[0] if rows else None
                if row is None:
                    row = conn.execute(
                        runs.where(t.run.c.label == ref)
                        .order_by(t.run.c.started_at.desc())
                        .limit(1)
                    ).first()
        if row is None:
            recent = ", ".join(
                f"{r['id'][:8]}" + (f" ({r['label']})" if r["label"] else "")
                for r in self.runs(limit=5)
            )
            where = f" in environment {environment!r}" if environment is not None else ""
            raise NotFoundError(
                f"no run {ref!r}{where} in store {self.url}; "
                + (f"recent runs: {recent}" if recent else "the store has no runs yet")
            )
        return dict(row._mapping)

    def environment_ids(self, ref: str) -> list[str]:
        """Ids of the environments ``ref`` names: an id, an id prefix or a machine label.

        Raises :class:`NotFoundError` listing the known machines when nothing matches.
        """
        e = t.environment.c
        query = sa.select(e.id).where(
            (e.id == ref) | (e.machine == ref) | e.id.startswith(ref, autoescape=True)
            if len(ref) >= 4
            else (e.id == ref) | (e.machine == ref)
        )
        with self.engine.connect() as conn:
            ids = [r[0] for r in conn.execute(query)]
            if not ids:
                machines = sorted({r[0] for r in conn.execute(sa.select(e.machine))})
                raise NotFoundError(
                    f"no environment or machine {ref!r} in store {self.url}; known machines: "
                    + (", ".join(machines[:10]) or "none")
                )
        return ids

    def environment(self, env_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.environment).where(t.environment.c.id == env_id)).first()
        return dict(row._mapping) if row else None

    def measurements(self, run_id: str) -> list[dict[str, Any]]:
        """Every stored point of a run, joined with its benchmark, in run order."""
        query = (
            sa.select(t.measurement, *_benchmark_columns())
            .select_from(t.measurement.join(t.benchmark))
            .where(t.measurement.c.run_id == run_id)
            .order_by(t.measurement.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def telemetry(self, run_id: str) -> dict[int, Any]:
        """The telemetry documents of a run's measurements, by measurement id."""
        query = (
            sa.select(t.telemetry.c.measurement_id, t.telemetry.c.data)
            .select_from(t.telemetry.join(t.measurement))
            .where(t.measurement.c.run_id == run_id)
        )
        with self.engine.connect() as conn:
            return {row[0]: row[1] for row in conn.execute(query)}

    def done_benchmark_ids(self, run_id: str) -> set[str]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.measurement.c.benchmark_id).where(t.measurement.c.run_id == run_id)
            )
            return {r[0] for r in rows}

    def dataframe(
        self,
        *,
        suite: Filter = None,
        workload: Filter = None,
        variant: Filter = None,
        device: Filter = None,
        dtype: Filter = None,
        run: Filter = None,
        environment: Filter = None,
        since: dt.datetime | str | None = None,
        until: dt.datetime | str | None = None,
        samples: bool = False,
    ) -> pd.DataFrame:
        """Measurements joined with their benchmark, run and environment, oldest first.

        Every filter takes one value or a list (``device=["cpu", "cuda"]``); ``run``
        takes ids, prefixes, labels or ``latest``; ``environment`` ids, prefixes or
        machine labels; ``since``/``until`` datetimes or ISO strings (UTC when naive)
        bound the run's start. Columns: :data:`benchbench.store.queries.DATAFRAME_COLUMNS`
        (plus ``samples_s`` with ``samples=True``); times are per call, in seconds.
        """
        return queries.dataframe(
            self,
            suite=suite,
            workload=workload,
            variant=variant,
            device=device,
            dtype=dtype,
            run=run,
            environment=environment,
            since=since,
            until=until,
            samples=samples,
        )

    def history(self, benchmark_id: str, environment_id: str) -> list[dict[str, Any]]:
        """One benchmark's results in one environment, oldest run first (dashboard, alerts)."""
        return queries.history(self, benchmark_id, environment_id)

    def counts(self) -> dict[str, int]:
        """Row count of every table (used to prove a rejected write changed nothing)."""
        with self.engine.connect() as conn:
            return {
                table.name: int(
                    conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                )
                for table in t.metadata.sorted_tables
            }


def _delete_measurements(conn: Connection, where: sa.ColumnElement[bool]) -> None:
    """Delete measurements (a point measured again) and the telemetry that refers to them."""
    ids = sa.select(t.measurement.c.id).where(where).scalar_subquery()
    conn.execute(t.telemetry.delete().where(t.telemetry.c.measurement_id.in_(ids)))
    conn.execute(t.measurement.delete().where(where))


def _latest_offset(ref: str) -> int | None:
    if ref == "latest":
        return 0
    head, _, tail = ref.partition("~")
    if head == "latest" and tail.isdigit():
        return int(tail)
    return None


def _benchmark_columns() -> Iterable[sa.ColumnElement[Any]]:
    b = t.benchmark.c
    return (
        b.suite,
        b.workload,
        b.variant,
        b.device,
        b.dtype,
        b.size,
        b.shape,
        b.params,
        b.code_version,
    )


__all__ = [
    "DEFAULT_PATH",
    "Store",
    "benchmark_row_for",
    "measurement_row_for",
    "normalize_url",
    "now",
    "safe_url",
]
