"""The one runner loop: measure jobs with worker processes, write each result as it comes.

``benchbench run`` and ``benchbench time`` differ only in how they plan their
:class:`Job` s and what their run row holds; both hand them to :func:`measure_jobs`,
which owns the lifecycle:

1. the first worker describes the environment, and the run row is created (or, for
   ``--resume``, set back to ``running``);
2. each job is one request per round to a fresh worker, with the machine telemetry
   the runner samples meanwhile (:func:`~benchbench.run.observed.observed_request`);
   its answer is one result per point of the job; when the point's rounds are in,
   their merge is written to the store in its own transaction at once (every process
   that telemetry saw on a crowded core is measured again at the end of its round:
   :mod:`benchbench.run.processes`);
3. a worker that crashes, hangs past the timeout or is killed for memory costs that
   job only: its points are recorded as errors with the reason (:meth:`Job.failed`)
   and the next job gets a fresh worker from the :class:`WorkerPool`;
4. a :class:`~benchbench.run.workers.StopRequest` stops the loop after the current
   sample: the job cut short is not stored (``--resume`` measures it), and the run
   is marked ``interrupted``; otherwise ``finished``.

How jobs meet processes is decided here and nowhere else: every request goes to a
fresh worker, in rounds (:mod:`benchbench.run.rounds`): each round visits the points
still open in a seeded shuffled order, and a point is merged over its processes and
written when its last round is in (so an interrupted run loses the rounds of the
points not yet complete, and ``--resume`` measures those points again, all rounds).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core import errors
from benchbench.core.errors import BenchbenchError, MeasurementError, SuiteError
from benchbench.core.values import Point, Result
from benchbench.machine.environment import Environment
from benchbench.run.allocate import (
    BUDGET_SPENT,
    FIRST_SHARE,
    Spread,
    next_process,
    why_stopped,
)
from benchbench.run.instrumented import SLOWDOWN, count_request, with_counts
from benchbench.run.observed import observed_request
from benchbench.run.planning import Plan, Planned, plan_request
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
from benchbench.run.record import RunRecord, run_row
from benchbench.run.rounds import Rounds, process_request, round_request
from benchbench.run.rounds import order as rounds_order
from benchbench.run.workers import StopRequest, WorkerFailure
from benchbench.store import Store
from benchbench.store.store import now
from benchbench.suite.load import Selection

#: ``run_row`` and ``RunRecord`` live in :mod:`benchbench.run.record`; their callers import
#: them from here, with the loop.
__all__ = [
    "Job",
    "ProgressFn",
    "RunRecord",
    "RunSummary",
    "WorkerPool",
    "measure_jobs",
    "run_row",
]

ProgressFn = Callable[[str, dict[str, Any]], None]

#: Seconds the first worker may take to describe the environment (it may be the first
#: process to touch the GPU driver: ~10 s on a cold machine).
ENVIRONMENT_TIMEOUT_S = 120.0


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


@dataclass
class RunSummary:
    """What a run did; ``results`` in the jobs' (plan) order, whatever order the rounds
    measured them in."""

    run_id: str
    results: list[Result] = field(default_factory=list)
    status: str = "running"
    environment: Environment | None = None
    stop_signal: int | None = None  # the signal that interrupted the run
    planned: int = 0  # jobs this invocation set out to measure

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


def measure_jobs(
    jobs: Sequence[Job],
    pool: WorkerPool,
    record: RunRecord,
    *,
    timeout_s: float,
    threads: int | None = None,
    stop: StopRequest | None = None,
    progress: ProgressFn | None = None,
    rounds: Rounds | None = None,
    counter: WorkerPool | None = None,
    timed: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> RunSummary:
    """Measure ``jobs`` in ``rounds``, writing each point's result to ``record``'s store.

    Every request goes to a fresh worker (:class:`WorkerPool` with ``fresh``; with
    ``rounds.per_process`` = k, a worker of the first rounds serves k of its round); a round
    visits the jobs still open in a seeded shuffled order (:mod:`benchbench.run.rounds`;
    without ``rounds``, one round in the jobs' order), and a point is merged and written
    once its last round is in. ``timeout_s`` bounds each request (a job's own
    ``timeout_s`` replaces it); ``threads`` is torch's thread count in the workers
    (None: torch's default). ``progress(event, data)`` is called with ``start`` (total:
    requests planned, run_id), ``point`` (index, label, round) before each request,
    ``advance`` (total) after it, ``result`` (index, results, result: the first) when a
    point is done. Without a store in ``record`` nothing is stored and the environment
    is not asked for.

    ``counter``: the pool of the instrumented worker (:mod:`benchbench.run.instrumented`),
    which counts every job's instructions first, in plan order, before any timing (so
    that callgrind's busy process never runs beside a timed one); each point's counts
    are then merged into its timed result, or are its result when ``timed`` is False
    (``--metric instructions``: no time rounds).
    """
    notify = progress or (lambda _e, _d: None)
    stop = stop or StopRequest()
    plan = rounds or Rounds.fixed(1)
    store = record.store
    summary = RunSummary(run_id=record.run_id, planned=len(jobs))
    opened = False
    try:
        if store is not None:
            summary.environment = record.environment or environment_of(pool, threads)
            _open_run(store, record, summary.environment)
            opened = True
        total = len(jobs) * (plan.count if timed else 0) + (len(jobs) if counter else 0)
        notify("start", {"total": total, "run_id": summary.run_id})
        taken: list[list[list[Result]]] = [[] for _ in jobs]  # [job][round] -> results
        finished: dict[int, list[Result]] = {}  # job -> its merged results

        def write(index: int, merged: list[Result]) -> None:
            if timed and index in counted:
                merged = [with_counts(r, c) for r, c in zip(merged, counted[index], strict=True)]
            for result in merged:
                if store is not None:
                    store.write_result(record.run_id, result)
            finished[index] = merged
            notify("result", {"index": index, "results": merged, "result": merged[0]})

        counted: dict[int, list[Result]] = {}
        if counter is not None:
            # Counts only (no time rounds): each point is written as soon as it is counted.
            done = None if timed else write
            counted = _counts(jobs, counter, timed, timeout_s, stop, notify, total, done)
        open_jobs = set(range(len(jobs))) if timed and not stop.requested else set()
        walls: list[list[float]] = [[] for _ in jobs]  # [job][process] -> wall seconds
        # Two processes or more give a spread to allocate by; one does not.
        adaptive = rounds is not None and plan.count >= 2 and plan.max_count > plan.count
        share = FIRST_SHARE if adaptive else 1.0
        # The run's sampling budget: the allocation's, and the retakes' (processes stop
        # early when precise, so a run without allocation has some left too).
        budget = Budget(sum(max_time_s(job.request) for job in jobs))

        def take(index: int, request: dict[str, Any], round_label: int) -> list[Result] | None:
            job = jobs[index]
            notify("point", {"index": index, "label": job.label, "round": round_label})
            started = clock()
            results = _request(job, pool, request, job.timeout_s or timeout_s, stop)
            if results is None:
                return None  # stopped: the point cut short is left for --resume
            walls[index].append(clock() - started)
            taken[index].append(results)
            spreads.pop(index, None)  # judged again when next asked
            budget.spend(results)
            notify("advance", {"total": total})
            return results

        target = run_target(job.request for job in jobs)
        # Each job's spread, merged once per new process rather than once per choice
        # (the merge and its statistics cost ~1 ms a job, beside a measuring worker).
        spreads: dict[int, Spread | None] = {}

        def spread(index: int) -> Spread | None:
            if index not in spreads:
                spreads[index] = widest_spread(
                    jobs[index].request, len(jobs[index].points), taken[index], walls[index]
                )
            return spreads[index]

        def settled(index: int) -> bool:
            """True when a point needs no more processes, whatever the budget: it is
            written at once, so a killed run keeps it."""
            return why_stopped(spread(index), target, plan.max_count) != BUDGET_SPENT

        # The first rounds: every point in plan.count fresh processes, shuffled rounds;
        # a process measures plan.per_process points of its round, never two of a point.
        # Every process whose threads outnumbered the idle cores is measured again at the
        # end of its round, once, whatever the budget (Retakes: so two runs of a suite
        # replace the same kind of process; not with --rounds 1, whose points are
        # written as measured). No process is ever measured again for its time.
        sharing = plan.per_process > 1
        if sharing:
            pool.share(plan.per_process)
        retakes = Retakes(len(jobs))

        def retake(index: int, position: int, request: dict[str, Any], why: str) -> None:
            """Process ``position`` of job ``index`` measured again, the first set aside."""
            nonlocal total
            total += 1
            if take(index, request, position + 1) is None:
                return
            results, wall = taken[index].pop(), walls[index].pop()
            retakes.set_aside(index, position, taken[index][position], why)
            taken[index][position], walls[index][position] = results, wall

        def ready(index: int) -> bool:
            """True when a point of the last round can be written: no more processes
            wanted (or none to allocate)."""
            return not adaptive or settled(index)

        def finish(index: int, why: str | None = None) -> None:
            """Job ``index`` merged over its processes and written; ``why``: the reason it
            got no more processes, for its ``not converged`` warning."""
            open_jobs.discard(index)
            job = jobs[index]
            points = len(job.points)
            aside = retakes.of(index)
            write(index, merged(job.request, points, taken[index], walls[index], why, aside))

        for round_index in range(plan.count):
            if not open_jobs or stop.requested:
                break
            # Without ``rounds``: one round in plan order (the callers' own order).
            visit = (
                rounds_order(len(jobs), round_index, plan.seed)
                if rounds is not None
                else range(len(jobs))
            )
            if round_index > 0:
                pool.renew()  # a fresh layout and a new worker a round (WorkerPool.renew)
            last = round_index + 1 == plan.count
            crowded_now: list[tuple[int, dict[str, Any], str]] = []
            for index in visit:
                if index not in open_jobs:
                    continue
                if stop.requested:
                    break
                request = round_request(jobs[index].request, plan.count, round_index, share)
                results = take(index, request, round_index + 1)
                if results is None:
                    break
                first_failed = round_index == 0 and all(r.status != "ok" for r in results)
                why = None if first_failed else crowded_why(results)
                if why is not None and plan.count > 1:
                    crowded_now.append((index, request, why))
                elif first_failed or (last and ready(index)):
                    finish(index)
            # Later in the round: every crowded process again.
            for index, request, why in crowded_now:
                # A stop leaves the crowded process as it is: its point is whole.
                if not stop.requested:
                    retake(index, round_index, request, why)
                if last and ready(index):
                    finish(index)
        # Then the budget left, a process at a time, to the points furthest from target.
        if sharing:
            pool.share(1)  # the same point may be chosen twice in a row: a fresh process each
        since_renewal = 0
        while adaptive and open_jobs and not stop.requested:
            wide = {i: s for i in open_jobs if (s := spread(i)) is not None}
            choice = next_process(wide, target, budget.left_s, plan.max_count)
            if choice is None:
                break
            index, cap_s = choice
            if since_renewal >= len(jobs):  # a round's worth of processes per layout
                pool.renew()
                since_renewal = 0
            since_renewal += 1
            total += 1
            request = process_request(jobs[index].request, cap_s, plan.count)
            if take(index, request, len(walls[index]) + 1) is None:
                break
            if settled(index):  # within target now, or at its most processes: written now
                finish(index)
        # What is still open is done, or the run stopped: write what is whole.
        if adaptive or stop.requested:
            for index in sorted(open_jobs):
                if len(taken[index]) < plan.count:
                    continue  # cut short by a stop: --resume measures it
                finish(index, why_stopped(spread(index), target, plan.max_count))
        summary.results = [r for index in sorted(finished) for r in finished[index]]
        summary.status = "interrupted" if stop.requested else "finished"
        summary.stop_signal = stop.signum
    except BaseException:
        summary.status = "interrupted"
        raise
    finally:
        if opened and store is not None:
            with contextlib.suppress(BenchbenchError):
                store.update_run(record.run_id, status=summary.status, finished_at=now())
    return summary


def _request(
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


def _counts(
    jobs: Sequence[Job],
    counter: WorkerPool,
    timed: bool,
    timeout_s: float,
    stop: StopRequest,
    notify: ProgressFn,
    total: int,
    done: Callable[[int, list[Result]], None] | None = None,
) -> dict[int, list[Result]]:
    """Every job's instruction counts from the instrumented worker, in plan order (the
    jobs a stop left uncounted are absent: ``--resume`` measures them); ``done(index,
    results)`` is called with each job's counts as they come."""
    counted: dict[int, list[Result]] = {}
    for index, job in enumerate(jobs):
        if stop.requested:
            break
        notify("point", {"index": index, "label": job.label, "round": "instructions"})
        limit_s = (job.timeout_s or timeout_s) * SLOWDOWN
        request = count_request(job.request, timed)
        try:
            message = counter.request(request, (job.answer, "interrupted"), limit_s, stop)
        except WorkerFailure as failure:
            if stop.requested:
                break
            counted[index] = job.failed(f"instruction count: {failure}")
        else:
            if message["event"] == "interrupted":
                break
            counted[index] = job.results(message)
        notify("advance", {"total": total})
        if done is not None:
            done(index, counted[index])
    return counted


