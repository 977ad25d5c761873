"""Rows of the store's tables built from results, one at a time or in bulk.

The bulk path exists for speed: :class:`benchbench.core.stats.Stats` costs ~0.3 ms per
point with NumPy's per-call overhead (1.9 ms on our loaded 2-core machine), which
alone would put 100,000 points at 30-190 s. :func:`summaries` computes the same
statistics for all points with the same sample count in one NumPy pass.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
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
from benchbench.core.stats import Stats, median_ci_ranks, process_interval, t_quantile
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


def rederived(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (a stored measurement) with its headline, interval and rates derived again
    from its stored process medians by today's rule (:func:`~benchbench.core.stats.
    process_interval`), so a run stored under an earlier rule is read, shown and judged
    as a new one is. A row of one process, or without process medians, is as stored."""
    medians = row.get("process_medians_s")
    if row.get("status") != "ok" or not medians or len(medians) < 2 or min(medians) <= 0:
        return row
    centre, low, high = process_interval([float(m) for m in medians])
    row.update(median_s=centre, ci_low_s=low, ci_high_s=high)
    for work, rate in THROUGHPUTS:
        if rate in row:
            row[rate] = row[work] / centre if row.get(work) is not None else None
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

    Results are grouped by sample count and split into processes (``process_samples``),
    and each group is sorted and reduced as one 2-D array; the numbers are those of
    :class:`Stats` (same percentile method, same order-statistic CI ranks, the same
    two-level interval over the process medians). A run's points share their split (3
    rounds of the same sample counts), so a 2,000-point run is a handful of groups: 10
    times faster than :class:`Stats` point by point, which cost ~0.4 ms a point here.
    """
    out: list[dict[str, Any] | None] = [None] * len(results)
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for index, result in enumerate(results):
        if result.status != "ok" or not result.samples_s:
            continue
        split = tuple(int(k) for k in result.process_samples)
        if len(split) > 1 and (min(split) < 1 or sum(split) != len(result.samples_s)):
            out[index] = _stats(result).summary()  # raises Stats' own error
            continue
        groups[split if len(split) > 1 else (len(result.samples_s),)].append(index)
    for split, indices in groups.items():
        for row_index, summary in enumerate(_group_summaries(results, indices, split)):
            out[indices[row_index]] = summary
    return out


def _group_summaries(
    results: Sequence[Result], indices: list[int], split: tuple[int, ...]
) -> list[dict[str, Any]]:
    """:func:`summaries` of the results at ``indices``, which all have ``sum(split)``
    samples taken by ``len(split)`` processes."""
    n = sum(split)
    per_call = np.array([results[i].samples_s for i in indices], dtype=np.float64) / np.array(
        [[results[i].calls_per_sample] for i in indices], dtype=np.float64
    )
    cuts = np.cumsum((0, *split))
    process_medians = np.stack(
        [np.median(per_call[:, a:b], axis=1) for a, b in itertools.pairwise(cuts)],
        axis=1,
    )
    per_call.sort(axis=1)
    if len(split) > 1:  # the process-level headline and interval of Stats
        k = len(split)
        logs = np.log(process_medians)
        half = t_quantile(k - 1) * logs.std(axis=1, ddof=1) / math.sqrt(k)
        median = np.exp(logs.mean(axis=1))
        ci_low, ci_high = median * np.exp(-half), median * np.exp(half)
    else:
        low, high = median_ci_ranks(n)
        median = np.median(per_call, axis=1)
        ci_low, ci_high = per_call[:, low], per_call[:, high]
    columns = {
        "median_s": median,
        "mean_s": per_call.mean(axis=1),
        "min_s": per_call[:, 0],
        "max_s": per_call[:, -1],
        "q1_s": np.percentile(per_call, 25, axis=1),
        "q3_s": np.percentile(per_call, 75, axis=1),
        "stdev_s": per_call.std(axis=1, ddof=1) if n > 1 else np.zeros(len(indices)),
        "ci_low_s": ci_low,
        "ci_high_s": ci_high,
    }
    lists = {name: values.tolist() for name, values in columns.items()}
    medians = process_medians.tolist()
    out = []
    for row_index in range(len(indices)):
        summary: dict[str, Any] = {"n": n}
        for name, values in lists.items():
            summary[name] = values[row_index]
        summary["process_medians_s"] = medians[row_index]
        out.append(summary)
    return out


def _dump_json(value: Any) -> str | None:
    if value is None:
        return None
    if not value and isinstance(value, (list, dict, tuple)):
        return "[]" if isinstance(value, (list, tuple)) else "{}"
    return json.dumps(value, allow_nan=False)


def bulk_insert(
    conn: Connection,
    table: sa.Table,
    rows: Sequence[dict[str, Any]],
    ignore: bool = False,
    replace: bool = False,
) -> None:
    """``INSERT`` many rows through the driver's ``executemany`` directly.

    ``ignore`` skips rows whose primary key exists (``ON CONFLICT DO NOTHING``);
    ``replace`` overwrites them (:func:`upsert`).

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
    if replace:
        statement = upsert(table, dialect.name)
    else:
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


def _insert(table: sa.Table, dialect: str) -> Any:
    """The dialect's ``INSERT`` for ``table``, which knows ``ON CONFLICT``."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def insert_ignore(table: sa.Table, dialect: str) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING`` for ``table`` on SQLite or PostgreSQL."""
    return _insert(table, dialect).on_conflict_do_nothing()


def upsert(table: sa.Table, dialect: str) -> Any:
    """``INSERT ... ON CONFLICT (primary key) DO UPDATE`` of every other column."""
    statement = _insert(table, dialect)
    return statement.on_conflict_do_update(
        index_elements=[c.name for c in table.primary_key],
        set_={c.name: statement.excluded[c.name] for c in table.c if not c.primary_key},
    )
