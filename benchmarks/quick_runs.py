"""Three `benchbench run quick` in a row, as issue 22 measures a run: wall time, points
converged to the target (the two-level interval), and the runs' agreement; with
``--metric instructions`` (issue 21), the agreement of their instruction counts.

Each run goes into one fresh store with the run flags given (e.g.
``--points-per-process 4``). Printed as JSON: per run its wall time and how many points
converged; over the runs, for the points whose median is at least 50 us, how many have
medians within 1.03 (max / min over the runs), with the median and worst ratio. Where
the runs counted instructions: for every point counted in each run, how many have
counts within 1 % (max / min), the median and worst ratio, and the points outside.

Usage: ``python benchmarks/quick_runs.py [--runs 3] [RUN FLAGS...]`` (numbers in
BENCHMARKS.md, with the CPU and the load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchbench.store import open_store

#: Agreement is judged on points at least this long: below it, timer and call overheads
#: dominate what the run-to-run ratio says.
MIN_MEDIAN_S = 50e-6
AGREE = 1.03
#: Instruction counts of fresh runs should agree this closely (issue 21: at >= 95 % of
#: the CPU points).
COUNTS_AGREE = 1.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args, flags = parser.parse_known_args()
    store_path = str(Path(tempfile.mkdtemp(prefix="quick-runs-")) / "q.db")
    report: dict = {"flags": flags, "load_before": os.getloadavg()[0], "runs": []}
    for _ in range(args.runs):
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "benchbench", "run", "quick", "--store", store_path, *flags],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        report["runs"].append({"wall_s": round(time.monotonic() - started, 1)})
    frame = open_store(store_path, create=False).dataframe(
        columns=[
            *("run_id", "benchmark_id", "workload", "variant", "dtype", "size"),
            *("status", "median_s", "converged", "instructions_per_call"),
        ]
    )
    for entry, (_, run) in zip(report["runs"], frame.groupby("run_id", sort=False), strict=True):
        entry["points"] = len(run)
        entry["converged"] = int((run["converged"] == True).sum())  # noqa: E712 (None: not asked)
    ok = frame[frame["status"] == "ok"]
    by_point = ok.groupby("benchmark_id")["median_s"]
    spans = (by_point.max() / by_point.min())[
        (by_point.min() >= MIN_MEDIAN_S) & (by_point.count() == args.runs)
    ]
    report["agreement"] = {
        "points": len(spans),
        "within": int((spans <= AGREE).sum()),
        "median_ratio": round(float(spans.median()), 4) if len(spans) else None,
        "worst_ratio": round(float(spans.max()), 4) if len(spans) else None,
    }
    counts = frame.dropna(subset=["instructions_per_call"]).groupby("benchmark_id")
    count_spans = (counts["instructions_per_call"].max() / counts["instructions_per_call"].min())[
        counts.size() == args.runs
    ]
    if len(count_spans):
        first = counts.first()
        labels = first["workload"] + ":" + first["variant"] + "[" + first["dtype"] + "]("
        labels += first["size"].astype(str) + ")"
        report["instructions"] = {
            "points": len(count_spans),
            "within_1pct": int((count_spans <= COUNTS_AGREE).sum()),
            "median_ratio": round(float(count_spans.median()), 5),
            "worst_ratio": round(float(count_spans.max()), 5),
            "outside": {
                labels[b]: round(float(r), 4)
                for b, r in count_spans[count_spans > COUNTS_AGREE].items()
            },
        }
    report["load_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
