"""Read-side queries of measurements: tables for analysis, one benchmark's history, a run's
points, and what sharding, the dashboard and bundles read.

Functions of an :class:`~sqlalchemy.engine.Engine` (:class:`Store` exposes each as a
method; this module does not import it). All are parameterised SELECTs over indexed
columns: ``history`` walks ``ix_measurement_series`` (benchmark -> its measurements on
every machine, with the columns it returns in the index entry) and joins each to its run
by primary key, so it does not grow with the number of benchmarks, and it reads no
measurement row: a fleet's year puts ~7,000 of them, ~2 KB each, behind one benchmark.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from benchbench.core.columns import MEDIAN_CI, POINT_KEYS, QUARTILES, RATES, SPREAD
from benchbench.core.errors import UsageError
from benchbench.core.values import suite_order
from benchbench.store import lookup
from benchbench.store import schema as t
from benchbench.store.rows import rederived

if TYPE_CHECKING:
    import pandas as pd

#: Run columns that place a measurement in time and in the code's history.
_RUN_CONTEXT = ("label", "kind", "started_at", "git_sha", "git_branch", "environment_id")

#: Columns of :meth:`Store.dataframe`, in order (times in seconds, per call).
DATAFRAME_COLUMNS: tuple[str, ...] = (
    "run_id",
    *_RUN_CONTEXT,
    "machine",
    *POINT_KEYS,
    "status",
    "reason",
    *MEDIAN_CI,
    *QUARTILES,
    *SPREAD,
    "n",
    "calls_per_sample",
    *RATES,
    "max_rel_error",
    "peak_memory_bytes",
    "threads",
    "cache_mode",
    "converged",
    "warnings",
    "benchmark_id",
    # Instruction counts (``run --metric instructions``), last: added with schema 3.
    "instructions_per_call",
    "instruction_counts",
)

#: Columns of :meth:`Store.history`, oldest run first.
HISTORY_COLUMNS: tuple[str, ...] = (
    "run_id",
    "started_at",
    "label",
    "git_sha",
    "status",
    *MEDIAN_CI,
    *QUARTILES,
    "n",
)

Filter = str | Sequence[str] | None

#: The measurement table's own columns among :data:`DATAFRAME_COLUMNS`, in its order.
_MEASUREMENT_OWN: tuple[str, ...] = tuple(
    name for name in DATAFRAME_COLUMNS if name not in (*_RUN_CONTEXT, "machine", *POINT_KEYS)
)


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
    engine: Engine,
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
) -> sa.Select[Any]:
    """The SELECT behind :meth:`Store.dataframe` (references resolved in ``engine``'s store):
    the measurement's own columns of :data:`DATAFRAME_COLUMNS` (of ``columns`` only, when
    given; ``run_id`` and ``benchmark_id`` always), ``samples_s`` too with ``samples``,
    filtered and in order; :func:`dataframe` maps the run's, environment's and
    benchmark's columns onto them."""
    m, b, r, e = t.measurement.c, t.benchmark.c, t.run.c, t.environment.c
    wanted = _wanted(columns)
    selected: list[Any] = [
        _as_read(m[name])
        for name in _MEASUREMENT_OWN
        if name in wanted or name in ("run_id", "benchmark_id")
    ]
    if samples:
        selected.append(_as_read(m.samples_s))
    query = (
        sa.select(*selected)
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
        query = query.where(m.run_id.in_([lookup.resolve_run(engine, ref)["id"] for ref in runs]))
    if run_ids is not None:
        query = query.where(m.run_id.in_(_literal_list(run_ids)))
    environments = _values("environment", environment)
    if environments is not None:
        ids = [i for ref in environments for i in lookup.environment_ids(engine, ref)]
        query = query.where(r.environment_id.in_(ids))
    start, end = _time("since", since), _time("until", until)
    if start is not None:
        query = query.where(r.started_at >= start)
    if end is not None:
        query = query.where(r.started_at < end)
    return query


def _wanted(columns: Sequence[str] | None) -> tuple[str, ...]:
    """The columns of :data:`DATAFRAME_COLUMNS` to read, in its order."""
    if columns is None:
        return DATAFRAME_COLUMNS
    unknown = sorted(set(columns) - set(DATAFRAME_COLUMNS))
    if unknown:
        raise UsageError(
            f"dataframe columns= names {unknown}, which it does not have; "
            f"it has {list(DATAFRAME_COLUMNS)}"
        )
    return tuple(name for name in DATAFRAME_COLUMNS if name in columns)


def _as_read(column: sa.Column[Any]) -> Any:
    """A JSON column as its text (:func:`_decoded` decodes it), others as they are."""
    if isinstance(column.type, sa.JSON):
        return sa.cast(column, sa.Text).label(column.name)
    return column


def _decoded(texts: Sequence[str | None]) -> list[Any]:
    """JSON texts decoded once per distinct text: a measurement's ``warnings`` is ``[]``
    on most rows, and decoding it per row (PostgreSQL's driver does for ``jsonb``) was
    ~40 % of reading a run's rows. A list or dict is copied per row (its first level:
    these columns hold lists of numbers or strings), so no two rows share one."""
    cache = {text: json.loads(text) for text in set(texts) if text is not None}
    return [None if text is None else _fresh(cache[text]) for text in texts]


def _fresh(value: Any) -> Any:
    if isinstance(value, list):
        return list(value)
    return dict(value) if isinstance(value, dict) else value


def _literal_list(values: Sequence[str]) -> sa.BindParameter[Any]:
    """An ``IN`` list written into the SQL, so that thousands of run ids stay one
    statement (SQLite caps a statement's parameters; PostgreSQL at 65,535)."""
    return sa.bindparam("ids", [str(v) for v in values], expanding=True, literal_execute=True)


def dataframe(engine: Engine, **filters: Any) -> pd.DataFrame:
    """Measurements joined with benchmark, run and environment as a DataFrame.

    Only the measurement's own columns are read per row; the run's (label, start,
    commit, environment, machine) are read once per run and the benchmark's once per
    benchmark, and mapped onto the rows (rows of one benchmark share its ``shape`` list
    and ``params`` dict). Per row, SQLite's text timestamps cost ~10 us to parse and
    the benchmark's JSON ~10 us to decode: a dashboard build read 183,554 timestamps for
    runs that number 7,000.
    """
    import numpy as np
    import pandas as pd

    query = measurement_query(engine, **filters)
    extra = ["samples_s"] if filters.get("samples") else []
    order = [*_wanted(filters.get("columns")), *extra]
    with engine.connect() as conn:
        result = conn.execute(query)
        names = list(result.keys())
        rows = result.all()
        if not rows:
            return pd.DataFrame(columns=order)
        own = dict(zip(names, zip(*rows, strict=True), strict=True))
        r, e, b = t.run.c, t.environment.c, t.benchmark.c
        run_query = sa.select(r.id, *(r[n] for n in _RUN_CONTEXT), e.machine).select_from(
            t.run.outerjoin(t.environment, e.id == r.environment_id)
        )
        if filters.get("run_ids") is not None:
            run_query = run_query.where(r.id.in_(_literal_list(filters["run_ids"])))
        # Every benchmark (thousands of rows), not an IN list of ids: SQLite caps the
        # parameters of one statement.
        context = {
            "run_id": conn.execute(run_query).all(),
            "benchmark_id": conn.execute(sa.select(b.id, *(b[n] for n in POINT_KEYS))).all(),
        }
    columns: dict[str, Any] = dict(own)
    for name in names:
        if isinstance(t.measurement.c[name].type, sa.JSON):
            columns[name] = _decoded(own[name])
    for key, table_rows in context.items():
        at = pd.Index([row[0] for row in table_rows]).get_indexer(list(own[key]))
        for k, name in enumerate((*_RUN_CONTEXT, "machine") if key == "run_id" else POINT_KEYS):
            if name not in order:
                continue
            values = np.empty(len(table_rows) + 1, dtype=object)  # the last: not found
            values[:-1] = [row[k + 1] for row in table_rows]
            columns[name] = values[at].tolist()
    # Columns as sequences of values: pandas infers each one's type as it does from rows.
    frame = pd.DataFrame({name: columns[name] for name in order})
    if "started_at" in frame.columns:
        frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    return frame


def history(engine: Engine, benchmark_id: str, environment_id: str) -> list[dict[str, Any]]:
    """One benchmark's measurements in one environment, oldest run first."""
    m, r = t.measurement.c, t.run.c
    columns = [r[name] if name in _RUN_CONTEXT else m[name] for name in HISTORY_COLUMNS]
    query = (
        sa.select(*columns)
        .select_from(t.measurement.join(t.run, r.id == m.run_id))
        .where((m.benchmark_id == benchmark_id) & (r.environment_id == environment_id))
        .order_by(r.started_at, r.id)
    )
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]


