"""Check the full CPU probe against plain measurements taken in the same run.

Run from the repository root:  PYTHONPATH=. python benchmarks/probe_check.py

Targets: probe <= 60 s; detected L2 and LLC boundaries within 2x of the OS figures;
main-memory copy bandwidth within 20 % of a plain 1 GiB ``dst.copy_(src)``; float32
peak within 20 % of a 4096x4096 ``torch.mm``. The plain figures are best-of-N like the
probe's, so both sides are "what this machine can attain" and a shared, noisy machine
moves them alike only if they are measured close together: hence the same process.

Because another process can halve a figure for seconds at a time, the script ends with
an interleaved check of the probe's *method* (A B A B rounds, best of each): the
probe's block timing of a 256 MiB copy and of a 2048² mm against the plain 1 GiB copy
and 4096² mm. It separates a bias of the method from the machine's drift.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch

from benchbench.machine.probe import run_probe
from benchbench.machine.probe_cuda import best_seconds_per_call

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
    # L1 hides behind torch's per-call overhead, so the OS levels from L2 up are paired in
    # order with the detected boundaries (not with the nearest one, which would let a
    # spurious drop in the main-memory region pass for the LLC).
    os_levels = sorted(k for k in os_by_level if k >= 2)
    padded = [*profile.cache_levels, *[None] * len(os_levels)]
    for level, found in zip(os_levels, padded, strict=False):
        os_size = os_by_level[level]
        if found is None:
            print(f"L{level}: OS {os_size / MIB:.3g} MiB, nothing detected  FAIL")
            continue
        ratio = found.size_bytes / os_size
        print(
            f"L{level}: OS {os_size / MIB:.3g} MiB, detected {found.size_bytes / MIB:.3g} MiB, "
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
    interleaved()
    return 0


def interleaved(rounds: int = 3) -> None:
    """Probe method vs plain, A B A B, best of each side over ``rounds`` rounds."""
    src = torch.rand(1024 * MIB // 4)
    dst = torch.zeros_like(src)
    ws = 256 * MIB  # the probe's largest working set: 128 MiB in, 128 MiB out
    s_half, d_half = src[: ws // 8], dst[: ws // 8]

    def probe_block(calls: int) -> float:
        begin = time.perf_counter_ns()
        for _ in range(calls):
            d_half.copy_(s_half)
        return (time.perf_counter_ns() - begin) / 1e9

    n_probe, n_plain = 2048, 4096
    mats = {n: (torch.rand(n, n), torch.rand(n, n), torch.empty(n, n)) for n in (n_probe, n_plain)}

    def mm_block(calls: int) -> float:
        a, b, c = mats[n_probe]
        begin = time.perf_counter_ns()
        for _ in range(calls):
            torch.mm(a, b, out=c)
        return (time.perf_counter_ns() - begin) / 1e9

    a4, b4, c4 = mats[n_plain]
    best = {"probe copy": 0.0, "plain copy": 0.0, "probe mm": 0.0, "plain mm": 0.0}
    for _ in range(rounds):
        best["probe copy"] = max(
            best["probe copy"], ws / best_seconds_per_call(probe_block, blocks=4)
        )
        best["plain copy"] = max(
            best["plain copy"], 2 * 1024 * MIB / best_seconds(lambda: dst.copy_(src), 2)
        )
        best["probe mm"] = max(
            best["probe mm"], 2 * n_probe**3 / best_seconds_per_call(mm_block, blocks=2)
        )
        best["plain mm"] = max(
            best["plain mm"], 2 * n_plain**3 / best_seconds(lambda: torch.mm(a4, b4, out=c4), 1)
        )
    copy_ratio = best["probe copy"] / best["plain copy"]
    mm_ratio = best["probe mm"] / best["plain mm"]
    print(
        f"interleaved x{rounds}: copy probe-method {best['probe copy'] / 1e9:.2f} vs plain "
        f"{best['plain copy'] / 1e9:.2f} GB/s, ratio {copy_ratio:.2f}  "
        + verdict(abs(copy_ratio - 1) <= 0.2)
    )
    print(
        f"interleaved x{rounds}: mm probe-method {best['probe mm'] / 1e9:.1f} vs plain "
        f"{best['plain mm'] / 1e9:.1f} GFLOP/s, ratio {mm_ratio:.2f}  "
        + verdict(abs(mm_ratio - 1) <= 0.2)
    )


if __name__ == "__main__":
    sys.exit(main())
