"""Does this machine's speed switch under a running process? A plain torch loop, no benchbench.

One process times ``torch.exp(x, out=y)`` (``--calls`` calls a sample, one thread, no
allocation) for ``--seconds``, and prints the median of each ``--block-s`` block: on a
machine that keeps one speed the blocks agree within a few percent; where the host moves
the virtual CPU between two speeds the blocks jump between two levels while the process
runs. ``--processes`` fresh processes in a row, one line each.

``--together K`` asks whose the speed is: K processes take turns sample by sample (one
core with ``--cpu``), and each line is one block, the K processes' medians side by side.
If they move together, the speed is the machine's at that moment, and two sides that
sample the same moments cancel it; if each keeps its own level, it is the process's.

Usage: ``python benchmarks/host_modes.py [--processes 4] [--seconds 6] [--n 16384]
[--together K] [--cpu K]`` (``--cpu K`` pins each process to core K). The lines go in
BENCHMARKS.md with the date, CPU and load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

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

#: ``--together``: a process that times one sample each time it reads a line.
TURNS = """
import sys, time, torch
n, calls = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(1)
x = torch.rand(n) + 0.5
y = torch.empty_like(x)
for _ in range(50):
    torch.exp(x, out=y)
for _ in sys.stdin:
    started = time.perf_counter()
    for _ in range(calls):
        torch.exp(x, out=y)
    print(time.perf_counter() - started, flush=True)
"""


def together(args: argparse.Namespace) -> None:
    """``args.together`` processes taking turns sample by sample; one line a block."""
    argv = [sys.executable, "-c", TURNS, str(args.n), str(args.calls)]
    if args.cpu is not None:
        argv = ["taskset", "-c", str(args.cpu), *argv]
    procs = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(args.together)
    ]

    def sample(proc: subprocess.Popen[str]) -> float:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        return float(proc.stdout.readline())

    for proc in procs:  # each has imported torch and warmed up before the clock starts
        sample(proc)
    spreads = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        until, times = time.monotonic() + args.block_s, [[] for _ in procs]
        while time.monotonic() < until:
            for proc, own in zip(procs, times, strict=True):
                own.append(sample(proc))
        medians = [statistics.median(own) for own in times]
        spreads.append(max(medians) / min(medians))
        print(" ".join(f"{1e6 * m:.0f}" for m in medians))
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    print(f"slowest process / fastest, per block: median {statistics.median(spreads):.3f}, "
          f"worst {max(spreads):.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--block-s", type=float, default=0.2)
    parser.add_argument("--n", type=int, default=16384, help="elements of x")
    parser.add_argument("--calls", type=int, default=20, help="calls a sample")
    parser.add_argument("--cpu", type=int, help="pin every process to this core")
    parser.add_argument("--together", type=int, help="K processes taking turns, side by side")
    args = parser.parse_args()
    if args.together:
        together(args)
        return
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
