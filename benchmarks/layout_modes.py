"""Which memory mode does a process fall in, and what decides it? ``x + 1.0`` on 2^22
float32, timed in fresh processes and in the forked children of one process.

Under the workers' fixed glibc thresholds (``benchbench.machine.allocator``), each call of
``x + 1.0`` either reuses the freed output or page-faults part of it in again, by
process. The script counts the minor page faults a call (``getrusage``) over 50 timed
calls after 10 warm ones, in:

- ``fresh``: a new interpreter per process, as the workers start; ``--hash-seed`` and
  ``--no-aslr`` (``setarch -R``) fix the two things that differ between them;
- ``fork``: ``--zygotes`` processes that import torch and fork ``--children`` each, one
  after another, as ``ab``'s zygotes fork its workers; ``--padding malloc`` makes each
  child ``malloc`` a random size below 1 MiB first, ``sbrk`` moves the heap's top by up
  to 4 MiB.

Prints each process's faults a call and time per 10 calls, and the count by faults.
Usage: ``python benchmarks/layout_modes.py fresh [--hash-seed 0] [--no-aslr]
[--processes 20]`` or ``python benchmarks/layout_modes.py fork [--padding
none|malloc|sbrk] [--zygotes 3] [--children 8]`` (numbers in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import random
import resource
import subprocess
import sys
import time

from benchbench.machine.allocator import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES

SIZE = 1 << 22


def measure() -> tuple[float, float]:
    """Milliseconds per 10 calls and minor faults a call of ``x + 1.0``."""
    import torch

    torch.set_num_threads(1)
    x = torch.randn(SIZE)
    for _ in range(10):
        y = x + 1.0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started = time.perf_counter()
    for _ in range(50):
        y = x + 1.0
    elapsed = time.perf_counter() - started
    del y
    return elapsed * 1e3 / 5, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 50


def _pad(padding: str, seed: int) -> None:
    libc = ctypes.CDLL("libc.so.6")
    rng = random.Random(seed)
    if padding == "malloc":
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc(rng.randrange(1, 1 << 20))
    elif padding == "sbrk":
        libc.sbrk.restype = ctypes.c_void_p
        libc.sbrk.argtypes = [ctypes.c_long]
        libc.sbrk(rng.randrange(0, 1 << 22, 64))


def fork_children(children: int, padding: str) -> list[str]:
    """Fork ``children`` one after another from this (torch-importing) process."""
    import torch  # noqa: F401  (the zygote's import, inherited by every child)

    lines = []
    for k in range(children):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _pad(padding, k)
            ms, faults = measure()
            os.write(write, f"{ms:.1f} {faults:.0f}".encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as answer:
            lines.append(answer.read())
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("how", choices=("fresh", "fork", "child", "zygote"))
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument("--hash-seed")
    parser.add_argument("--no-aslr", action="store_true")
    parser.add_argument("--zygotes", type=int, default=3)
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--padding", choices=("none", "malloc", "sbrk"), default="none")
    args = parser.parse_args()
    if args.how == "child":
        ms, faults = measure()
        print(f"{ms:.1f} {faults:.0f}")
        return
    if args.how == "zygote":
        print("\n".join(fork_children(args.children, args.padding)))
        return
    env = {
        **os.environ,
        "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES),
        "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD_BYTES),
    }
    if args.hash_seed is not None:
        env["PYTHONHASHSEED"] = args.hash_seed
    prefix = ["setarch", "-R"] if args.no_aslr else []
    me = [sys.executable, __file__]
    if args.how == "fresh":
        commands = [[*prefix, *me, "child"]] * args.processes
    else:
        extra = ["--children", str(args.children), "--padding", args.padding]
        commands = [[*prefix, *me, "zygote", *extra]] * args.zygotes
    counts: collections.Counter[str] = collections.Counter()
    for n, command in enumerate(commands):
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        lines = out.stdout.split()
        pairs = list(zip(lines[::2], lines[1::2], strict=True))
        counts.update(f for _, f in pairs)
        shown = ", ".join(f"{f} faults {ms} ms" for ms, f in pairs)
        print(f"{'process' if args.how == 'fresh' else 'zygote'} {n + 1}: {shown}")
    print("faults a call: " + ", ".join(f"{f} in {c}" for f, c in sorted(counts.items())))


if __name__ == "__main__":
    main()
