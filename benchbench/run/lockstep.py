"""One point measured on two sides in lockstep: a base worker and a head worker take turns.

Measured with a prototype on the 2-core AMD VM beside a busy neighbour: a
fresh process per side, the two sides back to back in each round, found a clean +10 %
at 9 of 20 points; two workers alive side by side, taking turns one ~1 ms sample each,
found it at 17 of 20, while identical code flagged 0 of 20. What made the difference:

- **pairs of samples milliseconds apart**, not rounds apart: a neighbour that slows one
  sample slows the next one too, on the other side;
- **everything side-specific randomised**: which side is forked first, and which side
  takes the first block of each pair (forking base first made 16 MiB heads look 6-19 %
  faster on identical code);
- **both sides sampling to the round's time cap**, not stopping once precise: a side
  that stopped after a few samples left the other sampling alone, at moments the first
  never saw, and this VM's speed moves 1.45x under every process at once (the per-round
  ratios' sd fell from 9.6-10.8 % to 6.1 % quiet: :func:`benchbench.run.rounds.lockstep_request`);
- **the waiting side idle**: it blocks on its request pipe between blocks, and its
  OpenMP threads sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE`` before torch
  loads: :func:`benchbench.run.ab.side_environment`; spinning ones gave ±50 %).

The protocol: both workers get the same ``measure`` request with ``"lockstep": true``;
each makes its inputs, checks its output and warms up at once with the other (nothing
is timed yet; the gate suite's 20 points at 20 rounds took 89 s instead of 92 s on a
2-core VM, whose other core imports the next round's zygotes), then answers ``turn``
before every timed block of calls (calibration and samples) and takes the block after
``go`` (:func:`benchbench.run.worker._gate`). This module waits for both sides' first
``turn`` (neither samples while the other still warms up), then sends ``go`` to one
side at a time, waiting for that side's next ``turn`` (its block is done) or its
``result`` (its point is done), alternating the sides in a seeded random order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from benchbench.core.values import Result
from benchbench.run.workers import StopRequest, Worker, WorkerFailure

#: The events a lockstep worker answers.
EVENTS = ("turn", "result", "interrupted")


def measure_pair(
    workers: Sequence[Worker],
    request: dict[str, Any],
    timeout_s: float,
    rng: random.Random,
    stop: StopRequest | None = None,
    together: bool = False,
) -> list[Result | None]:
    """``request`` measured on each of ``workers`` (base, head), their blocks alternating;
    with ``together`` (``ab --duet``: :mod:`benchbench.run.duet`), each pair's two blocks
    at the same moment, each side on its own core.

    Returns each side's result in the order of ``workers``; None for a side cut short
    by ``stop``. A side whose worker dies or hangs raises :class:`WorkerFailure` (the
    caller records the point as an error on that side).
    """
    locked = {**request, "lockstep": True}
    last: list[dict[str, Any]] = []
    for worker in workers:
        worker.send(locked)
    for worker in workers:
        last.append(worker.expect(EVENTS, timeout_s, stop))
    sides = list(range(len(workers)))
    while any(event["event"] == "turn" for event in last):
        rng.shuffle(sides)  # which side takes (or, together, is told first of) this pair
        waiting = [side for side in sides if last[side]["event"] == "turn"]
        for group in [waiting] if together else [[side] for side in waiting]:
            for side in group:
                workers[side].send({"op": "stop" if stop and stop.requested else "go"})
            for side in group:
                last[side] = workers[side].expect(EVENTS, timeout_s, stop)
    results: list[Result | None] = []
    for event in last:
        if event["event"] == "interrupted":
            results.append(None)
        else:
            results.append(Result.from_dict(event["result"]))
    return results


def pair_failed(failure: WorkerFailure) -> str:
    """The reason a point records when one side's worker failed in lockstep."""
    return f"lockstep measurement failed: {failure}"
