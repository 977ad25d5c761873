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

How jobs meet processes: every request goes to a fresh worker, in the rounds of the
round plan that ``ab`` follows too (:class:`~benchbench.run.rounds.RoundPlan`): each
round visits the points still open in a seeded shuffled order, from a fresh zygote, and
a point is merged over its processes (:mod:`benchbench.run.merge`) and written when its
last round is in (so an interrupted run loses the rounds of the points not yet
complete, and ``--resume`` measures those points again, all rounds).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchbench.core import errors
from benchbench.core.errors import BenchbenchError, MeasurementError, SuiteError
from benchbench.core.values import Result
from benchbench.machine.environment import Environment
from benchbench.run.planning import Plan, Planned, plan_request
from benchbench.run.pool import WorkerPool
from benchbench.run.record import RunRecord, run_row
from benchbench.run.rounds import Rounds
from benchbench.run.visits import Job, ProgressFn, Visits
from benchbench.run.workers import StopRequest, WorkerFailure
from benchbench.store import Store
from benchbench.store.store import now
from benchbench.suite.load import Selection

#: ``run_row`` and ``RunRecord`` live in :mod:`benchbench.run.record`, ``Job`` in
#: :mod:`benchbench.run.visits`; their callers import them from here, with the loop.
__all__ = [
    "Job",
    "ProgressFn",
    "RunRecord",
    "RunSummary",
    "WorkerPool",
    "measure_jobs",
    "run_row",
]

#: Seconds the first worker may take to describe the environment (it may be the first
#: process to touch the GPU driver: ~10 s on a cold machine).
ENVIRONMENT_TIMEOUT_S = 120.0


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
    counters: Sequence[WorkerPool] = (),
    counted_by: str = "callgrind",
    timed: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> RunSummary:
    """Measure ``jobs`` in ``rounds``, writing each point's result to ``record``'s store.

    :class:`~benchbench.run.visits.Visits` takes the processes: every request in a fresh
    worker (with ``rounds.per_process`` = k, a worker of the first rounds serves k of its
    round), in the rounds of :class:`~benchbench.run.rounds.RoundPlan` (without
    ``rounds``, one round in the jobs' order); a point is merged and written once its last
    round is in. ``timeout_s`` bounds each request (a job's own ``timeout_s`` replaces
    it); ``threads`` is torch's thread count in the workers (None: torch's default).
    ``progress(event, data)`` is called with ``start`` (total: requests planned, run_id),
    ``point`` (index, label, round) before each request, ``advance`` (total) after it,
    ``result`` (index, results, result: the first) when a point is done. Without a store
    in ``record`` nothing is stored and the environment is not asked for. ``counters``:
    the counting workers' pools, which count every job's instructions first with
    ``counted_by`` (``callgrind`` or ``pmu``), worker n of N the jobs n, n + N, ...;
    with ``timed`` False the counts are the results.
    """
    stop, store = stop or StopRequest(), record.store
    summary = RunSummary(run_id=record.run_id, planned=len(jobs))
    opened = False
    try:
        if store is not None:
            summary.environment = record.environment or environment_of(pool, threads)
            _open_run(store, record, summary.environment)
            opened = True
        visits = Visits(
            jobs,
            pool,
            store,
            record.run_id,
            rounds=rounds,
            stop=stop,
            notify=progress or (lambda _e, _d: None),
            timeout_s=timeout_s,
            timed=timed,
            counting=bool(counters),
            clock=clock,
        )
        summary.results = visits.measure(counters, counted_by)
        summary.status = "interrupted" if stop.requested else "finished"
        summary.stop_signal = stop.signum
    except BaseException:
        summary.status = "interrupted"
        raise
    finally:
        if opened and store is not None:
            _close_run(store, record.run_id, summary.status)
    return summary


def _close_run(store: Store, run_id: str, status: str) -> None:
    """The run's row marked ``status`` as it ends; a store that fails now loses no point
    (each was written as it was measured), so its error does not hide the run's own."""
    with contextlib.suppress(BenchbenchError):
        store.update_run(run_id, status=status, finished_at=now())


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
