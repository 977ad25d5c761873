"""Peak memory of one call of a point, per device (measured once, untimed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.profiler import profile

from benchbench.measure.inplace import fresh as _fresh
from benchbench.measure.trace import quiet_native_output


def peak_memory(
    fn: Callable[..., Any], inputs: tuple[Any, ...], device: str, inplace: bool
) -> int | None:
    """Peak bytes allocated by one call, above what the inputs already hold.

    CUDA: ``torch.cuda.max_memory_allocated(device)`` around one call, the point's
    device named in every call (not the current one). CPU: the largest
    running total of the CPU allocator's allocations during one call, from
    ``torch.profiler`` memory events (tensors only: NumPy and Python objects are not
    seen). MPS: ``torch.mps.driver_allocated_memory`` before and after (no peak).
    """
    args = _fresh(inputs) if inplace else inputs
    kind = device.partition(":")[0]
    if kind == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn(*args)
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - base)
    if kind == "mps":
        before = torch.mps.driver_allocated_memory()
        out = fn(*args)
        torch.mps.synchronize()
        after = torch.mps.driver_allocated_memory()
        del out
        return max(0, int(after - before))
    return cpu_peak_memory(fn, args)


def cpu_peak_memory(fn: Callable[..., Any], args: tuple[Any, ...]) -> int | None:
    # Allocations are attributed to the op that made them (self memory), frees are
    # "[memory]" events with negative sizes; their running sum in time order peaks
    # at the call's high-water mark. The profiler's native start/stop lines are
    # silenced. The autograd profiler (Kineto, as ``torch.profiler`` uses) costs ~8 ms a
    # call; ``torch.profiler.profile`` would import ``torch._inductor`` on its first use
    # (~2.3 s a process: ``prepare_trace`` asks ``hasattr(torch, "_inductor")``).
    with (
        quiet_native_output(),
        profile(use_cpu=True, use_kineto=True, profile_memory=True) as prof,
    ):
        out = fn(*args)
        del out
    events = [e for e in prof.function_events if e.self_cpu_memory_usage]
    events.sort(key=lambda e: e.time_range.start)
    running = peak = 0
    for event in events:
        running += event.self_cpu_memory_usage
        peak = max(peak, running)
    return int(peak)
