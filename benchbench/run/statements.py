"""``benchbench time``: statements measured in worker processes, point by point.

The statements are parsed and name-checked here (:mod:`benchbench.measure.statements`),
then every statement is evaluated once at the first point in the worker before
anything is timed, then each point is one job of the runner loop
(:func:`benchbench.run.jobs.measure_jobs`), measured in each of its rounds in a fresh
worker (every statement interleaved in that process, so the verdict pairs them by
process) by
:mod:`benchbench.measure.variants`. Ratios, verdicts and crossovers are the caller's
(:mod:`benchbench.analysis.variants`): this module stores and returns results only.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchbench.core.defaults import TIME_BUDGET_S
from benchbench.core.errors import UsageError
from benchbench.core.values import Point, Result, short_hash
from benchbench.machine.allocator import ALLOCATORS
from benchbench.machine.cpus import check_cpus
from benchbench.machine.environment import Environment
from benchbench.measure.policy import Policy
from benchbench.measure.statements import (
    DEFAULT_SETUP,
    STATEMENT_BUGS,
    Statement,
    check_names,
    parse_statements,
)
from benchbench.run.jobs import Job, ProgressFn, RunRecord, WorkerPool, measure_jobs, run_row
from benchbench.run.rounds import Rounds
from benchbench.run.workers import WorkerFailure, launcher
from benchbench.store import Store

#: Sampling cap per point of ``benchbench time`` (its reasons: core.defaults).
DEFAULT_BUDGET_S = TIME_BUDGET_S


# -- the CLI's driver: one worker process, one request per point ------------------------


@dataclass(frozen=True)
class TimeConfig:
    """What ``benchbench time`` measures; ``reference`` is a 0-based statement index.

    ``sizes``: numbers of elements (one-dimensional inputs) or shapes such as
    ``(64, 1024)``; the statements see ``n`` (the number of elements) and ``shape``.
    """

    statements: tuple[str, ...]
    sizes: tuple[int | tuple[int, ...], ...]
    setup: str | None = None
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = ("float32",)
    reference: int = 0
    policy: Policy = field(default_factory=Policy)
    #: Fresh worker processes per point (each measures every statement, interleaved).
    rounds: Rounds = field(default_factory=Rounds)
    #: ``--min-effect``, stored with the run for the verdict (None: the analysis' default).
    min_effect: float | None = None
    label: str | None = None
    timeout_s: float = 60.0
    #: torch threads in the worker (None: torch's default, one per pinned core with ``cpus``).
    threads: int | None = None
    #: ``--cpus``: the cores the worker is pinned to (empty: not pinned).
    cpus: tuple[int, ...] = ()
    #: ``--allocator``: the workers' memory allocator (:mod:`benchbench.machine.allocator`).
    allocator: str = "system"

    def __post_init__(self) -> None:
        if not 0 <= self.reference < len(self.statements):
            raise UsageError(
                f"--reference {self.reference + 1} is not a statement number; "
                f"give 1 to {len(self.statements)}"
            )
        if not self.sizes:
            raise UsageError("--size holds no size")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads must be >= 1, got {self.threads}")
        if self.cpus:
            object.__setattr__(self, "cpus", check_cpus(self.cpus))
        if self.allocator not in ALLOCATORS:
            raise UsageError(
                f"--allocator must be one of {', '.join(ALLOCATORS)}, got {self.allocator!r}"
            )

    @property
    def reference_text(self) -> str:
        return self.statements[self.reference]

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        """Every size as a shape, by number of elements (then shape)."""
        shapes = {(s,) if isinstance(s, int) else tuple(s) for s in self.sizes}
        return sorted(shapes, key=lambda shape: (math.prod(shape), shape))

    def point(
        self, size: int | tuple[int, ...], device: str, dtype: str, variant: str = ""
    ) -> Point:
        """The stored point of one statement; the setup is a parameter (it splits history)."""
        shape = (size,) if isinstance(size, int) else tuple(size)
        return Point(
            suite="time",
            workload="time",
            variant=variant,
            size=math.prod(shape),
            shape=shape,
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
            "threads": self.threads,
        }

    def job(self, point: Point) -> Job:
        """One point: every statement measured there, one result each, in order."""
        return Job(
            self.request(point),
            tuple(replace(point, variant=s) for s in self.statements),
            f"{point.dtype}, {point.device}, n={'x'.join(map(str, point.shape))}",
            answer="timed",
        )

    def default_label(self) -> str:
        return (self.label or "time: " + " vs ".join(self.statements))[:255]


@dataclass
class TimeOutcome:
    """What a ``time`` run produced; ``run_id`` is None when nothing was stored."""

    run_id: str | None
    results: list[Result]


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
    statements = parse_statements(config.statements)
    check_names(statements, config.setup)
    points = [
        config.point(size, device, dtype)
        for device in config.devices
        for dtype in config.dtypes
        for size in config.shapes
    ]
    run_id = str(uuid.uuid4())
    notify = progress or (lambda _event, _data: None)
    workers = launcher(allocator=config.allocator, cpus=config.cpus)
    with WorkerPool(workers, on_note=lambda text: notify("note", {"message": text})) as pool:
        try:
            checked = pool.request(
                config.request(points[0], check_only=True), ("timed",), config.timeout_s
            )
        except WorkerFailure:
            # A statement that crashes the process costs each point it crashes, like
            # any point of a run: the points below record it.
            pass
        else:
            bug = _statement_bug(config, [Result.from_dict(r) for r in checked["results"]])
            if bug is not None:
                raise bug

        def new_row(env: Environment) -> dict[str, Any]:
            return _run_row(run_id, config, env)

        summary = measure_jobs(
            [config.job(point) for point in points],
            pool,
            RunRecord(run_id, store, new_row),
            timeout_s=config.timeout_s,
            threads=config.threads,
            progress=progress,
            rounds=config.rounds,
        )
    return TimeOutcome(run_id if store is not None else None, summary.results)


def _run_row(run_id: str, config: TimeConfig, env: Environment) -> dict[str, Any]:
    return run_row(
        run_id,
        env,
        kind="adhoc",
        label=config.default_label(),
        suites=[
            {"name": "time", "path": None, "hash": short_hash([config.statements, config.setup])}
        ],
        config={
            "statements": list(config.statements),
            "setup": config.setup or DEFAULT_SETUP,
            "reference": config.reference_text,
            "sizes": [s if isinstance(s, int) else list(s) for s in config.sizes],
            "devices": list(config.devices),
            "dtypes": list(config.dtypes),
            "policy": dataclasses.asdict(config.policy),
            "rounds": config.rounds.to_dict(),
            "min_effect": config.min_effect,
            "threads": config.threads,
            "cpus": list(config.cpus) or None,
            "allocator": config.allocator,
        },
    )
