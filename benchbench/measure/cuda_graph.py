"""CUDA graphs mode: capture K calls once, replay the graph, time per call = replay / K.

A graph replay launches its K kernels with one host call, so the events time the
kernels without the per-call launch overhead of eager PyTorch (the host-side cost of
a tiny op is several microseconds; its kernel may take one). That is what
``triton.testing.do_bench_cudagraph`` and nvbench's graph mode measure, and why a
result so measured is labelled: ``Result.extra["cuda_graph"] = {"calls_per_replay": K}``.

The capture follows the PyTorch documentation (torch.cuda.graph): warm up on a side
stream, then capture inside ``torch.cuda.graph`` (itself on a side stream), then
replay on the current stream. Anything the capture rejects (a synchronize inside the
workload, a host read of a device value, an allocation the graph pool cannot serve)
raises :class:`GraphCaptureError` with torch's reason; the point is then skipped.

Run on an H100 (torch 2.11): within 0.8 % of ``do_bench_cudagraph`` at 2^24 and 2^26
floats, and 1.4 µs against eager's 7-10 µs at 2^10; its logic is unit-tested with a fake
``torch.cuda`` (tests/unit/test_cuda_graph.py).
"""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import repeat
from typing import Any

from benchbench.measure.policy import Measured, Subject

#: K is chosen so that one replay spans about this much device time (an eager call's
#: time, measured with events, tells how many calls that is): long enough that the
#: replay's own launch (~10 µs of host work, per the CUDA graph documentation's
#: figures) is small beside it, short enough to capture quickly.
REPLAY_TARGET_S = 1e-3
#: At most this many calls in one graph (a graph's size grows with its nodes).
MAX_CALLS_PER_REPLAY = 1000
#: Eager calls on the side stream before capture (lazy init, cuBLAS workspaces), and
#: the calls timed with events to choose K.
WARMUP_CALLS = 3
ESTIMATE_CALLS = 10


#: The keys of ``extra`` that :func:`timing_method` reads.
TIMING_KEYS: tuple[str, ...] = ("cuda_graph", "launch_bound")


def timing_method(device: object, extra: Any) -> str | None:
    """How a stored point was timed: ``events``, ``graph x100``, with ``, launch-bound``
    when the host outran the kernels; None for other devices, whose host clock is the
    only clock. ``extra`` is the point's ``Result.extra`` (a dict, or None)."""
    if not str(device or "").startswith("cuda"):
        return None
    extra = extra if isinstance(extra, dict) else {}
    graph = extra.get("cuda_graph")
    method = f"graph x{graph['calls_per_replay']}" if graph else "events"
    return f"{method}, launch-bound" if extra.get("launch_bound") else method


class GraphCaptureError(Exception):
    """The workload cannot be captured in a CUDA graph; the message is torch's reason."""


def graph_mode(
    requested: bool, device: str, inplace: bool, backward: bool = False
) -> tuple[bool, str | None]:
    """(capture a graph?, why a requested graph is not used) for one point."""
    if not requested:
        return False, None
    if not device.startswith("cuda"):
        return False, f"CUDA graph not used: {device} is not a CUDA device"
    if inplace:
        return False, "CUDA graph not used: in-place variants restore inputs between calls"
    if backward:
        return False, "CUDA graph not used: backward modes release gradients between calls"
    return True, None


def calls_per_replay(call_s: float, cold: bool = False) -> int:
    """K for an eager call of ``call_s`` seconds; 1 in ``cold`` mode (each sample's
    single call follows the flush, as without a graph)."""
    if cold:
        return 1
    if not call_s > 0 or not math.isfinite(call_s):
        return MAX_CALLS_PER_REPLAY
    return max(1, min(MAX_CALLS_PER_REPLAY, math.ceil(REPLAY_TARGET_S / call_s)))


def rotating_calls(calls: int, copies: int) -> int:
    """K for a graph of a loop that cycles through ``copies`` input copies: a whole
    number of cycles, at least one. A graph replays exactly the calls it captured, so
    K below the copy count would cycle through K copies only, and a smaller working set
    than ``rotate`` promises (at 2^10 floats and 64 copies, K = 76 on an H100 kept 12
    copies out of every cycle's second pass)."""
    if copies <= 1:
        return calls
    return copies * max(1, math.ceil(calls / copies))


def graph_subject(
    subject: Subject, cuda: Any, cold: bool = False, copies: int = 1
) -> tuple[Subject, int]:
    """``subject`` as a graph of K of its calls: ``(replaying subject, K)``.

    ``cuda`` is ``torch.cuda``. The replaying subject's ``loop(n)`` replays the graph
    ``n`` times (``n * K`` calls); its ``pre`` is the subject's (the cold-cache flush,
    outside the graph). ``copies``: the subject's loop cycles through that many input
    copies (``rotate``), and K is a whole number of cycles (:func:`rotating_calls`).
    Raises :class:`GraphCaptureError` when capture fails.
    """
    loop = subject.loop
    try:
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            loop(WARMUP_CALLS)
        cuda.current_stream().wait_stream(side)
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        loop(ESTIMATE_CALLS)
        end.record()
        cuda.synchronize()
        calls = calls_per_replay(start.elapsed_time(end) * 1e-3 / ESTIMATE_CALLS, cold)
        calls = rotating_calls(calls, copies)
        # The capture starts the cycle where the estimate left it: realign it so that
        # every replay begins at the same copy and covers each copy K / copies times.
        if realign := (-(WARMUP_CALLS + ESTIMATE_CALLS)) % copies:
            loop(realign)
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            loop(calls)
        cuda.synchronize()
    except Exception as exc:
        text = str(exc).strip()
        raise GraphCaptureError(text.splitlines()[0] if text else type(exc).__name__) from exc
    replay = graph.replay

    def replay_loop(n: int) -> None:
        for _ in repeat(None, n):
            replay()

    return Subject(subject.name, replay_loop, subject.pre), calls


def per_call(measured: Measured, calls: int) -> Measured:
    """What the engine measured in replays, counted in calls (K per replay)."""
    faults = measured.minor_faults_per_call
    return replace(
        measured,
        calls_per_sample=measured.calls_per_sample * calls,
        minor_faults_per_call=faults / calls if faults is not None else None,
    )
