"""The worker process (child side): answers the runner's requests, one point at a time.

Process tree on Linux::

    runner ──spawns──▶ zygote  (python -m benchbench.run.worker zygote FD LIMIT [CPUS])
                         └─forks─▶ worker, worker, ...   (one alive at a time)

``CPUS`` (``--cpus``, e.g. ``0,2-3``) pins the zygote before it imports torch, so its
workers inherit the affinity; a pinned worker's default torch thread count is the
number of those cores (a request's ``threads`` still overrides it). The worker runs no
thread of ours: the runner samples the machine's telemetry from its own process.

Importing torch costs ~3 s here (8 s on a loaded machine); the zygote pays it once,
and a worker forked from it answers in ~30 ms, so a crash, a hang or an out-of-memory
kill costs the run one point, not a torch import. Two first uses cost another ~2-7 s
each (both import ``torch._dynamo``, ``torch._inductor`` and sympy, ~820 modules): the
first dispatch mode (``FlopCounterMode``: a derived FLOP count) and the first
``torch.profiler`` session (``run --profile``'s trace). The zygote pays them once, and
only for a run that needs them: a ``fork`` request names them (:data:`WARM_UPS`), the
runner asking for what the worker's request will use (peak memory needs neither: it
uses the autograd profiler directly, ~8 ms). The zygote runs no parallel torch op
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
  "profile_dir", "outputs", "check", "metric", "counter"}`` → ``{"event": "result",
  "result", "retire"}`` (a ``Result.to_dict()``; ``"check": false`` skips the reference
  check; ``"metric": "instructions"`` counts instead of timing, with ``"counter"``: in a
  worker :mod:`benchbench.run.instrumented` started, under callgrind for ``callgrind``
  (the default), natively for ``pmu``; ``"lockstep": true`` answers
  ``{"event": "turn"}`` before each block of calls and takes it only after ``{"op":
  "go"}``: :mod:`benchbench.run.lockstep`), or
  ``{"event": "interrupted", "signal"}`` for a point cut short by a stop signal
- ``{"op": "plan", "suites", "selection", "cuda_graph"}`` → ``{"event": "plan",
  "points", "suites"}`` (the points to measure and the suites' names and hashes:
  :func:`benchbench.run.planning.answer_plan`), or ``{"event": "plan", "error",
  "error_type"}`` when a suite cannot load
- ``{"op": "points", "suites", "selection"}`` → ``{"event": "points", "ids"}`` (the
  benchmark ids the suites give here, or a string saying why they cannot load)
- ``{"op": "time", "statements", "setup", "point", "reference", "policy",
  "check_only", "threads"}`` → ``{"event": "timed", "results", "retire"}`` (one result
  per statement)
- ``"retire": true``: the point poisoned this process's CUDA context; the worker exits
  after this answer (see :func:`serve`)
- ``{"op": "exit"}`` → no event: the worker exits (so does end of input)
- any other ``op`` → ``{"event": "error", "message"}``

A point that fails (bad suite, exception, wrong result) is a ``result`` with status
``error``: the worker lives on, unless the failure poisoned its CUDA context
(``retire``). SIGINT or SIGTERM make the worker stop after the
current sample: a point cut short is answered ``interrupted`` (it is not a finished
point), a finished one with its ``result``; either way the worker then exits, and it
exits without answering when the signal came between requests.

The zygote speaks a second, smaller protocol on a SEQPACKET socket (one JSON message
per packet): ``{"event": "ready", "pid"}`` once torch is imported, then ``{"op":
"fork", "warm"}`` with the worker's request and event pipes attached as file
descriptors, answered ``{"pid", "warmed"}`` (``warm``, optional: the first uses of
:data:`WARM_UPS` to pay in the zygote before it forks, each once per zygote;
``warmed``: those it has paid so far), and
``{"op": "wait", "pid", "timeout_s"}``, answered ``{"code"}`` (the exit code;
negative: the signal that killed it). A ``fork`` is answered ``{"refused": reason}``
instead when CUDA is initialised in the zygote (:func:`fork_refusal`) or a test child
forked at the zygote's start could not use CUDA (:func:`fork_proof`); the runner then
starts fresh interpreters.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from benchbench.measure.timers import device_scope
from benchbench.run.forksafe import cuda_present, fork_proof, fork_refusal, reap
from benchbench.run.guards import guard_memory, poisons_cuda

#: Set for the runner's, the zygote's and the workers' torch: CUDA availability and
#: device counts from NVML, without initialising CUDA (fork-safe).
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"

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


def serve(channel: TextIO, requests: TextIO, memory_limit: int = 0) -> None:
    """Answer requests until ``exit``, end of input or a stop signal.

    ``memory_limit`` (bytes, 0: none) is applied per request, for its point's device
    (:func:`guard_memory`). After a result that poisoned the CUDA context (a
    device-side assert, an illegal address: :func:`poisons_cuda`) the event carries
    ``"retire": true`` and the worker exits: every later CUDA call of this process
    would fail with the same error, so the runner takes the next point to a new one.
    """
    import torch

    from benchbench.machine import environment

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
            if _measure(channel, requests, request, memory_limit, torch):
                return
        elif op == "plan":  # `benchbench run`: the runner never loads a suite (torch)
            from benchbench.run.planning import answer_plan

            _send(channel, answer_plan(request))
        elif op == "points":  # `benchbench ab`: the point ids this side's suites give
            _send(channel, {"event": "points", "ids": _point_ids(request)})
        elif op == "time":  # `benchbench time`: statements measured interleaved at one point
            if _time(channel, request, memory_limit, torch):
                return
        else:
            _send(channel, {"event": "error", "message": f"unknown request {op!r}"})


def _measure(
    channel: TextIO, requests: TextIO, request: dict[str, Any], memory_limit: int, torch: Any
) -> bool:
    """Measure the request's point and send its result; True when the worker must exit
    (a stop signal, or a result that poisoned the CUDA context)."""
    from benchbench.core.values import Point, Result
    from benchbench.measure.point import Options, measure_point
    from benchbench.measure.policy import INTERRUPTED, Policy
    from benchbench.suite.load import load_suite

    received = time.perf_counter()  # extra.cost counts the suite's load too
    point = Point.from_dict(request["point"])
    try:
        guard_memory(point.device, memory_limit, torch)
        workload = load_suite(Path(request["suite_path"])).get(request["workload"])
        options = Options(
            policy=Policy(**request["policy"]),
            cache=request["cache"],
            threads=request.get("threads"),
            should_stop=stop_requested,
            profile_dir=request.get("profile_dir"),
            outputs=request.get("outputs"),
            check=bool(request.get("check", True)),
            metric=str(request.get("metric", "time")),
            counter=str(request.get("counter", "callgrind")),
            started=received,
            gate=_gate(channel, requests) if request.get("lockstep") else None,
        )
    except Exception as exc:  # reported as this point's error, the worker lives on
        failed = Result(point=point, status="error", reason=f"{type(exc).__name__}: {exc}")
        _send(channel, {"event": "result", "result": failed.to_dict()})
        return False
    result = measure_point(workload, point, options)
    if stop_requested() and result.stop_reason == INTERRUPTED:
        # Cut short: not a finished point. The runner leaves it for --resume.
        _send(channel, {"event": "interrupted", "signal": _stop_signal})
        return True
    retire = poisons_cuda(result.reason)
    _send(channel, {"event": "result", "result": result.to_dict(), "retire": retire})
    return stop_requested() or retire


def _time(channel: TextIO, request: dict[str, Any], memory_limit: int, torch: Any) -> bool:
    """Time the request's statements interleaved at one point and send them; True when
    the worker must exit (a result that poisoned the CUDA context)."""
    from benchbench.core.values import Point
    from benchbench.measure.variants import time_request

    device = Point.from_dict(request["point"]).device
    guard_memory(device, memory_limit, torch)
    with device_scope(device, torch):
        results = time_request(request)
    retire = any(poisons_cuda(r.get("reason")) for r in results)
    _send(channel, {"event": "timed", "results": results, "retire": retire})
    return retire


def _point_ids(request: dict[str, Any]) -> list[str] | str:
    """The benchmark ids of ``request["suites"]`` under ``request["selection"]``, as this
    process's code loads them; or why they cannot be loaded."""
    from benchbench.suite.load import Selection, load_suite, select_points

    try:
        selection = Selection.from_dict(request["selection"])
        suites = [load_suite(Path(path)) for path in request["suites"]]
        return [p.benchmark_id(w.version) for w, p in select_points(suites, selection)]
    except Exception as exc:  # the suite's or the selection's error, for the runner to name
        return f"{type(exc).__name__}: {exc}"


