"""``benchbench time``: statements measured in a worker process, point by point.

The statements are parsed and name-checked here (:mod:`benchbench.measure.statements`),
then every statement is evaluated once at the first point in the worker before
anything is timed, then each point is measured (:mod:`benchbench.measure.variants`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchbench.analysis.variants import (
    MIN_EFFECT,
    Crossover,
    Row,
    find_crossovers,
    rows_from_results,
)
from benchbench.core.errors import BenchbenchError, MeasurementError, UsageError
from benchbench.core.values import Point, Result, short_hash
from benchbench.core.version import __version__
from benchbench.machine.environment import Environment
from benchbench.machine.vcs import git_state
from benchbench.measure.policy import Policy
from benchbench.measure.statements import (
    DEFAULT_SETUP,
    STATEMENT_BUGS,
    Statement,
    check_names,
    parse_statements,
)
from benchbench.run.workers import Spawner, Worker, WorkerFailure, Zygote, launcher
from benchbench.store import Store
from benchbench.store.store import now

#: Sampling cap per point of ``benchbench time``: 13 sizes x 2 statements answer in
#: <= 30 s with the worker's start (BENCHMARKS.md, "benchbench time (issue 8)").
DEFAULT_BUDGET_S = 0.5


# -- the CLI's driver: one worker process, one request per point ------------------------


@dataclass(frozen=True)
class TimeConfig:
    """What ``benchbench time`` measures; ``reference`` is a 0-based statement index."""

    statements: tuple[str, ...]
    sizes: tuple[int, ...]
    setup: str | None = None
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = ("float32",)
    reference: int = 0
    policy: Policy = field(default_factory=Policy)
    min_effect: float = MIN_EFFECT
    label: str | None = None
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 <= self.reference < len(self.statements):
            raise UsageError(
                f"--reference {self.reference + 1} is not a statement number; "
                f"give 1 to {len(self.statements)}"
            )
        if not self.sizes:
            raise UsageError("--size holds no size")

    @property
    def reference_text(self) -> str:
        return self.statements[self.reference]

    def point(self, size: int, device: str, dtype: str, variant: str = "") -> Point:
        """The stored point of one statement; the setup is a parameter (it splits history)."""
        return Point(
            suite="time",
            workload="time",
            variant=variant,
            size=size,
            shape=(size,),
            dtype=dtype,
            device=device,
            params=(("setup", self.setup or DEFAULT_SETUP),),
        )

    def request(self, point: Point, check_only: bool = False) -> dict[str, Any]:
        """The worker's ``time`` request for one point."""
        return {
            "op": "time",
            "statements": list(self.statements),
            "setup": self.setup,
            "point": point.to_dict(),
            "reference": self.reference,
            "policy": dataclasses.asdict(self.policy),
            "check_only": check_only,
        }

    def default_label(self) -> str:
        return (self.label or "time: " + " vs ".join(self.statements))[:255]


@dataclass
class TimeOutcome:
    """What a ``time`` run produced; ``run_id`` is None when nothing was stored."""

    run_id: str | None
    results: list[Result]
    rows: list[Row]
    crossovers: list[Crossover]


ProgressFn = Callable[[str, dict[str, Any]], None]


def _statement_bug(config: TimeConfig, checked: Sequence[Result]) -> UsageError | None:
    for index, result in enumerate(checked):
        failure = result.extra.get("failure") if result.extra else None
        if result.status == "error" and failure in STATEMENT_BUGS:
            if result.extra.get("in") == "setup":
                return UsageError(f"--setup failed: {result.reason}; nothing was measured")
            statement = Statement(index + 1, config.statements[index])
            return UsageError(f"{statement.describe()}: {result.reason}; nothing was measured")
    return None


