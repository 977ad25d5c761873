"""The results store: open, migrate, write each point in its own transaction, read back."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from benchbench.environment import Environment
from benchbench.errors import NotFoundError, StoreError
from benchbench.model import Result
from benchbench.stats import Stats
from benchbench.store import schema as t

DEFAULT_PATH = Path("results") / "benchbench.db"
T = TypeVar("T")


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


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
                with self.engine.begin() as conn:
                    return fn(conn)
            except sa.exc.OperationalError as exc:
                locked = "locked" in str(exc.orig) or "busy" in str(exc.orig)
                if not locked or attempt == attempts - 1:
                    raise StoreError(
                        f"store {self.url}: write failed: {str(exc.orig).strip()}"
                    ) from None
                time.sleep(0.05 * 2**attempt * random.uniform(0.5, 1.5))
        raise AssertionError("unreachable")

    def _insert_ignore(self, table: sa.Table) -> Any:
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table).on_conflict_do_nothing()

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
            conn.execute(
                t.measurement.delete().where(
                    (t.measurement.c.run_id == run_id)
                    & (t.measurement.c.benchmark_id == benchmark_row["id"])
                )
            )
            new_id = conn.execute(t.measurement.insert(), [measurement]).inserted_primary_key
            if result.telemetry is not None and new_id is not None:
                conn.execute(
                    t.telemetry.insert(),
                    [{"measurement_id": new_id[0], "data": dict(result.telemetry)}],
                )

        self.write(write)

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

    def resolve_run(self, ref: str) -> dict[str, Any]:
        """A run by id, unique id prefix, label (newest with it) or ``latest``."""
        with self.engine.connect() as conn:
            if ref == "latest":
                row = conn.execute(
                    sa.select(t.run).order_by(t.run.c.started_at.desc()).limit(1)
                ).first()
            else:
                row = conn.execute(sa.select(t.run).where(t.run.c.id == ref)).first()
                if row is None and len(ref) >= 4:
                    rows = conn.execute(
                        sa.select(t.run).where(t.run.c.id.startswith(ref, autoescape=True))
                    ).all()
                    if len(rows) > 1:
                        raise NotFoundError(
                            f"run id prefix {ref!r} is ambiguous: "
                            + ", ".join(r.id for r in rows[:5])
                        )
                    row = rows[0] if rows else None
                if row is None:
                    row = conn.execute(
                        sa.select(t.run)
                        .where(t.run.c.label == ref)
                        .order_by(t.run.c.started_at.desc())
                        .limit(1)
                    ).first()
        if row is None:
            recent = ", ".join(
                f"{r['id'][:8]}" + (f" ({r['label']})" if r["label"] else "")
                for r in self.runs(limit=5)
            )
            raise NotFoundError(
                f"no run {ref!r} in store {self.url}; "
                + (f"recent runs: {recent}" if recent else "the store has no runs yet")
            )
        return dict(row._mapping)

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

    def done_benchmark_ids(self, run_id: str) -> set[str]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.measurement.c.benchmark_id).where(t.measurement.c.run_id == run_id)
            )
            return {r[0] for r in rows}

    def counts(self) -> dict[str, int]:
        """Row count of every table (used to prove a rejected write changed nothing)."""
        with self.engine.connect() as conn:
            return {
                table.name: int(
                    conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                )
                for table in t.metadata.sorted_tables
            }


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


def benchmark_row_for(result: Result) -> dict[str, Any]:
    p = result.point
    return {
        "id": p.benchmark_id(result.code_version),
        "suite": p.suite,
        "workload": p.workload,
        "variant": p.variant,
        "device": p.device,
        "dtype": p.dtype,
        "size": p.size,
        "shape": list(p.shape),
        "params": {k: v for k, v in p.params},
        "code_version": result.code_version,
    }


def measurement_row_for(run_id: str, benchmark_id: str, result: Result) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": run_id,
        "benchmark_id": benchmark_id,
        "status": result.status,
        "reason": result.reason,
        "samples_s": list(result.samples_s),
        "calls_per_sample": result.calls_per_sample,
        "warmup": dict(result.warmup),
        "converged": result.converged,
        "stop_reason": result.stop_reason,
        "cache_mode": result.cache_mode,
        "threads": result.threads,
        "bytes_per_call": result.bytes_per_call,
        "flop_per_call": result.flop_per_call,
        "items_per_call": result.items_per_call,
        "max_rel_error": result.max_rel_error,
        "peak_memory_bytes": result.peak_memory_bytes,
        "warnings": list(result.warnings),
        "extra": dict(result.extra),
        "duration_s": result.duration_s,
        "created_at": now(),
    }
    if result.status == "ok" and result.samples_s:
        stats = Stats.from_samples(result.samples_s, result.calls_per_sample)
        row.update(stats.summary())
        median = stats.median_s
        for work, rate in (
            ("bytes_per_call", "bytes_per_s"),
            ("flop_per_call", "flop_per_s"),
            ("items_per_call", "items_per_s"),
        ):
            row[rate] = row[work] / median if row[work] is not None and median > 0 else None
    return row
