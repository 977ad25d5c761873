"""Which CPU cores the workers use, and how many of them other processes left idle.

``--cpus 0,2-3`` pins the worker processes to those cores (:func:`parse_cpus` reads the
kernel's list notation, :func:`pin` applies it with ``os.sched_setaffinity``); a pinned
worker's default torch thread count is the number of its cores.

Threads and idle cores: an intra-op parallel region ends when its last thread does, so
on a busy machine a region with more threads than idle cores waits for a descheduled
thread. ``torch.softmax`` over 2^12 float32 values took 7.58 ms with torch's default 2
threads and 3.21 µs with one on our loaded 2-core machine: one scheduler slice (a few
ms) lost per call. The rule (:func:`idle_cores`): other processes' CPU use on the
worker's cores, in cores (100 % of one core = 1.0), takes a core away for every
started core beyond the first :data:`TOLERATED_OTHERS_CORES`; what is left is idle. A
point whose threads exceed that count gets a warning (:func:`threads_warning`), ``run``
measures that process again later in its round (``benchbench.run.processes``), and
``benchbench doctor`` applies the same rule to the machine's load. Workers use one
thread unless ``--threads`` says otherwise.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Sequence

from benchbench.core.errors import UsageError

#: Other processes' use of a core below this share leaves it idle; at or above it the core
#: counts as taken: a thread sharing its core a quarter of the time is descheduled often
#: enough that every parallel region of a few µs meets it.
TOLERATED_OTHERS_CORES = 0.25


def usable_cpus() -> tuple[int, ...]:
    """The cores this process may run on (its affinity), or every core where it is unknown."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        return tuple(sorted(getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def format_cpus(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``'0-2,5'``, the kernel's own notation (``taskset -c``)."""
    ordered = sorted(set(cpus))
    if not ordered:
        return ""
    ranges: list[str] = []
    start = prev = ordered[0]
    for cpu in [*ordered[1:], None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if cpu is not None:
            start = prev = cpu
    return ",".join(ranges)


def parse_cpus(
    text: str, usable: Sequence[int] | None = None, flag: str = "--cpus"
) -> tuple[int, ...]:
    """``'0,2-3'`` -> ``(0, 2, 3)``; UsageError for a malformed list or a core not in ``usable``.

    ``usable`` defaults to :func:`usable_cpus` (the cores this process may run on). A
    platform without ``os.sched_setaffinity`` (macOS) cannot pin: UsageError too.
    """
    if not hasattr(os, "sched_setaffinity"):
        raise UsageError(
            f"{flag} {text!r}: pinning needs os.sched_setaffinity, which {sys.platform} "
            f"lacks (Linux has it); leave {flag} out"
        )
    allowed = tuple(usable) if usable is not None else usable_cpus()
    where = f"the cores here are {format_cpus(allowed)}"
    cpus: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise UsageError(
                f"{flag} {text!r}: {part.strip()!r} is not a core number or range; "
                f"give a list like 0 or 0-1 or 0,2-3 ({where})"
            ) from None
        if first < 0 or last < first:
            raise UsageError(
                f"{flag} {text!r}: {part.strip()!r} is not an ascending range of core numbers "
                f"({where})"
            )
        cpus.update(range(first, last + 1))
    missing = sorted(cpus - set(allowed))
    if missing:
        raise UsageError(
            f"{flag} {text!r}: this machine has no usable core {format_cpus(missing)}; {where}"
        )
    return tuple(sorted(cpus))


def check_cpus(cpus: Sequence[int], usable: Sequence[int] | None = None) -> tuple[int, ...]:
    """``cpus`` sorted, or UsageError when empty or naming a core this process cannot use."""
    if not cpus:
        raise UsageError("--cpus names no core; give e.g. 0 or 0-1, or leave it out")
    return parse_cpus(format_cpus(cpus), usable)


def pin(cpus: Sequence[int]) -> None:
    """Pin this process (and the threads it starts from now on) to ``cpus``."""
    os.sched_setaffinity(0, set(cpus))  # parse_cpus refused --cpus where this is missing


def idle_cores(cores: int, others_cores: float) -> int:
    """Cores of ``cores`` left idle when other processes used ``others_cores`` of them.

    Every started core of others' use beyond :data:`TOLERATED_OTHERS_CORES` takes one:
    0.2 takes none, 0.3 and 1.2 take one, 1.3 takes two.
    """
    taken = max(0, math.ceil(others_cores - TOLERATED_OTHERS_CORES))
    return max(0, cores - taken)


def threads_warning(threads: int, idle: int, cores: int, others_cores: float) -> str | None:
    """The warning for ``threads`` intra-op threads on ``cores`` of which ``idle`` were idle."""
    if threads <= idle:
        return None
    used = f"(other processes used {others_cores:.1f} cores)"
    if threads == 1:
        return (
            f"1 torch thread but none of {cores} cores was idle during the point {used}: "
            "its thread shared a core; measure on a quieter machine or with --cpus naming "
            "an idle core"
        )
    return (
        f"{threads} torch threads but only {idle} of {cores} cores were idle during the point "
        f"{used}: a parallel region waits for a descheduled thread; measure with "
        f"--threads {max(1, idle)} or --cpus naming idle cores"
    )
