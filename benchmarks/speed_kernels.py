"""Can one kernel stand for the machine's speed? Several kernels timed in turn, no benchbench.

One process, one thread, takes a sample of each kernel in turn (an in-cache ``exp``,
``add`` at 2^16 and 2^18 elements, ``sin`` at 2^22, a 128x128 ``mm``, NumPy's ``exp`` and a
plain Python loop) for ``--seconds``; every ``--block-s`` block gives each kernel's median.
Where the host moves the virtual CPU between speeds, all kernels move at once; this asks
whether they move *alike*. For each kernel it prints the spread of its block medians (log
sd), the slope of its log time on the first kernel's (1: it follows that kernel's speed
exactly), and what is left of its spread after dividing by the first kernel with that
slope and with a slope of 1. A reference kernel timed beside a point cancels the machine's
speed only when every point's slope is near 1.

Usage: ``python benchmarks/speed_kernels.py [--seconds 30] [--block-s 0.25] [--blocks]``
(``--blocks``: every block's times relative to each kernel's median). The lines go in
BENCHMARKS.md with the date, CPU and load.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch


def kernels() -> dict[str, tuple[Callable[[], object], int]]:
    """Each kernel and its calls per sample (samples of roughly equal length)."""
    a16, b16, o16 = torch.rand(1 << 16), torch.rand(1 << 16), torch.empty(1 << 16)
    a18, b18, o18 = torch.rand(1 << 18), torch.rand(1 << 18), torch.empty(1 << 18)
    a22, o22 = torch.rand(1 << 22), torch.empty(1 << 22)
    m, mo = torch.rand(128, 128), torch.empty(128, 128)
    x14, y14 = torch.rand(1 << 14) + 0.5, torch.empty(1 << 14)
    na, nb = np.random.rand(1 << 15), np.empty(1 << 15)

    def python_loop() -> int:
        total = 0
        for i in range(3000):
            total += i * i
        return total

    return {
        "exp 2^14": (lambda: torch.exp(x14, out=y14), 20),
        "add 2^16": (lambda: torch.add(a16, b16, out=o16), 10),
        "add 2^18": (lambda: torch.add(a18, b18, out=o18), 3),
        "sin 2^22": (lambda: torch.sin(a22, out=o22), 1),
        "mm 128": (lambda: torch.mm(m, m, out=mo), 10),
        "numpy exp": (lambda: np.exp(na, out=nb), 5),
        "python": (python_loop, 3),
    }


def _sample(kernel: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        kernel()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--block-s", type=float, default=0.25)
    parser.add_argument("--blocks", action="store_true", help="print every block")
    args = parser.parse_args()
    torch.set_num_threads(1)
    named = kernels()
    for kernel, _ in named.values():
        for _ in range(20):
            kernel()
    print(f"load before: {os.getloadavg()[0]:.2f}")
    blocks: list[dict[str, float]] = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        times: dict[str, list[float]] = {name: [] for name in named}
        until = time.monotonic() + args.block_s
        while time.monotonic() < until:
            for name, (kernel, calls) in named.items():
                times[name].append(_sample(kernel, calls))
        blocks.append({name: statistics.median(t) for name, t in times.items()})
    medians = {name: statistics.median(b[name] for b in blocks) for name in named}
    if args.blocks:
        for k, block in enumerate(blocks):
            print(f"{k:4d} " + " ".join(f"{block[n] / medians[n]:6.3f}" for n in named))
    logs = np.log(np.array([[b[name] for name in named] for b in blocks]))
    first = logs[:, 0]
    print(f"{len(blocks)} blocks of {args.block_s:g} s; relative to {next(iter(named))}:")
    print(f"{'kernel':<10} {'log sd':>7} {'slope':>6} {'left (slope)':>13} {'left (1)':>9}")
    for j, name in enumerate(named):
        slope = float(np.polyfit(first, logs[:, j], 1)[0])
        left = float(np.std(logs[:, j] - slope * first))
        left_one = float(np.std(logs[:, j] - first))
        print(f"{name:<10} {np.std(logs[:, j]):7.3f} {slope:6.2f} {left:13.3f} {left_one:9.3f}")
    levels = first - float(np.median(first))
    slow = float(np.mean(levels > math.log(1.15)))
    fast = float(np.mean(levels < -math.log(1.15)))
    print(f"blocks more than 15 % slower than the median: {slow:.0%}, faster: {fast:.0%}")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
