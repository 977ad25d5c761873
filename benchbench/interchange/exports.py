"""Exports other tools read: pyperf JSON, pytest-benchmark JSON, CSV.

The CI trackers' formats (github-action-benchmark, Bencher) are in
:mod:`benchbench.interchange.ci_formats`.

Each builder takes one stored run (its row, its environment row and its
measurement rows joined with their benchmarks, as :class:`Store` returns them) and
produces the other tool's document. Times are per call, in seconds, everywhere.
Only measured points (status ``ok``) go into pyperf and pytest-benchmark files:
neither format has a place for a skipped or failed point. CSV keeps every point.

Instruction counts (``run --metric instructions``) are columns of the CSV
(``instructions_per_call``, ``instruction_counts``: the DataFrame's) and of the bundle
(every stored column). pyperf and pytest-benchmark files hold times only: a point that
was counted and not timed is left out of them, and a run whose points were all counted
only is a :class:`UsageError` that names the formats that carry counts.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyperf

from benchbench.core.errors import UsageError
from benchbench.core.values import Point
from benchbench.store.queries import DATAFRAME_COLUMNS

#: The pytest-benchmark JSON layout we write (``pytest-benchmark compare`` 4.x and 5.x
#: read it: ``benchmarks[*].stats`` with the fields of its ``Stats.fields`` plus ``data``
#: and ``iterations``).
PYTEST_BENCHMARK_VERSION = "5.1.0"

Row = Mapping[str, Any]


point_of = Point.from_row


def _names(rows: Sequence[Row]) -> list[str]:
    """One name per row: the point's label, prefixed by its suite when a run has several."""
    several = len({r["suite"] for r in rows}) > 1
    return [f"{r['suite']}/{point_of(r).label}" if several else point_of(r).label for r in rows]


def _per_call(row: Row) -> list[float]:
    calls = int(row["calls_per_sample"])
    return [float(s) / calls for s in row["samples_s"]]


def measured_points(run: Row, rows: Sequence[Row], what: str) -> list[tuple[str, Row]]:
    """(name, row) of every timed point: status ``ok`` with positive samples.

    The formats other tools read have no place for a skipped or failed point. A
    UsageError when the run's ok points were all counted and none timed (``what``: the
    file format, for the message).
    """
    measured = [
        (name, row)
        for name, row in zip(_names(rows), rows, strict=True)
        if row["status"] == "ok" and row["samples_s"] and all(s > 0 for s in row["samples_s"])
    ]
    counted = [
        r for r in rows if r["status"] == "ok" and r.get("instructions_per_call") is not None
    ]
    if not measured and counted:
        raise UsageError(
            f"run {run['id']} counted instructions only (`run --metric instructions`): its "
            f"{len(counted)} points have no time samples, and a {what} file holds times. "
            "Export it with --format csv or --format bundle (both carry "
            "instructions_per_call), or measure times too: benchbench run SUITE "
            "--metric time,instructions"
        )
    return measured


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None and hasattr(value, "isoformat") else value


# -- pyperf -----------------------------------------------------------------------------


#: Values per benchmark in a pyperf export: every point gets exactly this many, the
#: octiles of its per-call times (min, 12.5 %, Q1, 37.5 %, median, 62.5 %, Q3, 87.5 %,
#: max). pyperf's ``compare_to`` only runs its t-test when both files hold the same
#: number of values (otherwise it prints "ERROR when testing if values are
#: significant"), and our points stop after different sample counts. Nine keeps min,
#: Q1, median, Q3 and max exactly as stored, and is below the 10 samples every point
#: measured with the default policy has, so no value is invented for those.
PYPERF_VALUES = 9


