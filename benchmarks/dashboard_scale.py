"""Scale check of the dashboard: 200 points x 365 nightly runs x 3 environments.

Targets (from the issue): the build takes <= 60 s and the overview page loads in
<= 2 s in headless Chromium, timed from navigation start to the moment the page
has drawn its charts (``window.BB_READY``, set by the page script).

    PYTHONPATH=. python benchmarks/dashboard_scale.py [-o /tmp/dash-scale] [--runs 365]

Prints one JSON document with the timings and the size of each page's data.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchbench.dashboard import build_site
from benchbench.dashboard.synthetic import synthetic_data
from tests.chromium import ARGS as CHROMIUM_ARGS
from tests.chromium import CHROMIUM


def least_squares_fit(sizes: list[float], times: list[float]) -> tuple[float, float] | None:
    """Stand-in for the analysis module's fit: t = t0 + n / rate, weighted by 1/t."""
    slope, t0 = np.polyfit(sizes, times, 1, w=1 / np.asarray(times))
    return (float(t0), float(1 / slope)) if slope > 0 else None


def page_load_ms(index_html: Path, repeats: int) -> list[float]:
    """Navigation start to charts drawn, per load of the overview, in ms."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(index_html.as_uri())
            page.wait_for_function("window.BB_READY !== undefined", timeout=30_000)
            # BB_READY is performance.now() at the end of drawing: ms since navigation start.
            out.append(round(float(page.evaluate("window.BB_READY")), 1))
            page.close()
        browser.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--out", type=Path, default=Path("/tmp/dash-scale"))
    parser.add_argument("--runs", type=int, default=365)
    parser.add_argument("--envs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    t = time.perf_counter()
    # 5 workloads x 2 variants x 2 dtypes x 10 sizes = 200 points per run.
    data = synthetic_data(
        n_workloads=5,
        n_variants=2,
        dtypes=("float32", "float64"),
        n_sizes=10,
        n_runs=args.runs,
        n_envs=args.envs,
    )
    generate_s = time.perf_counter() - t
    t = time.perf_counter()
    index_html = build_site(
        data,
        args.out,
        fit=least_squares_fit,
        changepoints=lambda values: [len(values) // 2],
    )
    build_s = time.perf_counter() - t
    sizes = {
        name: (args.out / "data" / name).stat().st_size
        for name in ("index.js", "overview.js", "workload/w0.js", "history/w0.js", "runs/r0.js")
    }
    total = sum(f.stat().st_size for f in (args.out / "data").rglob("*.js"))
    loads = page_load_ms(index_html, args.repeats) if CHROMIUM.exists() else []
    print(
        json.dumps(
            {
                "points_per_run": int(data.measurements["benchmark_id"].nunique()),
                "runs": len(data.runs),
                "measurements": len(data.measurements),
                "generate_s": round(generate_s, 2),
                "build_s": round(build_s, 2),
                "overview_load_ms": loads,
                "data_bytes": sizes,
                "data_bytes_total": total,
            },
            indent=2,
        )
    )
    return 0 if build_s <= 60 and all(ms <= 2000 for ms in loads) else 1


if __name__ == "__main__":
    sys.exit(main())
