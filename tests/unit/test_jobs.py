"""The runner loop on its own: measure_jobs with a scripted worker pool and a real store."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchbench.core.errors import MeasurementError
from benchbench.core.values import Point, Result
from benchbench.run.jobs import Job, RunRecord, WorkerPool, measure_jobs, run_row
from benchbench.run.rounds import Rounds
from benchbench.run.workers import ForkUnsafe, StopRequest, WorkerFailure
from benchbench.store import open_store

ENV = {"event": "environment", "fields": {"machine": "test"}, "info": {}}


def _point(size: int, variant: str = "v") -> Point:
    return Point("s", "w", variant, size, (size,), "float32", "cpu")


def _job(size: int) -> Job:
    return Job({"op": "measure", "size": size}, (_point(size),), f"n={size}", code_version=7)


def _ok(payload: dict[str, Any]) -> dict[str, Any]:
    result = Result(_point(payload["size"]), "ok", samples_s=(1e-3,) * 3)
    return {"event": "result", "result": result.to_dict()}


Answer = Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedPool:
    """Answers requests with ``answers[op]`` or, for ``measure``, ``by_size[size]``."""

    def __init__(self, by_size: dict[int, Answer] | None = None) -> None:
        self.by_size = by_size or {}
        self.requests: list[dict[str, Any]] = []

    def worker(self, warm=()):
        return FakeWorker(_ok)  # its pid is None: no process to read CPU time from

    def renew(self) -> bool:
        self.requests.append({"op": "renew"})
        return True

    def request(self, payload, events, timeout_s, stop=None):
        self.requests.append(payload)
        if payload["op"] == "environment":
            return ENV
        return self.by_size.get(payload["size"], _ok)(payload)


def _fail(reason: str) -> Answer:
    def answer(_payload: dict[str, Any]) -> dict[str, Any]:
        raise WorkerFailure(reason)

    return answer


@pytest.fixture
def store(tmp_path: Path):
    return open_store(str(tmp_path / "store.db"))


def _record(store, run_id: str = "run-1") -> RunRecord:
    def new_row(env):
        return run_row(run_id, env, kind="adhoc", label="t", suites=[], config={"k": 1})

    return RunRecord(run_id, store, new_row)


def test_a_failed_job_is_an_error_for_each_of_its_points_and_the_run_goes_on(store):
    pool = ScriptedPool({2: _fail("crashed: SIGSEGV")})
    events: list[tuple[str, dict[str, Any]]] = []
    summary = measure_jobs(
        [_job(1), _job(2), _job(3)],
        pool,
        _record(store),
        timeout_s=5,
        progress=lambda e, d: events.append((e, d)),
    )
    assert summary.status == "finished" and summary.planned == 3
    assert [(r.point.size, r.status) for r in summary.results] == [
        (1, "ok"),
        (2, "error"),
        (3, "ok"),
    ]
    failed = summary.results[1]
    assert (failed.reason, failed.code_version) == ("crashed: SIGSEGV", 7)
    assert [p["op"] for p in pool.requests] == ["environment", "measure", "measure", "measure"]
    run = store.resolve_run("run-1")
    assert run["status"] == "finished" and run["config"] == {"k": 1}
    stored = store.measurements("run-1")
    assert sorted((r["size"], r["status"]) for r in stored) == [(1, "ok"), (2, "error"), (3, "ok")]
    assert [e for e, _ in events] == ["start"] + ["point", "advance", "result"] * 3
    assert events[0][1] == {"total": 3, "run_id": "run-1"}


def test_a_point_cut_short_by_a_stop_is_not_stored_and_the_run_is_interrupted(store):
    stop = StopRequest()

    def interrupted(_payload: dict[str, Any]) -> dict[str, Any]:
        stop.request(signal.SIGTERM)
        return {"event": "interrupted", "signal": signal.SIGTERM}

    pool = ScriptedPool({2: interrupted})
    summary = measure_jobs(
        [_job(1), _job(2), _job(3)],
        pool,
        _record(store),
        timeout_s=5,
        stop=stop,
    )
    assert summary.status == "interrupted" and summary.stop_signal == signal.SIGTERM
    assert [r.point.size for r in summary.results] == [1]
    assert [p.get("size") for p in pool.requests] == [None, 1, 2]  # job 3 never sent
    assert store.resolve_run("run-1")["status"] == "interrupted"
    assert [r["size"] for r in store.measurements("run-1")] == [1]


def test_a_worker_killed_by_the_stop_is_not_an_error_result(store):
    stop = StopRequest()

    def killed(_payload: dict[str, Any]) -> dict[str, Any]:
        stop.request(signal.SIGINT)
        stop.request(signal.SIGINT)
        raise WorkerFailure("stopped by a second interrupt")

    summary = measure_jobs(
        [_job(1), _job(2)],
        ScriptedPool({1: killed}),
        _record(store),
        timeout_s=5,
        stop=stop,
    )
    assert summary.results == [] and summary.status == "interrupted"


def test_an_exception_in_the_loop_marks_the_run_interrupted_and_propagates(store):
    def boom(_payload: dict[str, Any]) -> dict[str, Any]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        measure_jobs(
            [_job(1), _job(2)],
            ScriptedPool({2: boom}),
            _record(store),
            timeout_s=5,
        )
    assert store.resolve_run("run-1")["status"] == "interrupted"
    assert [r["size"] for r in store.measurements("run-1")] == [1]


def test_resuming_reopens_the_existing_run_and_adds_to_it(store):
    measure_jobs([_job(1)], ScriptedPool(), _record(store), timeout_s=5)
    summary = measure_jobs(
        [_job(2)],
        ScriptedPool(),
        RunRecord("run-1", store, None),
        timeout_s=5,
    )
    assert summary.status == "finished"
    assert sorted(r["size"] for r in store.measurements("run-1")) == [1, 2]
    assert len(store.runs()) == 1


def test_resuming_on_another_machine_files_nothing_under_the_run(store):
    from benchbench.machine.environment import Environment

    measure_jobs([_job(1)], ScriptedPool(), _record(store), timeout_s=5)
    elsewhere = Environment(fields={"machine": "other"})
    with pytest.raises(MeasurementError, match="run run-1 was measured in another environment"):
        measure_jobs([_job(2)], ScriptedPool(), RunRecord("run-1", store, None, elsewhere),
                     timeout_s=5)  # fmt: skip
    assert [r["size"] for r in store.measurements("run-1")] == [1]
    assert store.resolve_run("run-1")["status"] == "finished"


def test_without_a_store_nothing_asks_for_the_environment():
    pool = ScriptedPool()
    summary = measure_jobs(
        [_job(1)],
        pool,
        RunRecord("unstored", None),
        timeout_s=5,
    )
    assert [r.status for r in summary.results] == ["ok"] and summary.environment is None
    assert [p["op"] for p in pool.requests] == ["measure"]


def test_a_job_answered_with_a_list_returns_every_result_in_order():
    points = (_point(4, "a"), _point(4, "b"))
    job = Job({"op": "time"}, points, "n=4", answer="timed")
    message = {"results": [Result(p, "ok").to_dict() for p in points]}
    assert [r.point.variant for r in job.results(message)] == ["a", "b"]
    assert [(r.point.variant, r.status) for r in job.failed("hung")] == [
        ("a", "error"),
        ("b", "error"),
    ]


class FakeWorker:
    pid = None  # no process: the runner's telemetry reads no worker CPU time

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.closed = False

    def request(self, payload, events, timeout_s, stop=None):
        return self.answer(payload)

    def close(self) -> None:
        self.closed = True


class FakeLauncher:
    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.started: list[FakeWorker] = []
        self.closed = False

    def worker(self, warm=()) -> FakeWorker:
        if not self.answers:
            raise WorkerFailure("the worker zygote exited with code 1")
        self.started.append(FakeWorker(self.answers.pop(0)))
        return self.started[-1]

    def close(self) -> None:
        self.closed = True


def test_a_fresh_pool_gives_every_request_a_worker_of_its_own():
    launcher = FakeLauncher(_ok, _ok)
    with WorkerPool(launcher) as pool:
        pool.request({"size": 1}, ("result",), 5)
        assert not launcher.started[0].closed  # idle until the next request
        pool.request({"size": 2}, ("result",), 5)
        assert launcher.started[0].closed  # ended before the next one started
        assert len(launcher.started) == 2 and not launcher.started[1].closed
    assert launcher.started[1].closed and launcher.closed


def test_the_pool_keeps_a_worker_until_it_fails_then_starts_a_fresh_one():
    launcher = FakeLauncher(_ok, _ok)
    with WorkerPool(launcher, fresh=False) as pool:
        pool.request({"size": 1}, ("result",), 5)
        pool.request({"size": 2}, ("result",), 5)
        assert len(launcher.started) == 1
        launcher.started[0].answer = _fail("timed out after 5 s")
        with pytest.raises(WorkerFailure, match="timed out"):
            pool.request({"size": 3}, ("result",), 5)
        assert launcher.started[0].closed
        pool.request({"size": 4}, ("result",), 5)
        assert len(launcher.started) == 2
    assert launcher.started[1].closed and launcher.closed


def test_a_worker_that_cannot_start_is_a_measurement_error():
    with (
        WorkerPool(FakeLauncher()) as pool,
        pytest.raises(
            MeasurementError, match=r"^the worker process did not start: the worker zygote exited"
        ),
    ):
        pool.request({"size": 1}, ("result",), 5)


DEVICE_ASSERT = "RuntimeError: CUDA error: device-side assert triggered (at suites/bad.py:9)"


def _poisoned(payload: dict[str, Any]) -> dict[str, Any]:
    """What a worker answers after a device-side assert: torch's message, and it retires."""
    result = Result(_point(payload["size"]), "error", reason=DEVICE_ASSERT)
    return {"event": "result", "result": result.to_dict(), "retire": True}


