"""Three `benchbench run quick` in a row, as issues 22 and 33 measure a run: wall time,
precision, what a person reads, and the runs' agreement; with ``--metric instructions``
(issue 21), the agreement of their instruction counts.

Each run goes into one fresh store with the run flags given (e.g. ``--threads all``,
``--points-per-process 4``). Printed as JSON: per run its wall time, how many points
converged, how many have intervals within ±5 % and ±10 % (and their share), the widest
interval (relative half-width), how many points are ``unstable`` (wider than ±50 %: the
table prints their range instead), and the widest line of ``benchbench show RUN``
written to a file (issue 33: at most 160 characters); between consecutive runs, at how
many points run i's interval holds run i+1's median (issue 33: >= 70 %, or the verdict
line says the drift); over the runs, for the points whose median is at least 50 us, how
many have medians within 1.03 (max / min over the runs), with the median and worst
ratio. Where the runs counted instructions: for every point counted in each run, how
many have counts within 1 % (max / min), the median and worst ratio, and the points
outside.

``--neighbour`` runs ``gate_bench.py --neighbour``'s noisy neighbour beside the runs (a
process busy and idle in seeded random phases of 0.1-1.5 s); it stops when the script
ends. ``--keep`` prints the store's path and leaves it (``benchbench show latest --store
PATH`` shows the last run as a person reads it).

Usage: ``python benchmarks/quick_runs.py [--runs 3] [--neighbour] [RUN FLAGS...]``
(numbers in BENCHMARKS.md, with the CPU and the load).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from gate_bench import NEIGHBOUR, held_pairs  # noqa: E402

from benchbench.analysis.rerun import history_factor, widened  # noqa: E402
from benchbench.store import open_store  # noqa: E402

#: Agreement is judged on points at least this long: below it, timer and call overheads
#: dominate what the run-to-run ratio says.
MIN_MEDIAN_S = 50e-6
AGREE = 1.03
#: Instruction counts of fresh runs should agree this closely (issue 21: at >= 95 % of
#: the CPU points).
COUNTS_AGREE = 1.01
#: Interval half-widths a run's points are counted within (issue 33: >= 80 % within ±5 %
#: quiet, >= 60 % within ±10 % beside the neighbour), and beyond which a row is unstable.
WITHIN = (0.05, 0.10)
UNSTABLE = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--neighbour", action="store_true", help="a noisy neighbour beside")
    parser.add_argument("--neighbour-seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the store and print its path")
    args, flags = parser.parse_known_args()
    folder = Path(tempfile.mkdtemp(prefix="quick-runs-"))
    store_path = str(folder / "q.db")
    report: dict[str, Any] = {
        "flags": flags,
        "neighbour": args.neighbour,
        "load_before": os.getloadavg()[0],
        "runs": [],
    }
    neighbour = None
    if args.neighbour:
        neighbour = subprocess.Popen(
            [sys.executable, "-c", NEIGHBOUR, str(args.neighbour_seed), "7200"]
        )
    try:
        for _ in range(args.runs):
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "benchbench", "run", "quick", "--store", store_path, *flags],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            report["runs"].append({"wall_s": round(time.monotonic() - started, 1)})
    finally:
        if neighbour is not None:
            neighbour.kill()
    frame = open_store(store_path, create=False).dataframe(
        columns=[
            *("run_id", "benchmark_id", "workload", "variant", "dtype", "size"),
            *("status", "median_s", "ci_low_s", "ci_high_s", "converged"),
            "instructions_per_call",
        ]
    )
    frame["half"] = (frame["ci_high_s"] - frame["ci_low_s"]) / (2 * frame["median_s"])
    run_ids = []
    for entry, (run_id, run) in zip(
        report["runs"], frame.groupby("run_id", sort=False), strict=True
    ):
        run_ids.append(run_id)
        entry["points"] = len(run)
        entry["converged"] = int((run["converged"] == True).sum())  # noqa: E712 (None: not asked)
        half = run.loc[run["status"] == "ok", "half"].dropna()
        for limit in WITHIN:
            within = int((half <= limit).sum())
            entry[f"within_{100 * limit:g}pct"] = within
            entry[f"within_{100 * limit:g}pct_share"] = round(within / max(1, len(half)), 3)
        entry["max_half_width"] = round(float(half.max()), 4) if len(half) else None
        entry["median_half_width"] = round(float(half.median()), 4) if len(half) else None
        entry["unstable"] = int((half > UNSTABLE).sum())
        entry["widest_show_line"] = _widest_show_line(store_path, run_id)
    report["holding"] = _holding(frame, run_ids)
    report["printed"] = _printed(store_path, run_ids)
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
    if args.keep:
        report["store"] = store_path
    else:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(report, indent=2))


def _widest_show_line(store_path: str, run_id: str) -> int:
    """The widest line, in characters, of ``benchbench show RUN`` written to a file."""
    out = Path(store_path).with_suffix(".show.txt")
    with out.open("w") as file:
        subprocess.run(
            [sys.executable, "-m", "benchbench", "show", run_id, "--store", store_path],
            check=True,
            stdout=file,
            stderr=subprocess.STDOUT,
        )
    return max((len(line) for line in out.read_text().splitlines()), default=0)


def _holding(frame: Any, run_ids: list[str]) -> list[dict[str, Any]]:
    """For each pair of consecutive runs: at how many common ok points run i's interval
    holds run i+1's median."""
    ok = frame[frame["status"] == "ok"].set_index("benchmark_id")
    out = []
    for before, after in itertools.pairwise(run_ids):
        first = ok[ok["run_id"] == before]
        second = ok[ok["run_id"] == after]
        common = first.index.intersection(second.index)
        median = second.loc[common, "median_s"]
        held = (first.loc[common, "ci_low_s"] <= median) & (
            median <= first.loc[common, "ci_high_s"]
        )
        out.append(
            {
                "runs": f"{before[:8]}->{after[:8]}",
                "points": len(common),
                "held": int(held.sum()),
                "share": round(float(held.mean()), 3) if len(common) else None,
            }
        )
    return out


def _printed(store_path: str, run_ids: list[str]) -> dict[str, Any]:
    """The intervals as each run's table printed them (widened by the run-to-run factor
    read from the runs before it, :mod:`benchbench.analysis.rerun`): run i's interval
    holding run i+1's median, the factor, the median half-width and unstable rows."""
    store = open_store(store_path, create=False)
    shown = {}
    for run_id in run_ids:
        rows = store.measurements(run_id)
        rerun = history_factor(store, store.resolve_run(run_id), rows)
        shown[run_id] = ({r["benchmark_id"]: r for r in widened(rows, rerun)}, rerun)
    held = judged = 0
    for before, after in itertools.pairwise(run_ids):
        pairs = held_pairs(shown[before][0], shown[after][0])
        judged += len(pairs)
        held += sum(holds for _, holds in pairs)
    runs = []
    for run_id in run_ids:
        rows, rerun = shown[run_id]
        halves = [
            (r["ci_high_s"] - r["ci_low_s"]) / (2 * r["median_s"])
            for r in rows.values()
            if r["status"] == "ok" and r["ci_low_s"] is not None
        ]
        runs.append(
            {
                "factor": round(rerun.factor, 3) if rerun else None,
                "median_half_width": round(statistics.median(halves), 4) if halves else None,
                "unstable": sum(h > UNSTABLE for h in halves),
            }
        )
    share = round(held / judged, 3) if judged else None
    return {"held": held, "judged": judged, "share": share, "runs": runs}


if __name__ == "__main__":
    main()