def environment_of(pool: WorkerPool, threads: int | None) -> Environment:
    """The environment ``pool``'s worker describes (with ``threads`` torch threads)."""
    try:
        message = pool.request(
            {"op": "environment", "threads": threads}, ("environment",), ENVIRONMENT_TIMEOUT_S
        )
    except WorkerFailure as failure:
        raise MeasurementError(f"the first worker failed before measuring: {failure}") from None
    return Environment(fields=message["fields"], info=message["info"])


#: Seconds a worker may take to load the suites and list their points.
PLAN_TIMEOUT_S = 300.0


def plan_in(
    pool: WorkerPool, suites: Sequence[Path], selection: Selection, cuda_graph: bool = False
) -> Plan:
    """:func:`benchbench.run.planning.plan`, done by ``pool``'s next worker: the suites
    import torch there.

    An error in a suite is raised here as the worker raised it (a :class:`SuiteError`
    naming the file and line, a :class:`UsageError` for a bad filter); one that is not
    benchbench's own becomes a :class:`SuiteError` with its class name.
    """
    try:
        answer = pool.request(
            plan_request(suites, selection, cuda_graph), ("plan",), PLAN_TIMEOUT_S
        )
    except WorkerFailure as failure:
        raise MeasurementError(f"the worker that loads the suites failed: {failure}") from None
    if "error" in answer:
        kind = getattr(errors, str(answer.get("error_type")), None)
        if isinstance(kind, type) and issubclass(kind, BenchbenchError):
            raise kind(answer["error"])
        raise SuiteError(f"{answer.get('error_type')}: {answer['error']}")
    return Plan([Planned.from_dict(p) for p in answer["points"]], answer["suites"])


def _open_run(store: Store, record: RunRecord, env: Environment) -> None:
    if record.new_row is None and store.resolve_run(record.run_id)["environment_id"] != env.id:
        raise MeasurementError(  # never file points under another machine's run
            f"run {record.run_id} was measured in another environment; --resume it with "
            "--force to measure the rest into a run of its own"
        )
    store.save_environment(env)
    if record.new_row is None:
        store.update_run(record.run_id, status="running", finished_at=None)
    else:
        store.create_run(record.new_row(env))
