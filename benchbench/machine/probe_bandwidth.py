"""The probe's bandwidth sweeps: read, write, copy and update over growing working sets.

**Why each call makes many passes.** A torch call costs ~3-5 µs before it touches a byte
(argument parsing, dispatch, the output's allocation; on two threads the pool's wake-up
too). One ``torch.sum`` over 4 KiB, the old probe's method, measured that overhead: 4 KiB
in ~3.4 µs is 1.2 GB/s, a "ceiling" that a 1 µs ``numpy.sqrt`` call beat by 78 % and a
``torch.add`` of 2^14-2^16 elements by 24-42 %. So every timed call here moves at least
:data:`PASS_BYTES` (16 MiB) by sweeping the same working set ``passes`` times inside one
call, through a view that repeats the buffer with a stride of 0 (no copy is made):

- ``read``: ``torch.sum(view, dim=2)`` over ``x.as_strided((T, passes, m), (m, 0, 1))``:
  each of the ``T * passes`` outputs is one contiguous pass over a ``1/T`` share of the
  buffer, so with ``T`` torch threads each thread re-reads its own share, as a torch
  operator of that size splits it. The outputs (4 bytes per pass over ``m`` floats, at
  most 0.2 % of the bytes read) are not counted;
- ``write``: ``fill_`` over the same kind of view of the destination (``fill_`` writes
  through a view whose elements alias, the other in-place and ``out=`` kernels refuse it);
- ``copy``: ``torch._foreach_copy_`` over ``passes`` references to the same source and
  destination halves: ``copy_`` refuses an aliasing destination, so the passes are a
  list executed in C++, ~0.45 µs each instead of ~3 µs through Python. At 4 KiB that
  still halves the copy rate, so at small sizes the copy curve stays below the read and
  write curves; the roofline takes the best of read, write and copy at each size;
- ``update``: ``torch._foreach_abs_`` over ``passes`` references to the same buffer, an
  in-place read-modify-write of every element (the values are positive, so they stay as
  they are), counted as 8 bytes per float32 element, 4 read and 4 written back, over a
  working set of 4. A copy with write-allocate moves 12 bytes for every 8 it is credited
  (its store first reads the destination's line) and an update moves what it is credited,
  so in-place operators are held to this curve (:mod:`benchbench.analysis.roofline`),
  not to the copy's. ``abs_`` is the cheapest in-place op per pass through the list
  here: ~0.28 µs, against ~0.38 µs for ``_foreach_mul_`` by a 0-d tensor and ~2.2 µs by a
  Python number (it wraps the number every pass).

``numpy`` was tried and rejected: it orders a stride-0 axis innermost, so a repeated view
becomes one element written ``passes`` times (2-10 GB/s on this machine).

Measured on our 2-core EPYC (one thread, best of 5 blocks): read at 4 KiB 1.2 -> 124 GB/s,
at 16 KiB 4.4 -> 152 (L1), at 256 KiB 20 -> 97 (L2), at 3 MiB 51 -> 66 (L3); write at 4
KiB 2.7 -> 96; copy at 4 KiB 3.3 -> 9. Beyond 16 MiB a call is one pass, as before.
Update, two threads, loaded machine: 2.6 GB/s at 4 KiB through ``_foreach_mul_`` by a
number, 29 through ``_foreach_abs_``; 16 MiB (in the 32 MiB L3) 339, 128 MiB 22, where
copy reads 181 and 9.

**Each figure is the best of repeats.** Another process only ever slows a block down, so
the ceiling is the fastest observation: every point's calls per block are calibrated once
(a block lasts >= 1 ms), then the whole sweep (all ops, all sizes) is timed ``repeats``
times, ``blocks`` blocks per point each time, and a point keeps its best. Repeating the
sweep rather than the point spreads one point's measurements over the run, so one busy
second on the shared machine sinks at most one of them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from benchbench.machine.probe_cuda import MIN_BLOCK_S, calls_per_block, cuda_block_runner

__all__ = [
    "OPS",
    "PASS_BYTES",
    "SweepPoint",
    "bandwidth_curves",
    "best_bandwidths",
    "block_runner",
    "disturbed_points",
    "op_call",
    "passes_for",
    "sweep_sizes",
]

#: Bytes every timed call moves at least; 16 MiB is ~110 µs at 150 GB/s (L1, one thread),
#: which puts a 5 µs call overhead at 4 %, and one pass beyond 16 MiB working sets.
PASS_BYTES = 16 << 20
OPS = ("read", "write", "copy", "update")


def passes_for(working_set_bytes: int, min_call_bytes: int) -> int:
    """Passes over ``working_set_bytes`` that make one call move ``min_call_bytes`` (>= 1)."""
    if working_set_bytes <= 0:
        raise ValueError(f"working_set_bytes must be > 0, got {working_set_bytes}")
    return max(1, -(-min_call_bytes // working_set_bytes))


def sweep_sizes(max_bytes: int, per_octave: int) -> list[int]:
    """Working sets from 4 KiB to ``max_bytes``, ``per_octave`` per doubling."""
    steps = round(math.log2(max_bytes / 4096) * per_octave) + 1
    # Multiples of 128 bytes: copy splits the working set into two 64-byte aligned halves.
    return sorted({int(s) // 128 * 128 for s in np.geomspace(4096, max_bytes, steps)})


def block_runner(device: str, fn: Callable[[], object]) -> Callable[[int], float]:
    """``run_block(k)`` on the device's clock: host clock (MPS synced after), events on CUDA."""
    if device.startswith("cuda"):
        return cuda_block_runner(torch.cuda, fn)
    sync: Callable[[], None] = torch.mps.synchronize if device == "mps" else (lambda: None)

    def run_block(calls: int) -> float:
        begin = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        sync()
        return (time.perf_counter_ns() - begin) / 1e9

    return run_block