def test_a_device_side_assert_costs_its_point_and_a_new_worker_takes_the_rest(store):
    # A reused worker (fresh=False) shows it: the poisoned one is never asked again.
    def first(payload: dict[str, Any]) -> dict[str, Any]:
        return ENV if payload["op"] == "environment" else _poisoned(payload)

    launcher = FakeLauncher(first, _ok)
    with WorkerPool(launcher, fresh=False) as pool:
        summary = measure_jobs([_job(1), _job(2), _job(3)], pool, _record(store), timeout_s=5)
    assert [(r.point.size, r.status) for r in summary.results] == [
        (1, "error"),
        (2, "ok"),
        (3, "ok"),
    ]
    assert summary.results[0].reason == DEVICE_ASSERT
    assert len(launcher.started) == 2 and launcher.started[0].closed
    stored = {row["size"]: row for row in store.measurements("run-1")}
    assert stored[1]["status"] == "error" and "device-side assert" in stored[1]["reason"]
    assert stored[3]["status"] == "ok"


class RefusingZygote(FakeLauncher):
    """A zygote whose process initialised CUDA: it refuses to fork."""

    def __init__(self, spawned: FakeLauncher) -> None:
        super().__init__()
        self.spawned = spawned

    def worker(self, warm=()) -> FakeWorker:
        raise ForkUnsafe("CUDA was initialised in the worker zygote")

    def spawner(self) -> FakeLauncher:
        return self.spawned


