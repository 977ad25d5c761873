"""Where a fresh worker process's time goes, first process of a point versus later ones.

Runs ``benchbench run SUITE`` (default ``quick``) into a throwaway store and reads, for
every process of every point, what the runner and the worker recorded:

- ``wall_s`` (``extra.processes[k].wall_s``): the runner's time for the request, from
  asking for a fresh worker (fork) to the answer;
- ``extra.processes[k].cost`` of each process: ``before_timing_s`` (the suite's load, inputs, the
  reference check in the first process, a compile), ``timing_s`` (warm-up, calibration,
  samples) and ``after_timing_s`` (peak memory, trace and derived work model in the
  first process); the samples themselves are the sum of the process's samples.

The rest of ``wall_s`` is the fork, the pipes and the runner's telemetry. Printed: the
median of each part over first processes and over later ones, and the run's wall time.

Usage: ``python benchmarks/process_cost.py [SUITE [RUN FLAGS...]]``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchbench.store import open_store


def main() -> None:
    suite = sys.argv[1] if len(sys.argv) > 1 else "quick"
    store_path = str(Path(tempfile.mkdtemp(prefix="process-cost-")) / "c.db")
    load = os.getloadavg()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "benchbench", "run", suite, "--store", store_path, *sys.argv[2:]],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr[-2000:])
    store = open_store(store_path, create=False)
    run = store.resolve_run("latest")
    first: dict[str, list[float]] = {}
    later: dict[str, list[float]] = {}
    processes = 0
    for row in store.measurements(run["id"]):
        extra = row.get("extra") or {}
        for k, proc in enumerate(extra.get("processes") or []):
            processes += 1
            parts = first if k == 0 else later
            parts.setdefault("wall_s", []).append(float(proc.get("wall_s") or 0.0))
            for key, value in (proc.get("cost") or {}).items():
                parts.setdefault(key, []).append(float(value))
    print(
        f"{suite}: {wall:.1f} s wall, {processes} processes; load before {load}, "
        f"after {os.getloadavg()}"
    )
    for name, parts in (("first process", first), ("later processes", later)):
        medians = {k: statistics.median(v) for k, v in parts.items() if v}
        print(f"  {name}: " + ", ".join(f"{k} {1e3 * v:.0f} ms" for k, v in medians.items()))
    print(json.dumps({"store": store_path}))


if __name__ == "__main__":
    main()