def op_call(
    op: str,
    src: torch.Tensor,
    dst: torch.Tensor,
    working_set_bytes: int,
    *,
    passes: int,
    threads: int = 1,
) -> tuple[Callable[[], object], int]:
    """One call of ``op`` making ``passes`` passes over a float32 working set; and the
    bytes that call moves (copy: half the working set in, half out; update: the whole
    working set read and written back, twice its bytes).

    ``threads`` splits the read and write views into that many contiguous shares (see the
    module docstring). ``src`` and ``dst`` hold at least the working set.
    """
    n = working_set_bytes // 4
    if op == "copy":
        half = n // 2
        s, d = src[:half], dst[:half]
        if passes == 1 or not hasattr(torch, "_foreach_copy_"):  # a private API: may go
            return (lambda: d.copy_(s)), 8 * half
        sources, targets = [s] * passes, [d] * passes
        return (lambda: torch._foreach_copy_(targets, sources)), 8 * half * passes
    if op == "update":
        # dst, not src: the update rewrites its buffer, and read's data must stay as set.
        # Positive values (write's 1.5, copy's rand()) make abs_ an identity on them.
        target = dst[:n]
        if passes == 1 or not hasattr(torch, "_foreach_abs_"):  # a private API: may go
            return (lambda: target.abs_()), 8 * n
        targets = [target] * passes
        return (lambda: torch._foreach_abs_(targets)), 8 * n * passes
    shares = max(1, min(threads, n // 32))
    m = n // shares
    if op == "read":
        view = src.as_strided((shares, passes, m), (m, 0, 1))
        totals = torch.empty(shares, passes, dtype=src.dtype, device=src.device)
        return (lambda: torch.sum(view, dim=2, out=totals)), 4 * shares * m * passes
    if op == "write":
        target = dst.as_strided((shares, passes, m), (m, 0, 1))
        return (lambda: target.fill_(1.5)), 4 * shares * m * passes
    raise ValueError(f"unknown bandwidth op {op!r}; use one of {OPS}")


@dataclass(frozen=True)
class SweepPoint:
    """One working set of one op: ``run_block(k)`` times ``k`` calls of ``bytes_per_call``."""

    working_set_bytes: int
    bytes_per_call: int
    run_block: Callable[[int], float]


def best_bandwidths(
    curves: Mapping[str, Sequence[SweepPoint]],
    *,
    repeats: int,
    blocks: int,
    min_block_s: float = MIN_BLOCK_S,
) -> dict[str, list[float]]:
    """Best bytes/s per point of each curve (see "best of repeats" in the module docstring).

    After the repeats, points far below their neighbours on both sides
    (:func:`disturbed_points`) are timed twice more: a neighbour's load can outlast a sweep.
    """
    if repeats < 1 or blocks < 1:
        raise ValueError(f"repeats and blocks must be >= 1, got {repeats} and {blocks}")
    calls = {
        op: [calls_per_block(p.run_block, min_block_s) for p in pts] for op, pts in curves.items()
    }
    seconds = {op: [math.inf] * len(pts) for op, pts in curves.items()}

    def time_point(op: str, k: int) -> None:
        point, count = curves[op][k], calls[op][k]
        for _ in range(blocks):
            seconds[op][k] = min(seconds[op][k], point.run_block(count) / count)

    for _ in range(repeats):
        for op, pts in curves.items():
            for k in range(len(pts)):
                time_point(op, k)
    rates = {}
    for op, pts in curves.items():
        values = [p.bytes_per_call / s for p, s in zip(pts, seconds[op], strict=True)]
        # Another process taking a core for a second sinks a run of points (seen: ten
        # sizes at 1 GB/s inside a 40 GB/s plateau); measure those again.
        for _ in range(2):
            for k in disturbed_points(values):
                time_point(op, k)
                values[k] = pts[k].bytes_per_call / seconds[op][k]
        rates[op] = values
    return rates


def disturbed_points(values: Sequence[float], *, factor: float = 0.75) -> list[int]:
    """Indices of values below ``factor`` x their neighbours on *both* sides (2 per side).

    A bandwidth curve is smooth within a plateau and falls over a few sizes at a cache
    boundary, where the points after the drop are as low as the drop itself. A point far
    below the points before it *and* after it was most likely disturbed.
    """
    flagged = []
    for k, v in enumerate(values):
        sides = [values[max(0, k - 2) : k], values[k + 1 : k + 3]]
        levels = [float(np.mean(side)) for side in sides if side]
        if levels and v < factor * min(levels):
            flagged.append(k)
    return flagged


def bandwidth_curves(
    device: str,
    sizes: Sequence[int],
    *,
    blocks: int,
    repeats: int,
    min_call_bytes: int = PASS_BYTES,
    one_thread_too: bool,
    progress: Callable[[str], None] | None,
) -> dict[str, tuple[tuple[int, float], ...]]:
    """``{op: ((working_set_bytes, bytes_per_s), ...)}`` for :data:`OPS` with torch's
    threads, and again with one thread (``read@1t`` ...) when ``one_thread_too``."""
    n_max = max(sizes) // 4
    src = torch.rand(n_max, device=device)  # random data, never zeros
    dst = torch.zeros(n_max, device=device)  # zeros touches every page before timing
    curves: dict[str, tuple[tuple[int, float], ...]] = {}
    saved = torch.get_num_threads()
    settings = [("", saved)] + ([("@1t", 1)] if one_thread_too else [])
    try:
        for suffix, threads in settings:
            torch.set_num_threads(threads)
            if progress:
                progress(
                    f"bandwidth: {', '.join(OPS)} with {threads} thread(s), {len(sizes)} sizes, "
                    f"best of {repeats} repeats"
                )
            shares = threads if device == "cpu" else 1
            points: dict[str, list[SweepPoint]] = {}
            for op in OPS:
                points[op] = []
                for ws in sizes:
                    passes = passes_for(ws, min_call_bytes)
                    fn, nbytes = op_call(op, src, dst, ws, passes=passes, threads=shares)
                    points[op].append(SweepPoint(ws, nbytes, block_runner(device, fn)))
            rates = best_bandwidths(points, repeats=repeats, blocks=blocks)
            for op in OPS:
                curves[op + suffix] = tuple(zip(sizes, rates[op], strict=True))
    finally:
        torch.set_num_threads(saved)
    return curves
