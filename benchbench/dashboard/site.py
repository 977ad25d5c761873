"""Write the static site: HTML pages, bundled assets and per-page data scripts.

Layout of the output directory::

    index.html workload.html history.html compare.html environment.html breakdown.html
    assets/      uPlot (MIT, vendored, LICENSE beside it), dashboard.css, *.js
    data/index.js            runs, environments, workloads, benchmarks, alerts
    data/overview.js         sparklines
    data/environments.js     fingerprints and ceilings
    data/workload/w<N>.js    latest run per environment of one workload
    data/history/w<N>.js     medians (and instruction counts) over time of one
                             workload's points
    data/runs/r<N>.js        every point of one run (compare, failures), with its
                             instruction counts where the run counted any: the runs
                             of ``measurements`` only (from a store: the newest per
                             environment and those alerts name); ``index.js`` marks
                             them (``data``)
    data/breakdown.js        captured calls of the latest run holding any

Data files are JavaScript, not JSON, because Chromium blocks ``fetch()`` from
``file://`` pages; each one stores a JSON document in ``window.BB_DATA``. The JSON
has ``<``, ``>`` and ``&`` escaped as ``\\u003c``... so no string in it can close the
script element, and the pages insert every string with ``textContent``.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchbench.core.errors import StoreError
from benchbench.dashboard.contract import (
    ALERT_COLUMNS,
    ENVIRONMENT_COLUMNS,
    MEASUREMENT_COLUMNS,
    OPTIONAL_MEASUREMENT_COLUMNS,
    RUN_COLUMNS,
    DashboardData,
)
from benchbench.dashboard.history_pages import (
    HistoryRows,
    change_marks,
    history_text,
    overview_payload,
)
from benchbench.dashboard.json_numbers import json_for_script
from benchbench.dashboard.page_data import (
    breakdown_payload,
    environments_payload,
    run_payloads,
    workload_payload,
)
from benchbench.dashboard.payload import ChangepointFn, FitFn, Keys, add_throughput, index_payload
from benchbench.dashboard.target import building, check_target

PAGES: dict[str, str] = {
    "index.html": "Overview",
    "workload.html": "Workload",
    "history.html": "History",
    "compare.html": "Compare",
    "environment.html": "Environment",
    "breakdown.html": "Breakdown",
}
PAGE_SCRIPTS: dict[str, str] = {
    "index.html": "overview.js",
    "workload.html": "workload.js",
    "history.html": "history.js",
    "compare.html": "compare.js",
    "environment.html": "environment.js",
    "breakdown.html": "breakdown.js",
}
ASSETS: tuple[str, ...] = (
    "uPlot.iife.min.js",
    "uPlot.min.css",
    "uPlot.LICENSE",
    "dashboard.css",
    "dashboard.js",
    "charts.js",
    *PAGE_SCRIPTS.values(),
)


def data_script(key: str, doc: Any) -> str:
    """A data file: ``window.BB_DATA[key] = <json>``; ``key`` is ours, never from the data."""
    return data_script_text(key, json_for_script(doc))


def data_script_text(key: str, text: str) -> str:
    """A data file of JSON ``text`` already escaped for a script (:func:`json_for_script`)."""
    return f"(window.BB_DATA=window.BB_DATA||{{}})[{json.dumps(key)}]={text};\n"


def _check(frame: pd.DataFrame, columns: tuple[str, ...], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing and len(frame.columns):
        raise StoreError(
            f"dashboard data: {name} lacks columns {missing}; got {list(frame.columns)}. "
            f"Read it with the store's dashboard query, which returns {list(columns)}."
        )


def _frame(frame: pd.DataFrame, columns: tuple[str, ...], name: str) -> pd.DataFrame:
    _check(frame, columns, name)
    if not len(frame.columns):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return frame


def _page_html(page: str, title: str, generated: str) -> str:
    here = ' class="here"'
    nav = "".join(f'<a href="{p}"{here if p == page else ""}>{t}</a>' for p, t in PAGES.items())
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'self'; script-src 'self'; \
style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'none'">
<title>benchbench · {title}</title>
<link rel="stylesheet" href="assets/uPlot.min.css">
<link rel="stylesheet" href="assets/dashboard.css">
</head>
<body data-page="{page}">
<header><span class="brand">benchbench</span><nav>{nav}</nav>
<span class="generated">built {generated}</span></header>
<section id="filters" class="filters"></section>
<main id="main"><p class="loading">Loading…</p></main>
<div id="tooltip" class="tooltip" hidden></div>
<script src="assets/uPlot.iife.min.js"></script>
<script src="assets/dashboard.js"></script>
<script src="assets/charts.js"></script>
<script src="data/index.js"></script>
<script src="assets/{PAGE_SCRIPTS[page]}"></script>
</body>
</html>
"""


