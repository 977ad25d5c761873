"""Fakes for engine tests: a virtual machine whose clock only moves when work is done,
a timer that logs its blocks, a stepping clock and a short policy."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from benchbench.measure.policy import Block, Policy

#: What a fake call costs on :class:`LoggingTimer`: 0.25 ms.
CALL_S = 250e-6

# Short everything: tests using it check what is answered, never how fast anything is.
FAST = Policy(
    max_time_s=0.01,
    min_time_s=0.0,
    min_samples=3,
    min_sample_s=1e-5,
    warmup_min_calls=1,
    warmup_min_s=0.0,
    warmup_max_s=0.01,
)


class LoggingTimer:
    """Marks where each timed block starts and stops; each call 'takes' ``CALL_S``."""

    name = "fake"

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def sync(self) -> None:
        return None

    def measure(self, blocks: Sequence[Block]) -> list[float]:
        out = []
        for block in blocks:
            if block.pre is not None:
                block.pre()
            self.events.append("start")
            block.loop(block.calls)
            self.events.append("stop")
            out.append(block.calls * CALL_S)
        return out


def stepping_clock() -> Callable[[], int]:
    """A nanosecond clock that moves 1 ms per read: the policy's budgets pass quickly."""
    now = [0]

    def clock() -> int:
        now[0] += 1_000_000
        return now[0]

    return clock


class VirtualMachine:
    """``clock()`` reads virtual nanoseconds; ``loop(n)`` spends ``n * cost`` of them.

    ``resolution_ns`` quantises what the clock shows (a coarse timer); ``jumps`` is a
    probability of the shown clock leaping by up to +-50 ms (a clock that jumps);
    ``noise`` is the relative spread of each call's cost.
    """

    def __init__(
        self,
        cost_ns: float,
        *,
        noise: float = 0.0,
        resolution_ns: int = 1,
        jumps: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.now_ns = 1_000_000_000.0
        self.cost_ns = cost_ns
        self.noise = noise
        self.resolution_ns = resolution_ns
        self.jumps = jumps
        self.rng = random.Random(seed)
        self.calls = 0
        self.clock_reads = 0

    def clock(self) -> int:
        self.clock_reads += 1
        self.now_ns += 30  # reading the clock costs time too
        shown = int(self.now_ns // self.resolution_ns * self.resolution_ns)
        if self.jumps and self.rng.random() < self.jumps:
            shown += self.rng.randint(-50_000_000, 50_000_000)
        return shown

    def loop(self, n: int) -> None:
        for _ in range(min(n, 1)):
            pass
        spread = 1.0 + (self.rng.gauss(0.0, self.noise) if self.noise else 0.0)
        self.now_ns += n * self.cost_ns * max(spread, 0.05)
        self.calls += n


class AsyncCuda:
    """A ``torch.cuda`` stand-in whose device runs queued work only when it gets to it.

    ``launch(seconds)`` queues a kernel and returns at once, as a CUDA launch does;
    ``Event.record()`` queues a marker. The device runs the queue in order, advancing
    ``device_s``, only when ``synchronize()`` (or ``Event.synchronize()``) waits for it,
    or ``run()`` lets it catch up. ``Event.elapsed_time`` raises, as CUDA does ("device
    not ready"), unless both events have completed; a timer that reads events before
    the work ran is caught. ``busy`` is True while work is queued: the NVML fakes read a
    load clock then and an idle one after a synchronize, as an H100 did (345 MHz idle,
    1980 under load). ``side`` queues work on another stream: the device runs it but
    no event of the timed stream spans it.
    """

    def __init__(self) -> None:
        self.device_s = 0.0
        self.queue: list[tuple[str, object]] = []
        self.synchronizes = 0
        self.log: list[str] = []

    # -- the work ------------------------------------------------------------------
    def launch(self, seconds: float) -> None:
        self.queue.append(("kernel", seconds))

    def side(self, seconds: float) -> None:
        self.queue.append(("side", seconds))

    @property
    def busy(self) -> bool:
        return any(kind != "event" for kind, _ in self.queue)

    def run(self) -> None:
        """The device catches up with everything queued so far."""
        for kind, item in self.queue:
            if kind == "event":
                item.done_at = self.device_s  # type: ignore[attr-defined]
            elif kind == "kernel":
                self.device_s += float(item)  # type: ignore[arg-type]
            # "side" work runs concurrently on another stream: no time on this one.
        self.queue.clear()

    # -- torch.cuda ----------------------------------------------------------------
    def synchronize(self, device: object = None) -> None:
        self.synchronizes += 1
        self.log.append("sync")
        self.run()

    def Event(self, enable_timing: bool = False) -> AsyncEvent:
        assert enable_timing
        return AsyncEvent(self)


class AsyncEvent:
    """An event of :class:`AsyncCuda`: complete once the device ran up to it."""

    def __init__(self, cuda: AsyncCuda) -> None:
        self.cuda = cuda
        self.done_at: float | None = None

    def record(self, stream: object = None) -> None:
        self.done_at = None
        self.cuda.queue.append(("event", self))
        self.cuda.log.append("record")

    def query(self) -> bool:
        return self.done_at is not None

    def synchronize(self) -> None:
        self.cuda.run()

    def elapsed_time(self, end: AsyncEvent) -> float:
        if self.done_at is None or end.done_at is None:
            raise RuntimeError("CUDA error: device not ready")
        return (end.done_at - self.done_at) * 1e3  # milliseconds, as torch returns


class BusyClockNvml:
    """NVML on fakes for one GPU per UUID, whose SM clock follows an :class:`AsyncCuda`:
    ``load_mhz`` while it has work queued, ``idle_mhz`` with the ``gpu_idle`` reason
    (0x1) otherwise. ``uuids`` are NVML's (``"GPU-..."``) in NVML's order."""

    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(
        self,
        cuda: AsyncCuda | None = None,
        uuids: Sequence[str] = ("GPU-0000",),
        *,
        load_mhz: int = 1980,
        idle_mhz: int = 345,
        app_mhz: int = 1980,
        reasons: int = 0,
    ) -> None:
        self.cuda = cuda
        self.uuids = list(uuids)
        self.load_mhz, self.idle_mhz, self.app_mhz = load_mhz, idle_mhz, app_mhz
        self.reasons = reasons
        self.reads: list[str] = []
        self.log: list[tuple[str, int, int]] = []

    def nvmlDeviceGetCount(self) -> int:
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        if uuid not in self.uuids:
            raise LookupError(f"NVML_ERROR_NOT_FOUND: {uuid}")
        return self.uuids.index(uuid)

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self.uuids[handle]

    def nvmlDeviceGetApplicationsClock(self, handle: int, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return self.app_mhz

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: int, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return self.app_mhz

    def _busy(self) -> bool:
        return self.cuda is not None and self.cuda.busy

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        self.reads.append("busy" if self._busy() else "idle")
        return self.load_mhz if self._busy() else self.idle_mhz

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self.reasons | (0 if self._busy() else 0x1)
