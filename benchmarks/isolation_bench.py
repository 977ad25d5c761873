"""What failure isolation costs: a 200-point run with 5 crashes, 2 hangs and 1 OOM.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/isolation_bench.py [--budget 0.1] [--timeout 5] [--spawn]

Writes a suite of 200 points (one workload, one variant, sizes 1000..1199) whose
variant calls ``os.abort()`` at 5 sizes, loops forever at 2 and allocates 1 TiB at
1, runs it through ``runner.run`` into a throwaway SQLite store, and prints:

- wall: the whole ``runner.run`` call, zygote start (torch import, profiler warm-up)
  included;
- good (worker): the sum of the 192 good points' stored ``duration_s`` (measured
  inside the worker around ``measure_point``);
- good (runner): the sum of the runner's wall clock per good point, from sending the
  request to the result being stored (adds the pipe round trip and the store write);
- timeouts: 2 x ``--timeout``;
- the slack ``wall / (good + timeouts) - 1`` under both accountings, with and
  without the one-time start-up, and what each failure cost beyond its own time.

``--spawn`` replaces the zygote by a fresh interpreter per worker (the launcher used
where fork is unsafe) to show what a restart costs without it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchbench.measure.policy import Policy
from benchbench.run import runner
from benchbench.store import open_store

CRASH = (1010, 1050, 1090, 1130, 1170)
HANG = (1030, 1150)
OOM = (1110,)

SUITE = f"""
import os
import torch
from benchbench import Suite, Variant

CRASH, HANG, OOM = {CRASH!r}, {HANG!r}, {OOM!r}


def faulty(x):
    n = x.numel()
    if n in CRASH:
        os.abort()
    if n in HANG:
        while True:
            pass
    if n in OOM:
        return torch.empty(2**40, dtype=torch.uint8)
    return torch.sqrt(x)


suite = Suite("isolation")
suite.workload(
    "faulty",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("sqrt", faulty)],
    reference=torch.sqrt,
    sizes=list(range(1000, 1200)),
)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.1, help="sampling cap per point (s)")
    parser.add_argument("--timeout", type=float, default=5.0, help="per-point timeout (s)")
    parser.add_argument("--spawn", action="store_true", help="a fresh interpreter per worker")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "isolation.py"
        suite.write_text(SUITE)
        store = open_store(str(Path(tmp) / "store.db"))
        config = runner.RunConfig(
            suites=(suite,),
            policy=Policy(max_time_s=args.budget),
            timeout_s=args.timeout,
            memory_limit_bytes=8 << 30,
            fork=False if args.spawn else None,
        )
        marks: dict[str, Any] = {"per_point": {}}

        def progress(event: str, data: dict[str, Any]) -> None:
            now = time.perf_counter()
            if event == "start":
                marks["started"] = now
            elif event == "point":
                marks["sent"] = now
            elif event == "result":
                marks["per_point"][data["index"]] = (data["result"], now - marks["sent"])

        t0 = time.perf_counter()
        summary = runner.run(config, store, progress)
        wall = time.perf_counter() - t0

    results = [r for r, _ in marks["per_point"].values()]
    ok = [(r, dt) for r, dt in marks["per_point"].values() if r.status == "ok"]
    errors = [r for r in results if r.status == "error"]
    startup = marks["started"] - t0
    good_worker = sum(r.duration_s or 0.0 for r, _ in ok)
    good_runner = sum(dt for _, dt in ok)
    timeouts = len(HANG) * args.timeout
    failed_wall = sum(dt for r, dt in marks["per_point"].values() if r.status == "error")
    print(f"launcher: {'spawn per worker' if args.spawn else 'zygote (fork)'}")
    print(f"points: {len(results)}; ok {len(ok)}; errors {len(errors)}; status {summary.status}")
    for reason in sorted({(r.reason or "")[:60] for r in errors}):
        print(f"  reason: {reason}")
    print(f"wall {wall:.2f} s; start-up (zygote + environment) {startup:.2f} s")
    print(f"good points, worker duration_s sum {good_worker:.2f} s")
    print(f"good points, runner wall clock sum {good_runner:.2f} s")
    print(f"timeouts {timeouts:.2f} s; failed points' wall clock {failed_wall:.2f} s")
    print(f"cost of the 6 non-hang failures beyond nothing: {failed_wall - timeouts:.2f} s")
    for name, good in (("worker duration_s", good_worker), ("runner wall clock", good_runner)):
        budget = good + timeouts
        print(
            f"[{name}] wall / (good + timeouts) = {wall / budget:.3f} "
            f"({'meets' if wall <= 1.10 * budget else 'misses'} the 10 % rule); "
            f"without the one-time start-up {(wall - startup) / budget:.3f}"
        )


if __name__ == "__main__":
    main()