def test_a_zygote_that_refuses_to_fork_gives_way_to_fresh_interpreters_and_says_so():
    spawned = FakeLauncher(_ok, _ok)
    zygote = RefusingZygote(spawned)
    notes: list[str] = []
    with WorkerPool(zygote, on_note=notes.append) as pool:
        summary = measure_jobs([_job(1), _job(2)], pool, RunRecord("run-1", None), timeout_s=5)
    assert [r.status for r in summary.results] == ["ok", "ok"]
    assert zygote.closed and len(spawned.started) == 2 and spawned.closed
    assert notes == ["CUDA was initialised in the worker zygote"]


def test_renewing_closes_the_zygote_and_the_next_worker_comes_from_a_fresh_one():
    first, second = FakeLauncher(_ok), FakeLauncher(_ok)
    with WorkerPool(first, relaunch=lambda: second) as pool:
        pool.request({"size": 1}, ("result",), 5)
        assert pool.renew()
        assert first.closed and first.started[0].closed and not second.closed
        pool.request({"size": 2}, ("result",), 5)
        assert len(second.started) == 1
    assert second.closed
    # Without a way to relaunch, or once the zygote gave way to a spawner: kept.
    with WorkerPool(FakeLauncher(_ok)) as pool:
        assert not pool.renew()
    spawned = FakeLauncher(_ok, _ok)
    with WorkerPool(RefusingZygote(spawned), relaunch=lambda: second) as pool:
        pool.request({"size": 1}, ("result",), 5)
        assert not pool.renew() and not spawned.closed


