"""CUDA side of the hardware probe: event-timed blocks, transfers, launch and sync latency.

Run on an H100 in ``--quick`` mode (BENCHMARKS.md, GPU acceptance). Written from the
PyTorch documentation (``torch.cuda.Event(enable_timing=True)``, ``Event.record``,
``Event.elapsed_time`` in milliseconds, ``torch.cuda.synchronize``, ``torch.empty(...,
pin_memory=True)``, ``Tensor.copy_(src, non_blocking=True)``); its arithmetic (bytes and
event milliseconds to bytes/s, calls per block) is tested with an injected fake
``torch``-like object whose device clock advances by a known amount per operation.

Everything takes the ``torch`` module (or a stand-in) as an argument, so nothing here
imports torch at module load, and ROCm builds (which expose ``torch.cuda``) work alike.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "MIN_BLOCK_S",
    "best_seconds_per_call",
    "calls_per_block",
    "cuda_block_runner",
    "measure_cuda_extras",
]

# Events resolve about 0.5 µs; a 1 ms block keeps that under 0.1 % of the reading.
MIN_BLOCK_S = 1e-3
_MAX_CALLS = 1 << 20


def best_seconds_per_call(
    run_block: Callable[[int], float], *, blocks: int, min_block_s: float = MIN_BLOCK_S
) -> float:
    """Best time per call: grow calls per block until a block takes ``min_block_s``.

    ``run_block(k)`` runs ``k`` calls and returns their elapsed seconds (host clock on
    the CPU, event pair on CUDA). Doubling ``k`` doubles as warm-up; then ``blocks``
    blocks of ``k`` calls are timed and the fastest per-call time is returned, the
    ceiling being what the machine can attain, not what it usually does.
    """
    calls = calls_per_block(run_block, min_block_s)
    best = math.inf
    for _ in range(blocks):
        best = min(best, run_block(calls) / calls)
    return best


def calls_per_block(run_block: Callable[[int], float], min_block_s: float = MIN_BLOCK_S) -> int:
    """Calls that make one block of ``run_block`` last ``min_block_s``: 1, 2, 4, ... calls
    are run until one block is long enough (the doubling doubles as warm-up)."""
    calls = 1
    elapsed = run_block(calls)
    while elapsed < min_block_s and calls < _MAX_CALLS:
        calls *= 2
        elapsed = run_block(calls)
    return calls


def cuda_block_runner(
    cuda: Any, fn: Callable[[], object], device: Any = None
) -> Callable[[int], float]:
    """A ``run_block`` for :func:`best_seconds_per_call` timed with a CUDA event pair.

    ``cuda`` is ``torch.cuda`` (or a stand-in). One synchronize of ``device`` (None: the
    current one) per block, after the end event, as the design asks: the calls queue
    back to back on the stream. The events go on the current device's current stream:
    run it inside ``torch.cuda.device(device)``.
    """

    def run_block(calls: int) -> float:
        start = cuda.Event(enable_timing=True)
        end = cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        cuda.synchronize(device)
        return float(start.elapsed_time(end)) / 1e3  # elapsed_time is in milliseconds

    return run_block


def measure_cuda_extras(
    torch_mod: Any,
    *,
    device: str = "cuda",
    quick: bool = False,
    clock_ns: Callable[[], int] = time.perf_counter_ns,
    progress: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Host↔device bandwidth (pinned, pageable), launch latency and sync latency.

    Returns ``{"h2d_pinned_bytes_per_s", "h2d_pageable_bytes_per_s",
    "d2h_pinned_bytes_per_s", "d2h_pageable_bytes_per_s", "launch_latency_s",
    "sync_latency_s"}`` of ``device`` (``cuda:1`` probes GPU 1: its tensors, its
    current stream for the events, its synchronize). Transfers move 256 MiB (16 MiB
    when ``quick``), large enough that the ~10 µs fixed cost of a copy is under 0.1 % of
    it at 25 GB/s.
    """
    scope = getattr(torch_mod.cuda, "device", None)
    with scope(torch_mod.device(device)) if scope is not None else contextlib.nullcontext():
        return _cuda_extras(torch_mod, device, quick, clock_ns, progress)


def _cuda_extras(
    torch_mod: Any,
    device: str,
    quick: bool,
    clock_ns: Callable[[], int],
    progress: Callable[[str], None] | None,
) -> dict[str, float]:
    cuda = torch_mod.cuda
    blocks = 2 if quick else 5
    nbytes = (16 if quick else 256) << 20
    out: dict[str, float] = {}
    on_device = torch_mod.empty(nbytes, dtype=torch_mod.uint8, device=device)
    for kind, pinned in (("pinned", True), ("pageable", False)):
        host = torch_mod.empty(nbytes, dtype=torch_mod.uint8, pin_memory=pinned)
        host.fill_(1)  # touch the pages so first-touch faults stay out of the timing
        if progress:
            progress(f"cuda: host<->device copies, {kind} memory")

        def h2d(host: Any = host) -> None:
            on_device.copy_(host, non_blocking=True)

        def d2h(host: Any = host) -> None:
            host.copy_(on_device, non_blocking=True)

        for name, fn in (("h2d", h2d), ("d2h", d2h)):
            seconds = best_seconds_per_call(cuda_block_runner(cuda, fn, device), blocks=blocks)
            out[f"{name}_{kind}_bytes_per_s"] = nbytes / seconds

    if progress:
        progress("cuda: launch and synchronize latency")
    tiny = torch_mod.empty(1, dtype=torch_mod.float32, device=device)
    # A one-element add is the cheapest real kernel: its event-timed cost per call, with
    # hundreds queued back to back, is the launch-to-launch latency of the stream.
    out["launch_latency_s"] = best_seconds_per_call(
        cuda_block_runner(cuda, lambda: tiny.add_(1.0), device), blocks=blocks
    )
    cuda.synchronize(device)
    sync_ns = []
    for _ in range(20 if quick else 200):
        begin = clock_ns()
        cuda.synchronize(device)
        sync_ns.append(clock_ns() - begin)
    out["sync_latency_s"] = sorted(sync_ns)[len(sync_ns) // 2] / 1e9
    return out
