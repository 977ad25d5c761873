"""Output lifetime side by side: the same operators timed with outputs kept and dropped.

One process, one torch thread, the engine's own policy; for each operator the two
loops (:func:`benchbench.measure.loops.make_loop` with ``outputs="keep"`` and
``"drop"``) are measured **interleaved** (one sample of each per round, shuffled), so
drift on the shared machine hits both alike. Prints the median per call, the ratio
keep / drop and the minor page faults per call of each. The empty callable shows what
the ``keep`` loop costs per call by itself. The script re-runs itself with the
workers' allocator environment (``--allocator system``: glibc's thresholds fixed), so
the numbers are those ``benchbench run`` sees; ``--allocator jemalloc`` and
``tcmalloc`` are accepted too.

Usage: ``python benchmarks/outputs_bench.py`` (numbers in BENCHMARKS.md).
"""

import os
import sys

import torch

from benchbench.machine.allocator import ALLOCATOR_VARIABLE, worker_environment
from benchbench.measure.loops import make_loop
from benchbench.measure.policy import Policy, Subject, measure
from benchbench.measure.timers import CpuTimer

torch.set_num_threads(1)
POLICY = Policy(max_time_s=3.0, min_time_s=1.0, target_rel_ci=0.005)


def empty() -> None:
    return None


def cases() -> list[tuple[str, object, tuple[object, ...]]]:
    g = torch.Generator().manual_seed(0)
    a = torch.rand(128, 32, 512, generator=g)
    b = torch.rand(128, 32, 512, generator=g)
    x16, y16 = torch.rand(2**16, generator=g), torch.rand(2**16, generator=g)
    x18, y18 = torch.rand(2**18, generator=g), torch.rand(2**18, generator=g)
    x20, y20 = torch.rand(2**20, generator=g), torch.rand(2**20, generator=g)
    return [
        ("empty callable", empty, ()),
        ("torch.add 2^16", torch.add, (x16, y16)),
        ("torch.add 2^18", torch.add, (x18, y18)),
        ("torch.add 2^20", torch.add, (x20, y20)),
        ("torch.add 128x32x512", torch.add, (a, b)),
        ("torch.sqrt 2^20", torch.sqrt, (x20 + 0.5,)),
    ]


def main() -> None:
    allocator = (
        sys.argv[sys.argv.index("--allocator") + 1] if "--allocator" in sys.argv else "system"
    )
    if os.environ.get(ALLOCATOR_VARIABLE) != allocator:
        env = worker_environment(allocator)
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    print(f"allocator: {allocator}")
    print(f"{'operator':24s} {'keep':>12s} {'drop':>12s} {'keep/drop':>9s}  faults/call k, d")
    for name, fn, args in cases():
        subjects = [Subject(mode, make_loop(fn, args, mode)) for mode in ("keep", "drop")]  # type: ignore[arg-type]
        keep, drop = measure(subjects, CpuTimer(), POLICY)
        k, d = keep.stats.median_s, drop.stats.median_s
        unit, scale = ("ns", 1e9) if k < 1e-6 else ("µs", 1e6)
        print(
            f"{name:24s} {k * scale:9.3f} {unit} {d * scale:9.3f} {unit} {k / d:9.2f}  "
            f"{keep.minor_faults_per_call:.1f}, {drop.minor_faults_per_call:.1f}"
        )


if __name__ == "__main__":
    main()