def measurements(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """Every stored point of a run: the measurement row and its benchmark's columns, in
    suite order (:func:`~benchbench.core.values.suite_order`), not the shuffled order the
    rounds wrote them in. Sorted here rather than in SQL: ``params`` is JSON, which
    PostgreSQL's ``json`` type cannot order by. The headline and interval of a point of
    several processes are derived again from its process medians
    (:func:`~benchbench.store.rows.rederived`): runs stored under an earlier rule read
    as new ones."""
    b = t.benchmark.c
    query = (
        sa.select(t.measurement, *(b[name] for name in (*POINT_KEYS, "code_version")))
        .select_from(t.measurement.join(t.benchmark))
        .where(t.measurement.c.run_id == run_id)
        .order_by(t.measurement.c.id)
    )
    with engine.connect() as conn:
        rows = [rederived(dict(r._mapping)) for r in conn.execute(query)]
    return sorted(rows, key=suite_order)


def telemetry(engine: Engine, run_id: str) -> dict[int, Any]:
    """The telemetry documents of a run's measurements, by measurement id."""
    query = (
        sa.select(t.telemetry.c.measurement_id, t.telemetry.c.data)
        .select_from(t.telemetry.join(t.measurement))
        .where(t.measurement.c.run_id == run_id)
    )
    with engine.connect() as conn:
        return {row[0]: row[1] for row in conn.execute(query)}


def done_benchmark_ids(engine: Engine, run_id: str) -> set[str]:
    """Ids of the benchmarks the run has a measurement of (any status): what ``--resume``
    skips."""
    query = sa.select(t.measurement.c.benchmark_id).where(t.measurement.c.run_id == run_id)
    with engine.connect() as conn:
        return {r[0] for r in conn.execute(query)}


def device_extras(
    engine: Engine,
    prefix: str,
    run_ids: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
) -> dict[tuple[str, str], tuple[str, Any]]:
    """``(device, extra)`` of every measurement on a device named ``prefix...``
    (``"cuda"``; of the runs ``run_ids`` only, when given), by ``(run_id,
    benchmark_id)``: what the DataFrame leaves out. ``keys``: read only these keys of
    ``extra`` (a dict of them, absent keys left out): a CUDA point's ``extra`` is ~500
    bytes of JSON, decoded at ~10 us a row, of which the timing method needs two keys."""
    m, b = t.measurement.c, t.benchmark.c
    parts: list[Any] = (
        [m.extra]
        if keys is None
        else [sa.cast(m.extra[k], sa.Text).label(f"k{i}") for i, k in enumerate(keys)]
    )
    query = (
        sa.select(m.run_id, m.benchmark_id, b.device, *parts)
        .select_from(t.measurement.join(t.benchmark, b.id == m.benchmark_id))
        .where(b.device.like(f"{prefix}%"))
    )
    if run_ids is not None:
        query = query.where(m.run_id.in_(_literal_list(run_ids)))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    if keys is None:
        return {(str(r), str(bid)): (str(dev), extra) for r, bid, dev, extra in rows}
    values = [_decoded([row[3 + i] for row in rows]) for i in range(len(keys))]
    return {
        (str(row[0]), str(row[1])): (
            str(row[2]),
            {k: v[j] for k, v in zip(keys, values, strict=True) if v[j] is not None},
        )
        for j, row in enumerate(rows)
    }


def counted_extras(
    engine: Engine, run_ids: Sequence[str] | None = None
) -> dict[tuple[str, str], Any]:
    """``extra`` of every measurement whose instructions were counted (of the runs
    ``run_ids`` only, when given), by ``(run_id, benchmark_id)``: the counts'
    within-process spread (``extra.instructions``) that the DataFrame leaves out."""
    m = t.measurement.c
    query = sa.select(m.run_id, m.benchmark_id, m.extra).where(m.instructions_per_call.is_not(None))
    if run_ids is not None:
        query = query.where(m.run_id.in_(_literal_list(run_ids)))
    with engine.connect() as conn:
        return {(str(r), str(bid)): extra for r, bid, extra in conn.execute(query)}


def process_medians(
    engine: Engine, run_ids: Sequence[str] | None = None, ok_only: bool = False
) -> dict[tuple[str, str], list[float]]:
    """Per-call medians of each worker process of every point measured in several (of
    the runs ``run_ids`` only, when given; ``ok_only``: of the points measured ok), by
    ``(run_id, benchmark_id)``: the spread between processes the verdict's test reads,
    which the DataFrame leaves out."""
    m = t.measurement.c
    query = sa.select(m.run_id, m.benchmark_id, m.process_medians_s).where(
        m.process_medians_s.is_not(None)
    )
    if ok_only:
        query = query.where(m.status == "ok")
    if run_ids is not None:
        query = query.where(m.run_id.in_(_literal_list(run_ids)))
    with engine.connect() as conn:
        return {
            (str(r), str(bid)): [float(v) for v in medians]
            for r, bid, medians in conn.execute(query)
            if medians
        }


def benchmarks(engine: Engine) -> list[dict[str, Any]]:
    """Every ``benchmark`` row (id, the point's keys, code version)."""
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(t.benchmark))]


def ok_durations(engine: Engine, run_ids: Sequence[str]) -> dict[str, list[float]]:
    """Stored ``duration_s`` of the ok points of ``run_ids``, by benchmark id."""
    if not run_ids:
        return {}
    m = t.measurement.c
    query = sa.select(m.benchmark_id, m.duration_s).where(
        m.run_id.in_(list(run_ids)) & (m.status == "ok") & m.duration_s.is_not(None)
    )
    durations: dict[str, list[float]] = {}
    with engine.connect() as conn:
        for benchmark_id, duration in conn.execute(query):
            durations.setdefault(benchmark_id, []).append(float(duration))
    return durations


def annotation_rows(engine: Engine) -> list[dict[str, Any]]:
    """Every ``annotation`` row (notes on benchmarks, environments, runs, alerts), oldest first."""
    query = sa.select(t.annotation).order_by(t.annotation.c.created_at, t.annotation.c.id)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def counts(engine: Engine) -> dict[str, int]:
    """Row count of every table."""
    with engine.connect() as conn:
        return {
            table.name: int(
                conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            )
            for table in t.metadata.sorted_tables
        }
