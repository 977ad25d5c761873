"""A virtual machine for engine tests: a clock that only moves when work is done."""

from __future__ import annotations

import random


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
