"""``run --profile``: a ``torch.profiler`` trace of one point, taken after its timing.

Runs in the worker, after :func:`benchbench.measure.point.measure_point` has timed the
point (never inside the timed region: the profiler adds ~µs per op).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from torch.profiler import ProfilerActivity, profile

from benchbench.core.values import Point
from benchbench.measure.pipeline import sync

#: A profile covers at least this many calls of the point, or this much time.
PROFILE_MIN_CALLS = 10
PROFILE_MIN_S = 0.2
PROFILE_TOP = 10


@contextlib.contextmanager
def quiet_native_output() -> Iterator[None]:
    """Send fds 1 and 2 to /dev/null: the profiler's native start/stop lines go there."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def profile_point(
    fn: Callable[..., Any], args: tuple[Any, ...], point: Point, folder: str
) -> dict[str, Any]:
    """Profile calls of ``fn(*args)`` with ``torch.profiler``, after the timed measurement.

    ``args`` are called as given (pass fresh copies for an in-place variant). Writes a
    Chrome trace (``chrome://tracing``, Perfetto) to ``folder/<label>.json`` and returns
    its path with the top operators by self time. On CUDA the profiler also records
    device activity and the device is synchronized before the profile closes: CPU-side
    times of asynchronous CUDA calls measure the launch, not the kernel (the kernel's
    time is ``self_device_s``).
    """
    kind = point.device.partition(":")[0]
    activities = [ProfilerActivity.CPU]
    if kind == "cuda":
        activities.append(ProfilerActivity.CUDA)
    calls = 0
    with quiet_native_output(), profile(activities=activities) as prof:
        started = time.perf_counter()
        while calls < PROFILE_MIN_CALLS or time.perf_counter() - started < PROFILE_MIN_S:
            fn(*args)
            calls += 1
            if calls >= 10_000:
                break
        sync(point.device)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, profile_file_name(point))
    prof.export_chrome_trace(path)
    averages = list(prof.key_averages())
    averages.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    top = [
        {
            "name": e.key,
            "calls": int(e.count),
            "self_cpu_s": e.self_cpu_time_total * 1e-6,
            "self_device_s": getattr(e, "self_device_time_total", 0.0) * 1e-6,
        }
        for e in averages[:PROFILE_TOP]
    ]
    return {"trace": os.path.abspath(path), "calls": calls, "top": top}


def profile_file_name(point: Point) -> str:
    """A file name for the point's trace: its label with unsafe characters replaced."""
    safe = "".join(c if c.isalnum() or c in "._=-" else "_" for c in point.label)
    return f"{safe[:150]}-{point.benchmark_id()[:8]}.json"
