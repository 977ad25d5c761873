"""``benchbench run``: plans the points of suites, one job per point, and measures them.

Planning is here (suites, selection, ``--shard``, ``--resume``), by what the run's first
worker lists (:class:`Session`; :mod:`benchbench.run.planning`: the suites import torch,
the runner never does); measuring is the one runner loop,
:func:`benchbench.run.jobs.measure_jobs`: workers forked from a zygote that imported
torch once (:mod:`benchbench.run.worker`), a crash, hang or out-of-memory kill recorded
as that point's error, each point written to the store in its own transaction as soon
as it is done (a killed run keeps everything it finished and ``resume`` completes it),
and a :class:`~benchbench.run.workers.StopRequest` (set by the CLI's SIGINT/SIGTERM
handlers) stopping the run after the current sample, marked ``interrupted``.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core import defaults
from benchbench.core.errors import UsageError
from benchbench.core.values import CACHE_MODES, OUTPUT_MODES
from benchbench.machine.allocator import ALLOCATORS
from benchbench.machine.cpus import check_cpus
from benchbench.machine.environment import Environment
from benchbench.measure.policy import Policy
from benchbench.run import planning, resume, sharding
from benchbench.run.instrumented import (
    counting_launcher,
    counting_workers,
    known_counter,
    parse_metrics,
)
from benchbench.run.jobs import (
    Job,
    ProgressFn,
    RunRecord,
    RunSummary,
    WorkerPool,
    environment_of,
    measure_jobs,
    run_row,
)
from benchbench.run.jobs import plan_in as jobs_plan_in
from benchbench.run.planning import Plan, Planned, shard_points
from benchbench.run.rounds import Rounds
from benchbench.run.workers import Spawner, StopRequest, WorkerFailure, Zygote, launcher
from benchbench.store import Store
from benchbench.suite.load import Selection

__all__ = ["Planned", "RunConfig", "RunSummary", "Session", "StopRequest", "WorkerFailure"]
__all__ += ["plan", "resume_config", "run", "shard_points"]

# The kinds of run and a compile variant's timeout are defined once, in the leaf, where
# ``--help`` quotes them without importing the runner.
RUN_KINDS = defaults.RUN_KINDS
COMPILE_TIMEOUT_S = defaults.COMPILE_TIMEOUT_S

#: A fresh run whose suites and filters select nothing (checked before a store is opened).
NO_POINTS = (
    "no points to run: the filters (--filter, --tag, --device, --dtype) match nothing; "
    "`benchbench list SUITE` shows the points a suite has"
)


@dataclass(frozen=True)
class RunConfig:
    """Everything ``benchbench run`` needs besides the store."""

    suites: tuple[Path, ...]
    selection: Selection = field(default_factory=Selection)
    policy: Policy = field(default_factory=Policy)
    cache: str = "warm"
    threads: int | None = None
    timeout_s: float = 60.0
    #: The timeout of ``torch.compile`` variants' points; None: the larger of
    #: ``timeout_s`` and :data:`COMPILE_TIMEOUT_S` (the CLI sets it to ``--timeout``).
    compile_timeout_s: float | None = None
    memory_limit_bytes: int = 0
    kind: str = "adhoc"
    label: str | None = None
    tags: tuple[str, ...] = ()
    resume: str | None = None
    #: ``run --resume RUN --force``: when the machine or code differs from RUN's, measure
    #: the rest into a new run of RUN's group (:mod:`benchbench.run.resume`).
    force: bool = False
    repo: Path | None = None
    shard: sharding.Shard | None = None
    shard_by: str = "cost"  # or "count": ignore the store's history
    group: str | None = None  # a --group value; the shards of one run share it
    fork: bool | None = None  # workers forked from a zygote (default: on Linux)
    allocator: str = "system"  # or "jemalloc", "tcmalloc": preloaded into the workers
    rounds: Rounds = field(default_factory=Rounds)  # fresh processes per point
    #: ``--cpus``: the cores the workers are pinned to (empty: not pinned); a pinned
    #: worker's torch uses one thread per core unless ``threads`` says otherwise.
    cpus: tuple[int, ...] = ()
    #: ``run --profile``: traces go to ``profile_dir/RUN_ID/`` (taken after timing).
    profile_dir: Path | None = None
    outputs: str | None = None  # ``run --outputs``; None: each workload's own
    #: ``run --metric``: ``time`` (fresh processes in rounds) and/or ``instructions``
    #: (counted under callgrind by instrumented workers, one per usable core:
    #: :mod:`benchbench.run.instrumented`).
    metrics: tuple[str, ...] = ("time",)
    #: ``run --counter``: what counts the instructions, ``callgrind`` or ``pmu`` (the CPU's
    #: own counter, natively: :func:`benchbench.run.instrumented.check_counter`).
    counter: str = defaults.DEFAULT_COUNTER

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", parse_metrics(self.metrics))
        known_counter(self.counter)
        if self.cache not in CACHE_MODES:
            raise UsageError(f"--cache must be one of {', '.join(CACHE_MODES)}, got {self.cache!r}")
        if self.kind not in RUN_KINDS:
            raise UsageError(f"run kind must be one of {', '.join(RUN_KINDS)}, got {self.kind!r}")
        if self.timeout_s <= 0:
            raise UsageError(f"--timeout must be > 0 seconds, got {self.timeout_s}")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads must be >= 1, got {self.threads}")
        if self.allocator not in ALLOCATORS:
            raise UsageError(
                f"--allocator must be one of {', '.join(ALLOCATORS)}, got {self.allocator!r}"
            )
        if self.outputs is not None and self.outputs not in OUTPUT_MODES:
            raise UsageError(
                f"--outputs must be one of {', '.join(OUTPUT_MODES)}, got {self.outputs!r}"
            )
        if self.shard_by not in ("cost", "count"):
            raise UsageError(f"--shard-by must be cost or count, got {self.shard_by!r}")
        if self.cpus:
            object.__setattr__(self, "cpus", check_cpus(self.cpus))


def plan(config: RunConfig) -> list[Planned]:
    """Load ``config``'s suites in this process and list the points the run would measure
    (``benchbench run`` asks its first worker instead: :attr:`Session.plan`)."""
    return planning.plan(config.suites, config.selection, config.policy.cuda_graph)


def plan_in(pool: WorkerPool, config: RunConfig) -> Plan:
    """:func:`plan`, done by ``pool``'s next worker (:func:`benchbench.run.jobs.plan_in`)."""
    return jobs_plan_in(pool, config.suites, config.selection, config.policy.cuda_graph)


