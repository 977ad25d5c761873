"""Does this machine's speed switch under a running process? A plain torch loop, no benchbench.

One process times ``torch.exp(x, out=y)`` (``--calls`` calls a sample, one thread, no
allocation) for ``--seconds``, and prints the median of each ``--block-s`` block: on a
machine that keeps one speed the blocks agree within a few percent; where the host moves
the virtual CPU between two speeds the blocks jump between two levels while the process
runs. ``--processes`` fresh processes in a row, one line each.

Usage: ``python benchmarks/host_modes.py [--processes 4] [--seconds 6] [--n 16384]``
(``--cpu K`` pins each process to core K). The lines go in BENCHMARKS.md with the date,
CPU and load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

LOOP = """
import statistics, sys, time, torch
n, calls = int(sys.argv[1]), int(sys.argv[2])
seconds, block_s = float(sys.argv[3]), float(sys.argv[4])
torch.set_num_threads(1)
x = torch.rand(n) + 0.5
y = torch.empty_like(x)
def sample():
    started = time.perf_counter()
    for _ in range(calls):
        torch.exp(x, out=y)
    return time.perf_counter() - started
for _ in range(50):
    sample()
blocks, end = [], time.monotonic() + seconds
while time.monotonic() < end:
    until, times = time.monotonic() + block_s, []
    while time.monotonic() < until:
        times.append(sample())
    blocks.append(statistics.median(times))
print(" ".join(f"{1e6 * b:.0f}" for b in blocks))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--block-s", type=float, default=0.2)
    parser.add_argument("--n", type=int, default=16384, help="elements of x")
    parser.add_argument("--calls", type=int, default=20, help="calls a sample")
    parser.add_argument("--cpu", type=int, help="pin every process to this core")
    args = parser.parse_args()
    print(f"µs per sample ({args.calls} calls of exp on {args.n} floats), median of each "
          f"{args.block_s} s; load {os.getloadavg()}")  # fmt: skip
    ratios = []
    for _ in range(args.processes):
        argv = [sys.executable, "-c", LOOP, str(args.n), str(args.calls)]
        argv += [str(args.seconds), str(args.block_s)]
        if args.cpu is not None:
            argv = ["taskset", "-c", str(args.cpu), *argv]
        line = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
        blocks = [float(b) for b in line.split()]
        ratios.append(max(blocks) / min(blocks))
        print(line)
    print(f"slowest block / fastest, per process: {' '.join(f'{r:.2f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
