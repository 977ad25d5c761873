"""Synthetic runs for store tests: real rows through the real write paths, no torch."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections.abc import Sequence
from pathlib import Path

from benchbench.core.values import Point, Result
from benchbench.machine.environment import Environment
from benchbench.store import Store

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: A store of schema version 1 written by a real `benchbench run` of the tiny suite, twice:
#: runs labelled "base" and "contender", 5 points each, machine "fixture-box".
STORE_V1 = FIXTURES / "store_v1.db"
#: A store of schema version 2 (two processes a point: process_samples), the same way:
#: runs "base" and "contender" of the tiny suite, 4 points each, with --rounds 2.
STORE_V2 = FIXTURES / "store_v2.db"
#: A store of schema version 3 (before the covering series index), the same way: run
#: "base" of the tiny suite with --rounds 2, run "contender" with --metric instructions.
STORE_V3 = FIXTURES / "store_v3.db"
#: A store of schema version 4 (before the detector's stored verdicts), the same way: six
#: runs of the tiny suite (the first with --rounds 2), then `benchbench regressions`.
STORE_V4 = FIXTURES / "store_v4.db"
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def environment(machine: str = "box-a", **fields: object) -> Environment:
    return Environment(fields={"machine": machine, "torch": "2.13.0", **fields}, info={"ram": 1})


def point(workload: str = "sqrt", variant: str = "torch.sqrt", size: int = 1024) -> Point:
    return Point("synthetic", workload, variant, size, (size,), "float32", "cpu")


def result(
    p: Point, median_s: float = 1e-3, *, n: int = 30, seed: int = 0, status: str = "ok", **kw
) -> Result:
    rng = random.Random(seed)
    samples = tuple(median_s * rng.uniform(0.97, 1.03) for _ in range(n)) if status == "ok" else ()
    return Result(point=p, status=status, samples_s=samples, calls_per_sample=1, **kw)  # type: ignore[arg-type]


def add_run(
    store: Store,
    results: Sequence[Result],
    *,
    env: Environment | None = None,
    started_at: dt.datetime = T0,
    label: str | None = None,
    bulk: bool = True,
    group_id: str | None = None,
) -> str:
    env = env or environment()
    store.save_environment(env)
    run_id = str(uuid.uuid4())
    store.create_run(
        {
            "id": run_id,
            "group_id": group_id or run_id,
            "kind": "nightly",
            "label": label,
            "status": "finished",
            "started_at": started_at,
            "finished_at": started_at + dt.timedelta(minutes=1),
            "suites": [{"name": "synthetic"}],
            "harness_version": "0.1.0",
            "git_sha": "a" * 40,
            "git_branch": "main",
            "git_dirty": False,
            "tags": [],
            "config": {},
            "environment_id": env.id,
        }
    )
    if bulk:
        store.write_results(run_id, list(results))
    else:
        for r in results:
            store.write_result(run_id, r)
    return run_id