def time_statements(
    config: TimeConfig, store: Store | None, progress: ProgressFn | None = None
) -> TimeOutcome:
    """Check the statements, then measure every point in a worker process.

    Every statement is evaluated once at the first point before anything is timed:
    a name or attribute error there is a :class:`UsageError` naming the statement.
    A worker that crashes or hangs costs that point (every statement of it is
    recorded as an error) and a fresh worker takes the rest. With a ``store``, the
    results are written as an ``adhoc`` run of suite ``time`` as they come.
    """
    notify = progress or (lambda _e, _d: None)
    statements = parse_statements(config.statements)
    check_names(statements, config.setup)
    points = [
        config.point(size, device, dtype)
        for device in config.devices
        for dtype in config.dtypes
        for size in sorted(config.sizes)
    ]
    worker: Worker | None = None
    run_id: str | None = None
    status = "interrupted"
    results: list[Result] = []
    workers = launcher()
    try:
        worker = _start_worker(workers)
        try:
            checked = worker.request(
                config.request(points[0], check_only=True), ("timed",), config.timeout_s
            )
        except WorkerFailure:
            # A statement that crashes the process costs each point it crashes, like
            # any point of a run: the points below record it.
            worker.close()
            worker = None
        else:
            bug = _statement_bug(config, [Result.from_dict(r) for r in checked["results"]])
            if bug is not None:
                raise bug
        if store is not None:
            worker = worker or _start_worker(workers)
            run_id = _create_run(config, store, worker)
        notify("start", {"total": len(points), "run_id": run_id})
        for index, point in enumerate(points):
            label = f"{point.dtype}, {point.device}, n={point.size}"
            notify("point", {"index": index, "label": label})
            # A replacement is forked only when a point needs it.
            worker = worker or _start_worker(workers)
            try:
                message = worker.request(config.request(point), ("timed",), config.timeout_s)
                measured = [Result.from_dict(r) for r in message["results"]]
            except WorkerFailure as failure:
                measured = [
                    Result(point=replace(point, variant=s), status="error", reason=str(failure))
                    for s in config.statements
                ]
                worker.close()
                worker = None
            for result in measured:
                if store is not None and run_id is not None:
                    store.write_result(run_id, result)
            results.extend(measured)
            notify("result", {"index": index, "results": measured})
        status = "finished"
    finally:
        if worker is not None:
            worker.close()
        workers.close()
        if store is not None and run_id is not None:
            with contextlib.suppress(BenchbenchError):
                store.update_run(run_id, status=status, finished_at=now())
    rows = rows_from_results(results, config.reference_text, config.min_effect)
    return TimeOutcome(run_id, results, rows, find_crossovers(rows))


def _start_worker(workers: Zygote | Spawner) -> Worker:
    try:
        return workers.worker()
    except WorkerFailure as failure:
        raise MeasurementError(f"the worker process did not start: {failure}") from None


def _create_run(config: TimeConfig, store: Store, worker: Worker) -> str:
    message = worker.request({"op": "environment", "threads": None}, ("environment",), 120.0)
    env = Environment(fields=message["fields"], info=message["info"])
    store.save_environment(env)
    run_id = str(uuid.uuid4())
    git = git_state(Path.cwd())
    store.create_run(
        {
            "id": run_id,
            "group_id": run_id,
            "kind": "adhoc",
            "label": config.default_label(),
            "status": "running",
            "started_at": now(),
            "finished_at": None,
            "suites": [
                {
                    "name": "time",
                    "path": None,
                    "hash": short_hash([config.statements, config.setup]),
                }
            ],
            "harness_version": __version__,
            "git_sha": git.sha,
            "git_branch": git.branch,
            "git_dirty": git.dirty,
            "tags": [],
            "config": {
                "statements": list(config.statements),
                "setup": config.setup or DEFAULT_SETUP,
                "reference": config.reference_text,
                "sizes": list(config.sizes),
                "devices": list(config.devices),
                "dtypes": list(config.dtypes),
                "policy": dataclasses.asdict(config.policy),
                "min_effect": config.min_effect,
            },
            "environment_id": env.id,
        }
    )
    return run_id
