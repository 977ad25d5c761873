"""Reading a results store into :class:`DashboardData`, with the real fit and detector.

History comes from the store's series (the columns its covering index holds), the
full rows only of the runs whose points the pages show (:mod:`.shown_runs`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchbench.analysis.changepoint import analyze
from benchbench.analysis.detectable import side_variance
from benchbench.analysis.fit import fit_curve
from benchbench.analysis.regressions import SeriesReport
from benchbench.analysis.roofline import roofline_numbers
from benchbench.analysis.sides import instructions
from benchbench.analysis.verdict import estimate_counts
from benchbench.core.errors import BenchbenchError
from benchbench.dashboard.contract import (
    ALERT_COLUMNS,
    ANNOTATION_COLUMNS,
    BENCHMARK_COLUMNS,
    ENVIRONMENT_COLUMNS,
    MEASUREMENT_COLUMNS,
    RUN_COLUMNS,
    DashboardData,
)
from benchbench.dashboard.run_to_run import asked, consecutive
from benchbench.dashboard.shown_runs import NEWEST_RUNS, shown_runs
from benchbench.machine.hardware import Profile
from benchbench.measure.cuda_graph import TIMING_KEYS, timing_method
from benchbench.store import Store
from benchbench.store.history import list_alerts
from benchbench.store.profiles import profile_documents, profile_of
from benchbench.store.queries import DATAFRAME_COLUMNS
from benchbench.store.series import SeriesRows, series_rows


def _frame(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame.from_records(list(rows), columns=list(columns))


#: The store's DataFrame columns the pages and the extras below read.
_READ: tuple[str, ...] = (
    *(c for c in MEASUREMENT_COLUMNS if c in DATAFRAME_COLUMNS),
    "instruction_counts",
)


def load(
    store: Store,
    repo_url: str | None = None,
    *,
    series: SeriesRows | None = None,
    reports: Sequence[SeriesReport] | None = None,
    marks_from_alerts: bool = False,
) -> DashboardData:
    """Everything the dashboard shows, read from ``store``.

    History from the store's series (``series``, read by
    :func:`~benchbench.store.series.series_rows` when not given: the columns
    ``ix_measurement_series`` holds), full rows only for the runs
    :func:`~benchbench.dashboard.shown_runs.shown_runs` picks. ``reports`` (the
    regression detector's, over the same store) give the history pages their change
    points; without them the pages mark none, or with ``marks_from_alerts`` the first bad
    run of each stored alert.
    """
    if series is None:
        series = series_rows(store)
    stored_runs = store.runs(counts=False)
    runs = _frame(
        [
            {
                **{k: r.get(k) for k in RUN_COLUMNS if k in r},
                "run_id": r["id"],
                "suites": [s.get("name") for s in r.get("suites") or []],
                "tags": list(r.get("tags") or []),
            }
            for r in stored_runs
        ],
        RUN_COLUMNS,
    )
    environments = _frame(
        [
            {"environment_id": e["id"], **{k: e[k] for k in ("machine", "fields", "info")}}
            for e in store.environments()
        ],
        ENVIRONMENT_COLUMNS,
    )
    annotations = _frame(
        [
            {
                "benchmark_id": a["benchmark_id"],
                "environment_id": a["environment_id"],
                "at": a["created_at"],
                "text": f"{a['kind']}: {a['text']}" if a["text"] else a["kind"],
            }
            for a in store.annotations()
        ],
        ANNOTATION_COLUMNS,
    )
    benchmarks = _frame(
        [{**b, "benchmark_id": b["id"]} for b in store.benchmarks()], BENCHMARK_COLUMNS
    )
    alerts = _frame(
        [{**a, "alert_id": a["id"]} for a in list_alerts(store)],
        ALERT_COLUMNS,
    )
    shown = shown_runs(runs, series, benchmarks, alerts)
    term_ids = asked(runs, alerts, set(shown))
    frame = store.dataframe(run_ids=shown, columns=_READ) if shown else pd.DataFrame()
    if frame.empty:
        measurements = _frame([], MEASUREMENT_COLUMNS)
    else:
        frame["timing"] = pd.Series(_timings(store, frame, shown), index=frame.index, dtype=object)
        frame["instructions_noise"] = pd.Series(_noise(store, frame, shown), index=frame.index)
        spreads = _spreads(store, frame, shown)
        frame["log_var"] = pd.Series([s[0] for s in spreads], index=frame.index, dtype=float)
        frame["processes"] = pd.Series([s[1] for s in spreads], index=frame.index, dtype=float)
        percent, compile_s = _captured(store, frame, shown)
        frame["percent_of_peak"] = pd.Series(percent, index=frame.index, dtype=float)
        frame["compile_s"] = pd.Series(compile_s, index=frame.index, dtype=float)
        measurements = frame.reindex(columns=list(MEASUREMENT_COLUMNS))
    change_points = None
    if reports is not None:
        change_points = {
            (r.benchmark_id, r.environment_id): r.change_runs for r in reports if r.change_runs
        }
    elif marks_from_alerts:
        marked: dict[tuple[str, str], list[str]] = {}
        for bench, env, bad in zip(
            alerts["benchmark_id"], alerts["environment_id"], alerts["first_bad_run_id"],
            strict=True,
        ):  # fmt: skip
            marked.setdefault((str(bench), str(env)), []).append(str(bad))
        change_points = {key: tuple(runs) for key, runs in marked.items()}
    return DashboardData(
        runs=runs,
        environments=environments,
        measurements=measurements,
        alerts=alerts,
        profiles=_profiles(store),
        repo_url=repo_url,
        annotations=annotations,
        series=series,
        benchmarks=benchmarks,
        change_points=change_points,
        newest_runs=NEWEST_RUNS,
        run_to_run=consecutive(store, [r for r in stored_runs if r["id"] in term_ids]),
    )


def _timings(store: Store, frame: pd.DataFrame, run_ids: Sequence[str]) -> list[str | None]:
    """How each row of ``frame`` (the runs ``run_ids``) was timed: its CUDA points'
    ``extra`` read in one query (the store's DataFrame leaves ``extra`` out); None for
    every other device."""
    cuda = frame["device"].astype(str).str.startswith("cuda")
    if not cuda.any():
        return [None] * len(frame)
    methods = {
        key: timing_method(device, extra)
        for key, (device, extra) in store.device_extras("cuda", run_ids, TIMING_KEYS).items()
    }
    out: list[str | None] = [None] * len(frame)
    at = np.flatnonzero(cuda.to_numpy())
    for k, r, bid in zip(
        at.tolist(), frame["run_id"].iloc[at], frame["benchmark_id"].iloc[at], strict=True
    ):
        out[k] = methods.get((str(r), str(bid)))
    return out


def _spreads(
    store: Store, frame: pd.DataFrame, run_ids: Sequence[str]
) -> list[tuple[float, float]]:
    """Each row's share of the verdict's standard error (:func:`side_variance`: the
    variance of its mean per-process log median and the process count); NaN for a point
    measured in one process."""
    medians = store.process_medians(run_ids)
    out = []
    for r, bid in zip(frame["run_id"], frame["benchmark_id"], strict=True):
        side = side_variance(medians.get((str(r), str(bid)), ()))
        out.append((math.nan, math.nan) if side is None else (side[0], float(side[1])))
    return out


def _noise(store: Store, frame: pd.DataFrame, run_ids: Sequence[str]) -> list[float | None]:
    """How much each counted row's instruction counts moved, as the instruction verdict
    reads one side (``estimate_counts`` of the side against itself: the larger of the
    within-process spread in ``extra`` and the spread between processes); None where
    nothing was counted. The compare page marks with it as ``compare`` does."""
    counted = frame["instructions_per_call"].notna()
    if not counted.any():
        return [None] * len(frame)
    extras = store.counted_extras(run_ids)
    out: list[float | None] = []
    for r, bid, c, per_call, counts in zip(
        frame["run_id"],
        frame["benchmark_id"],
        counted,
        frame["instructions_per_call"],
        frame["instruction_counts"],
        strict=True,
    ):
        if not c:
            out.append(None)
            continue
        row = {
            "instructions_per_call": per_call,
            "instruction_counts": counts,
            "extra": extras.get((str(r), str(bid))),
        }
        side = instructions(row)
        if side is None or min(side[0]) <= 0:
            out.append(None)  # a count of 0 has no ratio, so no noise to read
            continue
        out.append(estimate_counts(side[0], side[0], side[1]).noise)
    return out


def _captured(
    store: Store, frame: pd.DataFrame, run_ids: Sequence[str]
) -> tuple[list[float], list[float]]:
    """``percent_of_peak`` and ``compile_s`` of the captured calls' rows (the breakdown
    page's), NaN elsewhere: % of the ceiling as ``benchbench breakdown`` computes it
    (:func:`~benchbench.analysis.roofline.roofline_numbers` against the newest CPU
    profile of the row's environment), and the compile time a ``whole-compiled`` point
    keeps in its ``extra`` (the store's DataFrame leaves ``extra`` out)."""
    nan = float("nan")
    captured = [isinstance(p, dict) and "capture" in p for p in frame["params"]]
    percent, compile_s = [nan] * len(frame), [nan] * len(frame)
    if not any(captured):
        return percent, compile_s
    profiles: dict[str, Profile] = {}
    for env_id, data in profile_documents(store, "cpu"):  # oldest first: newest wins
        try:
            profiles[env_id] = profile_of(data)
        except BenchbenchError:
            continue
    at = np.flatnonzero(captured)
    runs = sorted({str(r) for r in frame["run_id"].iloc[at]})  # those holding captured calls
    extras = {key: extra for key, (_, extra) in store.device_extras("cpu", runs).items()}
    for i, row in zip(at.tolist(), frame.iloc[at].to_dict("records"), strict=True):
        if row["device"] != "cpu":
            continue
        extra = extras.get((str(row["run_id"]), str(row["benchmark_id"]))) or {}
        if isinstance(extra, dict) and extra.get("compile_s") is not None:
            compile_s[i] = float(extra["compile_s"])
        median = row.get("median_s")
        if median is None or median != median:  # NaN: not measured
            continue
        # the work per call from the rates: the DataFrame holds rates, not the work
        work = {
            "bytes_per_call": (row.get("bytes_per_s") or 0.0) * median,
            "flop_per_call": (row.get("flop_per_s") or 0.0) * median,
        }
        point = {str(k): v for k, v in row.items()} | work
        value, _ = roofline_numbers(point, profiles.get(str(row["environment_id"])))
        if value is not None:
            percent[i] = value
    return percent, compile_s


def _profiles(store: Store) -> dict[str, dict[str, Any]]:
    """The newest CPU profile per environment, in the dashboard's shape.

    Cache markers use the sizes the OS reports (the hardware's); the probe's detected
    boundaries are in the profile itself (`benchbench probe`).
    """
    out: dict[str, dict[str, Any]] = {}
    # Oldest first: each environment keeps its newest profile this version can read.
    for env_id, data in profile_documents(store, "cpu"):
        try:
            profile = profile_of(data)
        except BenchbenchError:
            continue  # a profile this version cannot read: no ceilings rather than a crash
        out[env_id] = {
            "peak_bytes_per_s": profile.peak_memory_bytes_per_s or None,
            "peak_flop_per_s": dict(profile.peak_flop_per_s),
            "caches": [
                {"level": c.level, "size_bytes": c.size_bytes}
                for c in profile.os_caches
                if c.level >= 2
            ],
        }
    return out


def fit(sizes: Sequence[float], times: Sequence[float]) -> tuple[float, float] | None:
    """``time = t0 + size / rate`` (rate in elements per second), or None when unfittable."""
    try:
        result = fit_curve(list(sizes), list(times), work_unit="elements")
    except BenchbenchError:
        return None
    return result.t0_s, result.rate_per_s


def changepoints(values: Sequence[float]) -> list[int]:
    """Indexes of the change points the regression detector finds."""
    try:
        return [cp.index for cp in analyze(values).change_points]
    except BenchbenchError:
        return []