def pyperf_values(per_call_s: Sequence[float]) -> list[float]:
    """The :data:`PYPERF_VALUES` values one point exports to pyperf, ascending.

    Evenly spaced quantiles (linear interpolation, numpy's default, as the stored
    quartiles use) of the per-call times. With fewer than 9 samples (a policy with a
    lower ``min_samples``) the values interpolate between samples, and pyperf's
    t-test is then more confident than the samples justify; the benchmark's metadata
    ``benchbench_samples`` says how many samples there were.
    """
    if not per_call_s:
        raise ValueError("a pyperf benchmark needs at least one sample, got none")
    levels = np.linspace(0.0, 1.0, PYPERF_VALUES)
    return [float(v) for v in np.quantile(np.asarray(per_call_s, dtype=np.float64), levels)]


def pyperf_suite(run: Row, env: Row | None, rows: Sequence[Row]) -> Any:
    """A ``pyperf.BenchmarkSuite``: one benchmark per measured point, named by its label.

    Each benchmark holds one pyperf ``Run`` of :data:`PYPERF_VALUES` per-call times
    (:func:`pyperf_values`; pyperf's values are per loop, ``loops`` is our calls per
    sample), so that ``python -m pyperf compare_to`` can test every pair of benchmarks
    for significance. pyperf's median, min and max equal the stored ones; its mean and
    standard deviation are those of the nine quantiles, close to but not the stored
    ones. The run's date, machine and versions are metadata.
    """
    fields = (env or {}).get("fields") or {}
    info = (env or {}).get("info") or {}
    common: dict[str, Any] = {
        "unit": "second",
        "date": _iso(run.get("started_at")),
        "hostname": info.get("hostname") or fields.get("machine"),
        "cpu_model_name": fields.get("cpu_model"),
        "python_version": fields.get("python"),
        "benchbench_run_id": run["id"],
        "benchbench_environment_id": run.get("environment_id"),
        "torch_version": fields.get("torch"),
    }
    if run.get("git_sha"):
        common["commit_id"] = run["git_sha"]
    common = {k: str(v) for k, v in common.items() if v not in (None, "")}
    benchmarks = []
    for name, row in measured_points(run, rows, "pyperf"):
        per_call = _per_call(row)
        metadata = {
            **common,
            "name": name,
            "loops": int(row["calls_per_sample"]),
            "benchbench_benchmark_id": row["benchmark_id"],
            "benchbench_samples": len(per_call),
            "device": row["device"],
            "dtype": row["dtype"],
        }
        run_ = pyperf.Run(pyperf_values(per_call), metadata=metadata, collect_metadata=False)
        benchmarks.append(pyperf.Benchmark([run_]))
    if not benchmarks:
        return None
    return pyperf.BenchmarkSuite(benchmarks)


# -- pytest-benchmark -------------------------------------------------------------------


