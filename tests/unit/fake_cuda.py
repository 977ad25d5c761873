"""A fake GPU that executes asynchronously, standing in for ``torch.cuda``.

The host and the device each have their own time. A launch costs the host
``launch_ns`` and queues a kernel, which starts when the device is free and the host
has launched it; the host waits only when the launch queue is full (``queue_depth``
kernels, ~1,024 on CUDA) or when it synchronizes. An event is stamped when the stream
reaches it, and ``elapsed_time`` refuses an event the device has not reached yet, as
CUDA does ("device not ready"): a timer that reads events without synchronizing
fails here as it would on a GPU. Work put on another stream runs beside the current
one and is seen by ``synchronize()`` but by no event of the current stream.

Used as ``cuda`` by :class:`~benchbench.measure.timers.CudaTimer` and the policy
(with ``gpu.clock`` as the host clock) in tests that would have caught the
asynchronous bugs a CPU-only fake hides.
"""

from __future__ import annotations

from collections import deque
from typing import Any

#: Launches a stream holds before the host blocks (CUDA's launch queue: ~1,024).
QUEUE_DEPTH = 1024
#: The clock ``_sleep`` counts (the H100's SM clock under load).
SLEEP_GHZ = 1.98


class FakeEvent:
    def __init__(self, gpu: FakeGpu, enable_timing: bool = False) -> None:
        self.gpu = gpu
        self.enable_timing = enable_timing
        self.at_ns: float | None = None

    def record(self, stream: Any = None) -> None:
        gpu = self.gpu
        gpu.host_ns += gpu.record_ns
        self.at_ns = max(gpu.device_free_ns, gpu.host_ns)

    def query(self) -> bool:
        return self.at_ns is not None and self.gpu.host_ns >= self.at_ns

    def synchronize(self) -> None:
        assert self.at_ns is not None, "event never recorded"
        self.gpu.host_ns = max(self.gpu.host_ns, self.at_ns)
        self.gpu.retire()

    def elapsed_time(self, end: FakeEvent) -> float:
        """Milliseconds between two reached events; RuntimeError before they are."""
        if not (self.query() and end.query()):
            raise RuntimeError("CUDA error: device not ready")
        assert self.at_ns is not None and end.at_ns is not None
        return (end.at_ns - self.at_ns) / 1e6


class FakeGpu:
    """``torch.cuda``'s timing surface over a host clock and an asynchronous device.

    ``clock()`` is the host's ``perf_counter_ns``; ``launch(kernel_ns)`` is one call of
    a workload; ``side_launch(kernel_ns)`` puts a kernel on another stream.
    """

    def __init__(
        self,
        *,
        launch_ns: float = 5_000,
        sync_ns: float = 10_000,
        record_ns: float = 1_000,
        queue_depth: int = QUEUE_DEPTH,
    ) -> None:
        self.host_ns = 1e9
        self.device_free_ns = 0.0
        self.side_free_ns = 0.0
        self.launch_ns = launch_ns
        self.sync_ns = sync_ns
        self.record_ns = record_ns
        self.queue_depth = queue_depth
        self.pending: deque[float] = deque()  # completion times of queued kernels
        self.launches = 0
        self.synchronizes = 0

    # -- the host's clock and the workload's calls --------------------------------
    def clock(self) -> int:
        self.host_ns += 30
        return int(self.host_ns)

    def retire(self) -> None:
        while self.pending and self.pending[0] <= self.host_ns:
            self.pending.popleft()

    def launch(self, kernel_ns: float) -> None:
        self.host_ns += self.launch_ns
        self.retire()
        if len(self.pending) >= self.queue_depth:  # the queue is full: the host waits
            self.host_ns = max(self.host_ns, self.pending[0])
            self.retire()
        start = max(self.device_free_ns, self.host_ns)
        self.device_free_ns = start + kernel_ns
        self.pending.append(self.device_free_ns)
        self.launches += 1

    def side_launch(self, kernel_ns: float) -> None:
        """A kernel on another stream: overlaps the current stream's work."""
        self.host_ns += self.launch_ns
        start = max(self.side_free_ns, self.host_ns)
        self.side_free_ns = start + kernel_ns

    # -- torch.cuda ------------------------------------------------------------------
    def Event(self, enable_timing: bool = False) -> FakeEvent:
        return FakeEvent(self, enable_timing)

    def synchronize(self, device: Any = None) -> None:
        self.host_ns = max(self.host_ns, self.device_free_ns, self.side_free_ns) + self.sync_ns
        self.pending.clear()
        self.synchronizes += 1

    def is_available(self) -> bool:
        return True

    def _sleep(self, cycles: int) -> None:
        """``torch.cuda._sleep``: a kernel that spins ``cycles`` of a 1.98 GHz clock."""
        self.launch(cycles / SLEEP_GHZ)
