"""Rows of the store's tables built from results, one at a time or in bulk.

The bulk path exists for speed: :class:`benchbench.core.stats.Stats` costs ~0.3 ms per
point with NumPy's per-call overhead (1.9 ms on our loaded 2-core machine), which
alone would put 100,000 points at 30-190 s. :func:`summaries` computes the same
statistics for all points with the same sample count in one NumPy pass.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from benchbench.core.columns import (
    PROCESS_STATISTICS,
    RATES,
    RESULT_FIELDS,
    STATISTICS,
    THROUGHPUTS,
)
from benchbench.core.stats import Stats, median_ci_ranks
from benchbench.core.values import Result


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def benchmark_row_for(result: Result) -> dict[str, Any]:
    """The ``benchmark`` row of a result's point (its id hashes the point)."""
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


def measurement_row_for(
    run_id: str,
    benchmark_id: str,
    result: Result,
    stats: dict[str, Any] | None = None,
    created_at: dt.datetime | None = None,
) -> dict[str, Any]:
    """The ``measurement`` row of a result; ``stats`` (from :func:`summaries`) or derived."""
    row: dict[str, Any] = {"run_id": run_id, "benchmark_id": benchmark_id}
    for name in RESULT_FIELDS:
        row[name] = _plain(getattr(result, name))
    # One process: no split to record (as in rows stored before rounds existed).
    row["process_samples"] = row["process_samples"] or None
    row["instruction_counts"] = row["instruction_counts"] or None
    for name in (*STATISTICS, *PROCESS_STATISTICS, *RATES):
        row[name] = None
    row["created_at"] = created_at or now()
    if result.status == "ok" and result.samples_s:
        if stats is None:
            stats = _stats(result).summary()
        row.update(stats)
        if row["process_samples"] is None:
            row["process_medians_s"] = None  # one process: its median is median_s
        median = row["median_s"]
        for work, rate in THROUGHPUTS:
            row[rate] = row[work] / median if row[work] is not None and median > 0 else None
    return row


def _plain(value: Any) -> Any:
    """A Result attribute as a row value: tuples become lists, mappings dicts (JSON)."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _stats(result: Result) -> Stats:
    return Stats.from_samples(result.samples_s, result.calls_per_sample, result.process_samples)


def summaries(results: Sequence[Result]) -> list[dict[str, Any] | None]:
    """``Stats(...).summary()`` of every ok result with samples (None for the others).

    Results of one process are grouped by sample count and each group is sorted and
    reduced as one 2-D array; the numbers are those of :class:`Stats` (same percentile
    method, same order-statistic CI ranks). Results of several processes take
    :class:`Stats` one at a time (their interval is the two-level one).
    """
    out: list[dict[str, Any] | None] = [None] * len(results)
    groups: dict[int, list[int]] = defaultdict(list)
    for index, result in enumerate(results):
        if result.status != "ok" or not result.samples_s:
            continue
        if len(result.process_samples) > 1:
            out[index] = _stats(result).summary()
        else:
            groups[len(result.samples_s)].append(index)
    for n, indices in groups.items():
        per_call = np.array([results[i].samples_s for i in indices], dtype=np.float64) / np.array(
            [[results[i].calls_per_sample] for i in indices], dtype=np.float64
        )
        per_call.sort(axis=1)
        low, high = median_ci_ranks(n)
        columns = {
            "median_s": np.median(per_call, axis=1),
            "mean_s": per_call.mean(axis=1),
            "min_s": per_call[:, 0],
            "max_s": per_call[:, -1],
            "q1_s": np.percentile(per_call, 25, axis=1),
            "q3_s": np.percentile(per_call, 75, axis=1),
            "stdev_s": per_call.std(axis=1, ddof=1) if n > 1 else np.zeros(len(indices)),
            "ci_low_s": per_call[:, low],
            "ci_high_s": per_call[:, high],
        }
        lists = {name: values.tolist() for name, values in columns.items()}
        for row_index, result_index in enumerate(indices):
            summary: dict[str, Any] = {"n": n}
            for name, values in lists.items():
                summary[name] = values[row_index]
            summary["process_medians_s"] = [summary["median_s"]]
            out[result_index] = summary
    return out


def _dump_json(value: Any) -> str | None:
    if value is None:
        return None
    if not value and isinstance(value, (list, dict, tuple)):
        return "[]" if isinstance(value, (list, tuple)) else "{}"
    return json.dumps(value, allow_nan=False)


def bulk_insert(
    conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]], ignore: bool = False
) -> None:
    """``INSERT`` many rows through the driver's ``executemany`` directly.

    ``ignore`` skips rows whose primary key exists (``ON CONFLICT DO NOTHING``).

    SQLAlchemy's per-row parameter processing (JSON encoding through its type, one
    dict walk per row) took 2/3 of a 10,000-point write here; this path encodes JSON
    once with the C encoder and runs every other column's bind processor from a list
    built once per table. The SQL is the dialect's own compilation of the insert.
    """
    if not rows:
        return
    dialect = conn.dialect
    names = list(rows[0])
    columns = [table.c[name] for name in names]
    processors: list[Any] = []
    for column in columns:
        impl = column.type.dialect_impl(dialect)
        if isinstance(impl, sa.JSON):
            processors.append(_dump_json)
        else:
            processors.append(impl.bind_processor(dialect))
    statement = insert_ignore(table, dialect.name) if ignore else table.insert()
    compiled = statement.values({name: sa.bindparam(name) for name in names}).compile(
        dialect=dialect
    )
    pairs = list(zip(names, processors, strict=True))
    if dialect.positional:
        order = compiled.positiontup or names
        index = {name: i for i, name in enumerate(names)}
        positions = [index[name] for name in order]
        params: list[Any] = []
        for row in rows:
            values = [row[name] if fn is None else fn(row[name]) for name, fn in pairs]
            params.append(tuple(values[i] for i in positions))
    else:
        params = [
            {name: row[name] if fn is None else fn(row[name]) for name, fn in pairs} for row in rows
        ]
    conn.exec_driver_sql(str(compiled), params)


def insert_ignore(table: sa.Table, dialect: str) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING`` for ``table`` on SQLite or PostgreSQL."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing()
