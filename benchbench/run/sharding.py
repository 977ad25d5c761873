"""Splitting one run's points across machines: ``--shard I/N``, ``--shard auto``, groups.

benchbench ships no scheduler: a CI matrix, a Slurm job array or a Kubernetes
indexed job starts N copies of ``benchbench run ... --shard I/N --group ID``
(``--shard auto`` reads I and N from the Slurm or Kubernetes environment:
:func:`shard_from_environment`). Each copy measures a deterministic, disjoint part
of the points; together they cover all of them. The parts are balanced by expected
cost where the store knows it (the median stored ``duration_s`` of the same
benchmark ids in recent finished runs), else by count. The shards are separate
runs sharing one ``group_id``, so ``show GROUP`` and ``runs`` present them as one run.

Every shard must compute the same split, so every shard must see the same
history: the first shard of a group records which runs its costs came from
(``config.shard.cost_runs``) and later shards reuse that list. Shards that start
within the same second can still see different histories if a run finishes in
between; ``--shard-by count`` removes that risk.
"""

from __future__ import annotations

import heapq
import re
import statistics
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchbench.core.errors import NotFoundError, UsageError
from benchbench.core.values import suite_order

if TYPE_CHECKING:  # the store is SQLAlchemy (~0.4 s): a worker that plans never opens one
    from benchbench.store import Store

#: Finished runs whose stored durations give the expected cost of a point.
COST_HISTORY_RUNS = 5

#: Scheduler variables that name one launch of all shards (checked in this order).
SCHEDULER_GROUP_VARIABLES = ("BENCHBENCH_GROUP", "GITHUB_RUN_ID", "SLURM_ARRAY_JOB_ID")

#: ``--shard auto``: the value that reads the shard from the scheduler's environment.
AUTO = "auto"
#: A Slurm array task's id and the array's bounds (``sbatch --array=MIN-MAX[:STEP]``).
SLURM_TASK_ID = "SLURM_ARRAY_TASK_ID"
SLURM_TASK_MIN = "SLURM_ARRAY_TASK_MIN"
SLURM_TASK_MAX = "SLURM_ARRAY_TASK_MAX"
SLURM_TASK_COUNT = "SLURM_ARRAY_TASK_COUNT"
SLURM_TASK_STEP = "SLURM_ARRAY_TASK_STEP"
#: A Kubernetes Indexed Job pod's index, 0 .. completions - 1 (set by Kubernetes).
KUBERNETES_INDEX = "JOB_COMPLETION_INDEX"
#: The shard count of a Kubernetes Indexed Job. Kubernetes does not put
#: ``.spec.completions`` in the pod's environment (and the downward API reaches only
#: the pod's own fields), so the Job's template sets this to the same number.
SHARD_COUNT_VARIABLE = "BENCHBENCH_SHARD_COUNT"