def resume_config(
    store: Store, ref: str, *, force: bool = False, repo: Path | None = None
) -> RunConfig:
    """The configuration stored run ``ref`` was started with, set to resume it.

    Suites (by path), selection, policy, cache mode, output lifetime, threads, pinned
    cores, timeout, memory limit, allocator, rounds, kind, label, tags, the repository
    and the shard come from the run, so that ``--resume RUN`` alone measures exactly the
    points the run still lacks. A usage error when benchbench, a suite file or the git
    sha of ``repo`` (default: the run's own) differs from the run's, unless ``force``
    (the environment is checked when the first worker describes it, in :func:`run`).
    """
    row = store.resolve_run(ref)
    stored: dict[str, Any] = row.get("config") or {}
    if repo is None and stored.get("repo"):
        repo = Path(stored["repo"])
    suites = tuple(Path(s["path"]) for s in row.get("suites") or [])
    missing = [str(p) for p in suites if not p.is_file()]
    if missing:
        raise UsageError(
            f"cannot resume run {row['id']}: its suite file(s) {', '.join(missing)} no longer "
            "exist; restore them or start a new run"
        )
    changed = resume.code_changes(row, repo)
    if changed and not force:
        raise resume.refusal(row["id"], changed)
    known = {f.name for f in dataclasses.fields(Policy)}
    policy = Policy(**{k: v for k, v in (stored.get("policy") or {}).items() if k in known})
    selection = Selection.from_dict(stored.get("selection") or {})
    shard = stored.get("shard")
    return RunConfig(
        suites=suites,
        selection=selection,
        policy=policy,
        cache=stored.get("cache", "warm"),
        outputs=stored.get("outputs"),
        metrics=tuple(stored.get("metrics") or ("time",)),
        counter=stored.get("counter") or defaults.DEFAULT_COUNTER,
        threads=stored.get("threads"),
        timeout_s=float(stored.get("timeout_s", 60.0)),
        compile_timeout_s=stored.get("compile_timeout_s"),
        memory_limit_bytes=int(stored.get("memory_limit_bytes") or 0),
        allocator=stored.get("allocator", "system"),
        rounds=Rounds.from_dict(stored.get("rounds")),
        cpus=tuple(int(c) for c in stored.get("cpus") or ()),
        kind=row["kind"],
        label=row.get("label"),
        tags=tuple(row.get("tags") or ()),
        resume=row["id"],
        force=force,
        repo=repo,
        shard=sharding.Shard(shard["index"], shard["count"]) if shard else None,
        shard_by=(shard or {}).get("by", "cost"),
    )


