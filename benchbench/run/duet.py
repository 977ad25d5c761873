"""``ab --duet``: both sides sample at the same moment, each on a core of its own.

Lockstep (:mod:`benchbench.run.lockstep`) lets one side sample at a time, so a round's
sampling takes the two sides' time one after the other. Duet (Bulej et al., "Duet
Benchmarking", ICPE 2020) runs the two sides' blocks at the same moment, each pinned
to its own core: whatever slows the machine during a block (a frequency step, another
process's memory traffic) meets both sides, and the two sides' sampling overlaps.

It needs two cores that nothing else uses. Beside a busy neighbour on a two-core
machine one side would share its core and the other would not: noise that pairing
cannot cancel. So before measuring, other processes' use of the two cores is read over
:data:`IDLE_CHECK_S`; when it reaches a quarter of a core
(:func:`benchbench.machine.cpus.idle_cores`), ``ab`` measures in lockstep instead and
says why. The check is taken once: a neighbour that starts later meets the duet.

On a 2-core VM duet was as sound and as powerful as lockstep and 3 % faster at the
default budget, since a round's time there is its fresh zygotes and workers more than
its sampling (BENCHMARKS.md, "``ab --duet`` against lockstep"): lockstep stays the
default.

The sides swap cores every round (each round's zygotes are pinned before they import
torch, and their forks inherit it): a core that runs faster, or takes the machine's
interrupts, favours each side in half the rounds, so the test paired by round sees it
as noise, not as a difference between the sides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchbench.core.errors import UsageError
from benchbench.machine.cpus import format_cpus, idle_cores, usable_cpus
from benchbench.run.workers import Zygote

#: Seconds over which other processes' use of the duet's two cores is read before ``ab``
#: starts (psutil's per-core CPU percent is a delta over it). Beside a neighbour busy and
#: idle in phases of 0.1-1.5 s, a 1 s window granted duet in 15 of 30 checks, a 3 s one in
#: 4 of 25; quiet, both granted it every time (BENCHMARKS.md, "``ab --duet`` against
#: lockstep").
IDLE_CHECK_S = 3.0

#: Per-core CPU use in percent over a window of the given seconds (psutil's by default).
Usage = Callable[[float], Sequence[float]]


@dataclass(frozen=True)
class Pairing:
    """How ``ab`` pairs the sides' blocks: ``cores`` is the duet's two cores (None:
    lockstep), ``note`` what a user reads about it."""

    cores: tuple[int, int] | None
    note: str

    @property
    def name(self) -> str:
        return "duet" if self.cores else "lockstep"


def check_threads(threads: int | None) -> None:
    """A usage error unless each side's torch can run on one core (``--threads 1``, the
    default, or ``all``: one per pinned core)."""
    if threads is not None and threads > 1:
        raise UsageError(
            f"--duet gives each side one core, so --threads must be 1, got {threads}: "
            "drop --threads or --duet"
        )


def choose(usage: Usage | None = None, cpus: Sequence[int] | None = None) -> Pairing:
    """Duet on the last two cores this process may use when other processes left both
    idle over :data:`IDLE_CHECK_S`; lockstep, with the reason, when they did not."""
    usable = tuple(cpus) if cpus is not None else usable_cpus()
    if len(usable) < 2:
        where = "--cpus names" if cpus is not None else "this process may use"
        return Pairing(None, f"lockstep, not duet: {where} one core, and duet needs two")
    cores = (usable[-2], usable[-1])
    percent = (usage or _cpu_percent)(IDLE_CHECK_S)
    others = sum(percent[c] for c in cores if c < len(percent)) / 100
    named = format_cpus(cores)
    if idle_cores(2, others) < 2:
        return Pairing(
            None,
            f"lockstep, not duet: other processes used {others:.1f} of cores {named} over "
            f"{IDLE_CHECK_S:g} s, and a side sharing its core is noise the pairing cannot "
            "cancel; lockstep lets a neighbour slow both sides alike",
        )
    return Pairing(
        cores, f"duet: base and head sample at the same moment on cores {named}, swapped each round"
    )


class Alternating:
    """A side's zygote factory under duet: its n-th zygote is pinned to
    ``cores[(side + n) % 2]``, so the two sides, renewed once a round each, swap cores
    every round and never share one."""

    def __init__(self, make: Callable[..., Zygote], side: int, cores: tuple[int, int]) -> None:
        self.make, self.side, self.cores = make, side, cores
        self.launches = 0

    def __call__(self) -> Zygote:
        core = self.cores[(self.side + self.launches) % 2]
        self.launches += 1
        return self.make(cpus=(core,))


def _cpu_percent(window_s: float) -> Sequence[float]:
    import psutil

    percent: list[float] = psutil.cpu_percent(interval=window_s, percpu=True)
    return percent
