"""A run's visits: each job taken in fresh worker processes, in rounds, then by the
allocation, and each point merged over its processes and written once it is whole.

:func:`benchbench.run.jobs.measure_jobs` opens the run and hands its jobs to
:class:`Visits`, which takes them in three steps:

1. **counts** (``--metric instructions``): every job once in the instrumented worker, in
   plan order, before any timing (callgrind's busy process never runs beside a timed
   one);
2. **the first rounds**: every job in ``Rounds.count`` fresh processes, each round in a
   seeded shuffled order from a fresh zygote, as the round plan that ``ab`` follows too
   says (:class:`~benchbench.run.rounds.RoundPlan`); a process whose threads outnumbered
   the idle cores is measured again at the end of its round, once, whatever the budget
   (:mod:`benchbench.run.processes`); no process is measured again for its time;
3. **the allocation** (``--max-rounds`` above ``--rounds``): the budget left, one process
   at a time, to the point furthest from its target (:mod:`benchbench.run.allocate`).

A point is written as soon as it needs no more processes, so a killed run keeps it; a
point a stop cut short is not written (``--resume`` measures it).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.core.values import Point, Result
from benchbench.run.allocate import BUDGET_SPENT, FIRST_SHARE, Spread, next_process, why_stopped
from benchbench.run.instrumented import count_request, slowdown, with_counts
from benchbench.run.observed import observed_request
from benchbench.run.pool import WorkerPool
from benchbench.run.processes import (
    Budget,
    Retakes,
    crowded_why,
    max_time_s,
    merged,
    run_target,
    widest_spread,
)
from benchbench.run.rounds import RoundPlan, Rounds, process_request, renew
from benchbench.run.workers import StopRequest, WorkerFailure
from benchbench.store import Store

ProgressFn = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Job:
    """One worker request and the points its answer covers, in the answer's order.

    ``answer`` is the event carrying the results (``result``: one, ``timed``: a list);
    a worker failure turns into an error result per point, with ``code_version``.
    ``timeout_s`` replaces the run's timeout for this job (a compile variant's point).
    """

    request: dict[str, Any]
    points: tuple[Point, ...]
    label: str
    answer: str = "result"
    code_version: int = 1
    timeout_s: float | None = None

    def results(self, message: dict[str, Any]) -> list[Result]:
        """The results an ``answer`` event carries."""
        if "result" in message:
            return [Result.from_dict(message["result"])]
        return [Result.from_dict(r) for r in message["results"]]

    def failed(self, reason: str) -> list[Result]:
        """Every point of the job recorded as an error: the worker died or hung on it."""
        return [
            Result(point=p, status="error", reason=reason, code_version=self.code_version)
            for p in self.points
        ]


class Visits:
    """The processes of one run's ``jobs``: :meth:`measure` takes ``count``,
    ``first_rounds``, ``allocate``, then ``close``; ``finished`` holds each written job's
    merged results by index.

    ``rounds`` None: one round in the jobs' own order, nothing allocated. ``store`` None:
    nothing is written. ``timed`` False: counts only (``--metric instructions``).
    """

    def __init__(
        self,
        jobs: Sequence[Job],
        pool: WorkerPool,
        store: Store | None,
        run_id: str,
        *,
        rounds: Rounds | None,
        stop: StopRequest,
        notify: ProgressFn,
        timeout_s: float,
        timed: bool = True,
        counting: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jobs, self.pool, self.store, self.run_id = jobs, pool, store, run_id
        self.rounds = counts = rounds or Rounds.fixed(1)
        self.stop, self.notify, self.timeout_s = stop, notify, timeout_s
        self.timed, self.clock = timed, clock
        self.total = len(jobs) * (counts.count if timed else 0) + (len(jobs) if counting else 0)
        self.taken: list[list[list[Result]]] = [[] for _ in jobs]  # [job][process][point]
        self.walls: list[list[float]] = [[] for _ in jobs]  # [job][process] -> wall seconds
        self.finished: dict[int, list[Result]] = {}
        self.counted: dict[int, list[Result]] = {}
        self.open: set[int] = set()
        # Two processes or more give a spread to allocate by; one does not.
        self.adaptive = rounds is not None and counts.count >= 2 and counts.max_count > counts.count
        self.share = FIRST_SHARE if self.adaptive else 1.0
        #: The first rounds' schedule (without ``rounds``: one round in the jobs' order).
        self.plan = RoundPlan([job.request for job in jobs], rounds, share=self.share)
        # The run's sampling budget: the allocation's, and the retakes' (processes stop
        # early when precise, so a run without allocation has some left too).
        self.budget = Budget(sum(max_time_s(job.request) for job in jobs))
        self.target = run_target(job.request for job in jobs)
        # Each job's spread, merged once per new process rather than once per choice
        # (the merge and its statistics cost ~1 ms a job, beside a measuring worker).
        self.spreads: dict[int, Spread | None] = {}
        self.retakes = Retakes(len(jobs))

    def measure(
        self, counters: Sequence[WorkerPool] = (), counted_by: str = "callgrind"
    ) -> list[Result]:
        """A run's measuring, start to end: ``start`` told, the counts (from the counting
        workers of ``counters``, by ``counted_by``), the first rounds, the allocation,
        then :meth:`close`."""
        self.notify("start", {"total": self.total, "run_id": self.run_id})
        if counters:
            self.count(counters, counted_by)
        self.first_rounds()
        self.allocate()
        return self.close()

    def write(self, index: int, merged_results: list[Result]) -> None:
        """Job ``index``'s results written (with its counts, in a run of both metrics)."""
        if self.timed and index in self.counted:
            pairs = zip(merged_results, self.counted[index], strict=True)
            merged_results = [with_counts(r, c) for r, c in pairs]
        for result in merged_results:
            if self.store is not None:
                self.store.write_result(self.run_id, result)
        self.finished[index] = merged_results
        self.notify(
            "result", {"index": index, "results": merged_results, "result": merged_results[0]}
        )

    def count(self, counters: Sequence[WorkerPool], counted_by: str = "callgrind") -> None:
        """Every job's instruction counts from the counting workers (``counted_by``:
        ``callgrind`` or ``pmu``), taken in plan order; the jobs a stop left uncounted
        are absent (``--resume`` measures them); with counts only, each job is written as
        it is counted.

        With several counting workers (one per pool in ``counters``), worker ``n`` of
        ``N`` counts the plan's jobs ``n``, ``n + N``, ... in order, in a thread of its
        own: a count is of its own process's instructions, so two cores count two points
        at once, and each worker counts the same points after the same ones on every run
        (a point's count moves by a few dozen instructions a call with what its process
        ran before: the same history, the same count). Results are written here, on the
        run's thread, as they come.
        """
        shares = [iter(range(n, len(self.jobs), len(counters))) for n in range(len(counters))]
        failed: list[BaseException] = []  # set by this thread, read by the workers' own

        def next_of(share: Iterator[int]) -> Callable[[], int | None]:
            return lambda: None if self.stop.requested or failed else next(share, None)

        if len(counters) == 1:  # the run's own thread: no other to hand results to
            self._count_with(counters[0], counted_by, next_of(shares[0]), self._counted)
            return
        events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        threads = [
            threading.Thread(
                target=self._count_with,
                args=(pool, counted_by, next_of(share), events.put, True),
                name=f"benchbench-counter-{n}",
                daemon=True,
            )
            for n, (pool, share) in enumerate(zip(counters, shares, strict=True))
        ]
        for thread in threads:
            thread.start()
        running = len(threads)
        while running:
            event = events.get()
            if event[0] == "ended":
                running -= 1
            elif event[0] == "raised":
                failed.append(event[1])
            else:
                self._counted(event)
        for thread in threads:
            thread.join()
        if failed:
            raise failed[0]

    def _count_with(
        self,
        counter: WorkerPool,
        counted_by: str,
        next_index: Callable[[], int | None],
        tell: Callable[[tuple[Any, ...]], None],
        in_thread: bool = False,
    ) -> None:
        """One counting worker's share of :meth:`count`: jobs from ``next_index`` until
        there are none, each told to ``tell`` (``point`` before its request, ``counted``
        after). ``in_thread``: in a thread of its own, which then tells ``ended`` (after
        ``raised`` when the worker could not start) and closes the pool: a worker ends
        with the thread that started it."""
        try:
            while (index := next_index()) is not None:
                tell(("point", index))
                job = self.jobs[index]
                limit_s = (job.timeout_s or self.timeout_s) * slowdown(counted_by)
                request = count_request(job.request, self.timed, counted_by)
                try:
                    message = counter.request(
                        request, (job.answer, "interrupted"), limit_s, self.stop
                    )
                except WorkerFailure as failure:
                    if self.stop.requested:
                        break
                    tell(("counted", index, job.failed(f"instruction count: {failure}")))
                else:
                    if message["event"] == "interrupted":
                        break
                    tell(("counted", index, job.results(message)))
        except BaseException as error:  # e.g. MeasurementError: no worker could start
            if not in_thread:
                raise
            tell(("raised", error))
        finally:
            if in_thread:
                counter.close()
                tell(("ended",))

    def _counted(self, event: tuple[Any, ...]) -> None:
        """A counting event of :meth:`_count_with`, on the run's thread: the point told
        before its request, or its counts kept (and written, with counts only)."""
        index = event[1]
        if event[0] == "point":
            self.notify(
                "point", {"index": index, "label": self.jobs[index].label, "round": "instructions"}
            )
            return
        self.counted[index] = event[2]
        self.notify("advance", {"total": self.total})
        if not self.timed:
            self.write(index, self.counted[index])

    def take(self, index: int, request: dict[str, Any], round_label: int) -> list[Result] | None:
        """One process of job ``index`` in a fresh worker: its results, or None when the
        run stops (the point cut short is left for ``--resume``)."""
        job = self.jobs[index]
        self.notify("point", {"index": index, "label": job.label, "round": round_label})
        started = self.clock()
        results = _results(job, self.pool, request, job.timeout_s or self.timeout_s, self.stop)
        if results is None:
            return None
        self.walls[index].append(self.clock() - started)
        self.taken[index].append(results)
        self.spreads.pop(index, None)  # judged again when next asked
        self.budget.spend(results)
        self.notify("advance", {"total": self.total})
        return results

    def spread(self, index: int) -> Spread | None:
        if index not in self.spreads:
            job = self.jobs[index]
            self.spreads[index] = widest_spread(
                job.request, len(job.points), self.taken[index], self.walls[index]
            )
        return self.spreads[index]

    def settled(self, index: int) -> bool:
        """True when a point needs no more processes, whatever the budget: it is written
        at once, so a killed run keeps it."""
        return why_stopped(self.spread(index), self.target, self.rounds.max_count) != BUDGET_SPENT

    def ready(self, index: int) -> bool:
        """True when a point of the last round can be written: no more processes wanted
        (or none to allocate)."""
        return not self.adaptive or self.settled(index)

    def finish(self, index: int, why: str | None = None) -> None:
        """Job ``index`` merged over its processes and written; ``why``: the reason it got
        no more processes, for its ``not converged`` warning."""
        self.open.discard(index)
        job, aside = self.jobs[index], self.retakes.of(index)
        self.write(
            index,
            merged(job.request, len(job.points), self.taken[index], self.walls[index], why, aside),
        )

    def retake(self, index: int, position: int, request: dict[str, Any], why: str) -> None:
        """Process ``position`` of job ``index`` measured again, the first set aside."""
        self.total += 1
        if self.take(index, request, position + 1) is None:
            return
        results, wall = self.taken[index].pop(), self.walls[index].pop()
        self.retakes.set_aside(index, position, self.taken[index][position], why)
        self.taken[index][position], self.walls[index][position] = results, wall

    def first_rounds(self) -> None:
        """Every job in ``rounds.count`` fresh processes, in the rounds of
        :class:`~benchbench.run.rounds.RoundPlan` (a fresh layout a round); a process takes
        ``rounds.per_process`` jobs of its round, never two processes of one job."""
        self.open = set(range(len(self.jobs))) if self.timed and not self.stop.requested else set()
        per_process = self.rounds.per_process
        if per_process > 1:
            self.pool.share(per_process)
        for round_index in self.plan.each_round([self.pool], self._going):
            self._round(round_index)
        if per_process > 1:
            self.pool.share(1)  # the same point may be chosen twice in a row: fresh each

    def _going(self) -> bool:
        return bool(self.open) and not self.stop.requested

    def _round(self, round_index: int) -> None:
        last = round_index + 1 == self.rounds.count
        crowded_now: list[tuple[int, dict[str, Any], str]] = []
        for visit in self.plan.visits(round_index, self.open):
            if self.stop.requested:
                break
            index = visit.index
            results = self.take(index, visit.request, visit.round)
            if results is None:
                break
            first_failed = round_index == 0 and all(r.status != "ok" for r in results)
            why = None if first_failed else crowded_why(results)
            if why is not None and self.rounds.count > 1:
                crowded_now.append((index, visit.request, why))
            elif first_failed or (last and self.ready(index)):
                self.finish(index)
        # Later in the round: every crowded process again (not with --rounds 1, whose
        # points are written as measured). A stop leaves it as it is: its point is whole.
        for index, request, why in crowded_now:
            if not self.stop.requested:
                self.retake(index, round_index, request, why)
            if last and self.ready(index):
                self.finish(index)

    def allocate(self) -> None:
        """The budget left, a process at a time, to the points furthest from target; a
        fresh layout every round's worth of processes."""
        since_renewal = 0
        while self.adaptive and self.open and not self.stop.requested:
            wide = {i: s for i in self.open if (s := self.spread(i)) is not None}
            choice = next_process(wide, self.target, self.budget.left_s, self.rounds.max_count)
            if choice is None:
                break
            index, cap_s = choice
            if since_renewal >= len(self.jobs):
                renew([self.pool])
                since_renewal = 0
            since_renewal += 1
            self.total += 1
            request = process_request(self.jobs[index].request, cap_s, self.rounds.count)
            if self.take(index, request, len(self.walls[index]) + 1) is None:
                break
            if self.settled(index):  # within target now, or at its most processes
                self.finish(index)

    def close(self) -> list[Result]:
        """What is still open written where it is whole (done, or the run stopped); every
        written result, in the jobs' order."""
        if self.adaptive or self.stop.requested:
            for index in sorted(self.open):
                if len(self.taken[index]) < self.rounds.count:
                    continue  # cut short by a stop: --resume measures it
                self.finish(
                    index, why_stopped(self.spread(index), self.target, self.rounds.max_count)
                )
        return [r for index in sorted(self.finished) for r in self.finished[index]]


def _results(
    job: Job, pool: WorkerPool, request: dict[str, Any], timeout_s: float, stop: StopRequest
) -> list[Result] | None:
    """``request`` (one process of ``job``) in a fresh worker: its results, or None when
    the run stops."""
    try:
        message = observed_request(pool, request, (job.answer, "interrupted"), timeout_s, stop)
    except WorkerFailure as failure:
        if stop.requested:
            return None  # it died of the stop (SIGTERM to the group, a second Ctrl-C)
        return job.failed(str(failure))
    if message["event"] == "interrupted":
        return None
    return job.results(message)