def _plan_run(
    config: RunConfig,
    store: Store,
    env: Environment | None = None,
    points: list[Planned] | None = None,
) -> tuple[str, str, list[Planned], dict[str, Any] | None]:
    """Run id, group id, the points to measure and the shard document.

    ``env``: where a resumed run goes on, whose points the run must not mix with its
    own unless ``config.force``; then they go to a new run of its group (its id is
    returned, with the shard document to store in it). ``points``: the plan, when a
    worker made it (None: planned here).
    """
    points = plan(config) if points is None else points
    if config.resume:
        row = store.resolve_run(config.resume)
        shard_doc = (row.get("config") or {}).get("shard")
        if shard_doc is not None:
            mine = set(shard_doc["benchmark_ids"])
            points = [p for p in points if p.benchmark_id in mine]
        done = resume.done_ids(store, row)
        rest = [p for p in points if p.benchmark_id not in done]
        if not _moved(config, store, row, env):
            return row["id"], row["group_id"], rest, None
        return str(uuid.uuid4()), row["group_id"], rest, shard_doc
    run_id = str(uuid.uuid4())
    group_id = sharding.group_id_for(config.group) if config.group else run_id
    if not points:
        raise UsageError(NO_POINTS)
    if config.shard is None:
        return run_id, group_id, points, None
    chosen, shard_doc = shard_points(points, config.shard, config.shard_by, store, group_id)
    return run_id, group_id, chosen, shard_doc


def _moved(config: RunConfig, store: Store, row: dict[str, Any], env: Environment | None) -> bool:
    """Whether resumed run ``row`` goes on under another environment or other code
    (refused without ``config.force``: :mod:`benchbench.run.resume`)."""
    changed = resume.code_changes(row, config.repo)
    if env is not None:
        changed += resume.environment_changes(resume.stored_fields(store, row), env)
    if changed and not config.force:
        raise resume.refusal(row["id"], changed)
    return bool(changed)


