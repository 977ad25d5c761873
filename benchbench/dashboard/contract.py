"""The data the dashboard is built from: one frozen value holding plain DataFrames."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from benchbench.core.columns import MEDIAN_CI, POINT_KEYS, QUARTILES, RATES
from benchbench.store.series import SeriesRows

RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "label",
    "kind",
    "status",
    "started_at",
    "finished_at",
    "git_sha",
    "git_branch",
    "git_dirty",
    "environment_id",
    "suites",
    "tags",
)
ENVIRONMENT_COLUMNS: tuple[str, ...] = ("environment_id", "machine", "fields", "info")
MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "run_id",
    "benchmark_id",
    *(name for name in POINT_KEYS if name != "shape"),
    "status",
    "reason",
    *MEDIAN_CI,
    *QUARTILES,
    *RATES,
    "max_rel_error",
    "warnings",
    "environment_id",
    "started_at",
    "git_sha",
    "timing",
    "instructions_per_call",
    "instructions_noise",
    "percent_of_peak",
    "compile_s",
    "log_var",
    "processes",
)
#: Measurement columns data may leave out (CPU-only data, runs that counted nothing, rows
#: that are not captured calls): the site reads them as None (NaN for the numbers).
OPTIONAL_MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "timing",
    "instructions_per_call",
    "instructions_noise",
    "percent_of_peak",
    "compile_s",
    "log_var",
    "processes",
)
ALERT_COLUMNS: tuple[str, ...] = (
    "alert_id",
    "benchmark_id",
    "environment_id",
    "last_good_run_id",
    "first_bad_run_id",
    "rel_change",
    "severity",
    "status",
    "created_at",
)
ANNOTATION_COLUMNS: tuple[str, ...] = ("benchmark_id", "environment_id", "at", "text")
#: The benchmarks of :attr:`DashboardData.series` (the ``measurements`` of the runs shown
#: need not hold every benchmark the history holds).
BENCHMARK_COLUMNS: tuple[str, ...] = (
    "benchmark_id",
    *(name for name in POINT_KEYS if name != "shape"),
)


def _empty(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in columns})


@dataclass(frozen=True)
class DashboardData:
    """Everything the dashboard shows, as read from the results store.

    Every DataFrame may be empty; its columns are the ``*_COLUMNS`` tuples of this
    module (``annotations`` is optional: ``benchmark_id`` or ``environment_id`` set
    to None applies the note to every benchmark or environment). ``profiles`` maps
    an environment id to its measured ceilings, ``{"peak_bytes_per_s": float,
    "peak_flop_per_s": {dtype: float}, "caches": [{"level": 2, "size_bytes": int}]}``.
    ``timing`` in ``measurements`` says how a CUDA point was timed (``events``,
    ``graph x100``, ``events, launch-bound``); None (or absent) for other devices.
    ``instructions_per_call`` is the point's instruction count per call under callgrind
    (``run --metric instructions``) and ``instructions_noise`` how much its counts moved
    (the noise :func:`benchbench.analysis.verdict.estimate_counts` reads: within and
    between processes); both None (or absent) where nothing was counted. A row that was
    counted and not timed is ``ok`` with ``median_s`` None.
    ``log_var`` and ``processes``: the variance of the mean of the point's per-process log
    medians and their count (:func:`benchbench.analysis.detectable.side_variance`), from
    which the compare page reads the smallest change a comparison could see; None (or
    absent) for a point measured in one process.
    ``percent_of_peak`` (% of the roofline ceiling) and ``compile_s`` (a compiled
    whole's compile time) are set on captured calls' rows only (NaN or absent
    elsewhere): the breakdown page shows them.
    ``repo_url`` turns commits into links ``{repo_url}/commit/{sha}`` (http/https only).

    A store's history is too large for ``measurements`` (a fleet's year: 14 million
    rows). :func:`benchbench.dashboard.from_store.load` gives ``series``, every
    measurement's history columns as arrays (:class:`~benchbench.store.series.
    SeriesRows`), with ``benchmarks`` (:data:`BENCHMARK_COLUMNS`, every benchmark the
    series name); the history pages, the overview's sparklines and the runs' point
    counts then come from ``series``, and ``measurements`` holds only the rows of the
    runs whose points the site shows (each gets a run file: the compare page offers
    those only; ``newest_runs`` says how many per environment, for the page's words).
    Without ``series`` every run's rows are in ``measurements`` and all of it is shown.
    ``change_points`` maps (benchmark_id, environment_id) to the runs where the
    regression detector found a change (the history pages mark them); without it,
    ``build_site``'s ``changepoints`` callback finds them. ``run_to_run`` maps the id of
    an environment's newest run or an open alert's first bad run to ``compare``'s
    run-to-run term and shared shift against the run before it
    (:func:`benchbench.dashboard.run_to_run.consecutive`); the compare page judges that
    pair with them, and any pair without them within its two runs only.
    """

    runs: pd.DataFrame = field(default_factory=lambda: _empty(RUN_COLUMNS))
    environments: pd.DataFrame = field(default_factory=lambda: _empty(ENVIRONMENT_COLUMNS))
    measurements: pd.DataFrame = field(default_factory=lambda: _empty(MEASUREMENT_COLUMNS))
    alerts: pd.DataFrame = field(default_factory=lambda: _empty(ALERT_COLUMNS))
    profiles: dict[str, dict] = field(default_factory=dict)
    repo_url: str | None = None
    annotations: pd.DataFrame = field(default_factory=lambda: _empty(ANNOTATION_COLUMNS))
    series: SeriesRows | None = None
    benchmarks: pd.DataFrame | None = None
    change_points: Mapping[tuple[str, str], Sequence[str]] | None = None
    newest_runs: int | None = None
    run_to_run: Mapping[str, Mapping[str, Any]] | None = None