def pytest_benchmark_stats(data: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's ``Stats.as_dict()`` for these per-round times, by its definitions.

    Quartiles by its method (Wikipedia's method 3 for odd counts, 2 for even),
    Tukey fences at 1.5 IQR, ``outliers`` as "stddev_outliers;iqr_outliers".
    """
    values = sorted(data)
    n = len(values)
    mean = statistics.mean(values)
    stddev = statistics.stdev(values) if n > 1 else 0.0
    if n == 1:
        q1 = q3 = values[0]
    elif n % 2:
        k, r = n // 4, n % 4
        if r == 1:
            q1 = 0.25 * values[k - 1] + 0.75 * values[k]
            q3 = 0.75 * values[3 * k] + 0.25 * values[3 * k + 1]
        else:
            q1 = 0.75 * values[k] + 0.25 * values[k + 1]
            q3 = 0.25 * values[3 * k + 1] + 0.75 * values[3 * k + 2]
    else:
        q1 = statistics.median(values[: n // 2])
        q3 = statistics.median(values[n // 2 :])
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    stddev_outliers = sum(1 for v in values if v < mean - stddev or v > mean + stddev)
    iqr_outliers = sum(1 for v in values if v < low_fence or v > high_fence)
    total = sum(values)
    return {
        "min": values[0],
        "max": values[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": statistics.median(values),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": values[0] if n == 1 else values[bisect_left(values, low_fence)],
        "hd15iqr": values[0] if n == 1 else values[bisect_right(values, high_fence) - 1],
        "ops": n / total if total else 0,
        "total": total,
    }


def pytest_benchmark_document(run: Row, env: Row | None, rows: Sequence[Row]) -> dict[str, Any]:
    """The JSON ``pytest-benchmark compare`` reads: machine_info, commit_info, benchmarks."""
    fields = (env or {}).get("fields") or {}
    info = (env or {}).get("info") or {}
    benchmarks = []
    for name, row in measured_points(run, rows, "pytest-benchmark"):
        data = _per_call(row)
        stats = pytest_benchmark_stats(data)
        stats["data"] = data
        stats["iterations"] = int(row["calls_per_sample"])
        benchmarks.append(
            {
                "group": f"{row['suite']}/{row['workload']}",
                "name": name,
                "fullname": f"{row['suite']}::{name}",
                "params": {
                    "device": row["device"],
                    "dtype": row["dtype"],
                    "size": row["size"],
                    **(row.get("params") or {}),
                },
                "param": "-".join(str(v) for v in (row["dtype"], row["device"], row["size"])),
                "extra_info": {
                    "benchmark_id": row["benchmark_id"],
                    "variant": row["variant"],
                    "bytes_per_s": row.get("bytes_per_s"),
                    "flop_per_s": row.get("flop_per_s"),
                    "warnings": list(row.get("warnings") or []),
                },
                "options": {
                    "disable_gc": False,
                    "timer": "perf_counter",
                    "min_rounds": len(data),
                    "max_time": None,
                    "min_time": None,
                    "warmup": True,
                },
                "stats": stats,
            }
        )
    return {
        "machine_info": {
            "node": info.get("hostname") or fields.get("machine"),
            "processor": fields.get("cpu_model"),
            "machine": fields.get("machine"),
            "python_implementation": "CPython",
            "python_version": fields.get("python"),
            "python_compiler": "",
            "release": info.get("kernel"),
            "system": info.get("platform"),
            "cpu": {"brand_raw": fields.get("cpu_model"), "count": fields.get("cpu_count")},
        },
        "commit_info": {
            "id": run.get("git_sha"),
            "time": None,
            "author_time": None,
            "dirty": run.get("git_dirty"),
            "project": "benchbench",
            "branch": run.get("git_branch"),
        },
        "benchmarks": benchmarks,
        "datetime": _iso(run.get("started_at")),
        "version": PYTEST_BENCHMARK_VERSION,
    }


# -- CSV ----------------------------------------------------------------------------------

#: CSV columns: the DataFrame's, with the point's label after the run id.
CSV_COLUMNS = ("run_id", "label", *(c for c in DATAFRAME_COLUMNS if c not in ("run_id", "label")))


def csv_text(run: Row, env: Row | None, rows: Sequence[Row]) -> str:
    """One CSV row per point (skipped and failed points included, with their reason).

    ``label`` is the point's label (the run's label is ``run_label``); list and dict
    cells (shape, params, warnings) are JSON.
    """
    columns = [*CSV_COLUMNS, "run_label"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for name, row in zip(_names(rows), rows, strict=True):
        values = {
            **row,
            "label": name,
            "run_label": run.get("label"),
            "kind": run.get("kind"),
            "started_at": _iso(run.get("started_at")),
            "git_sha": run.get("git_sha"),
            "git_branch": run.get("git_branch"),
            "environment_id": run.get("environment_id"),
            "machine": (env or {}).get("machine"),
        }
        cells = []
        for column in columns:
            value = values.get(column)
            if isinstance(value, (list, dict, tuple)):
                value = json.dumps(value)
            cells.append("" if value is None else value)
        writer.writerow(cells)
    return out.getvalue()
