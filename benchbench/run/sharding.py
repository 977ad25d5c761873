"""Splitting one run's points across machines: ``--shard I/N`` and run groups.

benchbench ships no scheduler: a CI matrix, a Slurm job array or a Kubernetes
indexed job starts N copies of ``benchbench run ... --shard I/N --group ID``. Each
copy measures a deterministic, disjoint part of the points; together they cover
all of them. The parts are balanced by expected cost where the store knows it
(the median stored ``duration_s`` of the same benchmark ids in recent finished
runs), else by count. The shards are separate runs sharing one ``group_id``, so
``show GROUP`` and ``runs`` present them as one run.

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
from typing import Any

from benchbench.core.errors import NotFoundError, UsageError
from benchbench.store import Store

#: Finished runs whose stored durations give the expected cost of a point.
COST_HISTORY_RUNS = 5

#: Scheduler variables that name one launch of all shards (checked in this order).
SCHEDULER_GROUP_VARIABLES = ("BENCHBENCH_GROUP", "GITHUB_RUN_ID", "SLURM_ARRAY_JOB_ID")

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
        """``"2/4"`` -> Shard(2, 4); anything else is a usage error."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise UsageError(f"--shard must look like I/N (e.g. 2/4), got {text!r}")
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
