"""Regressions over history: change points per (benchmark, environment) series.

:func:`analyze_series` is a pure function over :class:`HistoryPoint` sequences
(oldest first); :func:`detect` runs it on every series of a store and saves the new
alerts, through :mod:`benchbench.store.history` (which only reads and writes); the
CLI lists. The detector is :mod:`benchbench.analysis.changepoint`
(E-divisive means with a Student t-test, as in Hunter / Apache Otava). A series
too noisy to judge (per-point relative noise above 10 %) is reported as
``unstable`` and raises no alert. Each worsening change point becomes an alert with
its commit range: the last run at the old level and the first at the new one.
An ``expected`` annotation on an alert resets the baseline: only runs from its
first bad run on are judged afterwards.

``metric="instructions"`` judges the series of instruction counts per call instead
(``run --metric instructions``), whose noise is far below time's; its alerts say
``metric: instructions`` in their detail, with the counts before and after. An alert is
one per (benchmark, environment, first bad run): where time already raised one for that
run, the count's is not stored again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchbench.analysis.changepoint import MIN_VALUES, analyze, regressions
from benchbench.store.history import Alert, HistoryPoint, baselines, load_series, save_alerts

if TYPE_CHECKING:
    from benchbench.store import Store

__all__ = [
    "MIN_RUNS",
    "SEVERITIES",
    "Alert",
    "HistoryPoint",
    "SeriesReport",
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
    """What the detector concluded about one series."""

    benchmark_id: str
    environment_id: str
    points: int
    unstable: bool
    noise_rel: float | None
    change_points: tuple[int, ...]
    alerts: tuple[Alert, ...]

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
    alerts = []
    for cp in regressions(analysis):
        good = _last_ok_before(history, cp.index)
        bad = history[cp.index]
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
    )


def _last_ok_before(history: Sequence[HistoryPoint], index: int) -> HistoryPoint | None:
    for point in reversed(history[:index]):
        if point.median_s is not None:
            return point
    return None


def detect(
    store: Store, *, min_effect: float = 0.05, metric: str = "time"
) -> tuple[list[SeriesReport], int]:
    """Analyze every series of ``store`` (of ``metric``: ``time`` or ``instructions``),
    store the new alerts; returns the reports and how many alerts were new (an alert
    already stored keeps its status). Series with no value at all (a metric never
    measured for them) are left out."""
    bases = baselines(store)
    reports = [
        analyze_series(
            bench,
            env,
            history,
            min_effect=min_effect,
            baseline_run_id=bases.get((bench, env)),
            metric=metric,
        )
        for (bench, env), history in load_series(store, metric).items()
        if any(h.median_s is not None for h in history) or metric == "time"
    ]
    new = save_alerts(store, [alert for report in reports for alert in report.alerts])
    return reports, new
