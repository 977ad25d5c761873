"""Regressions over history: change points per (benchmark, environment) series.

:func:`analyze_series` is a pure function over :class:`HistoryPoint` sequences
(oldest first); :func:`detect` runs it on every series of a store that changed since
its last judgement and saves the new alerts and verdicts, through
:mod:`benchbench.store.history` (which only reads and writes); the CLI lists. The
detector is :mod:`benchbench.analysis.changepoint` (E-divisive means with a Student
t-test, as in Hunter / Apache Otava). A series too noisy to judge (per-point relative
noise above 10 %) is reported as ``unstable`` and raises no alert. Each worsening
change point becomes an alert with its commit range: the last run at the old level and
the first at the new one.
An ``expected`` annotation on an alert resets the baseline: only runs from its
first bad run on are judged afterwards.

``metric="instructions"`` judges the series of instruction counts per call instead
(``run --metric instructions``), whose noise is far below time's; its alerts say
``metric: instructions`` in their detail, with the counts before and after. An alert is
one per (benchmark, environment, first bad run): where time already raised one for that
run, the count's is not stored again. Those series are callgrind's counts: a run that
counted with the CPU's own counter (``run --counter pmu``, the C allocator's
instructions in its counts) is a gap in them, never a step.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from benchbench.analysis import judgements
from benchbench.analysis.changepoint import MIN_VALUES, SeriesAnalysis, analyze, regressions
from benchbench.store import history
from benchbench.store.history import Alert, HistoryPoint, SeriesTable, baselines, series_table

if TYPE_CHECKING:
    from benchbench.store import Store

__all__ = [
    "MIN_RUNS",
    "SEVERITIES",
    "Alert",
    "HistoryPoint",
    "SeriesReport",
    "analyze_all",
    "analyze_series",
    "detect",
    "severity",
]

#: Runs with a measured value a series needs before a regression can be found in it
#: (after an ``expected`` baseline, counted from it): a change point needs
#: ``MIN_SIZE`` = 3 runs at the old level and 3 at the new one.
MIN_RUNS = MIN_VALUES

#: |relative change| at or above each bound gets that severity.
SEVERITIES = (("critical", 0.25), ("major", 0.10), ("minor", 0.0))


def severity(rel_change: float) -> str:
    size = abs(rel_change)
    return next(name for name, bound in SEVERITIES if size >= bound)


@dataclass(frozen=True)
class SeriesReport:
    """What the detector concluded about one series.

    ``change_points`` are positions in the judged series (from its baseline on);
    ``change_runs`` the ids of the runs at those positions (the first run at each new
    level), which place them in any other view of the same history (the dashboard's).
    """

    benchmark_id: str
    environment_id: str
    points: int
    unstable: bool
    noise_rel: float | None
    change_points: tuple[int, ...]
    alerts: tuple[Alert, ...]
    change_runs: tuple[str, ...] = ()

    @property
    def too_short(self) -> bool:
        """Fewer than :data:`MIN_RUNS` measured runs: no regression can be found yet."""
        return self.points < MIN_RUNS


def analyze_series(
    benchmark_id: str,
    environment_id: str,
    history: Sequence[HistoryPoint],
    *,
    min_effect: float = 0.05,
    baseline_run_id: str | None = None,
    metric: str = "time",
) -> SeriesReport:
    """Detect regressions in one series (oldest first).

    ``baseline_run_id``: judge only runs from this one on (an expected change).
    ``metric``: what the series' values are (``time``: seconds; ``instructions``).
    """
    if baseline_run_id is not None:
        ids = [h.run_id for h in history]
        if baseline_run_id in ids:
            history = history[ids.index(baseline_run_id) :]
    values = [h.median_s if h.median_s is not None else math.nan for h in history]
    analysis = analyze(values, min_effect=min_effect)
    return _report(benchmark_id, environment_id, analysis, history.__getitem__, values, metric)


def _report(
    benchmark_id: str,
    environment_id: str,
    analysis: SeriesAnalysis,
    point_at: Callable[[int], HistoryPoint],
    values: Sequence[float] | np.ndarray,
    metric: str,
) -> SeriesReport:
    """The report of one analysed series; ``point_at(j)`` is its ``j``-th run (only the
    runs around a regression are asked for)."""
    alerts = []
    for cp in regressions(analysis):
        good = next(
            (point_at(j) for j in range(cp.index - 1, -1, -1) if not math.isnan(values[j])),
            None,
        )
        bad = point_at(cp.index)
        creep = next((c for c in analysis.creeps if cp.index in c.change_points), None)
        unit = "s" if metric == "time" else "instructions"
        detail: dict[str, Any] = {
            "kind": "creep" if creep else "step",
            "metric": metric,
            f"before_{unit}": cp.before,
            f"after_{unit}": cp.after,
            "p_value": cp.p_value,
            "good_sha": good.git_sha if good else None,
            "bad_sha": bad.git_sha,
            "noise_rel": analysis.noise_rel,
        }
        if creep is not None:
            detail["creep_rel_per_run"] = creep.slope_rel_per_point
        alerts.append(
            Alert(
                benchmark_id=benchmark_id,
                environment_id=environment_id,
                last_good_run_id=good.run_id if good else None,
                first_bad_run_id=bad.run_id,
                rel_change=cp.rel_change,
                severity=severity(cp.rel_change),
                detail=detail,
            )
        )
    return SeriesReport(
        benchmark_id=benchmark_id,
        environment_id=environment_id,
        points=analysis.n_values,
        unstable=analysis.unstable,
        noise_rel=analysis.noise_rel,
        change_points=tuple(cp.index for cp in analysis.change_points),
        alerts=tuple(alerts),
        change_runs=tuple(point_at(cp.index).run_id for cp in analysis.change_points),
    )


def detect(
    store: Store,
    *,
    min_effect: float = 0.05,
    metric: str = "time",
    jobs: int | None = None,
    table: SeriesTable | None = None,
) -> tuple[list[SeriesReport], int]:
    """Analyze every series of ``store`` (of ``metric``: ``time`` or ``instructions``),
    store the new alerts; returns the reports and how many alerts were new (an alert
    already stored keeps its status). Series with no value at all (a metric never
    measured for them) are left out. A report's ``change_points`` are positions in its
    series from the baseline on (see :func:`series_starts`), ``change_runs`` their runs.

    ``table``: the series of ``metric`` already read (``dashboard build`` reads them
    with the history it shows: :meth:`benchbench.store.series.SeriesRows.table`);
    default :func:`~benchbench.store.history.series_table`.

    The series are analysed in ``jobs`` processes (default: one per CPU this process may
    use) once there are :data:`PARALLEL_FROM` of them: a fleet's year is ~40,000 series
    at ~2 ms each.

    A series whose judged values (and ``min_effect``) are those of its stored judgement
    is not analysed again: its verdict is read back (:mod:`benchbench.analysis.judgements`),
    and its report is the one a fresh analysis gives. The fresh verdicts are stored with
    their alerts, in one transaction."""
    if table is None:
        table = series_table(store, metric)
    if metric == "instructions":  # callgrind's counts only (module docstring)
        table = table.without_runs(history.runs_counted_by(store, "pmu"))
    starts = series_starts(table, baselines(store))
    todo = [i for i in range(len(table)) if metric == "time" or not np.isnan(table.values(i)).all()]
    judged = [table.values(i)[starts[i] :] for i in todo]
    digests = [judgements.digest(values, min_effect) for values in judged]
    stored = history.judgements(store, metric)
    fresh = [k for k, i in enumerate(todo) if stored.get(table.keys[i], ("",))[0] != digests[k]]
    found = analyze_all([judged[k] for k in fresh], min_effect=min_effect, jobs=jobs)
    by_position = dict(zip(fresh, found, strict=True))
    reports = []
    for k, i in enumerate(todo):
        bench, env = table.keys[i]
        analysis = by_position.get(k) or judgements.decode(stored[table.keys[i]][1])
        point_at = _point_at(table, i, starts[i])
        reports.append(_report(bench, env, analysis, point_at, judged[k], metric))
    # A reused verdict's alerts were stored with it: only the fresh ones' are offered.
    alerts = [alert for k in fresh for alert in reports[k].alerts]
    verdicts = [
        (table.keys[todo[k]], digests[k], judgements.encode(analysis))
        for k, analysis in by_position.items()
    ]
    new = history.save_verdicts(store, alerts, metric, verdicts)
    return reports, new


def _point_at(table: SeriesTable, i: int, start: int) -> Callable[[int], HistoryPoint]:
    """The ``j``-th run of series ``i`` counted from ``start``, as a :class:`HistoryPoint`."""
    return lambda j: table.point(i, start + j)


def series_starts(table: SeriesTable, bases: dict[tuple[str, str], str]) -> list[int]:
    """Where each series of ``table`` is judged from: its ``expected`` baseline run's
    position, or 0."""
    number = {run_id: k for k, run_id in enumerate(table.run_ids)}
    starts = [0] * len(table)
    for i, key in enumerate(table.keys):
        base = bases.get(key)
        if base is None or base not in number:
            continue
        runs = table.runs(i)
        at = int(np.searchsorted(runs, number[base]))
        if at < runs.size and runs[at] == number[base]:
            starts[i] = at
    return starts


#: Series counts from which :func:`analyze_all` uses several processes.
PARALLEL_FROM = 2000

_SERIES: list[np.ndarray] = []  # what forked workers analyse, inherited, not pickled


def analyze_all(
    series: list[np.ndarray],
    *,
    min_effect: float = 0.05,
    jobs: int | None = None,
    parallel_from: int = PARALLEL_FROM,
) -> list[SeriesAnalysis]:
    """:func:`analyze` of every series, in ``jobs`` forked processes when there are
    ``parallel_from`` or more and the platform forks; the same results in the same order
    as one process gives."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    workers = jobs or cpus
    forks = "fork" in multiprocessing.get_all_start_methods()
    if workers <= 1 or len(series) < parallel_from or not forks:
        return [analyze(values, min_effect=min_effect) for values in series]
    global _SERIES
    _SERIES = series
    try:
        chunk = -(-len(series) // (workers * 8))
        bounds = [(a, min(a + chunk, len(series))) for a in range(0, len(series), chunk)]
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            done = pool.map(_analyze_range, bounds, [min_effect] * len(bounds))
            return [analysis for part in done for analysis in part]
    finally:
        _SERIES = []


def _analyze_range(bounds: tuple[int, int], min_effect: float) -> list[SeriesAnalysis]:
    a, b = bounds
    return [analyze(values, min_effect=min_effect) for values in _SERIES[a:b]]
