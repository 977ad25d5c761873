"""``run --deadline``: stop a run cleanly before its scheduler's time limit.

A scheduler ends a job at its limit with a signal and a short grace period (Slurm's
``--time`` and ``KillWait``, a CI job's ``timeout-minutes``, a Kubernetes Job's
``activeDeadlineSeconds``); a run told the same limit less the grace stops on its own:
after the current sample, its finished points written, the run marked ``interrupted``
for ``--resume``, as a signal would stop it. The deadline is a duration from the start
(``25m``, ``1h30m``, ``90s``, ``2h``) or a time of day on the machine's clock
(``02:30``, ``23:59``: the next such time, today or tomorrow).
"""

from __future__ import annotations

import datetime as dt
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from benchbench.core.errors import UsageError

#: The signal number a run stopped by its deadline reports (exit code 128 + 14 = 142).
DEADLINE_SIGNAL = signal.SIGALRM

FORMS = "a duration such as 25m, 1h30m, 90s or 2h, or a time of day HH:MM such as 02:30"

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_TIME_OF_DAY = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


class Stoppable(Protocol):
    def request(self, signum: int) -> None: ...


def seconds_until(text: str, now: dt.datetime) -> float:
    """Seconds from ``now`` (local, naive or aware) to the deadline ``text``; a
    :class:`UsageError` naming the forms for anything else."""
    value = text.strip().lower()
    clock = _TIME_OF_DAY.fullmatch(value)
    if clock:
        at = now.replace(hour=int(clock[1]), minute=int(clock[2]), second=0, microsecond=0)
        if at <= now:
            at += dt.timedelta(days=1)
        return (at - now).total_seconds()
    length = _DURATION.fullmatch(value)
    if length and any(length.groups()):
        hours, minutes, secs = (int(part or 0) for part in length.groups())
        total = hours * 3600 + minutes * 60 + secs
        if total > 0:
            return float(total)
    raise UsageError(f"--deadline {text!r} is not a deadline: give {FORMS}")


@contextmanager
def deadline(seconds: float | None, stop: Stoppable) -> Iterator[None]:
    """Ask ``stop`` to stop (as :data:`DEADLINE_SIGNAL` would) once ``seconds`` have
    passed, while the block runs; None: no deadline."""
    if seconds is None:
        yield
        return
    timer = threading.Timer(seconds, stop.request, args=(int(DEADLINE_SIGNAL),))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
