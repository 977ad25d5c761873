"""Read-side queries of the store: measurement tables for analysis, one benchmark's history.

Both are plain parameterised SELECTs over indexed columns: ``history`` walks
``ix_measurement_benchmark_run`` (benchmark -> its ~1,000 measurements) and joins
each to its run by primary key, so it does not grow with the number of benchmarks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from benchbench.core.errors import UsageError
from benchbench.store import schema as t

if TYPE_CHECKING:
    import pandas as pd

    from benchbench.store.store import Store

#: Columns of :meth:`Store.dataframe`, in order (times in seconds, per call).
DATAFRAME_COLUMNS = (
    "run_id",
    "label",
    "kind",
    "started_at",
    "git_sha",
    "git_branch",
    "environment_id",
    "machine",
    "suite",
    "workload",
    "variant",
    "device",
    "dtype",
    "size",
    "shape",
    "params",
    "status",
    "reason",
    "median_s",
    "ci_low_s",
    "ci_high_s",
    "q1_s",
    "q3_s",
    "mean_s",
    "min_s",
    "max_s",
    "stdev_s",
    "n",
    "calls_per_sample",
    "bytes_per_s",
    "flop_per_s",
    "items_per_s",
    "max_rel_error",
    "peak_memory_bytes",
    "threads",
    "cache_mode",
    "converged",
    "warnings",
    "benchmark_id",
)

#: Columns of :meth:`Store.history`, oldest run first.
HISTORY_COLUMNS = (
    "run_id",
    "started_at",
    "label",
    "git_sha",
    "status",
    "median_s",
    "ci_low_s",
    "ci_high_s",
    "q1_s",
    "q3_s",
    "n",
)

Filter = str | Sequence[str] | None


def _values(name: str, value: Filter) -> list[str] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else list(value)
    if not values or not all(isinstance(v, str) and v for v in values):
        raise UsageError(f"filter {name}= needs non-empty strings, got {value!r}")
    return values


def _time(name: str, value: dt.datetime | str | None) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        moment = value
    else:
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            raise UsageError(
                f"{name}= must be a datetime or an ISO date such as 2026-11-01, got {value!r}"
            ) from None
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)  # naive times are UTC, as stored
    return moment


def measurement_query(
    store: Store,
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
) -> sa.Select[Any]:
    """The SELECT behind :meth:`Store.dataframe` (filters resolved against ``store``)."""
    m, b, r, e = t.measurement.c, t.benchmark.c, t.run.c, t.environment.c
    columns: list[Any] = []
    for name in DATAFRAME_COLUMNS:
        if name == "run_id":
            columns.append(m.run_id)
        elif name == "benchmark_id":
            columns.append(m.benchmark_id)
        elif name in ("label", "kind", "started_at", "git_sha", "git_branch", "environment_id"):
            columns.append(r[name])
        elif name == "machine":
            columns.append(e.machine)
        elif name in b:
            columns.append(b[name])
        else:
            columns.append(m[name])
    if samples:
        columns.append(m.samples_s)
    query = (
        sa.select(*columns)
        .select_from(
            t.measurement.join(t.benchmark, b.id == m.benchmark_id)
            .join(t.run, r.id == m.run_id)
            .outerjoin(t.environment, e.id == r.environment_id)
        )
        .order_by(r.started_at, m.id)
    )
    for column, name, value in (
        (b.suite, "suite", suite),
        (b.workload, "workload", workload),
        (b.variant, "variant", variant),
        (b.device, "device", device),
        (b.dtype, "dtype", dtype),
    ):
        values = _values(name, value)
        if values is not None:
            query = query.where(column.in_(values))
    runs = _values("run", run)
    if runs is not None:
        query = query.where(m.run_id.in_([store.resolve_run(ref)["id"] for ref in runs]))
    environments = _values("environment", environment)
    if environments is not None:
        ids = [i for ref in environments for i in store.environment_ids(ref)]
        query = query.where(r.environment_id.in_(ids))
    start, end = _time("since", since), _time("until", until)
    if start is not None:
        query = query.where(r.started_at >= start)
    if end is not None:
        query = query.where(r.started_at < end)
    return query


def dataframe(store: Store, **filters: Any) -> pd.DataFrame:
    """Measurements joined with benchmark, run and environment as a DataFrame."""
    import pandas as pd

    query = measurement_query(store, **filters)
    with store.engine.connect() as conn:
        result = conn.execute(query)
        frame = pd.DataFrame.from_records(
            [tuple(row) for row in result], columns=list(result.keys())
        )
    if not frame.empty:
        frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    return frame


def history(store: Store, benchmark_id: str, environment_id: str) -> list[dict[str, Any]]:
    """One benchmark's measurements in one environment, oldest run first."""
    m, r = t.measurement.c, t.run.c
    query = (
        sa.select(
            m.run_id,
            r.started_at,
            r.label,
            r.git_sha,
            m.status,
            m.median_s,
            m.ci_low_s,
            m.ci_high_s,
            m.q1_s,
            m.q3_s,
            m.n,
        )
        .select_from(t.measurement.join(t.run, r.id == m.run_id))
        .where((m.benchmark_id == benchmark_id) & (r.environment_id == environment_id))
        .order_by(r.started_at, r.id)
    )
    with store.engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]
