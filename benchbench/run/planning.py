"""What a run measures: the points its suites give under its selection, as plain values.

Suites are Python files that import torch, and ``benchbench run``'s runner never does:
its first worker loads them (:func:`answer_plan`, the worker's ``plan`` request) and
answers :class:`Planned` points (:func:`benchbench.run.jobs.plan_in`), which the runner
schedules, shards (:func:`shard_points`) and resumes by. ``benchbench list`` and ``ab``
plan in their own process (:func:`plan`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbench.core.values import Point
from benchbench.run import sharding
from benchbench.suite.declare import Workload
from benchbench.suite.load import Selection, file_hash, load_suite, select_points

if TYPE_CHECKING:  # the store is SQLAlchemy (~0.4 s): a worker that plans never opens one
    from benchbench.store import Store


@dataclass(frozen=True)
class Planned:
    """One point a run measures, as the process that loaded its suite described it.

    Plain values only (no suite object, no torch), so that a worker can plan and the
    runner, which never imports torch, can schedule, shard and resume by them.
    """

    path: Path  # the suite file
    workload: str
    version: int  # the workload's code version
    point: Point
    tags: tuple[str, ...] = ()
    #: The work model's FLOPs are counted under a dispatch mode (round 1 warms it).
    derives_flops: bool = False
    compile: bool = False  # a ``torch.compile`` variant: the compile timeout applies

    @property
    def benchmark_id(self) -> str:
        return self.point.benchmark_id(self.version)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "workload": self.workload,
            "version": self.version,
            "point": self.point.to_dict(),
            "tags": list(self.tags),
            "derives_flops": self.derives_flops,
            "compile": self.compile,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Planned:
        return cls(
            path=Path(data["path"]),
            workload=data["workload"],
            version=int(data["version"]),
            point=Point.from_dict(data["point"]),
            tags=tuple(data.get("tags") or ()),
            derives_flops=bool(data.get("derives_flops")),
            compile=bool(data.get("compile")),
        )

    @classmethod
    def of(cls, path: Path, workload: Workload, point: Point) -> Planned:
        return cls(
            path=path,
            workload=workload.name,
            version=workload.version,
            point=point,
            tags=tuple(workload.tags),
            derives_flops=workload.derive and workload.flops is None,
            compile=bool(workload.variant(point.variant).compile),
        )


def plan(suites: Sequence[Path], selection: Selection, cuda_graph: bool = False) -> list[Planned]:
    """Load ``suites`` in this process and list the points ``selection`` picks (with
    ``cuda_graph``: ``run --cuda-graph``, whose CUDA points are their own benchmarks).

    Suites import torch: ``benchbench run`` plans in its first worker instead
    (:func:`benchbench.run.jobs.plan_in`), so that the runner never imports it.
    """
    out: list[Planned] = []
    for path in suites:
        suite = load_suite(path)
        for workload, point in select_points([suite], selection):
            if cuda_graph and point.device.startswith("cuda"):
                # Graph replays exclude launch overhead: their own history, not eager's.
                point = dataclasses.replace(point, params=(*point.params, ("cuda_graph", True)))
            out.append(Planned.of(path, workload, point))
    return out


def suites_of(paths: Sequence[Path]) -> list[dict[str, str]]:
    """The run row's ``suites``: each file's suite name, path and content hash."""
    return [{"name": load_suite(p).name, "path": str(p), "hash": file_hash(p)} for p in paths]


@dataclass(frozen=True)
class Plan:
    """What a worker's ``plan`` answer holds: the points, and the run row's ``suites``."""

    points: list[Planned]
    suites: list[dict[str, str]]


def plan_request(
    suites: Sequence[Path], selection: Selection, cuda_graph: bool = False
) -> dict[str, Any]:
    """The worker request that plans as :func:`plan` (answered by :func:`answer_plan`)."""
    return {
        "op": "plan",
        "suites": [str(p) for p in suites],
        "selection": dataclasses.asdict(selection),
        "cuda_graph": cuda_graph,
    }


def answer_plan(request: dict[str, Any]) -> dict[str, Any]:
    """A worker's ``plan`` event: the points, or the error that loading the suites or
    selecting their points raised (its class name and message, raised again by
    :func:`benchbench.run.jobs.plan_in` in the runner)."""
    try:
        selection = Selection.from_dict(request["selection"])
        suites = [Path(p) for p in request["suites"]]
        return {
            "event": "plan",
            "points": [
                p.to_dict() for p in plan(suites, selection, bool(request.get("cuda_graph")))
            ],
            "suites": suites_of(suites),
        }
    except Exception as exc:  # the suite's own error: raised again, as is, by the runner
        return {"event": "plan", "error": str(exc), "error_type": type(exc).__name__}


def shard_points(
    points: Sequence[Planned],
    shard: sharding.Shard,
    shard_by: str,
    store: Store | None,
    group_id: str,
) -> tuple[list[Planned], dict[str, Any]]:
    """The planned points shard ``shard`` measures, and the shard document stored with it.

    ``shard_by="cost"`` balances by the expected durations ``store`` holds for group
    ``group_id`` (:func:`benchbench.run.sharding.cost_runs`); without a store, or
    without history, every point costs the same (``balanced_by: "count"``).
    ``benchbench list --shard`` calls this too, so its preview is the run's choice.
    """
    ids = [p.benchmark_id for p in points]
    basis: list[str] = []
    costs: dict[str, float] = {}
    if shard_by == "cost" and store is not None:
        basis = sharding.cost_runs(store, group_id)
        costs = sharding.expected_costs(store, basis)
    mine_at = sharding.assign(ids, shard.count, costs)[shard.index - 1]
    shard_doc = {
        "index": shard.index,
        "count": shard.count,
        "by": shard_by,
        "cost_runs": basis,
        "balanced_by": "cost" if costs else "count",
        "benchmark_ids": [ids[k] for k in mine_at],
    }
    return [points[k] for k in mine_at], shard_doc
