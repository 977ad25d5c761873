"""The dashboard reads each CUDA point's timing method from the store's ``extra`` (the
two keys it needs, read by each engine's JSON path operators)."""

from __future__ import annotations

import datetime as dt

from benchbench.core.values import Point, Result
from benchbench.dashboard.from_store import load
from benchbench.machine.environment import Environment
from benchbench.store import open_store

RUN = "aaaa0000-0000-4000-8000-000000000001"


def _ok(device: str, mode: str, extra: dict) -> Result:
    point = Point("s", "relu", "torch.relu", 1024, (1024,), "float32", device, (("mode", mode),))
    return Result(point=point, status="ok", samples_s=(1.0, 1.0), calls_per_sample=1, extra=extra)


def test_load_gives_cuda_points_their_timing_and_others_none(store_url: str) -> None:
    store = open_store(store_url)
    env = Environment(fields={"machine": "box"})
    store.save_environment(env)
    store.create_run(
        {
            "id": RUN,
            "group_id": RUN,
            "kind": "adhoc",
            "label": None,
            "status": "finished",
            "started_at": dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc),
            "finished_at": None,
            "suites": [{"name": "s"}],
            "harness_version": "0.1.0",
            "git_sha": None,
            "git_branch": None,
            "git_dirty": None,
            "tags": [],
            "config": {},
            "environment_id": env.id,
        }
    )
    graph = {"cuda_graph": {"calls_per_replay": 64}, "launch_bound": False}
    store.write_results(
        RUN,
        [
            _ok("cpu", "fwd", {}),
            _ok("cuda", "fwd", graph),
            _ok("cuda", "bwd", {"launch_bound": True}),
        ],
    )
    m = load(store).measurements
    got = {(d, p["mode"], t) for d, p, t in zip(m["device"], m["params"], m["timing"], strict=True)}
    assert got == {
        ("cpu", "fwd", None),
        ("cuda", "fwd", "graph x64"),
        ("cuda", "bwd", "events, launch-bound"),
    }
