"""Synthetic :class:`DashboardData` for demos, tests and the scale benchmark.

Times follow the model the dashboard fits, t = t0 + size * bytes_per_item / rate,
with 2 % lognormal noise, a 25 % step regression half way through the history of
every seventh point, and one failing point per run in the first environment.
Seeded: the same arguments always give the same data.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

from benchbench.dashboard.contract import DashboardData

_WORKLOADS: tuple[tuple[str, str, str], ...] = (
    # (suite, workload, throughput column); None column means calls/s only.
    ("pointwise", "sqrt", "bytes_per_s"),
    ("pointwise", "exp", "bytes_per_s"),
    ("reduction", "sum", "bytes_per_s"),
    ("linalg", "matmul", "flop_per_s"),
    ("misc", "python_loop", ""),
    ("pointwise", "rsqrt", "bytes_per_s"),
    ("pointwise", "sigmoid", "bytes_per_s"),
    ("reduction", "softmax", "bytes_per_s"),
)


def _hex(text: str, n: int = 12) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def synthetic_data(
    *,
    n_workloads: int = 3,
    n_variants: int = 2,
    dtypes: tuple[str, ...] = ("float32",),
    n_sizes: int = 7,
    n_runs: int = 6,
    n_envs: int = 2,
    seed: int = 0,
    start: datetime = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc),
    run_label: str | None = None,
    repo_url: str | None = "https://example.org/benchbench",
) -> DashboardData:
    """``n_workloads x n_variants x len(dtypes) x n_sizes`` points, ``n_runs`` per environment.

    ``run_label`` replaces the label of the last run of the first environment (the
    tests put markup there to check it is shown as text).
    """
    rng = np.random.default_rng(seed)
    envs = [f"env{_hex(f'env{i}', 16)}" for i in range(n_envs)]
    env_rows = [
        {
            "environment_id": e,
            "machine": f"box-{i}",
            "fields": {"cpu": f"Xeon {8000 + i}", "threads": 2 * (i + 1), "torch": "2.13.0"},
            "info": {"hostname": f"box-{i}.lab", "ram_gb": 16 * (i + 1)},
        }
        for i, e in enumerate(envs)
    ]
    profiles = {
        e: {
            "peak_bytes_per_s": 2.0e10 * (1 + i),
            "peak_flop_per_s": {d: 1.0e11 * (1 + i) for d in dtypes},
            "caches": [{"level": 2, "size_bytes": 1 << 20}, {"level": 3, "size_bytes": 32 << 20}],
        }
        for i, e in enumerate(envs)
    }
    run_rows = []
    for ei, e in enumerate(envs):
        for k in range(n_runs):
            t = start + timedelta(days=k, hours=ei)
            run_rows.append(
                {
                    "run_id": f"run-{_hex(f'{e}/{k}', 20)}",
                    "label": f"nightly {t:%Y-%m-%d}",
                    "kind": "nightly",
                    "status": "finished",
                    "started_at": t,
                    "finished_at": t + timedelta(minutes=20),
                    "git_sha": _hex(f"commit{k}", 40),
                    "git_branch": "main",
                    "git_dirty": False,
                    "environment_id": e,
                    "suites": ["quick"],
                    "tags": ["nightly"],
                }
            )
    if run_label is not None and run_rows:
        run_rows[n_runs - 1]["label"] = run_label
    runs = pd.DataFrame(run_rows)

    sizes = np.array([1 << (8 + 2 * i) for i in range(n_sizes)], dtype=np.int64)
    points = [
        (_WORKLOADS[w % len(_WORKLOADS)], f"v{v}", d, int(s))
        for w in range(n_workloads)
        for v in range(n_variants)
        for d in dtypes
        for s in sizes
    ]
    n_p, n_r = len(points), len(run_rows)
    bpe = np.array([4.0 if d == "float32" else 8.0 for (_, _, d, _) in points])
    size = np.array([p[3] for p in points], dtype=float)
    # Per variant: v0 is cheap to call but slow per element, v1 the opposite, so
    # their lines cross (at about 2^12 elements) as a CPU and a GPU line would.
    variant = np.array([int(p[1][1:]) for p in points])
    rate = 1e9 * (1 + 4 * (variant % 2)) / bpe
    t0 = 2e-6 * (1 + 9 * (variant % 2))
    base = t0 + size / rate  # seconds, per point
    env_of_run = np.repeat(np.arange(n_envs), n_runs)
    k_of_run = np.tile(np.arange(n_runs), n_envs)
    slow = np.where(
        (np.arange(n_p) % 7 == 0)[None, :] & (k_of_run >= n_runs // 2)[:, None], 1.25, 1
    )
    noise = rng.lognormal(0.0, 0.02, size=(n_r, n_p))
    median = base[None, :] * (1 + 0.3 * env_of_run)[:, None] * slow * noise
    spread = median * 0.03
    status = np.full((n_r, n_p), "ok", dtype=object)
    status[env_of_run == 0, n_p - 1] = "error"
    bench_ids = [_hex(f"{s}/{w}/{v}/{d}/{n}", 16) for ((s, w, _), v, d, n) in points]

    flat = median.ravel()
    col = np.array([p[0][2] for p in points] * n_r, dtype=object)
    work = np.tile(size * bpe, n_r)
    thr = work / flat
    err = status.ravel() == "error"
    run_idx = np.repeat(np.arange(n_r), n_p)
    pt_idx = np.tile(np.arange(n_p), n_r)
    m = pd.DataFrame(
        {
            "run_id": runs["run_id"].to_numpy()[run_idx],
            "benchmark_id": np.array(bench_ids, dtype=object)[pt_idx],
            "suite": [points[i][0][0] for i in pt_idx],
            "workload": [points[i][0][1] for i in pt_idx],
            "variant": [points[i][1] for i in pt_idx],
            "device": "cpu",
            "dtype": [points[i][2] for i in pt_idx],
            "size": size[pt_idx].astype(np.int64),
            "params": [{"size": int(size[i])} for i in pt_idx],
            "status": status.ravel(),
            "reason": ["worker crashed: out of memory at size 2^16" if e else None for e in err],
            "median_s": np.where(err, np.nan, flat),
            "ci_low_s": np.where(err, np.nan, flat - spread.ravel()),
            "ci_high_s": np.where(err, np.nan, flat + spread.ravel()),
            "q1_s": np.where(err, np.nan, flat - 2 * spread.ravel()),
            "q3_s": np.where(err, np.nan, flat + 2 * spread.ravel()),
            "bytes_per_s": np.where((col == "bytes_per_s") & ~err, thr, np.nan),
            "flop_per_s": np.where((col == "flop_per_s") & ~err, thr / 4, np.nan),
            "items_per_s": np.nan,
            "max_rel_error": 1e-7,
            "warnings": [[] for _ in range(n_r * n_p)],
            "environment_id": np.array(envs, dtype=object)[env_of_run[run_idx]],
            "started_at": runs["started_at"].to_numpy()[run_idx],
            "git_sha": runs["git_sha"].to_numpy()[run_idx],
            "timing": None,
        }
    )
    m["started_at"] = pd.to_datetime(m["started_at"], utc=True)
    alerts = pd.DataFrame(
        [
            {
                "alert_id": f"alert-{i}",
                "benchmark_id": bench_ids[0],
                "environment_id": e,
                "last_good_run_id": run_rows[ei * n_runs + n_runs // 2 - 1]["run_id"],
                "first_bad_run_id": run_rows[ei * n_runs + n_runs // 2]["run_id"],
                "rel_change": 0.25,
                "severity": "major",
                "status": "open" if ei == 0 else "acknowledged",
                "created_at": start + timedelta(days=n_runs // 2, hours=3),
            }
            for i, (ei, e) in enumerate(enumerate(envs))
        ]
        if n_runs >= 2 and n_p
        else [],
        columns=[
            "alert_id",
            "benchmark_id",
            "environment_id",
            "last_good_run_id",
            "first_bad_run_id",
            "rel_change",
            "severity",
            "status",
            "created_at",
        ],
    )
    return DashboardData(
        runs=runs,
        environments=pd.DataFrame(env_rows),
        measurements=m,
        alerts=alerts,
        profiles=profiles,
        repo_url=repo_url,
    )
