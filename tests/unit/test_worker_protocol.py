"""The worker protocol, each side on its own: serve() on in-memory streams, and
Worker.expect on a real pipe fed a hand-written event stream."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchbench.run import forksafe
from benchbench.run import worker as child
from benchbench.run.statements import TimeConfig
from benchbench.run.workers import StopRequest, Worker, WorkerFailure
from benchbench.suite.load import load_suite
from tests.unit.fakes import FAST

SUITE = """
import torch
from benchbench import Suite, Variant
import benchbench.run.worker as worker

def stop_then_sqrt(x):
    worker._stop_signal = 2  # as the SIGINT handler does, in the middle of the point
    return torch.sqrt(x)

suite = Suite("proto")
suite.workload(
    "sqrt",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("torch.sqrt", torch.sqrt), Variant("stopped", stop_then_sqrt)],
    sizes=[64],
)
"""


# -- the child side: serve() -------------------------------------------------------


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "proto.py"
    path.write_text(SUITE)
    return path


@pytest.fixture(autouse=True)
def _no_stop_signal(monkeypatch):
    monkeypatch.setattr(child, "_stop_signal", None)


def _serve(*requests: dict) -> list[dict]:
    """Events ``serve`` writes for ``requests`` (one JSON line each)."""
    events = io.StringIO()
    child.serve(events, io.StringIO("".join(json.dumps(r) + "\n" for r in requests)))
    return [json.loads(line) for line in events.getvalue().splitlines()]


def _measure(suite_file: Path, variant: str, workload: str = "sqrt") -> dict:
    point = next(p for p in load_suite(suite_file).get("sqrt").points() if p.variant == variant)
    return {
        "op": "measure",
        "suite_path": str(suite_file),
        "workload": workload,
        "point": point.to_dict(),
        "policy": dataclasses.asdict(FAST),
        "cache": "warm",
        "threads": None,
        "profile_dir": None,
    }


def test_serve_says_hello_then_answers_each_request_and_stops_at_exit(suite_file):
    events = _serve(
        _measure(suite_file, "torch.sqrt"),
        {"op": "no such op"},
        {"op": "exit"},
        {"op": "no such op either"},  # after exit: never read
    )
    assert [e["event"] for e in events] == ["hello", "result", "error"]
    assert events[0]["pid"] == os.getpid()
    result = events[1]["result"]
    assert result["status"] == "ok" and result["point"]["variant"] == "torch.sqrt"
    assert len(result["samples_s"]) >= 3
    assert events[2]["message"] == "unknown request 'no such op'"


def test_a_point_that_cannot_load_is_an_error_result_and_the_worker_lives_on(suite_file):
    events = _serve(
        _measure(suite_file, "torch.sqrt", workload="nope"), _measure(suite_file, "torch.sqrt")
    )
    assert [e["event"] for e in events] == ["hello", "result", "result"]
    failed = events[1]["result"]
    assert failed["status"] == "error"
    assert failed["reason"].startswith("SuiteError: suite 'proto' has no workload 'nope'")
    assert events[2]["result"]["status"] == "ok"


def test_a_point_cut_short_by_a_stop_signal_is_answered_interrupted_and_serve_returns(
    suite_file,
):
    events = _serve(_measure(suite_file, "stopped"), _measure(suite_file, "torch.sqrt"))
    assert events[1:] == [{"event": "interrupted", "signal": 2}]


def test_a_stop_signal_between_requests_ends_serve_without_an_answer(suite_file, monkeypatch):
    monkeypatch.setattr(child, "_stop_signal", signal.SIGTERM)
    assert [e["event"] for e in _serve(_measure(suite_file, "torch.sqrt"))] == ["hello"]


def test_serve_answers_environment_and_time_requests(monkeypatch):
    import torch

    # The request sets torch's thread count in this process: put it back afterwards.
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    config = TimeConfig(statements=("x + 1", "x * 2"), sizes=(64,), policy=FAST)
    events = _serve(
        {"op": "environment", "threads": 1},
        config.request(config.point(64, "cpu", "float32"), check_only=True),
    )
    assert [e["event"] for e in events] == ["hello", "environment", "timed"]
    assert "threads" in events[1]["fields"] and isinstance(events[1]["info"], dict)
    timed = events[2]["results"]
    assert [r["point"]["variant"] for r in timed] == ["x + 1", "x * 2"]
    assert timed[0]["status"] == "ok" and timed[1]["reason"].startswith("wrong result")


# -- the runner's side: Worker.expect on a hand-written event stream ----------------


def _worker(script: str) -> tuple[subprocess.Popen[bytes], Worker]:
    """A Worker handle on a child running ``script``, which writes events to ``fd``."""
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import os, signal, sys, time\nfd = {write}\n" + script],
        pass_fds=(write,),
        stdin=subprocess.PIPE,
    )
    os.close(write)

    def reap(timeout_s: float) -> int:
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    assert proc.stdin is not None
    return proc, Worker(proc.pid, io.TextIOWrapper(proc.stdin), read, reap)


def _say(*events: str) -> str:
    return "".join(f"os.write(fd, {e!r}.encode())\n" for e in events)


def test_expect_returns_events_one_at_a_time_across_split_writes():
    _proc, handle = _worker(
        _say('{"event": "hello"}\n{"event": "res', 'ult", "n": 1}\n') + "time.sleep(30)"
    )
    try:
        assert handle.expect(("hello",), 10) == {"event": "hello"}
        assert handle.expect(("result",), 10) == {"event": "result", "n": 1}
    finally:
        handle.kill()
        handle.close()


def test_expect_kills_a_worker_that_says_nothing_before_the_timeout():
    proc, handle = _worker("time.sleep(30)")
    with pytest.raises(WorkerFailure, match=r"^timed out after 0\.2 s$"):
        handle.expect(("result",), 0.2)
    assert proc.returncode == -signal.SIGKILL
    handle.close()


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("sys.exit(3)", "worker exited with code 3"),
        ("os.kill(os.getpid(), signal.SIGSEGV)", "crashed: SIGSEGV"),
        (
            "os.kill(os.getpid(), signal.SIGKILL)",
            "crashed: SIGKILL (killed, often by the kernel's out-of-memory killer)",
        ),
    ],
)
def test_expect_turns_a_dead_worker_into_its_reason(script, reason):
    _proc, handle = _worker(_say('{"event": "hello"}\n') + script)
    assert handle.expect(("hello",), 10)["event"] == "hello"
    with pytest.raises(WorkerFailure) as failure:
        handle.expect(("result",), 10)
    assert str(failure.value) == reason
    handle.close()


def test_an_unexpected_event_is_a_protocol_error():
    _proc, handle = _worker(_say('{"event": "timed", "results": []}\n') + "time.sleep(30)")
    with pytest.raises(WorkerFailure, match=r"^worker protocol error: expected 'result', got"):
        handle.expect(("result", "interrupted"), 10)
    handle.kill()
    handle.close()


def test_a_stop_request_sends_sigint_once_and_waits_for_the_answer():
    script = textwrap.dedent(
        """
        got = []
        signal.signal(signal.SIGINT, lambda *_: got.append(1))
        os.write(fd, b'{"event": "hello"}\\n')
        while not got:
            time.sleep(0.01)
        time.sleep(0.3)  # the rest of the current sample; a second SIGINT would count
        os.write(fd, ('{"event": "interrupted", "sigints": %d}\\n' % len(got)).encode())
        """
    )
    proc, handle = _worker(script)
    assert handle.expect(("hello",), 10)["event"] == "hello"
    stop = StopRequest()
    stop.request(signal.SIGINT)
    answer = handle.expect(("result", "interrupted"), 10, stop)
    assert answer == {"event": "interrupted", "sigints": 1}
    handle.close()
    assert proc.returncode == 0


def test_a_second_stop_request_kills_the_worker_at_once():
    proc, handle = _worker(
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        + _say('{"event": "hello"}\n')
        + "time.sleep(30)"
    )
    assert handle.expect(("hello",), 10)["event"] == "hello"
    stop = StopRequest()
    stop.request(signal.SIGINT)
    stop.request(signal.SIGINT)
    with pytest.raises(WorkerFailure, match=r"^stopped by a second interrupt$"):
        handle.expect(("result",), 10, stop)
    assert proc.returncode == -signal.SIGKILL
    handle.close()


def test_request_to_a_worker_that_is_gone_reports_how_it_ended():
    _proc, handle = _worker("sys.exit(5)")
    handle.exit_code()  # wait until it is gone and its request pipe is broken
    with pytest.raises(WorkerFailure, match=r"^worker exited with code 5$"):
        handle.request({"op": "exit"}, ("result",), 10)
    handle.close()


class _Cuda:
    def __init__(self, available: bool) -> None:
        self._available = available

    def is_available(self) -> bool:
        return self._available


class _Torch:
    def __init__(self, available: bool) -> None:
        self.cuda = _Cuda(available)


def test_fork_proof_forks_a_test_child_only_where_cuda_is_visible_and_reads_its_exit():
    forks: list[int] = []

    def fork() -> int:
        forks.append(1)
        return os.fork()

    assert forksafe.fork_proof(_Torch(False), fork=fork) is None
    assert forks == []  # no CUDA device: nothing to prove, no fork
    assert forksafe.fork_proof(_Torch(True), fork=fork, child=lambda: os._exit(0)) is None
    refusal = forksafe.fork_proof(_Torch(True), fork=fork, child=lambda: os._exit(1))
    assert refusal is not None and "(exit code 1)" in refusal
    assert "fresh interpreters" in refusal
    assert len(forks) == 2


# -- the zygote's warm-ups ---------------------------------------------------------


def test_a_request_asks_for_the_first_uses_its_worker_will_make():
    from benchbench.run.pool import warm_ups

    measure = {"op": "measure", "derives_flops": True, "profile_dir": None}
    assert warm_ups(measure) == ("flops",)
    # a later round's process is unchecked: it derives nothing, its zygote warms nothing
    assert warm_ups({**measure, "check": False}) == ()
    assert warm_ups({**measure, "derives_flops": False}) == ()
    assert warm_ups({**measure, "profile_dir": "/tmp/p"}) == ("flops", "profiler")
    assert warm_ups({"op": "environment", "threads": 1}) == ()


def test_a_real_zygote_pays_a_first_use_only_when_a_fork_asks_and_only_once():
    from benchbench.run.workers import Zygote

    zygote = Zygote()
    try:
        for warm, warmed in [((), ()), (("flops",), ("flops",)), ((), ("flops",))]:
            worker = zygote.worker(warm)
            worker.close()
            assert zygote.warmed == warmed
    finally:
        zygote.close()


def test_the_zygote_imports_what_the_engine_needs_so_no_worker_imports_it_again():
    # A worker forked from the zygote that imports a module itself pays it at every
    # point: scipy.special, for the stopping rule's intervals, cost ~0.45 s of CPU a
    # worker when only the commands imported it; the store's SQLAlchemy ~0.4 s in the
    # worker that plans each run.
    code = textwrap.dedent(
        """
        import sys
        from benchbench.run.worker import _freeze_imports
        _freeze_imports()
        before = set(sys.modules)
        import torch
        from benchbench.measure.policy import Policy, Subject, measure
        from benchbench.measure.timers import CpuTimer
        x = torch.rand(64)
        loop = lambda calls: [torch.sqrt(x) for _ in range(calls)]
        (done,) = measure([Subject("sqrt", loop)], CpuTimer(), Policy(max_time_s=0.05))
        assert len(done.samples_s) >= 10
        import benchbench.run.planning  # the first worker plans the run: no store there
        print(sorted(m for m in set(sys.modules) - before if not m.startswith("benchbench")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
