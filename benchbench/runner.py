"""The runner: plans the points, feeds them to worker processes, stores each result.

A worker lives for many points (importing torch costs ~3 s here). When a worker
crashes, hangs past the per-point timeout or is killed for memory, the point it
held is recorded as an error with the reason, and a fresh worker takes the rest.
Each point is written to the store in its own transaction as soon as it is done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench import __version__
from benchbench.catalog import Selection, file_hash, load_suite, select_points
from benchbench.engine import Policy
from benchbench.environment import Environment
from benchbench.errors import BenchbenchError, UsageError
from benchbench.model import CACHE_MODES, Point, Result
from benchbench.store import Store
from benchbench.store.store import now
from benchbench.suite import Workload
from benchbench.vcs import git_state

RUN_KINDS = ("adhoc", "nightly", "ci")


class WorkerFailure(Exception):
    """The worker died or hung; the message is the point's error reason."""


@dataclass(frozen=True)
class RunConfig:
    """Everything ``benchbench run`` needs besides the store."""

    suites: tuple[Path, ...]
    selection: Selection = field(default_factory=Selection)
    policy: Policy = field(default_factory=Policy)
    cache: str = "warm"
    threads: int | None = None
    timeout_s: float = 60.0
    memory_limit_bytes: int = 0
    kind: str = "adhoc"
    label: str | None = None
    tags: tuple[str, ...] = ()
    resume: str | None = None
    repo: Path | None = None
    #: ``run --profile``: traces go to ``profile_dir/RUN_ID/`` (taken after timing).
    profile_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.cache not in CACHE_MODES:
            raise UsageError(f"--cache must be one of {', '.join(CACHE_MODES)}, got {self.cache!r}")
        if self.kind not in RUN_KINDS:
            raise UsageError(f"run kind must be one of {', '.join(RUN_KINDS)}, got {self.kind!r}")
        if self.timeout_s <= 0:
            raise UsageError(f"--timeout must be > 0 seconds, got {self.timeout_s}")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads must be >= 1, got {self.threads}")


@dataclass
class RunSummary:
    """What a run did; ``results`` in the order they were measured."""

    run_id: str
    results: list[Result] = field(default_factory=list)
    status: str = "running"
    environment: Environment | None = None

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


class Worker:
    """One worker process and its two pipes."""

    def __init__(self, memory_limit_bytes: int = 0) -> None:
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchbench.worker", str(write_fd), str(memory_limit_bytes)],
            stdin=subprocess.PIPE,
            pass_fds=(write_fd,),
            text=True,
        )
        os.close(write_fd)
        self._events = os.fdopen(read_fd, "r")
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._events, selectors.EVENT_READ)
        self._buffer = ""
        self.expect("hello", timeout_s=120.0)

    def expect(self, event: str, timeout_s: float) -> dict[str, Any]:
        """Wait for the next event; WorkerFailure on death, hang or protocol error."""
        deadline = time.monotonic() + timeout_s
        while "\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerFailure(f"timed out after {timeout_s:g} s")
            if not self._selector.select(timeout=remaining):
                continue
            chunk = os.read(self._events.fileno(), 1 << 20).decode()
            if not chunk:
                raise WorkerFailure(self._death_reason())
            self._buffer += chunk
        line, self._buffer = self._buffer.split("\n", 1)
        message = json.loads(line)
        if message.get("event") != event:
            raise WorkerFailure(f"worker protocol error: expected {event!r}, got {line[:200]}")
        return message

    def request(self, payload: dict[str, Any], event: str, timeout_s: float) -> dict[str, Any]:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(payload) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerFailure(self._death_reason()) from None
        return self.expect(event, timeout_s)

    def _death_reason(self) -> str:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            return "worker stopped answering"
        if code < 0:
            name = signal.Signals(-code).name
            if name == "SIGKILL":
                return "crashed: SIGKILL (killed, often by the kernel's out-of-memory killer)"
            return f"crashed: {name}"
        return f"worker exited with code {code}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self._selector.close()
        self._events.close()