def test_every_round_after_the_first_starts_from_a_fresh_zygote():
    from benchbench.run.rounds import Rounds

    pool = ScriptedPool()
    jobs = [_job(1), _job(2)]
    measure_jobs(jobs, pool, RunRecord("r", None), timeout_s=5, rounds=Rounds.fixed(3, 1))
    ops = [r.get("op") for r in pool.requests]
    assert ops.count("renew") == 2
    # Each renewal comes after a whole round: two measures, a renewal, two, one, two.
    assert ops == ["measure", "measure", "renew"] * 2 + ["measure", "measure"]


def test_a_launcher_that_cannot_fall_back_turns_the_refusal_into_an_error():
    class Refusing(FakeLauncher):
        def worker(self, warm=()) -> FakeWorker:
            raise ForkUnsafe("CUDA was initialised")

    with WorkerPool(Refusing()) as pool, pytest.raises(MeasurementError, match="initialised"):
        pool.request({"size": 1}, ("result",), 5)


def test_a_job_with_its_own_timeout_is_given_it_and_others_the_runs():
    given: list[float] = []

    class Timed(ScriptedPool):
        def request(self, payload, events, timeout_s, stop=None):
            given.append(timeout_s)
            return super().request(payload, events, timeout_s, stop)

    compiled = Job({"op": "measure", "size": 2}, (_point(2),), "n=2", timeout_s=300.0)
    measure_jobs([_job(1), compiled], Timed(), RunRecord("r", None), timeout_s=60)
    assert given == [60, 300.0]


def _counted(payload: dict[str, Any]) -> dict[str, Any]:
    assert payload["metric"] == "instructions" and payload["threads"] == 1
    result = Result(
        _point(payload["size"]),
        "ok",
        instructions_per_call=100.0 * payload["size"],
        instruction_counts=(100.0 * payload["size"],),
        extra={"instructions": {"spread": 0.0}},
    )
    return {"event": "result", "result": result.to_dict()}


class CountingPool(ScriptedPool):
    """The instrumented worker: counts every point, and checks what the store holds."""

    def __init__(self, store, run_id: str) -> None:
        super().__init__()
        self.store, self.run_id = store, run_id
        self.stored_before: list[int] = []

    def request(self, payload, events, timeout_s, stop=None):
        self.requests.append(payload)
        self.stored_before.append(len(self.store.measurements(self.run_id)))
        return _counted(payload)


def test_counts_alone_are_written_as_each_point_is_counted(store):
    counter = CountingPool(store, "run-1")
    summary = measure_jobs(
        [_job(1), _job(2), _job(3)],
        ScriptedPool(),
        _record(store),
        timeout_s=5,
        counters=[counter],  # type: ignore[list-item]
        timed=False,
    )
    # A killed run keeps every point counted before it: each is stored before the next.
    assert counter.stored_before == [0, 1, 2]
    rows = store.measurements("run-1")
    assert sorted(r["instructions_per_call"] for r in rows) == [100.0, 200.0, 300.0]
    assert all(not r["samples_s"] for r in rows)
    assert summary.status == "finished"


def test_counts_merge_into_the_timed_points(store):
    pool = ScriptedPool()
    measure_jobs(
        [_job(1), _job(2)],
        pool,
        _record(store),
        timeout_s=5,
        counters=[CountingPool(store, "run-1")],  # type: ignore[list-item]
        timed=True,
    )
    rows = store.measurements("run-1")
    assert all(r["samples_s"] and r["instructions_per_call"] for r in rows)
    assert [p["op"] for p in pool.requests].count("measure") == 2  # time was measured too


