"""The runner's side of the worker processes: launchers, handles, failures, stop requests.

:func:`launcher` starts a :class:`Zygote` on Linux (a process that imported torch
once and forks a fresh worker in ~30 ms) or a :class:`Spawner` elsewhere (a fresh
interpreter per worker); both hand out :class:`Worker` handles. The requests and
events a worker understands, and the zygote's own messages, are documented once, in
:mod:`benchbench.run.worker` (the child side).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from benchbench.core.errors import MeasurementError
from benchbench.machine.allocator import worker_environment
from benchbench.machine.cpus import format_cpus
from benchbench.run.worker import NVML_CHECK


class WorkerFailure(Exception):
    """The worker died or hung; the message is the point's error reason."""


class ForkUnsafe(Exception):
    """The zygote refused to fork (CUDA is initialised in it); the message says why."""


def resident_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (0 once it is gone)."""
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


class StopRequest:
    """Signals received by the runner: stop after the current sample; a second one: now.

    A signal handler calls :meth:`request`; the runner and :meth:`Worker.expect` poll
    :attr:`requested` (every 0.1 s while waiting on a worker).
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
    """The runner's handle on one worker process: its pid and its two pipes.

    ``memory_limit`` (bytes, 0: none): while it waits for an event the handle reads the
    worker's resident memory (``rss(pid)``, every 0.1 s) and kills a worker past it:
    ``--memory-limit`` for host memory where no address-space limit can hold it, a CUDA
    worker's (:func:`benchbench.run.guards.guard_memory`).
    """

    def __init__(
        self,
        pid: int,
        requests: IO[str],
        events_fd: int,
        reap: Callable[[float], int],
        memory_limit: int = 0,
        rss: Callable[[int], int] = resident_bytes,
    ) -> None:
        self.pid = pid
        self._memory_limit = memory_limit
        self._rss = rss
        self._requests = requests
        self._events_fd = events_fd
        self._reap = reap
        self._exit_code: int | None = None
        self._asked_exit = False
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
            self._check_memory()
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

    def _check_memory(self) -> None:
        if self._memory_limit <= 0 or self._exit_code is not None:
            return
        resident = self._rss(self.pid)
        if resident > self._memory_limit:
            self.kill()
            raise WorkerFailure(
                f"out of memory: the worker's resident memory reached {resident / 2**20:.0f} "
                f"MiB, past --memory-limit {self._memory_limit / 2**20:.0f} MiB "
                "(killed by the runner)"
            )

    def request(
        self,
        payload: dict[str, Any],
        events: tuple[str, ...],
        timeout_s: float,
        stop: StopRequest | None = None,
    ) -> dict[str, Any]:
        self.send(payload)
        return self.expect(events, timeout_s, stop)

    def send(self, payload: dict[str, Any]) -> None:
        """Write one request line without waiting for its answer (WorkerFailure if dead)."""
        try:
            self._requests.write(json.dumps(payload) + "\n")
            self._requests.flush()
        except OSError:
            raise WorkerFailure(self._death_reason()) from None

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

    def ask_exit(self) -> None:
        """Tell the worker to exit, not waiting (:meth:`close` waits): a pair ends at once."""
        if self._exit_code is None and not self._asked_exit:
            self._asked_exit = True
            with contextlib.suppress(WorkerFailure):  # already gone: close reaps it
                self.send({"op": "exit"})

    def close(self) -> None:
        self.ask_exit()
        self.exit_code()
        with contextlib.suppress(OSError):
            self._requests.close()
        self._selector.close()
        with contextlib.suppress(OSError):
            os.close(self._events_fd)


