"""Hardware probe: the machine's ceilings for "% of peak" and roofline plots.

:func:`run_probe` measures, on one device:

- memory bandwidth versus working-set size for ``read`` (``torch.sum``), ``write``
  (``fill_``), ``copy`` (counted as read + write) and ``update`` (``abs_`` in place, an
  in-place read-modify-write counted as read + write of the same bytes, the ceiling of
  in-place operators), float32, from 4 KiB to at least
  256 MiB and 4x the last-level cache, three sizes per octave
  (:mod:`benchbench.machine.probe_bandwidth`). Each timed call sweeps the working set as
  many times as it takes to move 16 MiB, so that torch's ~5 µs per call is a few percent
  of it and small working sets show the cache, not the call overhead; each point is the
  best of ``repeats`` sweeps of several 1 ms blocks. Curves are measured with torch's
  default threads (the ceiling a torch operator sees) and again with one thread
  (``read@1t`` ...), which is what the cache plateaus are detected on: with two threads
  each core streams half the buffer through its own L2, so the multi-thread drop sits at
  the sum of the L2s, not at one;
- the cache boundaries, from the drops of that curve (:func:`detect_cache_levels`),
  beside the sizes the OS reports (:func:`benchbench.machine.caches.read_os_caches`);
- peak FLOP/s per dtype (float64, float32, bfloat16, float16 where the device runs
  them) from square matmuls (2·n³ flop), n grown while one call stays short, the best of
  blocks at every n, the largest n's timed again in ``repeats`` rounds over the dtypes;
- the timer's resolution and overhead, and the thread count.

On CUDA the same sweeps are timed with event pairs, and :mod:`benchbench.machine.probe_cuda` adds
host↔device bandwidth and launch / sync latency (run on an H100 in quick mode: copy
within 3.3 % of a plain 1 GiB copy, bf16 peak within 5.2 % of a plain 8192³ matmul).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from benchbench.core.errors import UsageError
from benchbench.machine.caches import read_os_caches
from benchbench.machine.hardware import PROFILE_VERSION, CacheLevel, OsCache, Profile
from benchbench.machine.probe_bandwidth import (
    PASS_BYTES,
    bandwidth_curves,
    block_runner,
    disturbed_points,
    sweep_sizes,
)
from benchbench.machine.probe_cuda import (
    best_seconds_per_call,
    calls_per_block,
    measure_cuda_extras,
)

__all__ = [
    "PROFILE_VERSION",
    "CacheLevel",
    "OsCache",
    "Profile",
    "detect_cache_levels",
    "disturbed_points",
    "run_probe",
]

# History: 1 — first version; 2 — passes per call (min_call_bytes) and repeats recorded;
# the ``update`` curve came later within version 2 (see hardware.py).

_MIB = 1 << 20
_MATMUL_DTYPES = ("float64", "float32", "bfloat16", "float16")


def detect_cache_levels(
    curve: Sequence[tuple[int, float]], *, min_drop: float = 1.25, step_tol: float = 1.03
) -> tuple[CacheLevel, ...]:
    """Cache boundaries from a bandwidth-versus-working-set curve.

    Algorithm: work on ``log(bytes_per_s)``, smoothed by a running median of 3 so that one
    disturbed point (frequent on a shared machine) neither makes nor hides a drop. Start
    at the curve's maximum (left of it, per-call overhead rather than a cache limits the
    bandwidth). A *drop* is a run of consecutive steps each falling by more than
    ``step_tol`` (one flat step between falling ones is absorbed, else one noisy point
    splits a drop in two); it counts as a cache boundary if it falls by at least ``min_drop``
    overall (a plateau of L2 at 34 GB/s falling to L3 at 21 GB/s is 1.6x) and the two
    points after it stay that much lower too. The boundary
    is placed where the curve crosses the log-midpoint of the two plateaus, interpolated
    in log-size. Returns the boundaries ascending; () for fewer than 4 points.
    """
    pts = sorted((int(b), float(v)) for b, v in curve if v > 0)
    if len(pts) < 4:
        return ()
    sizes = np.array([p[0] for p in pts], dtype=np.float64)
    raw = np.log([p[1] for p in pts])
    y = raw.copy()
    y[1:-1] = np.median(np.stack([raw[:-2], raw[1:-1], raw[2:]]), axis=0)
    tol, need = math.log(step_tol), math.log(min_drop)
    levels: list[CacheLevel] = []
    i = int(np.argmax(y))
    while i < len(y) - 1:
        if y[i + 1] >= y[i] - tol:
            i += 1
            continue
        j = i + 1
        while True:
            if j < len(y) - 1 and y[j + 1] < y[j] - tol:
                j += 1
            elif j < len(y) - 2 and y[j + 1] <= y[j] + tol and y[j + 2] < y[j + 1] - tol:
                j += 2  # one flat step inside a drop: seen splitting L2's drop in two
            else:
                break
        # The lower plateau must hold for the next two points too, not bounce back up.
        if all(y[i] - y[k] >= need for k in range(j, min(j + 3, len(y)))):
            mid = (y[i] + y[j]) / 2
            k = next(k for k in range(i, j) if y[k + 1] <= mid)
            frac = (y[k] - mid) / (y[k] - y[k + 1])
            logsize = math.log(sizes[k]) + frac * (math.log(sizes[k + 1]) - math.log(sizes[k]))
            levels.append(
                CacheLevel(
                    size_bytes=round(math.exp(logsize)),
                    drop_start_bytes=int(sizes[i]),
                    drop_end_bytes=int(sizes[j]),
                    bytes_per_s_before=float(math.exp(y[i])),
                    bytes_per_s_after=float(math.exp(y[j])),
                )
            )
        i = j
    return tuple(levels)


def _peak_flop_per_s(
    device: str, *, quick: bool, repeats: int, progress: Callable[[str], None] | None
) -> dict[str, float]:
    # float16 matmul on this CPU runs at ~1 GFLOP/s: a 1024² call takes 4 s. So n grows
    # only while the next size (8x the work) is predicted to stay under the call budget.
    # n = 4096 (0.7 s a float32 call, 1.5 s float64) took the probe from 25 s to 50 s on
    # our loaded 2-core machine without a steadier peak: 2048 is the largest size.
    # A GPU reaches its peak only at sizes far beyond that (a 2048² bf16 matmul is a few
    # microseconds of an H100): there the call budget alone stops the growth.
    call_budget_s, n_max, dtype_budget_s = (0.02, 256, 0.1) if quick else (0.4, 2048, 2.0)
    if not device.startswith("cpu"):
        n_max = 16384
    peaks: dict[str, float] = {}
    finals: dict[str, tuple[Callable[[int], float], float, int, int]] = {}
    for name in _MATMUL_DTYPES:
        dtype = getattr(torch, name)
        try:
            tiny = torch.ones(2, 2, dtype=dtype, device=device)
            torch.mm(tiny, tiny)
        except (RuntimeError, TypeError):
            continue  # not supported on this device
        if progress:
            progress(f"peak flop/s: {name} matmul")
        n, best = 128, 0.0
        while True:
            a = torch.rand(n, n, device=device).to(dtype)
            b = torch.rand(n, n, device=device).to(dtype)
            c = torch.empty(n, n, dtype=dtype, device=device)

            def matmul(a: torch.Tensor = a, b: torch.Tensor = b, c: torch.Tensor = c) -> object:
                return torch.mm(a, b, out=c)

            run = block_runner(device, matmul)
            seconds = best_seconds_per_call(run, blocks=2)
            best = max(best, 2 * n**3 / seconds)
            if 8 * seconds <= call_budget_s and n < n_max:
                n *= 2
                continue
            # Last size: more blocks, since the machine is shared and the best one counts.
            extra = min(20, max(3, int(dtype_budget_s / max(seconds, 1e-9))))
            calls = calls_per_block(run)
            finals[name] = (run, 2.0 * n**3, calls, max(1, -(-extra // repeats)))
            peaks[name] = best
            break
    # Those blocks in rounds over the dtypes, not in a row: one busy second (seen: float32
    # and float64 both at 0.35 GFLOP/s, 1/300 of their peak, in one --quick probe) then
    # sinks one round of a dtype, not every look at it.
    if progress and finals:
        progress(f"peak flop/s: best of {repeats} rounds over {', '.join(finals)}")
    for _ in range(repeats):
        for name, (run, flop, calls, blocks) in finals.items():
            for _ in range(blocks):
                peaks[name] = max(peaks[name], flop * calls / run(calls))
    return peaks


def _timer_figures() -> tuple[float, float, float]:
    """(reported resolution, smallest observed nonzero step, median cost of a pair) in s."""
    clock = time.perf_counter_ns
    steps, pairs = [], []
    for _ in range(2000):
        a = clock()
        b = clock()
        pairs.append(b - a)
        while b == a:
            b = clock()
        steps.append(b - a)
    pairs.sort()
    return (
        time.get_clock_info("perf_counter").resolution,
        min(steps) / 1e9,
        pairs[len(pairs) // 2] / 1e9,
    )


def _plateau_beyond(points: Sequence[tuple[int, float]], llc_bytes: int) -> float:
    """Best bandwidth at working sets >= 2x the LLC (the last point if none are).

    Every point there streams from main memory, so they are repeated measurements of one
    plateau; another process on a shared machine only ever slows a run down, so the best
    of them (like the best block within each) estimates the ceiling.
    """
    beyond = [v for b, v in points if b >= 2 * llc_bytes]
    return max(beyond) if beyond else points[-1][1]


def run_probe(
    device: str = "cpu",
    *,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Profile:
    """Measure ``device``'s ceilings; 35-45 s on a loaded 2-core CPU, ~3 s when ``quick``.

    ``quick`` measures fewer, smaller points (to 16 MiB, one size per octave, one block
    per point and repeat, matmuls of n <= 256): the structure is complete, the figures
    are rough. ``progress`` receives
    one line per step. Raises :class:`UsageError` for an unknown or absent device.
    """
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UsageError(
                f"device {device!r} is not available (torch.cuda.is_available() is False); "
                "probe 'cpu' instead"
            )
    elif device == "mps":
        if not torch.backends.mps.is_available():
            raise UsageError("device 'mps' is not available on this machine; probe 'cpu' instead")
    elif device != "cpu":
        raise UsageError(f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:N' or 'mps'")
    started = time.perf_counter()
    on_cpu = device == "cpu"
    os_caches = read_os_caches() if on_cpu else ()
    llc = max((c.size_bytes for c in os_caches), default=0)
    if device.startswith("cuda"):
        # The GPU's L2 (50 MB on an H100): a sweep that stops inside it measures L2, not
        # device memory (a quick probe to 16 MiB read 2.5 TB/s beside a 1 GiB copy's 3.0).
        llc = int(
            getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0)
        )
    max_bytes = 16 * _MIB if quick else max(256 * _MIB, 4 * llc)
    if quick and not on_cpu:
        max_bytes = max(max_bytes, 4 * llc)  # a GPU streams 4x its L2 in well under 1 ms
    sizes = sweep_sizes(max_bytes, 1 if quick else 3)
    repeats = 3
    curves = bandwidth_curves(
        device,
        sizes,
        blocks=1 if quick else 2,
        repeats=repeats,
        min_call_bytes=PASS_BYTES,
        one_thread_too=on_cpu,
        progress=progress,
    )
    # Cache detection on the geometric mean of the one-thread read and write curves: two
    # noisy views of the same plateaus; the constant factor between them does not move the
    # drops. Copy stays out: below ~64 KiB its per-pass overhead, not the cache, shapes it.
    basis = [curves[k] for k in ("read@1t", "write@1t") if k in curves] or [
        curves["read"],
        curves["write"],
    ]
    mean_curve = [
        (pts[0][0], float(np.exp(np.mean(np.log([p[1] for p in pts])))))
        for pts in zip(*basis, strict=True)
    ]
    levels = detect_cache_levels(mean_curve)
    llc = max([llc] + [lv.drop_end_bytes for lv in levels])
    default_ops: tuple[str, ...] = tuple(
        op for op in ("read", "write", "copy", "update") if op in curves
    )
    memory = {op: _plateau_beyond(curves[op], llc) for op in default_ops}
    cache = {op: max(v for _, v in curves[op]) for op in default_ops}
    peaks = _peak_flop_per_s(device, quick=quick, repeats=repeats, progress=progress)
    resolution, observed, overhead = _timer_figures()
    extra: dict[str, float] = {}
    if device.startswith("cuda"):
        extra = measure_cuda_extras(torch, device=device, quick=quick, progress=progress)
    return Profile(
        device=device,
        threads=torch.get_num_threads(),
        bandwidth=curves,
        cache_levels=levels,
        os_caches=os_caches,
        peak_flop_per_s=peaks,
        memory_bytes_per_s=memory,
        cache_bytes_per_s=cache,
        timer_resolution_s=resolution,
        timer_observed_resolution_s=observed,
        timer_overhead_s=overhead,
        duration_s=time.perf_counter() - started,
        extra=extra,
        repeats=repeats,
        min_call_bytes=PASS_BYTES,
    )
