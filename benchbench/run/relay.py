"""``ab``'s next round's zygotes started while this round measures, on the idle core.

Every round of ``ab`` draws fresh zygotes, one a side (:meth:`WorkerPool.renew
<benchbench.run.pool.WorkerPool.renew>`: every fork of one zygote shares its layout). A
zygote imports torch before it can fork: ~2.5 s of one core. Started when the round
begins, the two imports are a wait in which nothing is measured.

In lockstep only one side samples at a time, so one core measures and the other is
idle. A :class:`Relay` starts the next round's zygotes there while the round measures,
one after the other (the second once the first has imported torch, checked between
visits), and the next round takes them ready. What has not started when the round ends
starts then, both sides at once, as without a relay. The layouts are as fresh as
before (one zygote a side and round, started in a seeded random order); the round's
samples meet one importing process on the other core, on both sides alike, as they
meet a neighbour. Duet uses both cores, and ``--cpus`` names the cores to use: neither
gets a relay (:func:`spare_core`).

What it bought on a 2-core VM (BENCHMARKS.md, "The next round's zygotes on the idle
core"): a 20-point round took 7.5-8.4 s instead of 9.8-10.6 s (an ``ab`` at 20 rounds
194 s instead of 236 s); a round that measures for less than two imports (10 points
there) takes as long as before, but its paired ratios scattered less (the interval
±4.5 % against ±6.5-6.8 %, identical code clean in 10 of 10 pairs).

The zygotes are started by the run's main thread: a zygote dies with the thread that
started it (its parent-death signal), so a helper thread could not start them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from benchbench.run.workers import Spawner, Zygote

Launcher = Zygote | Spawner


def spare_core(cpus: Sequence[int], duet: bool) -> bool:
    """Whether ``ab`` has a core that no side measures on: lockstep (not ``duet``), no
    ``--cpus`` (``cpus`` empty), and at least two cores usable by this process."""
    return not duet and not cpus and len(os.sched_getaffinity(0)) >= 2


class Relay:
    """Each side's next zygote, started ahead by :meth:`prepare` and :meth:`advance` and
    handed over by :meth:`take` (a pool's ``relaunch``); ``makers[k]`` starts side k's."""

    def __init__(self, makers: Sequence[Callable[[], Launcher]]) -> None:
        self._makers = list(makers)
        self._ahead: dict[int, Launcher] = {}
        self._queue: list[int] = []

    def prepare(self, order: Sequence[int]) -> None:
        """Queue the sides' next zygotes in ``order`` and start the first of them."""
        self._queue = [side for side in order if side not in self._ahead]
        self.advance()

    def advance(self) -> None:
        """Start the next queued zygote once those started ahead are past their import
        (one import at a time; never waits)."""
        while self._queue and all(launcher.poll_ready() for launcher in self._ahead.values()):
            side = self._queue.pop(0)
            self._ahead[side] = self._makers[side]()

    def take(self, side: int) -> Launcher:
        """Side ``side``'s next zygote: the one started ahead (ready or importing), or one
        started now. The round has ended: nothing more is started ahead."""
        self._queue.clear()
        launcher = self._ahead.pop(side, None)
        return launcher if launcher is not None else self._makers[side]()

    def close(self) -> None:
        """End the zygotes started ahead and not taken (the run stopped or failed)."""
        self._queue.clear()
        for launcher in self._ahead.values():
            launcher.close()
        self._ahead.clear()
