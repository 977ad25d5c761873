"""The worker process (child side): answers the runner's requests, one point at a time.

Process tree on Linux::

    runner ──spawns──▶ zygote  (python -m benchbench.run.worker zygote FD LIMIT [CPUS])
                         └─forks─▶ worker, worker, ...   (one alive at a time)

``CPUS`` (``--cpus``, e.g. ``0,2-3``) pins the zygote before it imports torch, so its
workers inherit the affinity; a pinned worker's default torch thread count is the
number of those cores (a request's ``threads`` still overrides it). The worker runs no
thread of ours: the runner samples the machine's telemetry from its own process.

Importing torch costs ~3 s here (8 s on a loaded machine), the first use of
``torch.profiler`` (peak memory of a point) another ~2-5 s, and the first dispatch
mode (``FlopCounterMode``, a derived work model: it imports ``torch._dynamo`` and
sympy, 822 modules) another ~2-7 s. The zygote pays all three once; a worker
forked from it answers in ~30 ms, so a crash, a hang or an out-of-memory kill
costs the run one point, not a torch import. The zygote runs no parallel torch op
(its warm-up tensors have 16 elements, far below the intra-op grain of 32768),
because OpenMP thread pools do not survive ``fork`` (the reason PyTorch's own
DataLoader forks only before the first parallel op).

Elsewhere (macOS: frameworks loaded by ``import torch`` are not fork-safe) every
worker is a fresh ``python -m benchbench.run.worker serve FD LIMIT [CPUS]``. The runner's
side (handles, launchers, failures) is :mod:`benchbench.run.workers`.

The protocol
------------

A worker reads one JSON request per line on its request pipe and writes one JSON
event per line on its event pipe (its stdout points at stderr, so a suite's prints
cannot corrupt the channel). Every request but ``exit`` gets exactly one event:

- (none: sent once, when the worker is ready) → ``{"event": "hello", "pid"}``
- ``{"op": "environment", "threads"}`` → ``{"event": "environment", "fields", "info"}``
- ``{"op": "measure", "suite_path", "workload", "point", "policy", "cache", "threads",
  "profile_dir", "outputs", "check"}`` → ``{"event": "result", "result"}`` (a
  ``Result.to_dict()``; ``"check": false`` skips the reference check), or
  ``{"event": "interrupted", "signal"}`` for a point cut short by a stop signal
- ``{"op": "time", "statements", "setup", "point", "reference", "policy",
  "check_only", "threads"}`` → ``{"event": "timed", "results"}`` (one result per statement)
- ``{"op": "exit"}`` → no event: the worker exits (so does end of input)
- any other ``op`` → ``{"event": "error", "message"}``

A point that fails (bad suite, exception, wrong result) is a ``result`` with status
``error``: the worker lives on. SIGINT or SIGTERM make the worker stop after the
current sample: a point cut short is answered ``interrupted`` (it is not a finished
point), a finished one with its ``result``; either way the worker then exits, and it
exits without answering when the signal came between requests.

The zygote speaks a second, smaller protocol on a SEQPACKET socket (one JSON message
per packet): ``{"event": "ready", "pid"}`` once torch is imported, then ``{"op":
"fork"}`` with the worker's request and event pipes attached as file descriptors,
answered ``{"pid"}``, and ``{"op": "wait", "pid", "timeout_s"}``, answered
``{"code"}`` (the exit code; negative: the signal that killed it).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

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
                    outputs=request.get("outputs"),
                    check=bool(request.get("check", True)),
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


def _freeze_imports() -> None:
    """Import what every worker needs, then move every object alive (torch, NumPy,
    benchbench) out of the garbage collector's sight.

    The engine runs ``gc.collect()`` before each point: over the ~180,000 objects of
    the imports that took 100-200 ms here, after ``gc.freeze()`` under 0.1 ms. In the
    zygote it also keeps forked workers from touching (and copying) those pages; a
    forked worker has the imports already and freezes only what the zygote made since.
    """
    import torch  # noqa: F401

    import benchbench.measure.point  # noqa: F401

    gc.collect()
    gc.freeze()


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


def _become_worker(
    requests_fd: int, events_fd: int, memory_limit: int, pinned: tuple[int, ...] = ()
) -> None:
    signal.signal(signal.SIGINT, _on_stop_signal)
    signal.signal(signal.SIGTERM, _on_stop_signal)
    _die_with_parent()
    _freeze_imports()
    if pinned:
        import torch

        torch.set_num_threads(len(pinned))  # the default: one thread per pinned core
    _limit_memory(memory_limit)
    channel = os.fdopen(events_fd, "w", buffering=1)
    serve(channel, os.fdopen(requests_fd, "r"))


def _warm_up_zygote() -> None:
    """Import what every worker needs and pay the first use of the profiler and of a
    dispatch mode, once."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    import benchbench.measure.point  # noqa: F401  (imports numpy, the engine, devices)

    # The profiler's native start/stop lines go to fds 1 and 2: silenced here.
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
            torch.ones(16).sqrt()  # 16 elements: no intra-op thread pool is started
        with FlopCounterMode(display=False):
            torch.ones(16).sqrt()
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


def zygote(sock: socket.socket, memory_limit: int, pinned: tuple[int, ...] = ()) -> None:
    """Serve ``fork`` and ``wait`` requests on ``sock`` until the runner goes away.

    ``fork`` carries two file descriptors (the worker's request and event pipes)
    and is answered with the new worker's pid; ``wait`` with its exit code.
    """
    # The runner decides what a Ctrl-C or SIGTERM means; the idle zygote ignores both.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _warm_up_zygote()
    _freeze_imports()
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
                    _become_worker(fds[0], fds[1], memory_limit, pinned)
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
    """``zygote FD LIMIT [CPUS]`` (FD: a SEQPACKET socket) or ``serve FD LIMIT [CPUS]``
    (FD: events); CPUS in the kernel's list notation, empty: not pinned."""
    mode, fd, memory_limit = argv[1], int(argv[2]), int(argv[3]) if len(argv) > 3 else 0
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pinned: tuple[int, ...] = ()
    if len(argv) > 4 and argv[4]:
        from benchbench.machine.cpus import parse_cpus, pin

        pinned = parse_cpus(argv[4])
        pin(pinned)  # before torch loads: OpenMP sizes its pool from the affinity
    if mode == "zygote":
        _die_with_parent()
        zygote(socket.socket(fileno=fd), memory_limit, pinned)
        return 0
    _become_worker(sys.stdin.fileno(), fd, memory_limit, pinned)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
