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
import pandas as pd
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


def _reasons(
    store: Store, rows: Scan, bench: np.ndarray, run: np.ndarray, status: np.ndarray
) -> dict[int, str]:
    """The reasons of the rows not ok, by their position in the per-row arrays
    ``bench``, ``run`` and ``status``.

    ``status IN ('skipped', 'error')`` rather than ``!= 'ok'``: an ``IN`` list is a
    condition PostgreSQL can check on ``ix_measurement_series`` entries (status is its
    third column) before it fetches a row, where ``<>`` is checked on the row itself."""
    m = t.measurement.c
    failed = [name for name in STATUS_CODES if name != "ok"]
    query = sa.select(m.run_id, m.benchmark_id, m.reason).where(
        m.status.in_(failed) & m.reason.is_not(None)
    )
    with store.engine.connect() as conn:
        found = conn.execute(query).all()
    if not found:
        return {}
    n_run = max(len(rows.run_ids), 1)
    where = np.flatnonzero(status != STATUS_CODES["ok"])
    pairs = pd.Index(bench[where] * n_run + run[where])
    found_run = pd.Index(rows.run_ids).get_indexer([f[0] for f in found])
    found_bench = pd.Index(rows.benchmarks).get_indexer([f[1] for f in found])
    at = pairs.get_indexer(found_bench * n_run + found_run)
    known = (at >= 0) & (found_run >= 0) & (found_bench >= 0)
    return {int(where[at[k]]): str(found[k][2]) for k in np.flatnonzero(known).tolist()}
