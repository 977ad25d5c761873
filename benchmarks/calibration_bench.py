"""Does a machine's run-to-run calibration make a suite's first run cover a rerun?

``benchbench probe --run-to-run`` once into a fresh store, then ``--runs`` default
``benchbench run quick``, each into its own copy of that store: every run is a suite's
first there, as a new user's is, so its printed interval is the calibration's (title
``incl. run-to-run (machine calibrated ...)``). For each pair of consecutive runs: at how
many points run i's interval holds run i+1's median, as printed (the calibration) and
within that run alone (what the same run printed before a calibration existed), with
the median half-width of each; the calibration's level, and the wall times.

``--neighbour`` runs gate_bench.py's noisy neighbour beside the calibration and the runs.

Usage: ``PYTHONPATH=. python benchmarks/calibration_bench.py [--runs 6] [--neighbour]``
(numbers in BENCHMARKS.md, with the CPU and the load).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from gate_bench import NEIGHBOUR, held_pairs  # noqa: E402

from benchbench.analysis.calibration import calibration_of  # noqa: E402
from benchbench.analysis.rerun import factor_of, widened  # noqa: E402
from benchbench.store import open_store  # noqa: E402


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchbench", *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return done


def _half(row: dict) -> float:
    return math.log(row["ci_high_s"] / row["ci_low_s"]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--neighbour", action="store_true")
    parser.add_argument("--neighbour-seed", type=int, default=0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="calibration-bench-"))
    neighbour = None
    if args.neighbour:
        neighbour = subprocess.Popen(
            [sys.executable, "-c", NEIGHBOUR, str(args.neighbour_seed), "7200"]
        )
    try:
        base = folder / "base.db"
        started = time.monotonic()
        line = json.loads(_bench("probe", "--run-to-run", "--store", str(base), "--json").stdout)
        calibration_s = time.monotonic() - started
        printed, within, walls = [], [], []
        for index in range(args.runs):
            path = folder / f"run{index}.db"
            shutil.copy(base, path)
            started = time.monotonic()
            run_id = json.loads(_bench("run", "quick", "--store", str(path), "--json").stdout)
            walls.append(time.monotonic() - started)
            store = open_store(str(path), create=False)
            run = store.resolve_run(run_id["run_id"])
            rows = store.measurements(run["id"])
            rerun = factor_of([], rows, calibration=calibration_of(store, run, rows))
            assert rerun is not None and rerun.calibrated is not None
            printed.append({r["benchmark_id"]: r for r in widened(rows, rerun)})
            within.append({r["benchmark_id"]: dict(r) for r in rows})
        report: dict = {
            "neighbour": args.neighbour,
            "calibration": line["run_to_run"],
            "calibration_s": round(calibration_s, 1),
            "run_s": [round(w, 1) for w in walls],
        }
        for name, runs in (("printed", printed), ("within", within)):
            held = [h for a, b in itertools.pairwise(runs) for _, h in held_pairs(a, b)]
            halves = [_half(r) for run in runs for r in run.values() if r["status"] == "ok"]
            report[name] = {
                "held": sum(held),
                "of": len(held),
                "share": round(sum(held) / len(held), 3),
                "median_half_width": round(math.expm1(statistics.median(halves)), 4),
            }
        print(json.dumps(report, indent=1))
    finally:
        if neighbour is not None:
            neighbour.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
