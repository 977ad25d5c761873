"""A run that outlives its store's server: measure on, keep the points, write them later.

A nightly fleet's store is a PostgreSQL server on another host, and a run writes each
point when its last round is in. :class:`SpoolingStore` is that store for one run:
while the server cannot be reached (stopped, restarting, the connection cut or hung:
:class:`~benchbench.core.errors.StoreUnavailable`) each finished point goes to a local
spool instead, a run bundle (:mod:`benchbench.interchange.bundle`) rewritten whole after
every point, and the run measures on. The store is tried again with exponential
back-off as points come; when it answers, the spooled points are written (each write
replaces the run's row of its point, so a commit whose acknowledgement was lost is not
written twice) and the spool is deleted. At the end of the run the store is tried for
at most ``retry_s`` more; if it is still away, the run stops with one line naming the
bundle, which ``benchbench import`` merges into the run point by point later.

SQLite stores are not spooled: a local file that fails is full, read-only or damaged,
and waiting does not mend it (:mod:`benchbench.store.failures`).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchbench.core import defaults
from benchbench.core.errors import StoreUnavailable, UsageError
from benchbench.core.values import Result
from benchbench.interchange.bundle import bundle_of, write_bundle
from benchbench.machine.environment import Environment
from benchbench.store import schema as t
from benchbench.store.store import DEFAULT_PATH, Store, now

#: Where spools go (beside the default store's folder), one bundle per run.
SPOOL_DIR = DEFAULT_PATH.parent / "spool"
#: Seconds the end of a run waits for the store's server (``$BENCHBENCH_STORE_RETRY_S``).
RETRY_S = defaults.STORE_RETRY_S
RETRY_ENV = "BENCHBENCH_STORE_RETRY_S"
#: An interrupted run (a scheduler's SIGTERM and its grace period) waits at most this.
INTERRUPTED_RETRY_S = 5.0
#: The back-off between tries: the first, doubled each time up to the last.
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 15.0

Note = Callable[[str], None]


def spooled(store: Store, note: Note, spool_dir: Path = SPOOL_DIR) -> Store:
    """``store`` as a :class:`SpoolingStore` when it is a server's, else as it is."""
    if store.dialect != "postgresql":
        return store
    return SpoolingStore(store, note, spool_dir, retry_s=retry_seconds(os.environ))


def retry_seconds(environ: Mapping[str, str]) -> float:
    """The end-of-run wait ``$BENCHBENCH_STORE_RETRY_S`` sets, else :data:`RETRY_S`."""
    text = environ.get(RETRY_ENV, "").strip()
    if not text:
        return RETRY_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise UsageError(
            f"{RETRY_ENV}={text!r}: must be seconds >= 0 (how long the end of a run waits "
            f"for its store's server), e.g. {RETRY_ENV}={RETRY_S:g}"
        )
    return value


class SpoolingStore(Store):
    """``store`` for one run, writing its points to a spool while the server is away.

    ``note(line)`` is told when the outage starts and ends; ``clock`` and ``sleep`` are
    injectable for tests. After the run, :attr:`stranded` is the bundle left to import
    (None when every point reached the store).
    """

    def __init__(
        self,
        store: Store,
        note: Note,
        spool_dir: Path = SPOOL_DIR,
        *,
        retry_s: float = RETRY_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(store.engine)
        self._note = note
        self._spool_dir = spool_dir
        self._retry_s = retry_s
        self._clock = clock
        self._sleep = sleep
        self._pending: list[tuple[Result, dt.datetime]] = []
        self._run: dict[str, Any] | None = None
        self._env: Environment | None = None
        self._delay = FIRST_DELAY_S
        self._next_try = 0.0
        self.stranded: Path | None = None

    @property
    def spool(self) -> Path:
        """The run's spool file (a run bundle)."""
        run_id = self._run["id"] if self._run else "unknown"
        return self._spool_dir.resolve() / f"run-{run_id}.json.gz"

    # -- the run's rows, kept for the spool ------------------------------------------

    def save_environment(self, env: Environment) -> str:
        self._env = env
        return super().save_environment(env)

    def create_run(self, run: Mapping[str, Any]) -> None:
        super().create_run(run)
        self._run = dict(run)

    def update_run(self, run_id: str, **values: Any) -> None:
        if values.get("status") == "running":  # a resumed run, opened again
            super().update_run(run_id, **values)
            stored = super().resolve_run(run_id)
            self._run = {column.name: stored[column.name] for column in t.run.columns}
            return
        if self._run is not None:
            self._run.update(values)
        wait_s = self._retry_s
        if values.get("status") == "interrupted":
            wait_s = min(wait_s, INTERRUPTED_RETRY_S)
        if not self._settle(run_id, values, wait_s):
            self._save()
            self.stranded = self.spool
            raise StoreUnavailable(self.stranded_line())

    # -- the points -------------------------------------------------------------

    def write_result(
        self, run_id: str, result: Result, created_at: dt.datetime | None = None
    ) -> None:
        stamp = created_at or now()
        if not self._pending:
            try:
                super().write_result(run_id, result, stamp)
                return
            except StoreUnavailable as exc:
                self._pending.append((result, stamp))
                self._save()
                self._note(f"{exc}; measuring on: the points go to {self.spool} meanwhile")
                self._back_off()
                return
        self._pending.append((result, stamp))
        self._save()
        if self._clock() >= self._next_try:
            self._flush(run_id)

    def stranded_line(self) -> str:
        """The one line of a run whose store stayed away: what, where, the fix."""
        return (
            f"store {self.url}: the server stayed away past {self._retry_s:g} s of retries; "
            f"{len(self._pending)} measured point(s) and the run's end are kept in "
            f"{self.spool}: once the server is back, `benchbench import {self.spool} "
            f"--store URL` merges them into run {self._run['id'] if self._run else '?'}"
        )

    def _flush(self, run_id: str) -> bool:
        """One try at writing the spooled points (oldest first): True when all are in."""
        if not self._pending:
            return True
        try:
            while self._pending:
                result, stamp = self._pending[0]
                super().write_result(run_id, result, stamp)
                self._pending.pop(0)
        except StoreUnavailable:
            self._back_off()
            return False
        self._delay = FIRST_DELAY_S
        self.spool.unlink(missing_ok=True)
        self._note(f"store {self.url}: back; the spooled points are written")
        return True

    def _settle(self, run_id: str, values: Mapping[str, Any], wait_s: float) -> bool:
        """The spooled points and the run's end written, trying for up to ``wait_s``."""
        deadline = self._clock() + wait_s
        while True:
            if self._flush(run_id):
                try:
                    super().update_run(run_id, **values)
                    return True
                except StoreUnavailable:
                    self._back_off()
            pause = min(self._next_try, deadline) - self._clock()
            if self._clock() >= deadline:
                return False
            self._sleep(max(pause, 0.0))

    def _back_off(self) -> None:
        """The next try after the current delay, which doubles up to the last."""
        self._next_try = self._clock() + self._delay
        self._delay = min(self._delay * 2, MAX_DELAY_S)

    def _save(self) -> None:
        """The spool rewritten whole: the run row and every point not yet stored."""
        if self._run is None or self._env is None:
            return  # the run was never opened: nothing measured is at stake
        self._spool_dir.mkdir(parents=True, exist_ok=True)
        results = [result for result, _ in self._pending]
        stamps = [stamp for _, stamp in self._pending]
        write_bundle(bundle_of(self._run, self._env, results, stamps), self.spool)
