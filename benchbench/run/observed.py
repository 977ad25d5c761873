"""One worker request with machine telemetry sampled beside it, from the runner's side.

psutil and NVML see the whole machine, so the runner samples them while its worker
measures (:class:`~benchbench.machine.telemetry.TelemetrySampler` in a thread of this
process) instead of a thread inside the timed process taking its GIL or a core
mid-sample. :func:`observed_request` is ``pool.request`` with that sampler around it:
the answer's measured results come back with the telemetry document, its warnings and
the thread-count warning (threads beyond the cores other processes left idle).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from benchbench.core.values import Result
from benchbench.machine.nvml import load_nvml, visible_cuda_uuids
from benchbench.machine.telemetry import (
    Telemetry,
    TelemetrySampler,
    thread_warnings,
    warnings,
)
from benchbench.run.pool import warm_ups
from benchbench.run.workers import StopRequest

#: Seconds between the sampler's cheap readings (CPU clocks ~80 µs, NVML): < 0.1 % of a core.
INTERVAL_S = 0.1

SamplerFactory = Callable[[int | None], TelemetrySampler]


class _Process(Protocol):
    @property
    def pid(self) -> int | None: ...


class Pool(Protocol):
    """What :func:`observed_request` needs of a :class:`~benchbench.run.jobs.WorkerPool`."""

    def worker(self, warm: Sequence[str] = ()) -> _Process: ...

    def request(
        self,
        payload: dict[str, Any],
        events: tuple[str, ...],
        timeout_s: float,
        stop: StopRequest | None = None,
    ) -> dict[str, Any]: ...


def runner_sampler(worker_pid: int | None) -> TelemetrySampler:
    """The runner's sampler for a request to ``worker_pid``: the runner and every process
    it started (zygote, workers, the callgrind worker: its descendants) and the kernel's
    threads are not "other processes"; the slow sources are read before and after the
    point only. With NVML, the GPUs read are the ones the workers see, matched by UUID
    and named by CUDA index (read once per runner, in a child: the runner starts no
    CUDA context)."""
    ours = {os.getpid()} | ({worker_pid} if worker_pid is not None else set())
    return TelemetrySampler(
        interval_s=INTERVAL_S,
        gpu_uuids=visible_cuda_uuids() if load_nvml()[0] is not None else None,
        exclude_pids=ours,
        slow_in_thread=False,
        measured_pid=worker_pid,
        own_root=os.getpid(),
    )


def observed_request(
    pool: Pool,
    payload: dict[str, Any],
    events: tuple[str, ...],
    timeout_s: float,
    stop: StopRequest | None = None,
    sampler: SamplerFactory = runner_sampler,
) -> dict[str, Any]:
    """``pool.request(...)`` with telemetry sampled around it and attached to its answer.

    Every ``ok`` result the answer carries (``result``, or each of ``results``) gets the
    telemetry document and the warnings it implies; other answers come back unchanged.
    A worker failure propagates as from ``pool.request`` (its points have no telemetry).
    """
    worker = pool.worker(warm_ups(payload))  # first, so that its pid is known to the sampler
    with sampler(worker.pid) as running:
        message = pool.request(payload, events, timeout_s, stop)
    if running.telemetry is not None:
        attach(message, running.telemetry)
    return message


def attach(message: dict[str, Any], telemetry: Telemetry) -> None:
    """Add ``telemetry`` and its warnings to each ``ok`` result document in ``message``."""
    documents = [message["result"]] if "result" in message else message.get("results") or []
    for document in documents:
        if document.get("status") != "ok":
            continue
        document["telemetry"] = telemetry.to_dict()
        document["warnings"] = [
            *document.get("warnings", ()),
            *warnings(telemetry),
            *thread_warnings(telemetry, document.get("threads")),
        ]


def crowded(result: Result) -> str | None:
    """The thread warning of a process whose torch threads outnumbered the cores other
    processes left idle while it measured (:func:`~benchbench.machine.cpus.idle_cores`),
    or None (not crowded, or not known: no telemetry, a window too short to judge)."""
    if result.status != "ok" or not result.telemetry:
        return None
    lines = thread_warnings(Telemetry.from_dict(result.telemetry), result.threads)
    return lines[0] if lines else None
