"""Check the full CPU probe against plain measurements taken in the same run.

Run from the repository root:  PYTHONPATH=. python benchmarks/probe_check.py

Targets: probe <= 60 s; detected L2 and LLC boundaries within 2x of the OS figures;
main-memory copy bandwidth within 20 % of a plain 1 GiB ``dst.copy_(src)``; float32
peak within 20 % of a 4096x4096 ``torch.mm``. The plain figures are best-of-N like the
probe's, so both sides are "what this machine can attain" and a shared, noisy machine
moves them alike only if they are measured close together: hence the same process.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch

from benchbench.probe import run_probe

MIB = 1 << 20


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Fastest of ``repeats`` single calls (each long enough: 50 ms to 1 s)."""
    fn()  # warm-up: first touch, allocator, thread pool
    best = float("inf")
    for _ in range(repeats):
        begin = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - begin) / 1e9)
    return best


def plain_figures() -> tuple[float, float]:
    """(bytes/s of a 1 GiB ``dst.copy_(src)``, flop/s of a 4096x4096 float32 ``torch.mm``)."""
    src = torch.rand(1024 * MIB // 4)  # 1 GiB copied: 1 GiB read + 1 GiB written per call
    dst = torch.zeros_like(src)
    copy = 2 * 1024 * MIB / best_seconds(lambda: dst.copy_(src), 5)
    n = 4096
    a, b = torch.rand(n, n), torch.rand(n, n)
    c = torch.empty(n, n)
    mm = 2 * n**3 / best_seconds(lambda: torch.mm(a, b, out=c), 3)
    return copy, mm


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> int:
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    # The machine is shared: plain figures are taken before and after the probe and the
    # best kept, so both sides get the same chances at a quiet moment.
    copy_before, mm_before = plain_figures()
    started = time.perf_counter()
    profile = run_probe(progress=lambda m: print(f"  [{time.perf_counter() - started:5.1f}s] {m}"))
    print(f"probe duration: {profile.duration_s:.1f} s  {verdict(profile.duration_s <= 60)}")

    os_by_level = {c.level: c.size_bytes for c in profile.os_caches}
    print(
        "OS caches: "
        + ", ".join(f"L{c.level} {c.type} {c.size_bytes / MIB:.3g} MiB" for c in profile.os_caches)
    )
    for lv in profile.cache_levels:
        print(
            f"detected boundary {lv.size_bytes / MIB:7.3f} MiB "
            f"(drop {lv.drop_start_bytes / MIB:.3g}..{lv.drop_end_bytes / MIB:.3g} MiB, "
            f"{lv.bytes_per_s_before / 1e9:.1f} -> "
            f"{lv.bytes_per_s_after / 1e9:.1f} GB/s one thread)"
        )
    for level in sorted(k for k in os_by_level if k >= 2):
        os_size = os_by_level[level]
        if not profile.cache_levels:
            print(f"L{level}: nothing detected  FAIL")
            continue
        nearest = min(profile.cache_levels, key=lambda lv: abs(lv.size_bytes / os_size - 1))
        ratio = nearest.size_bytes / os_size
        print(
            f"L{level}: OS {os_size / MIB:.3g} MiB, "
            f"nearest detected {nearest.size_bytes / MIB:.3g} MiB, "
            f"ratio {ratio:.2f}  {verdict(0.5 <= ratio <= 2.0)}"
        )

    copy_after, mm_after = plain_figures()
    print(
        f"plain figures before / after the probe: copy {copy_before / 1e9:.2f} / "
        f"{copy_after / 1e9:.2f} GB/s, mm {mm_before / 1e9:.1f} / {mm_after / 1e9:.1f} GFLOP/s"
    )
    plain_copy, plain_mm = max(copy_before, copy_after), max(mm_before, mm_after)
    probe_copy = profile.memory_bytes_per_s["copy"]
    ratio = probe_copy / plain_copy
    print(
        f"copy: probe {probe_copy / 1e9:.2f} GB/s, plain 1 GiB {plain_copy / 1e9:.2f} GB/s, "
        f"ratio {ratio:.2f}  {verdict(abs(ratio - 1) <= 0.2)}"
    )

    probe_mm = profile.peak_flop_per_s["float32"]
    ratio = probe_mm / plain_mm
    print(
        f"float32 matmul: probe {probe_mm / 1e9:.1f} GFLOP/s, plain 4096^3 mm "
        f"{plain_mm / 1e9:.1f} GFLOP/s, ratio {ratio:.2f}  {verdict(abs(ratio - 1) <= 0.2)}"
    )
    print(
        "peak flop/s: "
        + ", ".join(f"{k} {v / 1e9:.1f} G" for k, v in profile.peak_flop_per_s.items())
    )
    print(
        "memory plateau (default threads): "
        + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in profile.memory_bytes_per_s.items())
        + " GB/s; best in cache: "
        + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in profile.cache_bytes_per_s.items())
        + " GB/s"
    )
    print(
        f"timer: resolution {profile.timer_resolution_s * 1e9:.0f} ns reported, "
        f"{profile.timer_observed_resolution_s * 1e9:.0f} ns observed, "
        f"pair overhead {profile.timer_overhead_s * 1e9:.0f} ns; threads {profile.threads}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
