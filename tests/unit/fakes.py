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