class Zygote:
    """Linux launcher: one process that imported torch, forking a worker per call.

    Constructing it starts the zygote and returns at once, so that its torch import
    overlaps the runner's own work (loading the suites imports torch there too); the
    first :meth:`worker` call waits for it.
    """

    def __init__(
        self,
        memory_limit_bytes: int = 0,
        start_timeout_s: float = 300.0,
        env: dict[str, str] | None = None,
        cpus: Sequence[int] = (),
        python: str | None = None,
    ) -> None:
        self.memory_limit_bytes = memory_limit_bytes
        self.env = env
        self.cpus = tuple(cpus)
        #: The interpreter of the zygote and its workers (``benchbench ab``: a side's).
        self.python = python or sys.executable
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [
                self.python,
                "-m",
                "benchbench.run.worker",
                "zygote",
                str(theirs.fileno()),
                str(memory_limit_bytes),
                format_cpus(cpus),  # pinned before torch loads: its forks inherit it
            ],
            stdin=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            env=env,  # the allocator's settings: the zygote's forks inherit its malloc state
        )
        theirs.close()
        self._sock = ours
        self._start_timeout_s = start_timeout_s
        self._ready = False
        self._failed: MeasurementError | None = None
        #: The first uses (:func:`warm_ups`) the zygote has paid, as of its last fork.
        self.warmed: tuple[str, ...] = ()

    def wait_ready(self) -> None:
        """Wait for the zygote's ``ready`` (it imports torch meanwhile: ~3-15 s), once: a
        later call returns at once or raises the first call's error."""
        if self._failed is not None:
            raise self._failed
        if not self._ready:
            try:
                self._wait_ready()
            except MeasurementError as failure:
                self._failed = failure
                raise

    def poll_ready(self) -> bool:
        """Whether the zygote is past its torch import, ready or failed (never waits)."""
        if not self._ready and self._failed is None and select.select([self._sock], [], [], 0)[0]:
            with contextlib.suppress(MeasurementError):
                self.wait_ready()
        return self._ready or self._failed is not None

    def _wait_ready(self) -> None:
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

    def worker(self, warm: Sequence[str] = ()) -> Worker:
        """A fresh worker forked from the zygote (~30 ms), after its ``hello``; the
        zygote first pays the first uses in ``warm`` it has not paid yet (:func:`warm_ups`)."""
        self.wait_ready()
        requests_r, requests_w = os.pipe()
        events_r, events_w = os.pipe()
        fork: dict[str, Any] = {"op": "fork", "warm": list(warm)} if warm else {"op": "fork"}
        try:
            answer = self._call(fork, (requests_r, events_w))
        finally:
            os.close(requests_r)
            os.close(events_w)
        if "refused" in answer:
            os.close(requests_w)
            os.close(events_r)
            raise ForkUnsafe(str(answer["refused"]))
        pid = int(answer["pid"])
        self.warmed = tuple(answer.get("warmed", ()))
        handle = Worker(
            pid,
            os.fdopen(requests_w, "w"),
            events_r,
            lambda timeout_s: int(
                self._call({"op": "wait", "pid": pid, "timeout_s": timeout_s})["code"]
            ),
            self.memory_limit_bytes,
        )
        handle.expect(("hello",), timeout_s=120.0)
        return handle

    def spawner(self) -> Spawner:
        """A :class:`Spawner` with this zygote's settings: where forking became unsafe."""
        return Spawner(self.memory_limit_bytes, self.env, self.cpus, python=self.python)

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
    """Launcher where fork is unsafe: every worker is a fresh interpreter.

    ``prefix`` runs the interpreter under another program (``valgrind``: see
    :mod:`benchbench.run.instrumented`); ``start_timeout_s`` bounds the wait for its
    ``hello`` (torch's import: ~3 s, ~30 s under callgrind).
    """

    def __init__(
        self,
        memory_limit_bytes: int = 0,
        env: dict[str, str] | None = None,
        cpus: Sequence[int] = (),
        prefix: Sequence[str] = (),
        start_timeout_s: float = 120.0,
        python: str | None = None,
    ) -> None:
        self.memory_limit_bytes = memory_limit_bytes
        self.env = env
        self.cpus = tuple(cpus)
        self.prefix = tuple(prefix)
        self.start_timeout_s = start_timeout_s
        self.python = python or sys.executable

    def poll_ready(self) -> bool:
        """Always ready: each worker is a fresh interpreter, with no import to wait for."""
        return True

    def worker(self, warm: Sequence[str] = ()) -> Worker:
        """A fresh interpreter's worker, after its ``hello`` (``warm`` is for a zygote:
        a fresh interpreter pays a first use where it makes it)."""
        del warm
        events_r, events_w = os.pipe()
        proc = subprocess.Popen(
            [
                *self.prefix,
                self.python,
                "-m",
                "benchbench.run.worker",
                "serve",
                str(events_w),
                str(self.memory_limit_bytes),
                format_cpus(self.cpus),
            ],
            stdin=subprocess.PIPE,
            pass_fds=(events_w,),
            text=True,
            env=self.env,
        )
        os.close(events_w)

        def reap(timeout_s: float) -> int:
            try:
                return proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                return proc.wait()

        assert proc.stdin is not None  # stdin=PIPE
        handle = Worker(proc.pid, proc.stdin, events_r, reap, self.memory_limit_bytes)
        try:
            handle.expect(("hello",), timeout_s=self.start_timeout_s)
        except WorkerFailure:
            handle.close()
            raise
        return handle

    def close(self) -> None:
        pass


def launcher(
    memory_limit_bytes: int = 0,
    fork: bool | None = None,
    allocator: str = "system",
    cpus: Sequence[int] = (),
) -> Zygote | Spawner:
    """The zygote on Linux (cheap restarts), a spawner elsewhere or when ``fork=False``.

    Sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` in this process's environment unless set
    (inherited by the zygote and the workers): CUDA availability without initialising it.

    Its processes start with ``allocator``'s settings in their environment (see
    :mod:`benchbench.machine.allocator`); UsageError when its library is missing.
    ``cpus`` (``--cpus``): the cores every worker is pinned to, its default torch
    thread count being their number; empty: not pinned.
    """
    if fork is None:
        fork = sys.platform.startswith("linux")
    # This process (it loads the suites, which import torch) and every worker check
    # CUDA through NVML: nothing of the runner's side initialises CUDA.
    os.environ.setdefault(NVML_CHECK, "1")
    env = worker_environment(allocator)
    if fork:
        return Zygote(memory_limit_bytes, env=env, cpus=cpus)
    return Spawner(memory_limit_bytes, env, cpus)
