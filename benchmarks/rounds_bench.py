"""How many rounds (fresh processes per point) a run needs: measured, not assumed.

One ``benchbench run quick --rounds 6 --budget 1.0`` measures every point in six fresh
processes, each with the per-process budget of a default run (0.5 s over 3 rounds).
Disjoint groups of R processes then stand for two runs of identical code with
``--rounds R``, and the verdict (:func:`benchbench.analysis.verdict.estimate`) compares
them as ``benchbench compare`` would: for R = 1 at the sample level (one process a
side), for R >= 2 at the process level. Printed per R: the share of points marked
``slower``/``faster`` (false alarms: the code is identical), the share of A/A pairs of
runs with any point flagged, and the median relative width of the points' intervals.
The run's wall time per round is printed too, so the cost of a round is known.

Usage: ``python benchmarks/rounds_bench.py [SUITE [RUN FLAGS...]]``, e.g. ``quick
--threads 1`` (numbers in BENCHMARKS.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from benchbench.analysis.verdict import FASTER, SLOWER, estimate, mark
from benchbench.core.stats import Stats, split_processes
from benchbench.store import open_store

ROUNDS = 6


def _groups(r: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Disjoint pairs of process groups of size r out of ROUNDS (at most 10 pairs)."""
    pairs = []
    for a in combinations(range(ROUNDS), r):
        rest = [k for k in range(ROUNDS) if k not in a]
        for b in combinations(rest, r):
            if a < b:
                pairs.append((a, b))
    return pairs[:: max(1, len(pairs) // 10)][:10]


def main() -> None:
    suite = sys.argv[1] if len(sys.argv) > 1 else "quick"
    flags = sys.argv[2:]
    work = Path(tempfile.mkdtemp(prefix="rounds-bench-"))
    store_path = str(work / "r.db")
    load = os.getloadavg()
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchbench",
            "run",
            suite,
            "--rounds",
            str(ROUNDS),
            "--budget",
            "1.0",
            "--store",
            store_path,
            "--json",
            *flags,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr[-2000:])
    run_id = json.loads(done.stdout)["run_id"]
    rows = [
        r
        for r in open_store(store_path).measurements(run_id)
        if r["status"] == "ok" and len(r["process_samples"] or ()) == ROUNDS
    ]
    print(
        f"{suite} {' '.join(flags)}: {len(rows)} points x {ROUNDS} processes in {seconds:.0f} s "
        f"({seconds / ROUNDS:.1f} s a round); load {load} -> {os.getloadavg()}"
    )
    for r in (1, 2, 3):
        flagged = points = 0
        pair_alarm: dict[tuple, bool] = {}
        widths = []
        for row in rows:
            calls = row["calls_per_sample"]
            per_call = [s / calls for s in row["samples_s"]]
            parts = split_processes(per_call, row["process_samples"])
            for a, b in _groups(r):
                base = [v for k in a for v in parts[k]]
                con = [v for k in b for v in parts[k]]
                counts_a = tuple(len(parts[k]) for k in a) if r > 1 else ()
                counts_b = tuple(len(parts[k]) for k in b) if r > 1 else ()
                found = estimate(base, con, base_processes=counts_a, contender_processes=counts_b)
                hit = mark(found) in (SLOWER, FASTER)
                flagged += hit
                points += 1
                pair_alarm[(a, b)] = pair_alarm.get((a, b), False) or hit
                stats = Stats.from_samples(base, 1, counts_a)
                widths.append(stats.rel_ci_half_width)
        alarms = sum(pair_alarm.values())
        print(
            f"  R={r}: points flagged {flagged} of {points} ({100 * flagged / points:.1f} %); "
            f"A/A pairs with a flag {alarms} of {len(pair_alarm)}; "
            f"median CI half-width {100 * float(np.median(widths)):.1f} %"
        )


if __name__ == "__main__":
    main()
