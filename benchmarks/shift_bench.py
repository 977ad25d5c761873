"""What the run-to-run term costs a comparison: ``analysis.rerun.apart`` (the factor and
the shared shift, the points that changed on their own left out) for one pair of runs of
``--points`` points with ``--history`` earlier runs, as ``compare``, ``show`` and the
dashboard's compare page read it. Synthetic points (random log headlines and standard
errors, five processes), fresh copies each call so that no earlier pair's shift is reused
from a call before. Usage: ``PYTHONPATH=. python benchmarks/shift_bench.py [--points N]
[--history N] [--calls N]``; figures in BENCHMARKS.md with the CPU and the load.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time

from benchbench.analysis.rerun import Points, apart


def _points(rng: random.Random, count: int) -> Points:
    return {
        f"p{i}": (math.log(1e-4 * (1 + i)) + rng.gauss(0, 0.05), rng.uniform(0.01, 0.05), 5)
        for i in range(count)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--history", type=int, default=10, help="earlier runs, the base last")
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    runs = [_points(rng, args.points) for _ in range(args.history + 1)]
    apart([dict(r) for r in runs[:-1]], dict(runs[-1]), 0.05, 0.05)  # imports, caches
    took = []
    for _ in range(args.calls):
        fresh = [dict(r) for r in runs]
        start = time.perf_counter()
        apart(fresh[:-1], fresh[-1], 0.05, 0.05)
        took.append(time.perf_counter() - start)
    print(
        f"apart: {args.points} points, {args.history} earlier runs: median "
        f"{1000 * statistics.median(took):.0f} ms of {args.calls} calls "
        f"({1000 * min(took):.0f}-{1000 * max(took):.0f}); load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