_NAMESPACE = uuid.UUID("4a0f7a52-53c5-4c1e-9d0e-6b3a0d6b9e11")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based, as on the command line) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise UsageError(
                f"--shard {self.index}/{self.count} is out of range: "
                "use I/N with 1 <= I <= N, e.g. --shard 2/4"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` -> Shard(2, 4); anything else is a usage error (``auto``: see
        :func:`parse_shard`)."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise UsageError(f"--shard must look like I/N (e.g. 2/4) or auto, got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def assign(
    ids: Sequence[str], count: int, costs: Mapping[str, float] | None = None
) -> list[list[int]]:
    """Positions of ``ids`` for each of ``count`` shards: disjoint, covering, deterministic.

    Longest processing time first: points in decreasing expected cost (ties by id,
    then position) each go to the shard with the least cost so far (ties: the
    lowest shard). The heaviest shard then exceeds the lightest by at most one
    point's cost; with no costs every point costs 1 and shard sizes differ by at
    most one. Positions within a shard keep the plan's order.
    """
    if count < 1:
        raise UsageError(f"shard count must be >= 1, got {count}")
    known = [c for i in ids if (c := (costs or {}).get(i)) is not None and c > 0]
    default = statistics.median(known) if known else 1.0
    cost = [c if (c := (costs or {}).get(i)) is not None and c > 0 else default for i in ids]
    order = sorted(range(len(ids)), key=lambda k: (-cost[k], ids[k], k))
    loads = [(0.0, shard) for shard in range(count)]
    shards: list[list[int]] = [[] for _ in range(count)]
    for k in order:
        load, shard = heapq.heappop(loads)
        shards[shard].append(k)
        heapq.heappush(loads, (load + cost[k], shard))
    return [sorted(s) for s in shards]


def group_id_for(value: str) -> str:
    """The group id for a ``--group`` value: a UUID as given, anything else hashed to one."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return str(uuid.uuid5(_NAMESPACE, value))


def scheduler_group(environ: Mapping[str, str]) -> str | None:
    """A group name from the scheduler's environment (one value for all shards), if any."""
    for name in SCHEDULER_GROUP_VARIABLES:
        value = environ.get(name)
        if value:
            attempt = environ.get("GITHUB_RUN_ATTEMPT") if name == "GITHUB_RUN_ID" else None
            return f"{name}={value}" + (f".{attempt}" if attempt else "")
    return None


def cost_runs(store: Store, group_id: str) -> list[str]:
    """Runs whose durations price the points: a sibling shard's list, else recent ones."""
    for run in store.group_runs([group_id]):
        recorded = ((run["config"] or {}).get("shard") or {}).get("cost_runs")
        if recorded is not None:
            return [str(r) for r in recorded]
    return sorted(store.recent_finished_runs(COST_HISTORY_RUNS, exclude_group=group_id))


def expected_costs(store: Store, run_ids: Sequence[str]) -> dict[str, float]:
    """Median stored ``duration_s`` per benchmark id over ``run_ids`` (ok points only)."""
    return {k: statistics.median(v) for k, v in store.ok_durations(run_ids).items()}


def group_runs(store: Store, ref: str) -> list[dict[str, Any]]:
    """The runs of group ``ref`` (a group id, its prefix, or a ``--group`` value), oldest first.

    Raises NotFoundError when no run belongs to such a group.
    """
    rows = store.group_runs([ref, group_id_for(ref)], prefix=ref)
    groups = {r["group_id"] for r in rows}
    if len(groups) > 1:
        raise NotFoundError(f"group prefix {ref!r} is ambiguous: " + ", ".join(sorted(groups)[:5]))
    if not rows:
        raise NotFoundError(f"no run or run group {ref!r} in store {store.url}")
    return rows


def group_status(statuses: Sequence[str]) -> str:
    """A group is finished when every shard is; else the first of running/interrupted."""
    for status in ("running", "interrupted"):
        if status in statuses:
            return status
    return statuses[0] if len(set(statuses)) == 1 else "mixed"


def run_or_group(
    store: Store, ref: str, environment: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run and its measurements, or a run group's shards as one run and all their points.

    ``ref`` is first a run reference (:meth:`Store.resolve_run`: id, prefix, label,
    ``latest~N``, among ``environment``'s runs when given), else a run group
    (:func:`group_runs`). A group's row has the group id as ``id``, its first shard's
    start and environment, the shards' common label (else ``ref``), their combined
    status and the number of shards in ``shards``. Raises the run lookup's
    NotFoundError when neither matches.
    """
    try:
        run = store.resolve_run(ref, environment=environment)
        return run, store.measurements(run["id"])
    except NotFoundError as not_a_run:
        try:
            shards = group_runs(store, ref)
        except NotFoundError:
            raise not_a_run from None
    row = {
        **shards[0],
        "id": shards[0]["group_id"],
        "status": group_status([r["status"] for r in shards]),
        "finished_at": max((r["finished_at"] for r in shards if r["finished_at"]), default=None),
        "shards": len(shards),
    }
    labels = {r["label"] for r in shards}
    if (len(labels) > 1 or not row["label"]) and ref != row["id"]:
        # Shards labelled apart ("nightly-1-shard-2"), or not at all: the --group value
        # names the run better than one shard's label or the hashed group id.
        row["label"] = ref
    points = [m for r in shards for m in store.measurements(r["id"])]
    return row, sorted(points, key=suite_order)


@dataclass(frozen=True)
class AutoShard:
    """The shard ``--shard auto`` found, the scheduler it came from and what it read.

    ``read`` holds ``(name, value)`` of every variable the shard was computed from, so
    that a log says why this copy measures shard I of N.
    """

    shard: Shard
    scheduler: str
    read: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        variables = ", ".join(f"{name}={value}" for name, value in self.read)
        return f"--shard auto: shard {self.shard} from the {self.scheduler} ({variables})"


def parse_shard(text: str, environ: Mapping[str, str]) -> tuple[Shard, AutoShard | None]:
    """A ``--shard`` value: ``I/N`` as given, or ``auto`` read from ``environ``.

    Returns the shard and, for ``auto``, what it was read from (to tell the user).
    """
    if text.strip().lower() == AUTO:
        found = shard_from_environment(environ)
        return found.shard, found
    return Shard.parse(text), None


def _integer(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise UsageError(
            f"--shard auto: {name} must be an integer, got {value!r}; "
            "fix the scheduler's environment or give --shard I/N"
        ) from None


def _required(environ: Mapping[str, str], name: str) -> int:
    value = _integer(environ, name)
    if value is None:
        raise UsageError(f"--shard auto: {name} is not set; give --shard I/N")
    return value


def shard_from_environment(environ: Mapping[str, str]) -> AutoShard:
    """The shard of this copy from a Slurm array job or a Kubernetes Indexed Job.

    Slurm: ``SLURM_ARRAY_TASK_ID`` with the array's ``SLURM_ARRAY_TASK_MIN`` (0 when
    unset), ``SLURM_ARRAY_TASK_STEP`` (1 when unset) and its ``SLURM_ARRAY_TASK_COUNT``
    or ``SLURM_ARRAY_TASK_MAX``: task ids MIN, MIN + STEP, ... are shards 1, 2, ...
    (``--array=0-7``, ``--array=1-8`` and ``--array=0-14:2`` all give 8 shards). An
    array given as a list that is not such a range (``--array=1,2,7``) cannot be
    numbered and is a usage error. Kubernetes: ``JOB_COMPLETION_INDEX`` (0-based) is
    shard index + 1 of ``BENCHBENCH_SHARD_COUNT``, which the Job's template sets to
    its ``.spec.completions``. Both schedulers' variables at once, or neither, are a
    usage error naming the variables looked for.
    """
    slurm = environ.get(SLURM_TASK_ID, "").strip() != ""
    kubernetes = environ.get(KUBERNETES_INDEX, "").strip() != ""
    if slurm and kubernetes:
        raise UsageError(
            f"--shard auto: both {SLURM_TASK_ID}={environ[SLURM_TASK_ID]} (Slurm) and "
            f"{KUBERNETES_INDEX}={environ[KUBERNETES_INDEX]} (Kubernetes) are set, so the "
            "shard is ambiguous; unset one or give --shard I/N"
        )
    if slurm:
        return _slurm_shard(environ)
    if kubernetes:
        return _kubernetes_shard(environ)
    raise UsageError(
        f"--shard auto found no scheduler's shard in the environment: it looks for "
        f"{SLURM_TASK_ID} with {SLURM_TASK_COUNT} or {SLURM_TASK_MIN}/{SLURM_TASK_MAX} "
        f"(a Slurm array job) and {KUBERNETES_INDEX} with {SHARD_COUNT_VARIABLE} (a "
        "Kubernetes Indexed Job), and none is set; give --shard I/N instead "
        "(e.g. --shard ${{ matrix.shard }}/4 in a GitHub Actions matrix)"
    )


def _slurm_shard(environ: Mapping[str, str]) -> AutoShard:
    names = (SLURM_TASK_ID, SLURM_TASK_MIN, SLURM_TASK_MAX, SLURM_TASK_COUNT, SLURM_TASK_STEP)
    read = tuple((n, environ[n].strip()) for n in names if environ.get(n, "").strip())
    task = _required(environ, SLURM_TASK_ID)
    high, count = _integer(environ, SLURM_TASK_MAX), _integer(environ, SLURM_TASK_COUNT)
    given_low, given_step = _integer(environ, SLURM_TASK_MIN), _integer(environ, SLURM_TASK_STEP)
    low = 0 if given_low is None else given_low
    step = 1 if given_step is None else given_step
    if step < 1:
        raise UsageError(f"--shard auto: {SLURM_TASK_STEP} must be >= 1, got {step}")
    if count is None:
        if high is None:
            raise UsageError(
                f"--shard auto: {SLURM_TASK_ID}={task} is set but neither {SLURM_TASK_COUNT} "
                f"nor {SLURM_TASK_MAX}, so the number of shards is unknown; run it as an "
                "array job (sbatch --array=1-N) or give --shard I/N"
            )
        total = (high - low) // step + 1
    else:
        total = count
        span = (high - low) // step + 1 if high is not None else count
        if span != count:
            raise UsageError(
                f"--shard auto: the Slurm array's task ids are not a range ({SLURM_TASK_MIN}="
                f"{low}, {SLURM_TASK_MAX}={high}, step {step} would make {span} tasks, "
                f"{SLURM_TASK_COUNT}={count}), so they cannot be numbered as shards; use "
                "--array=MIN-MAX[:STEP] or give --shard I/N"
            )
    offset = task - low
    if offset < 0 or offset % step or offset // step >= total:
        raise UsageError(
            f"--shard auto: {SLURM_TASK_ID}={task} is not one of the array's {total} task "
            f"ids {low}, {low + step}, ... (from {', '.join(f'{n}={v}' for n, v in read)}); "
            "give --shard I/N"
        )
    return AutoShard(Shard(offset // step + 1, total), "Slurm array job", read)


def _kubernetes_shard(environ: Mapping[str, str]) -> AutoShard:
    index = _required(environ, KUBERNETES_INDEX)
    count = _integer(environ, SHARD_COUNT_VARIABLE)
    if count is None:
        raise UsageError(
            f"--shard auto: {KUBERNETES_INDEX}={index} is set but {SHARD_COUNT_VARIABLE} is "
            "not: Kubernetes does not tell a pod its Job's completions, so set "
            f"{SHARD_COUNT_VARIABLE} to .spec.completions in the Job's pod template"
        )
    if count < 1 or not 0 <= index < count:
        raise UsageError(
            f"--shard auto: {KUBERNETES_INDEX}={index} must be in 0..{SHARD_COUNT_VARIABLE}-1 "
            f"with {SHARD_COUNT_VARIABLE}={count} >= 1; set {SHARD_COUNT_VARIABLE} to the "
            "Job's .spec.completions"
        )
    read = ((KUBERNETES_INDEX, str(index)), (SHARD_COUNT_VARIABLE, str(count)))
    return AutoShard(Shard(index + 1, count), "Kubernetes Indexed Job", read)
