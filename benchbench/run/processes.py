"""What the runner does with a point's processes besides taking them: the run's sampling
budget, the processes retakes replaced, and the merge over the processes taken so far.

:class:`benchbench.run.visits.Visits` takes the processes (in rounds, then the
allocation's); this module is pure: a job is its request and how many points its answer
covers, its processes so far ``taken[process][point]``.

**Retakes.** A process whose torch threads outnumbered the cores other processes left
idle (:func:`crowded_why`: telemetry, never its time) is measured again later in its
round, and the retake takes its place (:class:`Retakes` keeps the first, set aside).
Every crowded process of a point is retaken, once, whatever the budget, so two runs of
a suite measure the same thing: the processes that ran on a crowded core replaced, no
others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from benchbench.core.values import Result
from benchbench.run.allocate import Spread, spread_of
from benchbench.run.merge import SetAside, merge
from benchbench.run.observed import crowded
from benchbench.run.rounds import target_of

Taken = list[list[Result]]
Aside = tuple[int, list[Result], str]


def merged(
    request: Mapping[str, Any],
    points: int,
    taken: Taken,
    walls: Sequence[float] = (),
    why: str | None = None,
    set_aside: Sequence[Aside] = (),
) -> list[Result]:
    """Each of a job's ``points`` merged over the processes taken so far; ``set_aside``:
    the processes retakes replaced, as (0-based position, their results, why)."""
    target = target_of(request)
    return [
        merge(
            [results[k] for results in taken],
            target,
            walls,
            why,
            [SetAside(position + 1, results[k], reason) for position, results, reason in set_aside],
        )
        for k in range(points)
    ]


def widest_spread(
    request: Mapping[str, Any], points: int, taken: Taken, walls: Sequence[float]
) -> Spread | None:
    """The widest spread among a job's points (a ``time`` job has several)."""
    spreads = [spread_of(r, walls) for r in merged(request, points, taken, walls)]
    known = [s for s in spreads if s is not None]
    return max(known, key=lambda s: s.rel_half_width, default=None)


def run_target(requests: Iterable[Mapping[str, Any]]) -> float:
    """The run's precision target (the same policy for every job of a run)."""
    return next((t for request in requests if (t := target_of(request)) is not None), 0.01)


def max_time_s(request: Mapping[str, Any]) -> float:
    """A request's sampling cap in seconds (0 without a policy)."""
    policy = request.get("policy") or {}
    return float(policy.get("max_time_s") or 0.0)


def crowded_why(results: Sequence[Result]) -> str | None:
    """Why a process must be measured again: its threads outnumbered the idle cores (telemetry)."""
    return next((why for r in results if (why := crowded(r)) is not None), None)


class Retakes:
    """The processes of each job that a retake replaced: (position, results, why)."""

    def __init__(self, jobs: int) -> None:
        self._aside: list[list[Aside]] = [[] for _ in range(jobs)]

    def set_aside(self, index: int, position: int, results: list[Result], why: str) -> None:
        self._aside[index].append((position, results, why))

    def of(self, index: int) -> list[Aside]:
        return self._aside[index]


class Budget:
    """A run's sampling budget: the seconds of samples its points may take in all."""

    def __init__(self, total_s: float) -> None:
        self.total_s = total_s
        self.spent_s = 0.0

    def spend(self, results: Sequence[Result]) -> None:
        self.spent_s += sum(sum(r.samples_s) for r in results if r.status == "ok")

    @property
    def left_s(self) -> float:
        return max(0.0, self.total_s - self.spent_s)
