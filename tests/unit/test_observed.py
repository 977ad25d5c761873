"""The runner samples telemetry around a worker request and attaches it to measured results."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from benchbench.core.values import Point, Result
from benchbench.machine.sensors import CpuReader
from benchbench.machine.telemetry import TelemetrySampler
from benchbench.run.observed import observed_request, runner_sampler
from benchbench.run.workers import WorkerFailure

WORKER_PID = 4242


class FakeWorker:
    pid = WORKER_PID


class FakePool:
    """Answers every request with ``answer``; records what was asked, in order."""

    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer
        self.calls: list[str] = []

    def worker(self, warm=()) -> FakeWorker:
        self.calls.append("worker")
        return FakeWorker()

    def request(self, payload, events, timeout_s, stop=None):
        self.calls.append("request")
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _point(variant: str = "v") -> Point:
    return Point("s", "w", variant, 8, (8,), "float32", "cpu")


def _doc(status: str = "ok", threads: int | None = 2, warnings: tuple[str, ...] = ()) -> Any:
    return Result(_point(), status, threads=threads, warnings=warnings).to_dict()  # type: ignore[arg-type]


class Factory:
    """Builds samplers whose CPU readings are fakes: core 1 held by another process."""

    def __init__(self) -> None:
        self.pids: list[int | None] = []

    def __call__(self, pid: int | None) -> TelemetrySampler:
        self.pids.append(pid)
        cores = [[(100.0, 500.0), (200.0, 400.0)], [(101.9, 500.1), (201.9, 400.1)]]
        measured = [7.0, 9.0]
        return TelemetrySampler(
            interval_s=60.0,
            slow_interval_s=60.0,
            nvml=None,
            slow_in_thread=False,
            exclude_pids={WORKER_PID},
            measured_pid=pid,
            cpu=CpuReader(
                per_cpu=lambda: cores.pop(0),
                process_cpu_s=lambda _pid: measured.pop(0),
                process_cpus=lambda _pid: (0, 1),
            ),
        )


def test_ok_results_get_the_telemetry_and_the_thread_warning() -> None:
    factory = Factory()
    pool = FakePool({"event": "result", "result": _doc(warnings=("noisy",))})
    message = observed_request(pool, {"op": "measure"}, ("result",), 5.0, sampler=factory)
    assert pool.calls == ["worker", "request"]  # the worker's pid is known before sampling
    assert factory.pids == [WORKER_PID]
    result = Result.from_dict(message["result"])
    assert result.telemetry is not None
    assert result.telemetry["cpus"] == [0, 1]
    assert result.telemetry["idle_cores"] == 1
    assert result.telemetry["cpu_idle_share"] == pytest.approx({"0": 0.05, "1": 0.05})
    assert result.warnings[0] == "noisy"
    (threads_line,) = [w for w in result.warnings if "torch threads" in w]
    assert threads_line.startswith("2 torch threads but only 1 of 2 cores were idle")


def test_a_one_thread_point_gets_telemetry_without_the_warning() -> None:
    pool = FakePool({"event": "result", "result": _doc(threads=1)})
    message = observed_request(pool, {"op": "measure"}, ("result",), 5.0, sampler=Factory())
    result = Result.from_dict(message["result"])
    assert result.telemetry is not None and result.telemetry["idle_cores"] == 1
    assert not any("torch threads" in w for w in result.warnings)


def test_each_ok_result_of_a_timed_answer_gets_it_and_the_others_do_not() -> None:
    answer = {"event": "timed", "results": [_doc(), _doc("error"), _doc("skipped")]}
    message = observed_request(FakePool(answer), {"op": "time"}, ("timed",), 5.0, sampler=Factory())
    ok, error, skipped = (Result.from_dict(d) for d in message["results"])
    assert ok.telemetry is not None and ok.warnings
    assert error.telemetry is None and error.warnings == ()
    assert skipped.telemetry is None


def test_an_interrupted_answer_is_returned_unchanged() -> None:
    answer = {"event": "interrupted", "signal": 15}
    message = observed_request(
        FakePool(dict(answer)), {"op": "measure"}, ("result", "interrupted"), 5.0,
        sampler=Factory(),
    )  # fmt: skip
    assert message == answer


def test_a_worker_failure_propagates() -> None:
    pool = FakePool(WorkerFailure("crashed: SIGSEGV"))
    with pytest.raises(WorkerFailure, match="SIGSEGV"):
        observed_request(pool, {"op": "measure"}, ("result",), 5.0, sampler=Factory())


def test_the_runner_sampler_reads_the_worker_and_never_calls_it_another_process() -> None:
    worker = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        sampler = runner_sampler(worker.pid)
        assert sampler.slow_in_thread is False  # no process scan while the worker times
        sampler.start()
        time.sleep(0.5)
        telemetry = sampler.stop()
    finally:
        worker.kill()
        worker.wait()
    assert worker.pid not in {p.pid for p in telemetry.busy_processes}
    assert os.getpid() not in {p.pid for p in telemetry.busy_processes}
    assert telemetry.measured_cpu_s is not None and telemetry.measured_cpu_s > 0
    assert telemetry.cpus == tuple(sorted(os.sched_getaffinity(0)))
    assert set(telemetry.cpu_idle_share) >= set(telemetry.cpus)


def test_the_runners_other_processes_are_its_own(monkeypatch) -> None:
    # The runner's zygote, helpers and callgrind worker are its descendants: the sampler
    # is told the runner is their root (what that does: test_telemetry's fake tables).
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(
        "benchbench.run.observed.TelemetrySampler", lambda **kw: made.append(kw) or kw
    )
    runner_sampler(4321)
    (kwargs,) = made
    assert kwargs["own_root"] == os.getpid()
    assert kwargs["exclude_pids"] == {os.getpid(), 4321}