class SlowCountingPool(CountingPool):
    """A counting worker that takes ``delay_s`` a count, in a thread of the run's, and
    records which thread asked it and that the run closed it; with a ``barrier``, its
    first count waits there for the other worker's (a broken barrier: they never ran at
    the same time)."""

    def __init__(self, store, run_id: str, delay_s: float, barrier=None) -> None:
        super().__init__(store, run_id)
        self.delay_s, self.barrier, self.threads, self.closed = delay_s, barrier, set(), 0

    def request(self, payload, events, timeout_s, stop=None):
        import threading
        import time

        self.threads.add(threading.current_thread().name)
        if self.barrier is not None and not self.requests:
            self.barrier.wait()
        time.sleep(self.delay_s)
        return super().request(payload, events, timeout_s, stop)

    def close(self) -> None:
        self.closed += 1


def test_two_counting_workers_count_each_point_once_side_by_side(store):
    import threading

    together = threading.Barrier(2, timeout=60)
    first, second = (SlowCountingPool(store, "run-1", 0.01, together) for _ in range(2))
    events: list[tuple[str, dict[str, Any]]] = []
    summary = measure_jobs(
        [_job(size) for size in range(1, 9)],
        ScriptedPool(),
        _record(store),
        timeout_s=5,
        counters=[first, second],  # type: ignore[list-item]
        timed=False,
        progress=lambda event, data: events.append((event, data)),
    )
    # Worker n of 2 counts the plan's points n, n + 2, ...: the same ones on every run.
    assert [p["size"] for p in first.requests] == [1, 3, 5, 7]
    assert [p["size"] for p in second.requests] == [2, 4, 6, 8]
    assert not together.broken  # each worker's first count began while the other's waited
    for pool in (first, second):
        assert pool.closed == 1 and all(t.startswith("benchbench-counter-") for t in pool.threads)
    rows = store.measurements("run-1")
    assert sorted(r["instructions_per_call"] for r in rows) == [100.0 * n for n in range(1, 9)]
    told = [data["index"] for event, data in events if event == "point"]
    assert sorted(told) == list(range(8))
    assert summary.status == "finished" and len(summary.results) == 8


def test_a_counting_worker_that_cannot_start_stops_the_count_with_its_error(store):
    from benchbench.core.errors import MeasurementError

    class Broken(SlowCountingPool):
        def request(self, payload, events, timeout_s, stop=None):
            raise MeasurementError("the worker process did not start: valgrind: not found")

    other = SlowCountingPool(store, "run-1", 0.01)
    with pytest.raises(MeasurementError, match="valgrind: not found"):
        measure_jobs(
            [_job(size) for size in range(1, 30)],
            ScriptedPool(),
            _record(store),
            timeout_s=5,
            counters=[Broken(store, "run-1", 0.0), other],  # type: ignore[list-item]
            timed=False,
        )
    # The other worker stops at its next point instead of counting the whole plan.
    assert len(other.requests) < 29


def _policy_job(size: int) -> Job:
    request = {"op": "measure", "size": size, "policy": {"max_time_s": 0.05, "target_rel_ci": 0.03}}
    return Job(request, (_point(size),), f"n={size}")


def test_the_budget_left_after_the_first_rounds_goes_to_the_widest_point(store):
    import itertools

    from benchbench.run.rounds import Rounds

    wobble = itertools.cycle([1.0, 1.5, 0.7, 1.3])  # size 2's processes disagree by 2x

    def answer(payload: dict[str, Any]) -> dict[str, Any]:
        # As the engine: samples until the cap, at least 10 (so one may pass the cap).
        scale = next(wobble) if payload["size"] == 2 else 1.0
        count = max(10, int(payload["policy"]["max_time_s"] / (1e-3 * scale)))
        samples = tuple(1e-3 * scale * (1 + k / 1000) for k in range(count))
        result = Result(_point(payload["size"]), "ok", samples_s=samples, converged=True)
        return {"event": "result", "result": result.to_dict()}

    pool = ScriptedPool({1: answer, 2: answer})
    ticks = itertools.count()
    summary = measure_jobs(
        [_policy_job(1), _policy_job(2)],
        pool,
        _record(store),
        timeout_s=5,
        rounds=Rounds(3, 8, seed=1),
        clock=lambda: float(next(ticks)),
    )
    by_size = {r.point.size: r for r in summary.results}
    assert len(by_size[1].process_samples) == 3  # its processes agree: within target
    assert by_size[1].converged is True
    assert 3 < len(by_size[2].process_samples) <= 8  # the budget went to the wide one
    # The first rounds took half of each process's share: 0.05 s x 0.5 / 3 per process.
    first = next(p for p in pool.requests if p["op"] == "measure")
    assert first["policy"]["max_time_s"] == pytest.approx(0.05 * 0.5 / 3)
    # Samples never add up to more than the run's budget (2 points x 0.05 s).
    spent = sum(sum(r.samples_s) for r in summary.results)
    assert spent <= 0.1
    wide = by_size[2]
    if not wide.converged:
        assert any(w.startswith("not converged: ±") for w in wide.warnings)
    assert [p["wall_s"] for p in wide.extra["processes"]] == [1.0] * len(wide.process_samples)


