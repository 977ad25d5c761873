"""Rounds across fresh processes: the schedule, the budget split, the merge, the loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchbench.core.errors import UsageError
from benchbench.core.values import Point, Result
from benchbench.run import rounds
from benchbench.run.jobs import Job, RunRecord, measure_jobs, run_row
from benchbench.run.merge import merge, wants_more
from benchbench.run.rounds import Rounds, order, round_request
from benchbench.run.workers import StopRequest, WorkerFailure
from benchbench.store import open_store

ENV = {"event": "environment", "fields": {"machine": "test"}, "info": {}}
POLICY = {
    "max_time_s": 0.6,
    "min_time_s": 0.06,
    "min_samples": 10,
    "max_samples": 100,
    "target_rel_ci": 0.01,
    "warmup_min_s": 0.3,
    "warmup_min_calls": 10,
}


def _point(size: int) -> Point:
    return Point("s", "w", "v", size, (size,), "float32", "cpu")


def _ok(size: int, samples: tuple[float, ...], calls: int = 1, **kw: Any) -> Result:
    return Result(
        _point(size),
        "ok",
        samples_s=samples,
        calls_per_sample=calls,
        converged=True,
        stop_reason="precise",
        **kw,
    )


def test_each_round_is_a_seeded_shuffle_of_every_job():
    first = [order(20, r, seed=5) for r in range(3)]
    assert all(sorted(o) == list(range(20)) for o in first)
    assert len({tuple(o) for o in first}) == 3  # rounds differ
    assert first == [order(20, r, seed=5) for r in range(3)]  # and replay
    assert order(20, 0, seed=6) != first[0]


def test_the_budget_is_split_across_rounds_but_each_process_keeps_its_minimum_samples():
    request = {"op": "measure", "policy": POLICY}
    split = round_request(request, 3)
    assert split["policy"]["max_time_s"] == pytest.approx(0.2)
    assert split["policy"]["min_time_s"] == pytest.approx(0.02)
    assert split["policy"]["warmup_min_s"] == pytest.approx(0.1)
    assert split["policy"]["warmup_min_calls"] == 10
    assert split["policy"]["min_samples"] == 10 and split["policy"]["max_samples"] == 33
    assert request["policy"]["max_time_s"] == 0.6  # the job's own request is untouched
    assert round_request(request, 1) == request
    # Later processes neither check the result again nor trace it again.
    later = round_request({**request, "profile_dir": "/t"}, 3, round_index=1)
    assert later["check"] is False and later["profile_dir"] is None
    assert "check" not in round_request(request, 3, round_index=0)


def test_bad_rounds_are_usage_errors():
    with pytest.raises(UsageError, match="--rounds must be >= 1, got 0"):
        Rounds(0)
    with pytest.raises(UsageError, match=r"--max-rounds must be >= --rounds \(3\), got 2"):
        Rounds(3, 2)
    assert Rounds.from_dict(None) == Rounds.fixed(1)
    assert Rounds.from_dict(Rounds(3, 5, 9).to_dict()) == Rounds(3, 5, 9)


def test_merge_scales_samples_to_one_calls_per_sample_and_counts_processes():
    merged = merge(
        [_ok(1, (2.0, 2.2), calls=2), _ok(1, (4.0, 4.4, 4.2), calls=4, warnings=("w",))], None
    )
    assert merged.calls_per_sample == 2
    assert merged.samples_s == pytest.approx((2.0, 2.2, 2.0, 2.2, 2.1))
    assert merged.process_samples == (2, 3)
    assert merged.warnings == ("w",)
    assert [p["samples"] for p in merged.extra["processes"]] == [2, 3]
    assert merged.stop_reason == "2 processes: precise"


def test_merge_keeps_each_processs_compile_time_the_first_one_as_the_points():
    from dataclasses import replace

    compiled = [replace(_ok(1, (1.0,) * 3), extra={"compile_s": s}) for s in (41.0, 6.5)]
    merged = merge(compiled, None)
    assert merged.extra["compile_s"] == 41.0  # the first process: the coldest compile
    assert [p["compile_s"] for p in merged.extra["processes"]] == [41.0, 6.5]
    assert "compile_s" not in merge([_ok(1, (1.0,) * 3)] * 2, None).extra["processes"][0]


def test_merge_is_not_converged_when_processes_disagree_beyond_the_target():
    tight = merge([_ok(1, (1.0,) * 10), _ok(1, (1.0,) * 10), _ok(1, (1.0,) * 10)], 0.01)
    apart = merge([_ok(1, (1.0,) * 10), _ok(1, (1.3,) * 10), _ok(1, (0.8,) * 10)], 0.01)
    assert tight.converged is True and apart.converged is False
    assert wants_more([apart], 0.01) and not wants_more([tight], 0.01)


def test_a_failed_later_process_is_left_out_with_a_warning_and_a_failed_first_is_the_result():
    error = Result(_point(1), "error", reason="crashed: SIGSEGV")
    merged = merge([_ok(1, (1.0, 1.0)), error, _ok(1, (1.1, 1.1))], None)
    assert merged.status == "ok" and merged.process_samples == (2, 2)
    assert "process 2 of 3 failed: crashed: SIGSEGV" in merged.warnings
    assert merge([error, _ok(1, (1.0,))], None) is error


class RoundPool:
    """A fresh fake worker per request: answers with a time that depends on the round."""

    def __init__(self, fail: set[tuple[int, int]] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail = fail or set()
        self.seen: dict[int, int] = {}
        self.renewals = 0  # a fresh zygote (address layout) asked for

    def worker(self, warm=()):
        return self  # no process: no pid for the runner's telemetry to read

    pid = None

    def renew(self) -> bool:
        self.renewals += 1
        return True

    def request(self, payload, events, timeout_s, stop=None):
        self.requests.append(payload)
        if payload["op"] == "environment":
            return ENV
        size = payload["size"]
        r = self.seen[size] = self.seen.get(size, 0) + 1
        if (size, r) in self.fail:
            raise WorkerFailure("crashed: SIGSEGV")
        result = _ok(size, tuple(1e-3 * r for _ in range(4)))
        return {"event": "result", "result": result.to_dict()}


def _job(size: int) -> Job:
    return Job({"op": "measure", "size": size, "policy": POLICY}, (_point(size),), f"n={size}")


def _record(store, run_id="run-1") -> RunRecord:
    return RunRecord(
        run_id,
        store,
        lambda env: run_row(run_id, env, kind="adhoc", label=None, suites=[], config={}),
    )


def test_every_point_is_measured_once_per_round_in_shuffled_rounds_and_stored_merged(
    tmp_path: Path,
):
    store = open_store(str(tmp_path / "s.db"))
    pool = RoundPool(fail={(3, 1)})
    summary = measure_jobs(
        [_job(size) for size in range(1, 7)],
        pool,
        _record(store),
        timeout_s=5,
        rounds=Rounds.fixed(3, seed=11),
    )
    sizes = [p["size"] for p in pool.requests if p["op"] == "measure"]
    # Point 3 failed in its first process: not asked again. The others: 3 rounds each.
    assert sorted(sizes) == sorted([1, 2, 4, 5, 6] * 3 + [3])
    per_round = [sizes[:6], sizes[6:11], sizes[11:]]
    assert per_round[0] == [k + 1 for k in order(6, 0, 11)]
    assert per_round[1] == [k + 1 for k in order(6, 1, 11) if k + 1 != 3]
    assert pool.renewals == 2  # a fresh layout before each round after the first
    assert all(p["policy"]["max_time_s"] == pytest.approx(0.2) for p in pool.requests[1:])
    stored = {r["size"]: r for r in store.measurements("run-1")}
    assert stored[3]["status"] == "error"
    assert stored[1]["process_samples"] == [4, 4, 4]
    assert stored[1]["process_medians_s"] == pytest.approx([1e-3, 2e-3, 3e-3])
    assert len(summary.results) == 6 and summary.status == "finished"


def test_extra_rounds_go_to_the_points_whose_processes_disagree(tmp_path: Path):
    store = open_store(str(tmp_path / "s.db"))
    pool = RoundPool()
    measure_jobs([_job(1), _job(2)], pool, _record(store), timeout_s=5, rounds=Rounds(2, 4))
    # Round r answers r ms: processes always disagree, so both points take all 4 rounds.
    assert pool.seen == {1: 4, 2: 4}
    assert store.measurements("run-1")[0]["process_samples"] == [4, 4, 4, 4]


def test_a_stopped_run_stores_only_points_whose_rounds_are_all_in(tmp_path: Path):
    store = open_store(str(tmp_path / "s.db"))
    stop = StopRequest()

    class StopInRoundTwo(RoundPool):
        def request(self, payload, events, timeout_s, stop_=None):
            if payload["op"] == "measure" and self.seen.get(payload["size"]) == 1:
                stop.request(15)
                return {"event": "interrupted", "signal": 15}
            return super().request(payload, events, timeout_s, stop_)

    summary = measure_jobs(
        [_job(1), _job(2)],
        StopInRoundTwo(),
        _record(store),
        timeout_s=5,
        stop=stop,
        rounds=Rounds.fixed(2),
    )
    assert summary.status == "interrupted" and summary.results == []
    assert store.measurements("run-1") == []  # --resume measures both, all rounds


def test_the_default_rounds_come_from_the_environment_when_set(monkeypatch):
    from benchbench.cli import flags

    monkeypatch.delenv("BENCHBENCH_ROUNDS", raising=False)
    assert flags.default_rounds() == rounds.DEFAULT_ROUNDS
    monkeypatch.setenv("BENCHBENCH_ROUNDS", "5")
    assert flags.default_rounds() == 5
    monkeypatch.setenv("BENCHBENCH_ROUNDS", "three")
    with pytest.raises(UsageError, match=r"\$BENCHBENCH_ROUNDS must be a whole number.*'three'"):
        flags.default_rounds()


def test_points_per_process_is_stored_with_the_rounds_and_checked():
    shared = Rounds(3, 10, seed=2, per_process=4)
    assert Rounds.from_dict(shared.to_dict()) == shared
    assert "per_process" not in Rounds(3).to_dict()  # runs stored before it read the same
    with pytest.raises(UsageError, match=r"--points-per-process must be >= 1 .* got 0"):
        Rounds(3, per_process=0)
