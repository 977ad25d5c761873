"""Every series of the store with the columns its history shows, as arrays.

:func:`series_rows` is the dashboard's read of history: per (benchmark, environment)
and run, the status, the median and its CI and the instructions per call, all of which
``ix_measurement_series`` holds, so the ~2 KB rows of a fleet's year (~14 million) are
never read; and, from a second query, the reasons of the rows that did not succeed
(~0.1 % of a fleet's rows; ``reason`` is not in the index). The same rows give the
regression detector its series (:meth:`SeriesRows.table`), so a dashboard build reads
the index once for both.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa

from benchbench.store import schema as t
from benchbench.store.history import SeriesTable
from benchbench.store.scan import NO_ENVIRONMENT, STATUS_CODES, Scan, scan
from benchbench.store.store import Store

#: The columns of :class:`SeriesRows` beside the status, all in ``ix_measurement_series``.
HISTORY_VALUES: tuple[str, ...] = ("median_s", "ci_low_s", "ci_high_s", "instructions_per_call")


@dataclass(frozen=True)
class SeriesRows:
    """Every measurement of every run, one series after another, each in run order.

    Runs are numbered in run order (oldest first, ties by id): ``run_ids[k]``,
    ``started_at[k]`` and ``git_shas[k]`` describe run ``k``. Series ``i`` is
    ``keys[i]`` = (benchmark_id, environment_id; None for runs without an environment)
    and holds rows ``offsets[i]`` to ``offsets[i + 1]`` of the per-row arrays: ``run``
    (run numbers, ascending in a series), ``status``
    (:data:`~benchbench.store.scan.STATUS_CODES`: 0 ok, 1 skipped, 2 error) and
    ``values[column]`` for the columns of :data:`HISTORY_VALUES` (NaN for NULL).
    ``reasons`` maps a row's position to the reason it recorded, for rows not ok.
    """

    run_ids: list[str]
    started_at: list[dt.datetime]
    git_shas: list[str | None]
    keys: list[tuple[str, str | None]]
    offsets: np.ndarray
    run: np.ndarray
    status: np.ndarray
    values: dict[str, np.ndarray]
    reasons: dict[int, str]

    def __len__(self) -> int:
        return len(self.keys)

    def table(self, metric: str = "time") -> SeriesTable:
        """The regression detector's series, as :func:`~benchbench.store.history.
        series_table` reads them for ``metric`` (``time`` or ``instructions``), from
        these rows: the ok and error rows, values NaN where not ok; runs without an
        environment belong to no series."""
        column = "instructions_per_call" if metric == "instructions" else "median_s"
        lengths = np.diff(self.offsets)
        series = np.repeat(np.arange(len(self.keys)), lengths)
        with_env = np.array([env is not None for _, env in self.keys], dtype=bool)
        keep = (self.status != STATUS_CODES["skipped"]) & with_env[series]
        counts = np.bincount(series[keep], minlength=len(self.keys))
        kept = np.flatnonzero(counts)
        values = np.where(self.status == STATUS_CODES["ok"], self.values[column], np.nan)
        return SeriesTable(
            run_ids=self.run_ids,
            started_at=self.started_at,
            git_shas=self.git_shas,
            keys=[(b, str(e)) for b, e in (self.keys[i] for i in kept.tolist())],
            run_numbers=self.run[keep],
            all_values=values[keep],
            offsets=np.concatenate(([0], np.cumsum(counts[kept]))).astype(np.int64),
        )


def series_rows(store: Store) -> SeriesRows:
    """Every measurement's history columns (:class:`SeriesRows`): one scan of
    ``ix_measurement_series`` and one query of the reasons of the rows not ok."""
    rows = scan(store, HISTORY_VALUES)
    series = rows.series_order()
    order = series.order
    envs = [None if e == NO_ENVIRONMENT else e for e in rows.environments]
    status = rows.status[order]
    run = rows.run[order]
    bench = rows.bench[order]
    return SeriesRows(
        run_ids=rows.run_ids,
        started_at=rows.started_at,
        git_shas=rows.git_shas,
        keys=[
            (rows.benchmarks[b], envs[e])
            for b, e in zip(series.bench.tolist(), series.environment.tolist(), strict=True)
        ],
        offsets=series.offsets,
        run=run,
        status=status,
        values={c: rows.values[c][order] for c in HISTORY_VALUES},
        reasons=_reasons(store, rows, bench, run, status),
    )


#: Rows not ok up to which their reasons are looked up by (run, benchmark) through the
#: unique index, rather than by a walk of every series entry for their status (which at
#: a fleet's year is ~14 million entries, ~6 s, for ~14,000 failed rows).
LOOKUP_UP_TO = 100_000
_CHUNK = 400  # pairs per statement: 800 parameters, under SQLite's oldest cap (999)


def _reasons(
    store: Store, rows: Scan, bench: np.ndarray, run: np.ndarray, status: np.ndarray
) -> dict[int, str]:
    """The reasons of the rows not ok, by their position in the per-row arrays
    ``bench``, ``run`` and ``status``.

    A few: looked up by their (run_id, benchmark_id) through ``uq_measurement_run_
    benchmark``, a join with :data:`_CHUNK` pairs a statement (a ``VALUES`` list, which
    both engines probe the index with; SQLite scans the table for a row-value ``IN``
    list of the same pairs). Many: every row of those statuses,
    with ``status IN ('skipped', 'error')`` rather than ``!= 'ok'``, a condition
    PostgreSQL checks on ``ix_measurement_series`` entries (status is its third column)
    before it fetches a row, where ``<>`` is checked on the row itself."""
    m = t.measurement.c
    where = np.flatnonzero(status != STATUS_CODES["ok"])
    if not where.size:
        return {}
    position = {
        (rows.run_ids[r], rows.benchmarks[b]): int(k)
        for r, b, k in zip(run[where].tolist(), bench[where].tolist(), where.tolist(), strict=True)
    }
    failed = [name for name in STATUS_CODES if name != "ok"]
    queries = [sa.select(m.run_id, m.benchmark_id, m.reason).where(m.status.in_(failed))]
    if where.size <= LOOKUP_UP_TO:
        pairs = list(position)
        queries = []
        for start in range(0, len(pairs), _CHUNK):
            named = sa.values(sa.column("r", sa.String), sa.column("b", sa.String), name="p")
            p = named.data(pairs[start : start + _CHUNK]).cte("p")
            on = (m.run_id == p.c.r) & (m.benchmark_id == p.c.b)
            queries.append(
                sa.select(m.run_id, m.benchmark_id, m.reason).select_from(p.join(t.measurement, on))
            )
    out: dict[int, str] = {}
    with store.engine.connect() as conn:
        for query in queries:
            for run_id, bench_id, reason in conn.execute(query.where(m.reason.is_not(None))):
                at = position.get((run_id, bench_id))
                if at is not None:
                    out[at] = str(reason)
    return out