def _codes(values: pd.Series, numbering: dict[str, int]) -> np.ndarray:
    """Each value's number in ``numbering`` (-1 if absent), by one hash join.

    ``Series.map(dict)`` on 219,000 strings takes ~0.25 s on our machine;
    ``Index.get_indexer`` a tenth of that.
    """
    return pd.Index(list(numbering)).get_indexer(values.astype(str)).astype(np.int64)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def build_site(
    data: DashboardData,
    out_dir: Path,
    *,
    fit: FitFn | None = None,
    changepoints: ChangepointFn | None = None,
    now: datetime | None = None,
) -> Path:
    """Write the dashboard for ``data`` into ``out_dir``; return the path of ``index.html``.

    ``fit(sizes, times) -> (t0_s, rate) | None`` adds model lines and crossovers to
    workload pages; ``changepoints(values) -> [index, ...]`` marks change points on
    history pages where ``data.change_points`` does not (the detector's, from the
    store); without either those overlays are left out. ``now`` stamps the pages
    (default: the current UTC time). The site is written beside ``out_dir`` and swapped
    in whole when complete (:mod:`benchbench.dashboard.target`); ``out_dir`` must be
    absent, empty or a dashboard (a :class:`UsageError` names it otherwise); files a
    user put beside the site there are kept.

    History (history pages, sparklines, each run's point counts) comes from
    ``data.series`` when given, else from ``data.measurements``; the workload, compare
    and breakdown pages from ``data.measurements``, whose runs each get a run file (as
    does a run that recorded nothing); the index says which runs have one.
    """
    target = Path(out_dir)
    check_target(target)
    runs = _frame(data.runs, RUN_COLUMNS, "runs")
    environments = _frame(data.environments, ENVIRONMENT_COLUMNS, "environments")
    alerts = _frame(data.alerts, ALERT_COLUMNS, "alerts")
    measurements = data.measurements
    absent = [c for c in OPTIONAL_MEASUREMENT_COLUMNS if c not in measurements.columns]
    if len(measurements.columns) and absent:
        # CPU-only data lacks timing, data that counted nothing the instruction columns,
        # data without captured calls their % of peak and compile time.
        numbers = ("percent_of_peak", "compile_s")
        measurements = measurements.assign(
            **{c: float("nan") if c in numbers else None for c in absent}
        )
    measurements = _frame(measurements, MEASUREMENT_COLUMNS, "measurements")
    data = dataclasses.replace(
        data,
        runs=runs,
        environments=environments,
        measurements=measurements,
        alerts=alerts,
        profiles=data.profiles or {},
    )
    # Measurements of runs the runs table does not list cannot be placed in time.
    listed = measurements["run_id"].astype(str).isin(set(runs["run_id"].astype(str)))
    m = add_throughput(measurements[listed])
    keys = Keys(data, m, _benchmarks(data, m))
    m = m.assign(
        r=_codes(m["run_id"], keys.run),
        e=_codes(m["environment_id"], keys.env),
        b=_codes(m["benchmark_id"], keys.bench),
    )
    m = m[m["b"] >= 0]
    m = m.assign(w=keys.bench_workload[m["b"].to_numpy()])
    history = (
        HistoryRows.from_series(data.series, keys)
        if data.series is not None
        else HistoryRows.from_frame(m)
    )
    counts = history.counts(len(keys.runs))
    # Run files: the runs of ``measurements``, and runs that recorded nothing (killed at
    # start), which still open on the compare page.
    files = set(np.unique(m["r"]).tolist()) | set(np.flatnonzero(counts.sum(axis=1) == 0).tolist())
    with building(target) as out_dir:
        (out_dir / "assets").mkdir(parents=True)
        source = resources.files("benchbench.dashboard") / "assets"
        for name in ASSETS:
            (out_dir / "assets" / name).write_bytes((source / name).read_bytes())

        stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
        index = index_payload(data, keys, counts, files)
        index["generated"] = stamp
        _write(out_dir / "data" / "index.js", data_script("index", index))
        envs = environments_payload(environments, data.profiles or {}, keys)
        _write(out_dir / "data" / "environments.js", data_script("environments", envs))
        _write(out_dir / "data" / "breakdown.js", data_script("breakdown", breakdown_payload(m)))
        job = _Pages(
            out_dir=out_dir,
            shown=m,
            rows=dict(iter(m.groupby("w", sort=True))),
            empty=m.iloc[:0],
            history=history,
            bounds=history.workload_bounds(keys.bench_workload, len(keys.workload)),
            annotations=data.annotations,
            keys=keys,
            run_to_run=data.run_to_run or {},
            profiles=data.profiles or {},
            fit=fit,
            changepoints=changepoints,
            marks=change_marks(data.change_points, keys)
            if data.change_points is not None
            else None,
        )
        _write_pages(job, parallel=history.r.size + len(m) >= PARALLEL_FROM_ROWS)
        written = set(np.unique(m["r"]).tolist())  # by the "runs" task
        nothing: dict[str, Any] = {k: [] for k in ("b", "s", "unit", "m", "lo", "hi", "thr", "err")}
        nothing.update(reason={}, warn={})
        for r in sorted(files - written):
            _write(out_dir / "data" / "runs" / f"r{r}.js", data_script(f"runs/r{r}", nothing))
        for page, title in PAGES.items():
            _write(out_dir / page, _page_html(page, title, stamp))
    return target / "index.html"