ProgressFn = Callable[[str, dict[str, Any]], None]


def plan(config: RunConfig) -> list[tuple[Path, Workload, Point]]:
    """Load the suites and list the points the run would measure."""
    out: list[tuple[Path, Workload, Point]] = []
    for path in config.suites:
        suite = load_suite(path)
        for workload, point in select_points([suite], config.selection):
            out.append((path, workload, point))
    return out


def run(config: RunConfig, store: Store, progress: ProgressFn | None = None) -> RunSummary:
    """Measure every planned point into ``store``; returns the summary.

    ``progress(event, data)`` is called with ``start`` (total), ``point`` (index,
    label) before each point and ``result`` (result) after it.
    """
    notify = progress or (lambda _e, _d: None)
    points = plan(config)
    if config.resume:
        run_row = store.resolve_run(config.resume)
        run_id = run_row["id"]
        done = store.done_benchmark_ids(run_id)
        points = [p for p in points if p[2].benchmark_id(p[1].version) not in done]
    else:
        run_id = str(uuid.uuid4())
    summary = RunSummary(run_id=run_id)
    if not points and not config.resume:
        raise UsageError(
            "no points to run: the filters (--filter, --tag, --device, --dtype) match nothing"
        )

    worker = Worker(config.memory_limit_bytes)
    try:
        env_msg = worker.request(
            {"op": "environment", "threads": config.threads}, "environment", 120.0
        )
        env = Environment(fields=env_msg["fields"], info=env_msg["info"])
        summary.environment = env
        store.save_environment(env)
        if config.resume:
            store.update_run(run_id, status="running", finished_at=None)
        else:
            store.create_run(_run_row(run_id, config, env))
        notify("start", {"total": len(points), "run_id": run_id})
        for index, (path, workload, point) in enumerate(points):
            notify("point", {"index": index, "label": point.label})
            try:
                message = worker.request(
                    {
                        "op": "measure",
                        "suite_path": str(path),
                        "workload": workload.name,
                        "point": point.to_dict(),
                        "policy": dataclasses.asdict(config.policy),
                        "cache": config.cache,
                        "threads": config.threads,
                        "profile_dir": (
                            str(config.profile_dir / run_id) if config.profile_dir else None
                        ),
                    },
                    "result",
                    config.timeout_s,
                )
                result = Result.from_dict(message["result"])
            except WorkerFailure as failure:
                result = Result(
                    point=point, status="error", reason=str(failure), code_version=workload.version
                )
                worker.close()
                worker = Worker(config.memory_limit_bytes)
            store.write_result(run_id, result)
            summary.results.append(result)
            notify("result", {"index": index, "result": result})
        summary.status = "finished"
    except BaseException:
        summary.status = "interrupted"
        raise
    finally:
        worker.close()
        with contextlib.suppress(BenchbenchError):
            store.update_run(run_id, status=summary.status, finished_at=now())
    return summary


def _run_row(run_id: str, config: RunConfig, env: Environment) -> dict[str, Any]:
    suites = []
    for path in config.suites:
        suite = load_suite(path)
        suites.append({"name": suite.name, "path": str(path), "hash": file_hash(path)})
    git = git_state(config.repo or Path.cwd())
    return {
        "id": run_id,
        "group_id": run_id,
        "kind": config.kind,
        "label": config.label,
        "status": "running",
        "started_at": now(),
        "finished_at": None,
        "suites": suites,
        "harness_version": __version__,
        "git_sha": git.sha,
        "git_branch": git.branch,
        "git_dirty": git.dirty,
        "tags": list(config.tags),
        "config": {
            "policy": dataclasses.asdict(config.policy),
            "cache": config.cache,
            "threads": config.threads,
            "timeout_s": config.timeout_s,
            "selection": dataclasses.asdict(config.selection),
        },
        "environment_id": env.id,
    }
