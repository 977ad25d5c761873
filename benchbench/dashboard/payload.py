"""Turn the store's DataFrames into the small JSON-ready documents each page reads.

Pages never see store ids as file names: runs, environments and workloads are
numbered (``r12``, ``w3``) in a stable order (runs by start time, workloads by
name), and the ids travel only as data. Floats are cut to 5 significant digits,
which keeps 200 benchmarks x 1095 runs near 30 MB of data in all instead of 60.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchbench.analysis.detectable import BEYOND_SHIFT, factor_table
from benchbench.analysis.verdict import ALPHA, INSTRUCTIONS_MIN_EFFECT, MIN_EFFECT
from benchbench.dashboard.contract import DashboardData
from benchbench.dashboard.json_numbers import compact

FitFn = Callable[[Sequence[float], Sequence[float]], "tuple[float, float] | None"]
ChangepointFn = Callable[[Sequence[float]], list[int]]

#: Throughput columns in order of preference, with the unit the page shows.
THROUGHPUT_UNITS: tuple[tuple[str, str], ...] = (
    ("bytes_per_s", "B/s"),
    ("flop_per_s", "FLOP/s"),
    ("items_per_s", "items/s"),
)
CALLS_UNIT = "calls/s"
STATUS_CODES: dict[str, int] = {"ok": 0, "skipped": 1, "error": 2}
_SHA = re.compile(r"^[0-9a-fA-F]{4,64}$")
_AXIS_PARAMS = frozenset({"size", "dtype", "device", "variant"})


def to_ms(values: Any) -> list[int | None]:
    """UTC datetimes (or anything pandas parses) as milliseconds since the epoch."""
    ts = pd.to_datetime(pd.Series(values, dtype=object), utc=True, errors="coerce")
    return [None if pd.isna(t) else int(t.value // 1_000_000) for t in ts]


def safe_repo_url(url: str | None) -> str | None:
    """The repository URL if it is http(s); anything else (``javascript:``...) is dropped."""
    if not url or not isinstance(url, str):
        return None
    url = url.strip().rstrip("/")
    return url if re.match(r"^https?://[^\s\"'<>]+$", url) else None


def safe_sha(sha: object) -> str | None:
    """A git sha if it looks like one (hex), else None so no link is built from it."""
    return sha if isinstance(sha, str) and _SHA.match(sha) else None


def _text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _list(value: object) -> list[str]:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [str(v) for v in value]
    return []


def params_text(params: object) -> str:
    """Parameters other than the plotted axes, canonical: ``dim=1, inplace=True``."""
    if not isinstance(params, dict):
        return ""
    return ", ".join(f"{k}={params[k]}" for k in sorted(params) if k not in _AXIS_PARAMS)


def add_throughput(m: pd.DataFrame) -> pd.DataFrame:
    """Add ``thr`` (per second) and ``unit``: the first throughput present, else calls/s."""
    m = m.copy()
    median = pd.to_numeric(m["median_s"], errors="coerce").to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        thr = np.where(median > 0, 1.0 / median, np.nan)
    unit = np.full(len(m), CALLS_UNIT, dtype=object)
    for column, name in reversed(THROUGHPUT_UNITS):
        v = pd.to_numeric(m[column], errors="coerce").to_numpy(dtype=float)
        have = np.isfinite(v) & (v > 0)
        thr = np.where(have, v, thr)
        unit = np.where(have, name, unit)
    m["thr"] = thr
    m["unit"] = unit
    # Status as a small int once, vectorised: iterating pandas 3 string columns per
    # row costs ~5 us a value, 1 s per pass over 219,000 rows.
    m["sc"] = m["status"].map(STATUS_CODES).fillna(2).astype(np.int64)
    # Work per call in the throughput's unit: turns every time (Q1, Q3, CI) into a rate.
    m["work"] = thr * median
    for column in ("median_s", "ci_low_s", "ci_high_s", "q1_s", "q3_s", "size"):
        m[column] = pd.to_numeric(m[column], errors="coerce")
    return m


class Keys:
    """Stable small keys for runs, environments, workloads and benchmarks.

    ``benchmarks`` (columns :data:`~benchbench.dashboard.contract.BENCHMARK_COLUMNS`)
    lists the benchmarks to key; by default those of ``m``'s rows.
    """

    def __init__(
        self, data: DashboardData, m: pd.DataFrame, benchmarks: pd.DataFrame | None = None
    ) -> None:
        runs = data.runs.copy()
        runs["_t"] = to_ms(runs["started_at"]) if len(runs) else []
        runs = runs.sort_values(["_t", "run_id"], na_position="first", kind="stable")
        self.runs = runs.reset_index(drop=True)
        self.run: dict[str, int] = {str(r): i for i, r in enumerate(self.runs["run_id"])}
        machines = {
            str(e): str(mach)
            for e, mach in zip(
                data.environments["environment_id"], data.environments["machine"], strict=True
            )
        }
        series_envs = {e for _, e in data.series.keys if e is not None} if data.series else set()
        env_ids = sorted(
            {str(e) for e in data.environments["environment_id"]}
            | {str(e) for e in runs["environment_id"].dropna()}
            | {str(e) for e in m["environment_id"].dropna().unique()}
            | series_envs,
            key=lambda e: (machines.get(e, ""), e),
        )
        self.env: dict[str, int] = {e: i for i, e in enumerate(env_ids)}
        if benchmarks is None:
            benchmarks = m.drop_duplicates("benchmark_id")
        pairs = sorted(
            {
                (str(s), str(w))
                for s, w in zip(benchmarks["suite"], benchmarks["workload"], strict=True)
            }
        )
        self.workload: dict[tuple[str, str], int] = {p: i for i, p in enumerate(pairs)}
        # Benchmarks numbered workload by workload, so a workload's history rows (sorted
        # by benchmark) are one stretch.
        workload_of = [
            self.workload[(str(s), str(w))]
            for s, w in zip(benchmarks["suite"], benchmarks["workload"], strict=True)
        ]
        firsts = benchmarks.assign(_w=np.asarray(workload_of, dtype=np.int64)).sort_values(
            ["_w", "variant", "dtype", "device", "size"], kind="stable"
        )
        self.bench: dict[str, int] = {str(b): i for i, b in enumerate(firsts["benchmark_id"])}
        #: The workload of each benchmark key.
        self.bench_workload = firsts["_w"].to_numpy(dtype=np.int64)
        self.bench_rows = firsts.drop(columns="_w").reset_index(drop=True)


def index_payload(
    data: DashboardData, keys: Keys, counts: np.ndarray, files: set[int]
) -> dict[str, Any]:
    """What every page reads: runs, environments, workloads, benchmarks, open alerts.

    ``counts[r]`` is run ``r``'s points by status code (ok, skipped, error); ``files``
    the runs with a data file (``data``: the compare page offers only those), and
    ``newest_runs`` how many of each environment's newest runs have one (None: all).
    """
    machines = {
        str(e): _text(mach)
        for e, mach in zip(
            data.environments["environment_id"], data.environments["machine"], strict=True
        )
    }
    envs = [{"id": e, "machine": machines.get(e) or e[:12]} for e in keys.env]
    runs = []
    for i, r in enumerate(keys.runs.to_dict("records")):
        rid = str(r["run_id"])
        c = counts[i]
        runs.append(
            {
                "i": i,
                "id": rid,
                "label": _text(r.get("label")) or rid[:8],
                "kind": _text(r.get("kind")),
                "status": _text(r.get("status")),
                "t": r["_t"],
                "sha": _text(r.get("git_sha")),
                "link_sha": safe_sha(r.get("git_sha")),
                "branch": _text(r.get("git_branch")),
                "dirty": bool(r.get("git_dirty")) if r.get("git_dirty") is not None else None,
                "env": keys.env.get(str(r.get("environment_id")), -1),
                "suites": _list(r.get("suites")),
                "tags": _list(r.get("tags")),
                "ok": int(c[0]),
                "skipped": int(c[1]),
                "error": int(c[2]),
                "data": i in files,
            }
        )
    workloads = []
    for (suite, workload), w in keys.workload.items():
        b = keys.bench_rows
        rows = b[(b["suite"] == suite) & (b["workload"] == workload)]
        workloads.append(
            {
                "i": w,
                "suite": suite,
                "workload": workload,
                "variants": sorted({str(v) for v in rows["variant"]}),
                "devices": sorted({str(v) for v in rows["device"]}),
                "dtypes": sorted({str(v) for v in rows["dtype"]}),
            }
        )
    b = keys.bench_rows
    benchmarks = [
        {
            "id": str(bid),
            "w": keys.workload[(str(s), str(wl))],
            "variant": str(v),
            "dtype": str(dt),
            "device": str(dev),
            "size": None if pd.isna(sz) else float(sz),
            "params": params_text(p),
        }
        for bid, s, wl, v, dt, dev, sz, p in zip(
            b["benchmark_id"],
            b["suite"],
            b["workload"],
            b["variant"],
            b["dtype"],
            b["device"],
            b["size"],
            b["params"],
            strict=True,
        )
    ]
    return {
        "repo_url": safe_repo_url(data.repo_url),
        "envs": envs,
        "runs": runs,
        "workloads": workloads,
        "benchmarks": benchmarks,
        "alerts": alerts_payload(data.alerts, keys),
        "newest_runs": data.newest_runs,
        # The compare page marks points with the CLI's rules and minimum effects: times
        # by analysis.verdict.mark, instruction counts by mark_counts.
        # The MDE column: the factor of compare's minimum detectable effect by degrees of
        # freedom and minimum effect over se (analysis.detectable), read at the Welch se
        # and df of the two runs' points; alpha for compare's Welch test and its q-values.
        "verdict": {
            "alpha": ALPHA,
            "min_effect": MIN_EFFECT,
            "instructions_min_effect": INSTRUCTIONS_MIN_EFFECT,
            "mde": factor_table(),
            # Beyond a judged shared shift: compare's MDE for a change at a third of the
            # points (a change at every point is then the shift line's).
            "mde_beyond_shift": factor_table(share=BEYOND_SHIFT),
        },
    }


def alerts_payload(alerts: pd.DataFrame, keys: Keys) -> list[dict[str, Any]]:
    """Alerts, open ones first then by severity, with run and benchmark keys resolved."""
    rank = {"critical": 0, "major": 1, "minor": 2}
    out: list[dict[str, Any]] = []
    # Whole columns at once: a fleet's year can hold ~20,000 alerts, and one parse of a
    # time each took ~250 us (5 s).
    times = to_ms(alerts["created_at"]) if len(alerts) else []
    changes = compact(pd.to_numeric(alerts["rel_change"], errors="coerce")) if len(alerts) else []
    for a, t, change in zip(alerts.to_dict("records"), times, changes, strict=True):
        out.append(
            {
                "id": _text(a.get("alert_id")),
                "b": keys.bench.get(str(a.get("benchmark_id")), -1),
                "env": keys.env.get(str(a.get("environment_id")), -1),
                "good": keys.run.get(str(a.get("last_good_run_id")), -1),
                "bad": keys.run.get(str(a.get("first_bad_run_id")), -1),
                "rel_change": change,
                "severity": _text(a.get("severity")),
                "status": _text(a.get("status")),
                "t": t,
            }
        )
    out.sort(key=lambda a: (a["status"] != "open", rank.get(str(a["severity"]), 3), -(a["t"] or 0)))
    return out
