"""Which runs' points the site holds in full: the rest of a store is history only.

A fleet's year is ~7,100 runs of 2,000 points; a page that shows a run's points (the
workload pages, the compare page, the overview's failures, the breakdown page) needs
only a few of them, and reading the full rows of all of them is what made a build of
a fleet's year take ~20 minutes (~35 us a row, 14 million rows). The site holds:

- the newest :data:`NEWEST_RUNS` runs of each environment: the overview's latest run
  per environment and a week and a half of nightlies for the compare page;
- per workload and environment, the newest run that timed the workload or failed in it
  (the workload page's line; in a nightly fleet this is the newest run already, but a
  suite run once a month still gets its page);
- the runs open alerts name (last good, first bad), newest alerts first, up to
  :data:`ALERT_RUNS` runs beyond those above: the compare page can put the two sides of
  a recent regression side by side;
- the newest run that holds captured calls (the breakdown page).

Older runs stay in the store (``benchbench compare RUN_A RUN_B``, ``benchbench show
RUN``); their history is on the history pages all the same.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchbench.store.scan import STATUS_CODES
from benchbench.store.series import SeriesRows

#: Newest runs per environment whose points the site holds.
NEWEST_RUNS = 10
#: Runs named by open alerts that the site holds beyond the newest ones.
ALERT_RUNS = 20


def shown_runs(
    runs: pd.DataFrame,
    series: SeriesRows,
    benchmarks: pd.DataFrame,
    alerts: pd.DataFrame,
    newest: int = NEWEST_RUNS,
    alert_runs: int = ALERT_RUNS,
) -> list[str]:
    """The ids of the runs whose points the site holds (see the module's docstring).

    ``runs``: ``run_id``, ``started_at``, ``environment_id``; ``benchmarks``:
    ``benchmark_id``, ``suite``, ``workload``, ``params``; ``alerts``: the store's, newest
    first, with ``status``, ``last_good_run_id`` and ``first_bad_run_id``."""
    ordered = runs.sort_values(["started_at", "run_id"], kind="stable")
    env = ordered["environment_id"].astype(object).where(ordered["environment_id"].notna(), "")
    chosen = set(ordered.groupby(env, sort=False).tail(newest)["run_id"].astype(str))
    chosen |= _latest_per_workload(series, benchmarks)
    chosen |= _latest_captured(series, benchmarks)
    added = 0
    open_ = alerts[alerts["status"] == "open"]
    for pair in zip(open_["first_bad_run_id"], open_["last_good_run_id"], strict=True):
        for run in pair:
            if added < alert_runs and isinstance(run, str) and run not in chosen:
                chosen.add(run)
                added += 1
    known = set(runs["run_id"].astype(str))
    return sorted(chosen & known)


def _latest_per_workload(series: SeriesRows, benchmarks: pd.DataFrame) -> set[str]:
    """Per workload and environment, the newest run that timed it or failed in it."""
    if not series.run.size:
        return set()
    lengths = np.diff(series.offsets)
    of_series = np.repeat(np.arange(len(series)), lengths)
    timed = (series.status != STATUS_CODES["ok"]) | np.isfinite(series.values["median_s"])
    rows = np.flatnonzero(timed)
    if not rows.size:
        return set()
    # Runs ascend within a series: its last timed row is its newest.
    last = rows[np.concatenate((np.diff(of_series[rows]) != 0, [True]))]
    workload = _workloads(series, benchmarks)
    frame = pd.DataFrame(
        {
            "w": workload[of_series[last]],
            "e": [str(series.keys[i][1]) for i in of_series[last].tolist()],
            "run": series.run[last],
        }
    )
    frame = frame[frame["w"] >= 0]
    newest = frame.groupby(["w", "e"])["run"].max().to_numpy()
    return {series.run_ids[k] for k in newest.tolist()}


def _latest_captured(series: SeriesRows, benchmarks: pd.DataFrame) -> set[str]:
    """The newest run holding captured calls (benchmarks whose params name a capture)."""
    captured = {
        str(b)
        for b, p in zip(benchmarks["benchmark_id"], benchmarks["params"], strict=True)
        if isinstance(p, dict) and "capture" in p
    }
    ends = [series.offsets[i + 1] - 1 for i, (b, _) in enumerate(series.keys) if b in captured]
    if not ends:
        return set()
    return {series.run_ids[int(series.run[ends].max())]}


def _workloads(series: SeriesRows, benchmarks: pd.DataFrame) -> np.ndarray:
    """Each series' workload as a number (-1 for a benchmark ``benchmarks`` lacks)."""
    pairs = pd.MultiIndex.from_arrays(
        [benchmarks["suite"].astype(str), benchmarks["workload"].astype(str)]
    )
    codes, _ = pd.factorize(pairs)
    at = pd.Index(benchmarks["benchmark_id"].astype(str)).get_indexer([b for b, _ in series.keys])
    return np.where(at >= 0, np.asarray(codes)[at], -1)