def _gate(channel: TextIO, requests: TextIO) -> Any:
    """The lockstep gate of a ``"lockstep": true`` request (``benchbench ab``): before each
    timed block of calls (calibration and samples; warm-up does not wait) the worker
    says ``{"event": "turn"}`` and waits for ``{"op": "go"}``,
    so that the runner lets one side of a pair sample at a time. Anything else (an exit,
    end of input) stops the point after this sample, as a stop signal does."""

    def gate() -> None:
        global _stop_signal
        _send(channel, {"event": "turn"})
        line = requests.readline()
        if not line or json.loads(line).get("op") != "go":
            _stop_signal = signal.SIGTERM

    return gate


def _freeze_imports() -> None:
    """Import what every worker needs, then move every object alive (torch, NumPy,
    benchbench) out of the garbage collector's sight.

    The engine runs ``gc.collect()`` before each point: over the ~180,000 objects of
    the imports that took 100-200 ms here, after ``gc.freeze()`` under 0.1 ms. In the
    zygote it also keeps forked workers from touching (and copying) those pages; a
    forked worker has the imports already and freezes only what the zygote made since.
    """
    import scipy.special  # noqa: F401  # the stopping rule's intervals: ~0.3 s a worker
    import torch  # noqa: F401

    import benchbench.measure.point  # noqa: F401

    gc.collect()
    gc.freeze()


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (no orphan keeps measuring)."""
    if sys.platform.startswith("linux"):
        with_errno = ctypes.CDLL(None, use_errno=True)
        with_errno.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


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
    channel = os.fdopen(events_fd, "w", buffering=1)
    serve(channel, os.fdopen(requests_fd, "r"), memory_limit)


#: First uses a ``fork`` request may ask the zygote to pay before it forks (once per
#: zygote): ``flops``, the first dispatch mode (a derived FLOP count); ``profiler``, the
#: first ``torch.profiler`` session (``run --profile``).
WARM_UPS = ("flops", "profiler")


def _warm_up(name: str) -> None:
    """Pay the first use of :data:`WARM_UPS` ``name`` here, on 16-element tensors (no
    intra-op thread pool is started).

    Which first uses a zygote pays, and when, is :func:`zygote`'s to decide.
    """
    import torch

    if name == "flops":
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False):
            torch.ones(16).sqrt()
    elif name == "profiler":
        from torch.profiler import ProfilerActivity, profile

        from benchbench.measure.trace import quiet_native_output

        with quiet_native_output(), profile(activities=[ProfilerActivity.CPU]):
            torch.ones(16).sqrt()


def zygote(sock: socket.socket, memory_limit: int, pinned: tuple[int, ...] = ()) -> None:
    """Serve ``fork`` and ``wait`` requests on ``sock`` until the runner goes away.

    ``fork`` carries two file descriptors (the worker's request and event pipes)
    and is answered with the new worker's pid; ``wait`` with its exit code.
    """
    # The runner decides what a Ctrl-C or SIGTERM means; the idle zygote ignores both.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import torch

    # With a CUDA device present the profiler is left cold: its first use starts the CUDA
    # driver (Kineto loads CUPTI) without ``torch.cuda.is_initialized()`` saying so, and
    # a child forked after that fails every CUDA call with "CUDA error: initialization
    # error" (seen on an H100 with torch 2.11); a worker that profiles pays it instead.
    has_cuda = cuda_present(torch)
    warmed: set[str] = set()
    if has_cuda:
        # Paid before fork_proof forks its test child, as on the H100 where the GPU paths
        # were validated: a first use that started the CUDA driver unseen is caught there.
        _warm_up("flops")
        warmed.add("flops")
    _freeze_imports()
    refused_at_start = fork_proof(torch)
    try:
        sock.send(json.dumps({"event": "ready", "pid": os.getpid()}).encode())
    except OSError:
        return  # the runner gave up while torch was importing
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, 4096, 2)
        if not message:
            return  # the runner closed its end
        request = json.loads(message)
        refusal = refused_at_start or fork_refusal(sys.modules.get("torch"))
        if request["op"] == "fork" and refusal:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"refused": refusal}).encode())
        elif request["op"] == "fork":
            # The profiler stays cold where CUDA is (above); the rest is warmed on demand.
            warm = [n for n in request.get("warm", ()) if not (n == "profiler" and has_cuda)]
            pid = _fork_worker(sock, fds, warm, warmed, memory_limit, pinned)
            sock.send(json.dumps({"pid": pid, "warmed": sorted(warmed)}).encode())
        elif request["op"] == "wait":
            code = reap(int(request["pid"]), float(request.get("timeout_s", 10.0)))
            sock.send(json.dumps({"code": code}).encode())
        else:
            return


def _fork_worker(
    sock: socket.socket,
    fds: list[int],
    warm: Sequence[str],
    warmed: set[str],
    memory_limit: int,
    pinned: tuple[int, ...],
) -> int:
    """Warm what ``warm`` names that the zygote has not (``warmed`` grows), then fork a
    worker on the pipes ``fds``; its pid. The zygote closes its copies of the pipes."""
    cold = [name for name in warm if name not in warmed]
    for name in cold:
        # A first use that fails here fails again in the worker, which reports it with
        # its point (a work model not derived, a trace not taken).
        with contextlib.suppress(Exception):
            _warm_up(name)
        warmed.add(name)
    if cold:
        _freeze_imports()
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
    return pid


def main(argv: list[str]) -> int:
    """``zygote FD LIMIT [CPUS]`` (FD: a SEQPACKET socket) or ``serve FD LIMIT [CPUS]``
    (FD: events); CPUS in the kernel's list notation, empty: not pinned."""
    mode, fd, memory_limit = argv[1], int(argv[2]), int(argv[3]) if len(argv) > 3 else 0
    # Before torch loads: torch.cuda.is_available() and device_count() then ask NVML and
    # leave CUDA uninitialised, so that the zygote stays fork-safe (see fork_refusal).
    os.environ.setdefault(NVML_CHECK, "1")
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
    code = main(sys.argv)
    sys.stderr.flush()  # and skip the teardown of torch's modules: ~1 s of CPU a zygote
    os._exit(code)