#: Rows (history and shown runs') from which the pages drawn from every run or many
#: runs are written by one forked process per CPU: a fleet's year has 2,000 workload
#: lines to fit (~5 ms each), 14 million history rows to write and sparklines to average
#: over them, and ~200 runs' points, on a 2-core machine that has just run the detector
#: on both cores. Below it (tests, a workstation's store) one process writes them.
PARALLEL_FROM_ROWS = 1_000_000

#: A task of :class:`_Pages`: a workload's pages (its number), the overview's
#: sparklines, or the run files.
Task = int | str


@dataclass(frozen=True)
class _Pages:
    """What the workload, history, overview and run pages are written from (inherited
    by forked workers, not pickled)."""

    out_dir: Path
    shown: pd.DataFrame
    rows: dict[int, pd.DataFrame]
    empty: pd.DataFrame
    history: HistoryRows
    bounds: np.ndarray
    annotations: pd.DataFrame
    keys: Keys
    run_to_run: Mapping[str, Mapping[str, Any]]
    profiles: dict[str, dict]
    fit: FitFn | None
    changepoints: ChangepointFn | None
    marks: dict[tuple[int, int], np.ndarray] | None

    def tasks(self) -> list[Task]:
        """Every task, the largest first (a fork pool then ends with the small ones)."""
        workloads = sorted(range(len(self.keys.workload)), key=self.size, reverse=True)
        return ["overview", "runs", *workloads]

    def write(self, task: Task) -> None:
        """Write a workload's workload and history pages, the overview's sparklines
        (``"overview"``) or the run files of the shown runs (``"runs"``)."""
        data = self.out_dir / "data"
        if task == "overview":
            overview = overview_payload(self.history, self.keys)
            _write(data / "overview.js", data_script("overview", overview))
            return
        if task == "runs":
            ids = self.keys.runs["run_id"].astype(str).tolist()
            for r, doc in run_payloads(self.shown):
                term = self.run_to_run.get(ids[r])
                if term is not None:  # compare's term against the run before it
                    doc["rr"] = _keyed(term, self.keys.bench)
                _write(data / "runs" / f"r{r}.js", data_script(f"runs/r{r}", doc))
            return
        w = int(task)
        rows = self.rows.get(w, self.empty)
        wl = workload_payload(rows, self.profiles, list(self.keys.env), self.fit)
        _write(self.out_dir / "data" / "workload" / f"w{w}.js", data_script(f"workload/w{w}", wl))
        lo, hi = int(self.bounds[w]), int(self.bounds[w + 1])
        hist = history_text(
            self.history, lo, hi, self.annotations, self.keys, self.changepoints, self.marks
        )
        path = self.out_dir / "data" / "history" / f"w{w}.js"
        _write(path, data_script_text(f"history/w{w}", hist))

    def size(self, w: int) -> int:
        return int(self.bounds[w + 1] - self.bounds[w]) + len(self.rows.get(w, self.empty))


_JOB: list[_Pages] = []  # what forked workers write from


def _keyed(term: Mapping[str, Any], bench: Mapping[str, int]) -> dict[str, Any]:
    """``term`` (:func:`~benchbench.dashboard.run_to_run.consecutive`) with its points' own
    factors keyed as the run files key benchmarks."""
    rerun = term.get("run_to_run")
    if not rerun or not rerun.get("own"):
        return dict(term)
    own = {bench[b]: f for b, f in rerun["own"].items() if b in bench}
    return {**term, "run_to_run": {**rerun, "own": own}}


def _write_pages(job: _Pages, parallel: bool) -> None:
    """Every task's pages, in one process per CPU this process may use when
    ``parallel`` and the platform forks, else here."""
    tasks = job.tasks()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    forks = "fork" in multiprocessing.get_all_start_methods()
    if not parallel or cpus <= 1 or not forks:
        for task in tasks:
            job.write(task)
        return
    _JOB[:] = [job]
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(cpus, len(tasks)), mp_context=context) as pool:
            list(pool.map(_write_one, tasks))
    finally:
        _JOB.clear()


def _write_one(task: Task) -> None:
    _JOB[0].write(task)


def _benchmarks(data: DashboardData, m: pd.DataFrame) -> pd.DataFrame | None:
    """The benchmarks to key: with ``series``, those it or ``m`` names, described by
    ``data.benchmarks``; else (None) those of ``m``."""
    if data.series is None or data.benchmarks is None:
        return None
    named = {b for b, _ in data.series.keys} | set(m["benchmark_id"].astype(str))
    given = data.benchmarks
    return given[given["benchmark_id"].astype(str).isin(named)]
