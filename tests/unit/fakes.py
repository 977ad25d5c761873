"""Fakes for engine tests: a virtual machine whose clock only moves when work is done,
a timer that logs its blocks, a stepping clock and a short policy."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from benchbench.measure.policy import Block, Policy
from tests.unit.fake_cuda import FakeGpu

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


class BusyClockNvml:
    """NVML on fakes for one GPU per UUID, whose SM clock follows a
    :class:`tests.unit.fake_cuda.FakeGpu`: ``load_mhz`` while its device still has work
    at the host's present, ``idle_mhz`` with the ``gpu_idle`` reason (0x1) otherwise, as
    an H100 read (345 MHz idle, 1980 under load). ``uuids`` are NVML's (``"GPU-..."``)
    in NVML's order."""

    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(
        self,
        gpu: FakeGpu | None = None,
        uuids: Sequence[str] = ("GPU-0000",),
        *,
        load_mhz: int = 1980,
        idle_mhz: int = 345,
        app_mhz: int = 1980,
        reasons: int = 0,
    ) -> None:
        self.gpu = gpu
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
        return self.gpu is not None and self.gpu.host_ns < self.gpu.device_free_ns

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        self.reads.append("busy" if self._busy() else "idle")
        return self.load_mhz if self._busy() else self.idle_mhz

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self.reasons | (0 if self._busy() else 0x1)