def _shared_run(store, answer: Answer, jobs: list[Job], rounds: Rounds):
    """``measure_jobs`` through a real pool of fake workers; returns the summary and the
    sizes each measuring worker served, in order (the environment's worker left out)."""
    served: dict[int, list[int]] = {}
    with WorkerPool(FakeLauncher(*[answer] * 40)) as pool:
        request = pool.request

        def recording(payload, events, timeout_s, stop=None):
            served.setdefault(id(pool.worker()), []).append(payload.get("size", 0))
            return request(payload, events, timeout_s, stop)

        pool.request = recording  # type: ignore[method-assign]
        summary = measure_jobs(jobs, pool, _record(store), timeout_s=5, rounds=rounds)
    return summary, [w for w in served.values() if w != [0]]


def test_shared_processes_serve_k_points_of_a_round_and_never_two_of_one_point(store):
    def answer(payload: dict[str, Any]) -> dict[str, Any]:
        return ENV if payload["op"] == "environment" else _ok(payload)

    sizes = range(1, 8)
    summary, workers = _shared_run(
        store, answer, [_job(s) for s in sizes], Rounds(3, 3, seed=5, per_process=3)
    )
    assert summary.status == "finished" and len(summary.results) == 7
    assert all(len(w) <= 3 and len(set(w)) == len(w) for w in workers)
    assert sorted(s for w in workers for s in w) == sorted(list(sizes) * 3)
    # 7 points in a round: processes of 3, 3 and 1; a fresh zygote each round.
    assert sorted(len(w) for w in workers) == [1, 1, 1, 3, 3, 3, 3, 3, 3]
    assert all(sum(s in w for w in workers) == 3 for s in sizes)  # 3 distinct processes


def test_shared_pool_gives_a_fresh_worker_once_told_one_request_each():
    launcher = FakeLauncher(_ok, _ok, _ok)
    with WorkerPool(launcher) as pool:
        pool.share(2)
        pool.request({"size": 1}, ("result",), 5)
        pool.request({"size": 2}, ("result",), 5)
        assert len(launcher.started) == 1
        pool.request({"size": 3}, ("result",), 5)
        pool.share(1)  # the second worker has served one: spent now
        pool.request({"size": 4}, ("result",), 5)
        assert len(launcher.started) == 3 and launcher.started[1].closed


def test_extra_processes_after_shared_rounds_are_fresh_ones(store):
    seen: dict[int, int] = {}

    def disagreeing(payload: dict[str, Any]) -> dict[str, Any]:
        if payload["op"] == "environment":
            return ENV
        r = seen[payload["size"]] = seen.get(payload["size"], 0) + 1  # process r answers r ms
        result = Result(_point(payload["size"]), "ok", samples_s=(1e-3 * r,) * 4)
        return {"event": "result", "result": result.to_dict()}

    jobs = [Job({"op": "measure", "size": s, "policy": {"max_time_s": 1.0}}, (_point(s),),
                f"n={s}") for s in (1, 2)]  # fmt: skip
    _, workers = _shared_run(store, disagreeing, jobs, Rounds(2, 4, per_process=2))
    assert seen == {1: 4, 2: 4}  # they never agree: every point takes its 4 processes
    assert sorted(map(len, workers)) == [1, 1, 1, 1, 2, 2]  # 2 shared rounds, 4 fresh extras
    assert all(len(set(w)) == len(w) for w in workers)
