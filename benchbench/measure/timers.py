"""Clocks and synchronisation per device, chosen per point from where inputs live.

- CPU: ``time.perf_counter_ns`` around a block of calls.
- CUDA (and ROCm through the same interface): a pair of
  ``torch.cuda.Event(enable_timing=True)`` per sample, one ``synchronize`` per batch
  of samples; the host time each sample took to enqueue is recorded beside it (the
  launch-bound test in :mod:`benchbench.measure.gpu`).
- MPS: ``torch.mps.synchronize()`` before and after a host-timed block (MPS events
  are not reliable for timing); its own overhead is measured on that bracket around
  an empty block, which is what calibration must dwarf.

The CPU and CUDA paths have run on real hardware (the CUDA one on an H100 with torch
2.11: within 0.2 % of a hand-written event loop and of triton's ``do_bench``;
BENCHMARKS.md, GPU acceptance); the MPS path is written from the PyTorch documentation
and its logic is unit-tested with injected fakes (tests/unit/test_devices.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

from benchbench.machine.caches import cpu_cache_sizes
from benchbench.measure.policy import Block

#: Last-level cache assumed when the OS does not say (bytes).
DEFAULT_LLC_BYTES = 32 * 2**20


def unavailable_reason(device: str, torch: Any) -> str | None:
    """Why ``device`` cannot run here, or None when it can."""
    kind, _, index = device.partition(":")
    if kind == "cpu":
        return None
    if kind == "cuda":
        if not torch.cuda.is_available():
            return "CUDA is not available"
        count = torch.cuda.device_count()
        if index and int(index) >= count:
            present = ", ".join(f"cuda:{i}" for i in range(count)) or "none"
            return (
                f"CUDA device {device} does not exist: this machine has {count} "
                f"(present: {present}); choose one of them with --device"
            )
        return None
    if kind == "mps":
        backend = torch.backends.mps
        if not backend.is_built():
            return "MPS is not available: this PyTorch was not built with MPS"
        if not backend.is_available():
            return "MPS is not available: no MPS device (needs macOS 12.3+ on Apple silicon)"
        return None
    return f"unknown device {device!r}"


class CpuTimer:
    """Host clock around each block; nothing to synchronise."""

    name = "perf_counter_ns"

    def __init__(self, clock: Any = time.perf_counter_ns) -> None:
        self._clock = clock

    def sync(self) -> None:
        return None

    def measure(self, blocks: Sequence[Block]) -> list[float]:
        clock = self._clock
        out: list[float] = []
        for block in blocks:
            if block.pre is not None:
                block.pre()
            t0 = clock()
            block.loop(block.calls)
            t1 = clock()
            out.append((t1 - t0) * 1e-9)
        return out


def device_scope(device: str, torch: Any) -> contextlib.AbstractContextManager[Any]:
    """``torch.cuda.device(...)`` for a CUDA ``device``, so that every CUDA call of a
    point (allocations, events, streams) lands on the point's device, not on device 0;
    a do-nothing context elsewhere, and for a device :func:`unavailable_reason` rejects
    (the point is skipped with that reason)."""
    if device.partition(":")[0] == "cuda" and unavailable_reason(device, torch) is None:
        return torch.cuda.device(torch.device(device))
    return contextlib.nullcontext()


class CudaTimer:
    """CUDA event pairs per block, one synchronize per batch.

    ``cuda`` is ``torch.cuda`` (injected so the logic is testable without a GPU);
    ``device`` the point's device: the events are recorded on its current stream
    (run the timer inside :func:`device_scope`) and the batch synchronizes that device.
    ``host_block_s`` keeps, per block of the last batch, the host seconds from just
    before its start event to just after its end event: what the host spent
    launching the block's calls. The engine stores it beside the event times.
    ``before_sync`` (None, or the clock guard's ``note``) runs once the batch is queued
    and before its synchronize, while the GPU still runs it.
    """

    name = "cuda-events"

    def __init__(self, cuda: Any, clock: Any = time.perf_counter_ns, device: Any = None) -> None:
        self._cuda = cuda
        self._clock = clock
        self._device = device
        self.host_block_s: list[float] = []
        self.before_sync: Any = None

    def sync(self) -> None:
        self._cuda.synchronize(self._device)

    def measure(self, blocks: Sequence[Block]) -> list[float]:
        pairs = []
        host: list[float] = []
        clock = self._clock
        for block in blocks:
            if block.pre is not None:
                block.pre()  # enqueued before the start event: outside the timed region
            start = self._cuda.Event(enable_timing=True)
            end = self._cuda.Event(enable_timing=True)
            t0 = clock()
            start.record()
            block.loop(block.calls)
            end.record()
            host.append((clock() - t0) * 1e-9)
            pairs.append((start, end))
        if self.before_sync is not None:
            self.before_sync()
        self._cuda.synchronize(self._device)
        self.host_block_s = host
        # elapsed_time is in milliseconds.
        return [start.elapsed_time(end) * 1e-3 for start, end in pairs]


class MpsTimer:
    """Host clock around each block with ``torch.mps.synchronize()`` on both sides."""

    name = "mps-sync+perf_counter_ns"

    def __init__(self, mps: Any, clock: Any = time.perf_counter_ns) -> None:
        self._mps = mps
        self._clock = clock

    def sync(self) -> None:
        self._mps.synchronize()

    def overhead_s(self, pairs: int = 50) -> float:
        """Smallest time of an empty block through :meth:`measure`: two synchronizes
        and two clock reads, the floor under every MPS sample (calibration makes
        samples 1000x longer)."""
        empty = Block(_no_calls, 0)
        return max(0.0, min(self.measure([empty])[0] for _ in range(pairs)))

    def measure(self, blocks: Sequence[Block]) -> list[float]:
        out: list[float] = []
        for block in blocks:
            if block.pre is not None:
                block.pre()
            self._mps.synchronize()
            t0 = self._clock()
            block.loop(block.calls)
            self._mps.synchronize()
            out.append((self._clock() - t0) * 1e-9)
        return out


def _no_calls(calls: int) -> None:
    return None


def timer_for(device: str, torch: Any) -> CpuTimer | CudaTimer | MpsTimer:
    """The timer for a point whose inputs live on ``device``."""
    kind = device.partition(":")[0]
    if kind == "cuda":
        return CudaTimer(torch.cuda, device=torch.device(device))
    if kind == "mps":
        return MpsTimer(torch.mps)
    return CpuTimer()


def device_of(inputs: Sequence[Any], torch: Any) -> str:
    """Where the inputs live: the first tensor's device, else ``cpu``."""
    for value in inputs:
        if isinstance(value, torch.Tensor):
            return str(value.device)
    return "cpu"


def last_level_cache_bytes(device: str, torch: Any) -> int:
    """Size of the cache a ``cold`` sample must evict: the CPU's LLC or the GPU's L2."""
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return int(getattr(props, "L2_cache_size", 0)) or 8 * 2**20
    sizes = cpu_cache_sizes()
    return max(sizes.values()) if sizes else DEFAULT_LLC_BYTES


def cache_flusher(device: str, torch: Any) -> Any:
    """A callable that writes over a buffer of 2x the last-level cache on ``device``.

    Run before each sample in ``cold`` mode, outside the timed region.
    """
    nbytes = 2 * last_level_cache_bytes(device, torch)
    buffer = torch.empty(nbytes // 8, dtype=torch.int64, device=device)

    def flush() -> None:
        buffer.add_(1)

    return flush
