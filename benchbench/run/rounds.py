"""Rounds: the plan of a run's first rounds, one for ``run``, ``time`` and ``ab``.

On a real machine the largest variance of a benchmark is between processes, not
between the samples of one: a process carries its own heap layout, page mappings and
clock state, shared by all of its samples. So a run proceeds in **rounds**. Each round
visits every job once, in a seeded shuffled order (Google Benchmark's random
interleaving), each job in a fresh worker forked for it that has measured nothing
else, from a zygote of that round (a fresh address layout a round); the point's
sampling budget is split across its rounds.

:class:`RoundPlan` is that schedule, written once: which round, which job in which
order, the round's request (:func:`round_request`; ``ab``'s with its sampling time
doubled for the lockstep, :func:`lockstep_request`), and a fresh layout before every
round after the first (:func:`renew`). Its callers take the visits:
:class:`benchbench.run.visits.Visits` one process a visit (``run``, ``time``),
:mod:`benchbench.run.ab` a pair of workers in lockstep; :mod:`benchbench.run.merge`
merges a point's processes.

This module starts no process: the pools it renews are its callers'.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# The rounds per point and the most processes a point may take are defined once, in the
# leaf, where ``--help`` reads them without importing the runner.
from benchbench.core.defaults import AB_MIN_SAMPLES, DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS
from benchbench.core.errors import UsageError

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_ROUNDS",
    "RoundPlan",
    "Rounds",
    "Visit",
    "carried_calls",
    "lockstep_request",
    "renew",
    "round_request",
]


@dataclass(frozen=True)
class Rounds:
    """How many fresh processes measure each point, and the seed of their order.

    ``count`` rounds always; up to ``max_count`` for a point whose processes disagree
    beyond the target precision. ``count=1`` is one process per point (no interval
    across processes).
    """

    count: int = DEFAULT_ROUNDS
    max_count: int = 0  # 0: the larger of count and DEFAULT_MAX_ROUNDS
    seed: int = 0
    #: Points one worker process measures in a first round, one after another in the
    #: round's order (``run --points-per-process``); later processes measure one point.
    per_process: int = 1

    def __post_init__(self) -> None:
        if self.max_count == 0:
            object.__setattr__(self, "max_count", max(self.count, DEFAULT_MAX_ROUNDS))
        if self.count < 1:
            raise UsageError(f"--rounds must be >= 1, got {self.count}")
        if self.max_count < self.count:
            raise UsageError(
                f"--max-rounds must be >= --rounds ({self.count}), got {self.max_count}"
            )
        if self.per_process < 1:
            raise UsageError(
                f"--points-per-process must be >= 1 (1: a fresh process per point), "
                f"got {self.per_process}"
            )

    @classmethod
    def fixed(cls, count: int, seed: int = 0) -> Rounds:
        """Exactly ``count`` rounds, no extra ones."""
        return cls(count, count, seed)

    def to_dict(self) -> dict[str, int]:
        doc = {"count": self.count, "max_count": self.max_count, "seed": self.seed}
        return doc if self.per_process == 1 else {**doc, "per_process": self.per_process}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Rounds:
        """The rounds a stored run used; a run stored before rounds existed had one."""
        if not data:
            return cls.fixed(1)
        return cls(
            int(data["count"]),
            int(data["max_count"]),
            int(data.get("seed", 0)),
            int(data.get("per_process", 1)),
        )


def order(count: int, round_index: int, seed: int) -> list[int]:
    """The order in which round ``round_index`` visits jobs ``0 .. count-1``: a shuffle
    seeded by the run's seed and the round, so a run's schedule can be replayed."""
    indices = list(range(count))
    random.Random(f"{seed}:{round_index}").shuffle(indices)
    return indices


def round_request(
    request: Mapping[str, Any], rounds: int, round_index: int = 0, share: float = 1.0
) -> dict[str, Any]:
    """A job's request for round ``round_index``, ``share`` of its policy's time budget
    split across ``rounds``.

    After the first round a suite point's request skips the reference check (the first
    process checked the same code on the same seeded inputs; a float64 reference of a
    large input costs as much as the point's samples) and the ``--profile`` trace (one
    is enough).

    ``max_time_s``, ``min_time_s`` and the warm-up's minimum time ``warmup_min_s`` are
    divided (the run keeps the machine busy, so clocks are up; each process still makes
    its first call and ``warmup_min_calls`` before timing); ``min_samples`` stays per
    process (a process's median needs samples of its own); ``max_samples`` is divided,
    but not below ``min_samples``.
    """
    out = dict(request)
    if round_index > 0 and request.get("op") == "measure":
        out["check"] = False
        out["profile_dir"] = None
    policy = request.get("policy")
    if (rounds > 1 or share != 1.0) and isinstance(policy, Mapping):
        split = dict(policy)
        for key in ("max_time_s", "min_time_s", "warmup_min_s"):
            if split.get(key) is not None:
                split[key] = float(split[key]) * (share if key == "max_time_s" else 1.0) / rounds
        if split.get("max_samples") is not None:
            floor = int(split.get("min_samples") or 2)
            split["max_samples"] = max(floor, int(split["max_samples"]) // rounds)
        out["policy"] = split
    return out


def process_request(
    request: Mapping[str, Any], max_time_s: float, rounds: int = 1
) -> dict[str, Any]:
    """A job's request for one more process (after the first ``rounds``): no check, no
    trace, its warm-up as short as a first-round process's, its samples capped at
    ``max_time_s`` (the allocation's choice)."""
    out = round_request(request, rounds, 1)
    policy = dict(out["policy"]) if isinstance(out.get("policy"), Mapping) else {}
    policy["max_time_s"] = max_time_s
    policy["min_time_s"] = min(float(policy.get("min_time_s") or 0.0), max_time_s)
    out["policy"] = policy
    return out


def target_of(request: Mapping[str, Any]) -> float | None:
    """The precision target (relative CI half-width) of a job's policy, if it has one."""
    policy = request.get("policy")
    if isinstance(policy, Mapping) and policy.get("target_rel_ci") is not None:
        return float(policy["target_rel_ci"])
    return None


def lockstep_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """A round's request for ``ab``'s lockstep: its sampling time doubled (each side waits
    while the other samples, and its clock runs meanwhile), at least
    :data:`~benchbench.core.defaults.AB_MIN_SAMPLES` samples instead of ``run``'s
    per-process minimum, and its warm-up 10 calls or half its own share of the sampling,
    whichever comes first (a fresh fork of a warm zygote: a long call is warm after its
    first; both sides warm up at once, outside the lockstep's turns).

    The paired test takes one median per side and round; more samples in a round buy
    nothing the rounds' spread does not already carry, and a 60 ms call took 10 samples
    and 15 warm-up calls a side and round (1.7 s for a 0.05 s round). The warm-up's
    length does not show in the samples after it: the gate suite's first sample of a
    round was > 5 % above that round's median at 24-39 % of rounds with the whole share
    as warm-up and at 20-31 % with this one, while its 20 points took 76-79 s instead of
    84-85 s (2026-12-07, a 2-core AMD EPYC VM, side by side)."""
    out = dict(request)
    if isinstance(out.get("policy"), Mapping):
        policy = dict(out["policy"])
        own = policy.get("max_time_s")
        for key in ("max_time_s", "min_time_s"):
            if policy.get(key) is not None:
                policy[key] = 2.0 * float(policy[key])
        if policy.get("min_samples") is not None:
            policy["min_samples"] = min(int(policy["min_samples"]), AB_MIN_SAMPLES)
        if own is not None:
            half = 0.5 * float(own)
            policy["warmup_max_s"] = min(float(policy.get("warmup_max_s") or half), half)
        policy["warmup_min_s"] = 0.0  # 10 calls or the cap, whichever comes first
        policy["stop_when_precise"] = False
        out["policy"] = policy
    return out


def carried_calls(request: Mapping[str, Any], calls: int) -> dict[str, Any]:
    """``request`` with ``calls`` calls per sample fixed, as a point's first round
    calibrated them (``ab``: calibration paid once per point, not once per round); a
    request that fixes its calls already (cold cache: one a sample) keeps its own, and so
    does an instruction count (fixed calls would change how its counts are taken)."""
    policy = request.get("policy")
    timed = request.get("metric", "time") == "time"
    if not timed or calls < 1 or not isinstance(policy, Mapping) or policy.get("fixed_calls"):
        return dict(request)
    return {**request, "policy": {**policy, "fixed_calls": int(calls)}}


class Renewable(Protocol):
    """What :func:`renew` renews: a :class:`~benchbench.run.pool.WorkerPool`."""

    def renew(self) -> bool: ...


def renew(pools: Sequence[Renewable], rng: random.Random | None = None) -> None:
    """A fresh layout for the workers to come: every one of ``pools`` starts a fresh
    zygote (:meth:`~benchbench.run.pool.WorkerPool.renew`), in ``rng``'s random order
    when given (``ab``'s sides: which side's zygote starts first is left to chance, as
    everything side-specific is)."""
    sides: Sequence[int] = range(len(pools))
    if rng is not None:
        sides = rng.sample(sides, len(pools))
    for side in sides:
        pools[side].renew()


@dataclass(frozen=True)
class Visit:
    """Job ``index`` in round ``round_index`` (0-based), with that round's ``request``;
    ``last``: the plan's last round (the point's processes are all in after it)."""

    index: int
    round_index: int
    request: dict[str, Any]
    last: bool

    @property
    def round(self) -> int:
        """The round as progress shows it, from 1."""
        return self.round_index + 1


class RoundPlan:
    """The first rounds of a run's jobs, given their requests, in one schedule for
    ``run``, ``time`` and ``ab``.

    ``rounds`` None: one round in the jobs' own order. ``share``: the part of each job's
    time budget the first rounds spend (the allocation has the rest); ``lockstep``: each
    request's sampling time doubled (:func:`lockstep_request`). Take the rounds from
    :meth:`each_round`, which renews the pools before every round after the first, and
    each round's visits from :meth:`visits`::

        for round_index in plan.each_round(pools, lambda: not stop.requested):
            for visit in plan.visits(round_index):
                ...  # one process (or a lockstep pair) of visit.index, visit.request
    """

    def __init__(
        self,
        requests: Sequence[Mapping[str, Any]],
        rounds: Rounds | None,
        *,
        share: float = 1.0,
        lockstep: bool = False,
    ) -> None:
        self.requests = list(requests)
        self.rounds = rounds or Rounds.fixed(1)
        self.shuffled = rounds is not None
        self.share, self.lockstep = share, lockstep

    @property
    def count(self) -> int:
        """How many first rounds."""
        return self.rounds.count

    def order(self, round_index: int) -> list[int]:
        """The jobs in the order round ``round_index`` visits them (:func:`order`)."""
        jobs = len(self.requests)
        return order(jobs, round_index, self.rounds.seed) if self.shuffled else list(range(jobs))

    def request(self, index: int, round_index: int) -> dict[str, Any]:
        """Job ``index``'s request in round ``round_index``."""
        out = round_request(self.requests[index], self.count, round_index, self.share)
        return lockstep_request(out) if self.lockstep else out

    def each_round(
        self,
        pools: Sequence[Renewable],
        keep_on: Callable[[], bool],
        rng: random.Random | None = None,
    ) -> Iterator[int]:
        """Each round's index while ``keep_on()`` (asked before every round), every one of
        ``pools`` renewed before each round after the first (:func:`renew`, in ``rng``'s
        order when given)."""
        for round_index in range(self.count):
            if not keep_on():
                return
            if round_index > 0:
                renew(pools, rng)
            yield round_index

    def visits(self, round_index: int, wanted: Container[int] | None = None) -> Iterator[Visit]:
        """Round ``round_index``'s visits in its order, of the jobs ``wanted`` holds when
        it is given (asked as each comes: a job written meanwhile is passed over)."""
        last = round_index + 1 == self.count
        for index in self.order(round_index):
            if wanted is None or index in wanted:
                yield Visit(index, round_index, self.request(index, round_index), last)