class Session:
    """The workers of one ``benchbench run``, and the plan its first worker makes.

    Constructing it starts the zygote, whose torch import overlaps the caller's own work
    (the instrumented workers start at their first count: ~30 s under callgrind);
    :attr:`plan` is the first request a worker answers, so the suites, which import
    torch, load there and never in the runner (the CLI reads it before it opens the
    store: a run that selects nothing creates none). Use as a context manager: leaving
    it ends the workers.
    """

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self._notify: ProgressFn | None = None
        #: Notes given before :meth:`run` has a progress callback (the plan's worker may
        #: be the one that falls back to fresh interpreters): told when it has one.
        self._held: list[str] = []
        counting = "instructions" in config.metrics
        #: The counting workers' pools (none without the instructions metric): each
        #: starts its worker at its first count.
        self.counters = [
            WorkerPool(
                counting_launcher(config.counter, config.memory_limit_bytes, config.allocator),
                fresh=False,
            )
            for _ in range(counting_workers() if counting else 0)
        ]

        def workers() -> Zygote | Spawner:
            return launcher(config.memory_limit_bytes, config.fork, config.allocator, config.cpus)

        try:
            self.pool = WorkerPool(
                workers(),
                on_note=self._note,
                relaunch=workers,
            )
        except BaseException:
            self._close_counters()
            raise
        self._plan: Plan | None = None

    def _note(self, text: str) -> None:
        if self._notify is None:
            self._held.append(text)
        else:
            self._notify("note", {"message": text})

    @property
    def plan(self) -> Plan:
        """The suites' points under the run's selection, listed by a worker (once)."""
        if self._plan is None:
            self._plan = plan_in(self.pool, self.config)
        return self._plan

    def run(
        self,
        store: Store,
        progress: ProgressFn | None = None,
        stop: StopRequest | None = None,
    ) -> RunSummary:
        """:func:`run` with these workers."""
        config = self.config
        self._notify = progress or (lambda _event, _data: None)
        for text in self._held:
            self._notify("note", {"message": text})
        self._held.clear()
        env = environment_of(self.pool, config.threads)
        run_id, group_id, points, shard_doc = _plan_run(config, store, env, self.plan.points)
        profile_dir = str(config.profile_dir / run_id) if config.profile_dir else None
        jobs = [job_for(config, planned, profile_dir) for planned in points]
        continues = config.resume if config.resume and run_id != config.resume else None
        suites = self.plan.suites

        def new_row(env: Environment) -> dict[str, Any]:
            return _run_row(run_id, group_id, config, env, shard_doc, suites, continues)

        fresh = config.resume is None or continues is not None
        return measure_jobs(
            jobs,
            self.pool,
            RunRecord(run_id, store, new_row if fresh else None, env),
            timeout_s=config.timeout_s,
            threads=config.threads,
            stop=stop,
            progress=progress,
            rounds=config.rounds,
            counters=self.counters,
            counted_by=config.counter,
            timed="time" in config.metrics,
        )

    def close(self) -> None:
        try:
            self.pool.close()
        finally:
            self._close_counters()

    def _close_counters(self) -> None:
        for counter in self.counters:
            counter.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def run(
    config: RunConfig,
    store: Store,
    progress: ProgressFn | None = None,
    stop: StopRequest | None = None,
) -> RunSummary:
    """Measure every planned point into ``store``; returns the summary.

    ``progress(event, data)`` is called with ``start`` (total), ``point`` (index,
    label) before each point, ``result`` (result) after it, and ``note`` (message) when
    the workers change how they start (fresh interpreters). ``stop`` (set by a
    signal handler) ends the run after the current sample, status ``interrupted``.
    The suites load in the first worker (:class:`Session`).
    """
    with Session(config) as session:
        return session.run(store, progress, stop)


def job_for(config: RunConfig, planned: Planned, profile_dir: str | None) -> Job:
    """The job that measures ``planned``'s point."""
    point = planned.point
    request = {
        "op": "measure",
        "suite_path": str(planned.path),
        "workload": planned.workload,
        "point": point.to_dict(),
        "policy": dataclasses.asdict(config.policy),
        "cache": config.cache,
        "outputs": config.outputs,
        "threads": config.threads,
        "profile_dir": profile_dir,
        # a checked process counts the FLOPs: its zygote warms the dispatch mode first
        "derives_flops": planned.derives_flops,
    }
    timeout_s = None
    if planned.compile:
        timeout_s = config.compile_timeout_s or max(config.timeout_s, COMPILE_TIMEOUT_S)
    return Job(request, (point,), point.label, code_version=planned.version, timeout_s=timeout_s)


def _run_row(
    run_id: str,
    group_id: str,
    config: RunConfig,
    env: Environment,
    shard_doc: dict[str, Any] | None,
    suites: list[dict[str, str]],
    continues: str | None = None,
) -> dict[str, Any]:
    """The row of run ``run_id``; ``suites``: :func:`suites_of` its suite files;
    ``continues``: the run whose rest it measures (``--resume RUN --force`` on another
    machine or code)."""
    return run_row(
        run_id,
        env,
        kind=config.kind,
        label=config.label,
        suites=suites,
        tags=config.tags,
        group_id=group_id,
        repo=config.repo,
        config={
            "policy": dataclasses.asdict(config.policy),
            "cache": config.cache,
            "outputs": config.outputs,
            "metrics": list(config.metrics),
            # What counted the instructions: counts of two counters are never compared.
            "counter": config.counter if "instructions" in config.metrics else None,
            "threads": config.threads,
            "timeout_s": config.timeout_s,
            "compile_timeout_s": config.compile_timeout_s,
            "memory_limit_bytes": config.memory_limit_bytes,
            "allocator": config.allocator,
            "rounds": config.rounds.to_dict(),
            "cpus": list(config.cpus) or None,
            "selection": dataclasses.asdict(config.selection),
            "group": config.group,
            "shard": shard_doc,
            # Where the git state was read: a resume compares that checkout's sha now.
            "repo": str((config.repo or Path.cwd()).resolve()),
            "continues": continues,
        },
    )
