"""The worker processes: a zygote imports torch once and forks a fresh worker per need.

Process tree on Linux::

    runner ──spawns──▶ zygote  (python -m benchbench.run.worker zygote FD LIMIT)
                         └─forks─▶ worker, worker, ...   (one alive at a time)

Importing torch costs ~3 s here (8 s on a loaded machine), and the first use of
``torch.profiler`` (peak memory of a point) another ~2-5 s. The zygote pays both
once; a worker forked from it answers in ~30 ms, so a crash, a hang or an
out-of-memory kill costs the run one point, not a torch import. The zygote runs no
parallel torch op (its warm-up tensor has 16 elements, far below the intra-op grain
of 32768), because OpenMP thread pools do not survive ``fork`` (the reason PyTorch's
own DataLoader forks only before the first parallel op).

Elsewhere (macOS: frameworks loaded by ``import torch`` are not fork-safe) every
worker is a fresh ``python -m benchbench.run.worker serve FD LIMIT``.

A worker reads JSON requests line by line on one pipe and writes JSON events on
another (stdout points at stderr, so a suite's prints cannot corrupt the channel).
SIGINT and SIGTERM make it stop after the current sample: it answers
``{"event": "interrupted"}`` for a point cut short, and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TextIO

from benchbench.core.errors import MeasurementError

#: Signal that stopped this worker process (set by the handler), else None.
_stop_signal: int | None = None


def _on_stop_signal(signum: int, _frame: object) -> None:
    global _stop_signal
    _stop_signal = signum


def stop_requested() -> bool:
    """True once SIGINT or SIGTERM reached this worker (the engine's ``should_stop``)."""
    return _stop_signal is not None


def _send(channel: TextIO, event: dict[str, Any]) -> None:
    channel.write(json.dumps(event) + "\n")
    channel.flush()


def serve(channel: TextIO, requests: TextIO) -> None:
    """Answer requests until ``exit``, end of input or a stop signal."""
    import torch

    from benchbench.core.values import Point, Result
    from benchbench.machine import environment
    from benchbench.measure.point import Options, measure_point
    from benchbench.measure.policy import INTERRUPTED, Policy
    from benchbench.suite.load import load_suite

    _send(channel, {"event": "hello", "pid": os.getpid()})
    for line in requests:
        request = json.loads(line)
        op = request.get("op")
        if op == "exit" or stop_requested():
            return
        if op == "environment":
            if request.get("threads"):
                torch.set_num_threads(int(request["threads"]))
            env = environment.collect(torch, request.get("threads"))
            _send(channel, {"event": "environment", "fields": env.fields, "info": env.info})
        elif op == "measure":
            point = Point.from_dict(request["point"])
            try:
                workload = load_suite(Path(request["suite_path"])).get(request["workload"])
                options = Options(
                    policy=Policy(**request["policy"]),
                    cache=request["cache"],
                    threads=request.get("threads"),
                    should_stop=stop_requested,
                    profile_dir=request.get("profile_dir"),
                )
            except Exception as exc:  # reported as this point's error, the worker lives on
                failed = Result(point=point, status="error", reason=f"{type(exc).__name__}: {exc}")
                _send(channel, {"event": "result", "result": failed.to_dict()})
                continue
            result = measure_point(workload, point, options)
            if stop_requested() and result.stop_reason == INTERRUPTED:
                # Cut short: not a finished point. The runner leaves it for --resume.
                _send(channel, {"event": "interrupted", "signal": _stop_signal})
                return
            _send(channel, {"event": "result", "result": result.to_dict()})
            if stop_requested():
                return
        elif op == "time":  # `benchbench time`: statements measured interleaved at one point
            from benchbench.measure.variants import time_request

            _send(channel, {"event": "timed", "results": time_request(request)})
        else:
            _send(channel, {"event": "error", "message": f"unknown request {op!r}"})


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (no orphan keeps measuring)."""
    if sys.platform.startswith("linux"):
        with_errno = ctypes.CDLL(None, use_errno=True)
        with_errno.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _limit_memory(memory_limit: int) -> None:
    if memory_limit > 0:
        # Address-space limit: an allocation past it fails inside the worker (and is
        # recorded as "out of memory") instead of waking the kernel's OOM killer.
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))


def _become_worker(requests_fd: int, events_fd: int, memory_limit: int) -> None:
    signal.signal(signal.SIGINT, _on_stop_signal)
    signal.signal(signal.SIGTERM, _on_stop_signal)
    _die_with_parent()
    _limit_memory(memory_limit)
    channel = os.fdopen(events_fd, "w", buffering=1)
    serve(channel, os.fdopen(requests_fd, "r"))


def _warm_up_zygote() -> None:
    """Import what every worker needs and pay the profiler's first use, once."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import benchbench.measure.point  # noqa: F401  (imports numpy, the engine, devices)

    # The profiler's native start/stop lines go to fds 1 and 2: silenced here.
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
            torch.ones(16).sqrt()  # 16 elements: no intra-op thread pool is started
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _reap(pid: int, timeout_s: float) -> int:
    """Exit code of child ``pid`` (negative: killed by that signal); kills it if stuck."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def zygote(sock: socket.socket, memory_limit: int) -> None:
    """Serve ``fork`` and ``wait`` requests on ``sock`` until the runner goes away.

    ``fork`` carries two file descriptors (the worker's request and event pipes)
    and is answered with the new worker's pid; ``wait`` with its exit code.
    """
    # The runner decides what a Ctrl-C or SIGTERM means; the idle zygote ignores both.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _warm_up_zygote()
    try:
        sock.send(json.dumps({"event": "ready", "pid": os.getpid()}).encode())
    except OSError:
        return  # the runner gave up while torch was importing
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, 4096, 2)
        if not message:
            return  # the runner closed its end
        request = json.loads(message)
        if request["op"] == "fork":
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    sock.close()
                    _become_worker(fds[0], fds[1], memory_limit)
                except BaseException:
                    traceback.print_exc()
                    code = 1
                finally:
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())
        elif request["op"] == "wait":
            code = _reap(int(request["pid"]), float(request.get("timeout_s", 10.0)))
            sock.send(json.dumps({"code": code}).encode())
        else:
            return


def main(argv: list[str]) -> int:
    """``zygote FD LIMIT`` (FD: a SEQPACKET socket) or ``serve FD LIMIT`` (FD: events)."""
    mode, fd, memory_limit = argv[1], int(argv[2]), int(argv[3]) if len(argv) > 3 else 0
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if mode == "zygote":
        _die_with_parent()
        zygote(socket.socket(fileno=fd), memory_limit)
        return 0
    _become_worker(sys.stdin.fileno(), fd, memory_limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))


# -- the runner's side -------------------------------------------------------------


class WorkerFailure(Exception):
    """The worker died or hung; the message is the point's error reason."""


class StopRequest:
    """Signals received by the runner: stop after the current sample; a second one: now.

    A signal handler calls :meth:`request`; the runner and :meth:`Worker.expect`
    poll :attr:`requested` (every 0.1 s while waiting on a worker).
    """

    def __init__(self) -> None:
        self.signals: list[int] = []

    def request(self, signum: int) -> None:
        self.signals.append(signum)

    @property
    def requested(self) -> bool:
        return bool(self.signals)

    @property
    def forced(self) -> bool:
        return len(self.signals) >= 2

    @property
    def signum(self) -> int | None:
        return self.signals[0] if self.signals else None


class Worker:
    """The runner's handle on one worker process: its pid and its two pipes."""

    def __init__(
        self, pid: int, requests: IO[str], events_fd: int, reap: Callable[[float], int]
    ) -> None:
        self.pid = pid
        self._requests = requests
        self._events_fd = events_fd
        self._reap = reap
        self._exit_code: int | None = None
        self._selector = selectors.DefaultSelector()
        self._selector.register(events_fd, selectors.EVENT_READ)
        self._buffer = ""
        self._told_to_stop = False

    def expect(
        self, events: tuple[str, ...], timeout_s: float, stop: StopRequest | None = None
    ) -> dict[str, Any]:
        """Wait for the next event; WorkerFailure on death, hang or protocol error.

        When ``stop`` is requested the worker is sent SIGINT once (it finishes its
        current sample and answers ``interrupted``); when it is forced, the worker
        is killed.
        """
        deadline = time.monotonic() + timeout_s
        while "\n" not in self._buffer:
            if stop is not None and stop.requested:
                if stop.forced:
                    self.kill()
                    raise WorkerFailure("stopped by a second interrupt")
                if not self._told_to_stop:
                    self._told_to_stop = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGINT)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerFailure(f"timed out after {timeout_s:g} s")
            if not self._selector.select(timeout=min(remaining, 0.1)):
                continue
            chunk = os.read(self._events_fd, 1 << 20).decode()
            if not chunk:
                raise WorkerFailure(self._death_reason())
            self._buffer += chunk
        line, self._buffer = self._buffer.split("\n", 1)
        message: dict[str, Any] = json.loads(line)
        if message.get("event") not in events:
            raise WorkerFailure(f"worker protocol error: expected {events[0]!r}, got {line[:200]}")
        return message

    def request(
        self,
        payload: dict[str, Any],
        events: tuple[str, ...],
        timeout_s: float,
        stop: StopRequest | None = None,
    ) -> dict[str, Any]:
        try:
            self._requests.write(json.dumps(payload) + "\n")
            self._requests.flush()
        except OSError:
            raise WorkerFailure(self._death_reason()) from None
        return self.expect(events, timeout_s, stop)

    def exit_code(self, timeout_s: float = 10.0) -> int:
        """Wait for the process to end (killing it after ``timeout_s``); its exit code."""
        if self._exit_code is None:
            self._exit_code = self._reap(timeout_s)
        return self._exit_code

    def _death_reason(self) -> str:
        code = self.exit_code()
        if code < 0:
            name = signal.Signals(-code).name
            if name == "SIGKILL":
                return "crashed: SIGKILL (killed, often by the kernel's out-of-memory killer)"
            return f"crashed: {name}"
        return f"worker exited with code {code}"

    def kill(self) -> None:
        if self._exit_code is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.exit_code()

    def close(self) -> None:
        if self._exit_code is None:
            with contextlib.suppress(OSError):
                self._requests.write(json.dumps({"op": "exit"}) + "\n")
                self._requests.flush()
            self.exit_code()
        with contextlib.suppress(OSError):
            self._requests.close()
        self._selector.close()
        with contextlib.suppress(OSError):
            os.close(self._events_fd)


class Zygote:
    """Linux launcher: one process that imported torch, forking a worker per call.

    Constructing it starts the zygote and returns at once, so that its torch import
    overlaps the runner's own work (loading the suites imports torch there too);
    the first :meth:`worker` call waits for it.
    """

    def __init__(self, memory_limit_bytes: int = 0, start_timeout_s: float = 300.0) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchbench.run.worker",
                "zygote",
                str(theirs.fileno()),
                str(memory_limit_bytes),
            ],
            stdin=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self._sock = ours
        self._start_timeout_s = start_timeout_s
        self._ready = False

    def _wait_ready(self) -> None:
        """Wait for the zygote's ``ready`` (it imports torch meanwhile: ~3-15 s)."""
        self._sock.settimeout(self._start_timeout_s)
        try:
            ready = self._sock.recv(4096)
        except TimeoutError:
            self.close()
            raise MeasurementError(
                f"the worker zygote did not start within {self._start_timeout_s:g} s"
            ) from None
        if not ready:
            code = self.proc.wait()
            raise MeasurementError(
                f"the worker zygote exited with code {code} while importing torch; "
                "run `python -c 'import torch'` to see why"
            )
        self._sock.settimeout(120.0)
        self._ready = True

    def _call(self, request: dict[str, Any], fds: tuple[int, ...] = ()) -> dict[str, Any]:
        try:
            socket.send_fds(self._sock, [json.dumps(request).encode()], list(fds))
            reply = self._sock.recv(4096)
        except OSError as exc:
            raise WorkerFailure(f"the worker zygote stopped answering: {exc}") from None
        if not reply:
            raise WorkerFailure(f"the worker zygote exited with code {self.proc.wait()}")
        answer: dict[str, Any] = json.loads(reply)
        return answer

    def worker(self) -> Worker:
        """A fresh worker forked from the zygote (~30 ms), after its ``hello``."""
        if not self._ready:
            self._wait_ready()
        requests_r, requests_w = os.pipe()
        events_r, events_w = os.pipe()
        try:
            pid = int(self._call({"op": "fork"}, (requests_r, events_w))["pid"])
        finally:
            os.close(requests_r)
            os.close(events_w)
        handle = Worker(
            pid,
            os.fdopen(requests_w, "w"),
            events_r,
            lambda timeout_s: int(
                self._call({"op": "wait", "pid": pid, "timeout_s": timeout_s})["code"]
            ),
        )
        handle.expect(("hello",), timeout_s=120.0)
        return handle

    def close(self) -> None:
        self._sock.close()  # the zygote exits on end of input
        if not self._ready:
            self.proc.kill()  # still importing torch: nothing to finish
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Spawner:
    """Launcher where fork is unsafe: every worker is a fresh interpreter."""

    def __init__(self, memory_limit_bytes: int = 0) -> None:
        self.memory_limit_bytes = memory_limit_bytes

    def worker(self) -> Worker:
        events_r, events_w = os.pipe()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchbench.run.worker",
                "serve",
                str(events_w),
                str(self.memory_limit_bytes),
            ],
            stdin=subprocess.PIPE,
            pass_fds=(events_w,),
            text=True,
        )
        os.close(events_w)

        def reap(timeout_s: float) -> int:
            try:
                return proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                return proc.wait()

        assert proc.stdin is not None  # stdin=PIPE
        handle = Worker(proc.pid, proc.stdin, events_r, reap)
        handle.expect(("hello",), timeout_s=120.0)
        return handle

    def close(self) -> None:
        pass


def launcher(memory_limit_bytes: int = 0, fork: bool | None = None) -> Zygote | Spawner:
    """The zygote on Linux (cheap restarts), a spawner elsewhere or when ``fork=False``."""
    if fork is None:
        fork = sys.platform.startswith("linux")
    return Zygote(memory_limit_bytes) if fork else Spawner(memory_limit_bytes)
