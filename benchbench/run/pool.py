"""The current worker of a run: forked (or spawned) when a request needs one, fresh for
every request by default, and given back when the run ends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from benchbench.core.errors import MeasurementError
from benchbench.run.worker import WARM_UPS
from benchbench.run.workers import ForkUnsafe, Spawner, StopRequest, Worker, WorkerFailure, Zygote


def warm_ups(request: dict[str, Any]) -> tuple[str, ...]:
    """The first uses (:data:`~benchbench.run.worker.WARM_UPS`) the worker answering
    ``request`` will make: ``flops`` for a checked point whose FLOPs are derived
    (``"derives_flops"``), ``profiler`` for a traced one (``profile_dir``). A zygote
    pays them once, before it forks that worker; later rounds (unchecked, untraced)
    ask for none."""
    wanted = {
        "flops": bool(request.get("derives_flops")) and bool(request.get("check", True)),
        "profiler": bool(request.get("profile_dir")),
    }
    return tuple(name for name in WARM_UPS if wanted[name])


class WorkerPool:
    """The current worker of a run, forked (or spawned) when a request needs one.

    Use as a context manager: leaving it ends the worker and the launcher. A worker
    that failed is discarded, so the next request starts a fresh one. A zygote that
    refuses to fork (CUDA initialised in it) gives way to its spawner, and ``on_note``
    is told why. With ``fresh``
    (the default) every request gets a worker that has done nothing else: its heap,
    page mappings and caches owe nothing to the points before it; :meth:`share` lets a
    worker serve a few requests before a fresh one takes over.
    """

    def __init__(
        self,
        launcher: Zygote | Spawner,
        fresh: bool = True,
        on_note: Callable[[str], None] | None = None,
        relaunch: Callable[[], Zygote | Spawner] | None = None,
    ) -> None:
        self._launcher = launcher
        #: Requests a worker serves before it is spent (None: until it fails or retires).
        self._per_worker: int | None = 1 if fresh else None
        self._served = 0
        #: Makes the next launcher when :meth:`renew` is called (None: never renewed).
        self._relaunch = relaunch
        self._fell_back = False
        self._spent = False
        self._worker: Worker | None = None
        #: Told what the run's user should know about its workers (the spawn fallback).
        self._on_note = on_note or (lambda _message: None)

    def request(
        self,
        payload: dict[str, Any],
        events: tuple[str, ...],
        timeout_s: float,
        stop: StopRequest | None = None,
    ) -> dict[str, Any]:
        """Send ``payload`` to the current worker and return its answer.

        :class:`WorkerFailure` when the worker dies, hangs or breaks the protocol (it
        is discarded); :class:`MeasurementError` when no worker can be started.
        """
        worker = self.worker(warm_ups(payload))
        try:
            answer = worker.request(payload, events, timeout_s, stop)
        except WorkerFailure:
            worker.close()
            self._worker = None
            raise
        # A spent worker (a fresh pool's, after its one request) stays (idle, so that the
        # runner can read its CPU time) until the next request asks for a worker. One
        # that retired (its CUDA context is poisoned) is exiting: never asked again.
        self._served += 1
        self._spent = self._used_up() or bool(answer.get("retire"))
        return answer

    def share(self, requests: int | None) -> None:
        """From now on a worker serves up to ``requests`` requests (1: a fresh worker for
        every request; None: one worker until it fails). The current worker is spent at
        once if it has served that many already."""
        self._per_worker = requests
        self._spent = self._spent or self._used_up()

    def _used_up(self) -> bool:
        return self._per_worker is not None and self._served >= self._per_worker

    def worker(self, warm: Sequence[str] = ()) -> Worker:
        """The current worker, started now if there is none or it is spent (it has served
        its requests: one in a fresh pool) (MeasurementError if it cannot start). A new
        worker's zygote first pays the first uses in ``warm`` (:func:`warm_ups` of the
        request it will answer)."""
        if self._worker is not None and self._spent:
            self._worker.close()
            self._worker = None
        self._spent = False
        if self._worker is None:
            try:
                self._worker = self._start(warm)
            except WorkerFailure as failure:
                raise MeasurementError(f"the worker process did not start: {failure}") from None
            self._served = 0
        return self._worker

    def _start(self, warm: Sequence[str]) -> Worker:
        try:
            return self._launcher.worker(warm)
        except ForkUnsafe as refusal:
            spawner = getattr(self._launcher, "spawner", None)  # a Zygote has one
            if spawner is None:
                raise MeasurementError(str(refusal)) from None
            self._on_note(str(refusal))
            self._launcher.close()
            self._launcher = spawner()
            self._fell_back = True
            return self._launcher.worker(warm)

    def renew(self) -> bool:
        """Start a fresh zygote for the workers to come (True when it did).

        Every fork of one zygote inherits its address layout: where the libraries' code,
        the interpreter's heap and the tensors' buffers lie. A layout can make a point
        a few percent faster or slower for as long as it lasts, so the processes of one
        zygote share a bias that their spread does not show, and two runs (or the two
        sides of ``ab``) differ by more than their intervals say. A fresh zygote per
        round draws a fresh layout, and the spread between rounds carries it. A spawner
        started in the zygote's place (it refused to fork) is kept: nothing is renewed
        (False), as without ``relaunch``. Either way the current worker is closed: the
        next request, a new round's, gets a new worker.
        """
        self.retire()
        if self._relaunch is None or self._fell_back:
            return False
        self._launcher.close()
        self._launcher = self._relaunch()
        return True

    def ask_retire(self) -> None:
        """Tell the current worker to exit, not waiting for it (:meth:`retire` waits)."""
        if self._worker is not None:
            self._worker.ask_exit()

    def retire(self) -> None:
        """Close the current worker (a lockstep pair's side, driven by its own requests)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def close(self) -> None:
        self.retire()
        self._launcher.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()
