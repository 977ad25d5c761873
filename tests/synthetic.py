"""Synthetic but real stores: runs written through the Store API, no clock involved."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import uuid
from collections.abc import Mapping, Sequence

from benchbench.core.values import Point, Result
from benchbench.machine.environment import Environment
from benchbench.store import Store


def environment(machine: str = "ci-box") -> Environment:
    return Environment(
        fields={"machine": machine, "cpu_model": "test cpu", "torch": "2.13.0"}, info={}
    )


def point(variant: str = "torch.sqrt", size: int = 1024, workload: str = "sqrt") -> Point:
    return Point("synthetic", workload, variant, size, (size,), "float32", "cpu")


def write_history(
    store: Store,
    series: Mapping[Point, Sequence[float | None]],
    *,
    env: Environment | None = None,
    noise: float = 0.01,
    seed: int = 0,
    start: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    label: str | None = None,
    counts: Mapping[Point, Sequence[float]] | None = None,
    timed: bool = True,
    spread: float | Mapping[Point, float] = 0.0,
    processes: int = 1,
    process_noise: float = 0.0,
    labels: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    counter: str = "callgrind",
) -> list[str]:
    """One run per index of the series; ``None`` stores a failed point. ``counts``: the
    instructions per call each run counted for a point (run i gets value i), with
    ``spread`` as their within-process spread (one for all, or per point);
    ``timed=False`` stores counted points with no time samples, as ``run --metric
    instructions`` does. ``processes``: the 20 samples split among that many worker
    processes, each offset by a log-normal ``process_noise``. ``labels`` and ``groups``:
    run i's label and run group (the shards of one night share a group). ``counter``:
    what counted them (``run --counter``), in the runs' config and the counts' extra.
    Returns run ids."""
    env = env or environment()
    store.save_environment(env)
    rng = random.Random(seed)
    length = max(len(v) for v in series.values())
    run_ids = []
    for i in range(length):
        run_id = str(uuid.UUID(int=rng.getrandbits(128)))
        store.create_run(
            {
                "id": run_id,
                "group_id": groups[i] if groups else run_id,
                "kind": "nightly",
                "label": labels[i] if labels else label or f"night-{i}",
                "status": "finished",
                "started_at": start + dt.timedelta(days=i),
                "finished_at": start + dt.timedelta(days=i, minutes=5),
                "suites": [{"name": "synthetic", "path": "-", "hash": "-"}],
                "harness_version": "test",
                "git_sha": f"{i:040x}",
                "git_branch": "main",
                "git_dirty": False,
                "tags": [],
                "config": {"counter": counter} if counts is not None else {},
                "environment_id": env.id,
            }
        )
        for p, values in series.items():
            if i >= len(values):
                continue
            value = values[i]
            if value is None:
                result = Result(point=p, status="error", reason="crashed: SIGABRT")
            else:
                offsets = [rng.lognormvariate(0, process_noise) for _ in range(processes)]
                samples = tuple(
                    value * offsets[k * processes // 20] * (1 + rng.gauss(0, noise))
                    for k in range(20)
                )
                split = [20 // processes] * processes
                split[-1] += 20 - sum(split)
                result = Result(
                    point=p,
                    status="ok",
                    samples_s=samples,
                    calls_per_sample=1,
                    converged=True,
                    bytes_per_call=8.0 * p.size,
                    process_samples=tuple(split) if processes > 1 else (),
                )
                if counts is not None and p in counts:
                    counted = float(counts[p][i])
                    moved = spread.get(p, 0.0) if isinstance(spread, Mapping) else spread
                    result = dataclasses.replace(
                        result,
                        instructions_per_call=counted,
                        instruction_counts=(counted,),
                        extra={"instructions": {"tool": counter, "spread": moved}},
                    )
                    if not timed:
                        result = dataclasses.replace(result, samples_s=(), converged=None)
            store.write_result(run_id, result)
        run_ids.append(run_id)
    return run_ids
