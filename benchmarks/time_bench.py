"""Benchmarks of `benchbench time` (issue 8), for BENCHMARKS.md.

1. Wall time and verdict stability of the command users run::

       benchbench time 'torch.rsqrt(x)' '1 / torch.sqrt(x)' --size 2**10..2**22

   repeated N times (process start included): per size, the N ratios, their
   spread (max / min) and whether the verdict agreed every time.
2. Interleaved versus one-after-the-other: on the same pair, at a few sizes, N
   repetitions of (a) both measured interleaved by one engine call and (b) each
   measured alone, one after the other, with the same policy. The spread (max /
   min) of the ratio of medians over the repetitions, per size and method.

Run from the repository root::

    PYTHONPATH=. python benchmarks/time_bench.py [--repeat 5] [--skip-cli] [--skip-pair]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATEMENTS = ("torch.rsqrt(x)", "1 / torch.sqrt(x)")


def cli_runs(repeat: int, sizes: str, threads: int | None) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "benchbench", "time", *STATEMENTS, "--size", sizes]
    if threads is not None:
        # The default inputs, with torch's thread count set first (a torch global).
        command += ["--setup", f"torch.set_num_threads({threads}); x = ctx.uniform(0.5, 1.5)"]
    print(f"$ benchbench time {' '.join(repr(s) for s in command[4:])}")
    per_size: dict[int, list[tuple[float, str]]] = {}
    walls = []
    for i in range(repeat):
        started = time.monotonic()
        done = subprocess.run(
            [*command, "--no-store", "--json"], env=env, capture_output=True, text=True
        )
        wall = time.monotonic() - started
        walls.append(wall)
        if done.returncode != 0:
            print(done.stderr)
            raise SystemExit(f"run {i + 1} failed with exit code {done.returncode}")
        for row in json.loads(done.stdout)["results"]:
            if row["variant"] == STATEMENTS[1] and row["ratio"] is not None:
                per_size.setdefault(row["size"], []).append((row["ratio"], row["verdict"]))
        print(f"run {i + 1}: {wall:.1f} s wall", flush=True)
    print(
        f"wall time: min {min(walls):.1f} s, median {statistics.median(walls):.1f} s, "
        f"max {max(walls):.1f} s over {repeat} runs"
    )
    print(
        "| size | ratios (1/sqrt over rsqrt) | spread max/min | verdicts "
        "| |true diff| > 5 % | same verdict |"
    )
    print("|---|---|---|---|---|---|")
    for size in sorted(per_size):
        ratios = [r for r, _ in per_size[size]]
        verdicts = [v for _, v in per_size[size]]
        true_ratio = statistics.median(ratios)
        big = abs(true_ratio - 1) > 0.05
        print(
            f"| 2^{size.bit_length() - 1} | {', '.join(f'{r:.3g}' for r in ratios)} | "
            f"{max(ratios) / min(ratios):.3f} | {', '.join(verdicts)} | {'yes' if big else 'no'} | "
            f"{'yes' if len(set(verdicts)) == 1 else 'NO'} |"
        )


def pair_runs(repeat: int, sizes: list[int], budget_s: float, threads: int | None) -> None:
    import torch

    if threads is not None:
        torch.set_num_threads(threads)

    from benchbench.measure.loops import make_loop
    from benchbench.measure.policy import Policy, Subject, measure
    from benchbench.measure.timers import CpuTimer

    policy = Policy(max_time_s=budget_s)
    print(f"interleaved vs one after the other, {repeat} repetitions, budget {budget_s} s a point")
    print("| size | method | ratios | spread max/min |")
    print("|---|---|---|---|")
    for size in sizes:
        x = torch.rand(size) + 0.5
        subjects = [
            Subject("rsqrt", make_loop(torch.rsqrt, (x,))),
            Subject("1/sqrt", make_loop(lambda x: 1 / torch.sqrt(x), (x,))),
        ]
        ratios: dict[str, list[float]] = {"interleaved": [], "one after the other": []}
        for _ in range(repeat):
            a, b = measure(subjects, CpuTimer(), policy)
            ratios["interleaved"].append(b.stats.median_s / a.stats.median_s)
            (a,) = measure(subjects[:1], CpuTimer(), policy)
            (b,) = measure(subjects[1:], CpuTimer(), policy)
            ratios["one after the other"].append(b.stats.median_s / a.stats.median_s)
        for method, values in ratios.items():
            print(
                f"| 2^{size.bit_length() - 1} | {method} | {', '.join(f'{r:.3g}' for r in values)} "
                f"| {max(values) / min(values):.3f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="2**10..2**22")
    parser.add_argument("--pair-sizes", default="4096,65536,1048576")
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--skip-pair", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    if not args.skip_cli:
        cli_runs(args.repeat, args.sizes, args.threads)
    if not args.skip_pair:
        sizes = [int(s) for s in args.pair_sizes.split(",")]
        pair_runs(args.repeat, sizes, args.budget, args.threads)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
