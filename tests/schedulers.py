"""How schedulers end a job, played against a real `benchbench run`, and the check after.

Plain Python with no pytest dependency, for ``tests/integration/test_schedulers.py`` (a
few seeded moments) and ``benchmarks/fault_injection.py --schedulers`` (10 each):

- GitHub Actions' cancel: SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that;
- Slurm's preemption: SIGTERM to every process of the step, ``KillWait`` (30 s by
  default), SIGKILL;
- Kubernetes' pod deletion: SIGTERM to the container's PID 1, 30 s of grace, SIGKILL.

The run starts through a wrapper shell that ``exec`` s it (``bash -c 'exec benchbench
run ...'``), as the docs advise, or as a container's first process (``container``):
``benchbench`` itself as PID 1 of a new PID namespace (``unshare --pid``), or ``tini``
as PID 1 with benchbench under it, as the docs' Kubernetes recipe runs it. A signal "to
the runner" goes to that PID 1, as the kubelet signals a container. SIGKILL goes to the
whole process group, as a scheduler kills a job's every process. ``scale`` shortens the
grace periods (0.1: 0.75 s, 3 s), so that the kill also lands in the run's clean-up.
"""

from __future__ import annotations

import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "tests" / "integration" / "suites" / "grid.py"


@dataclass(frozen=True)
class Step:
    after_s: float  # since the previous step
    signum: int
    group: bool  # to the whole process group, else to the runner only


SCHEDULERS: dict[str, tuple[Step, ...]] = {
    "github": (
        Step(0.0, signal.SIGINT, False),
        Step(7.5, signal.SIGTERM, False),
        Step(2.5, signal.SIGKILL, True),
    ),
    "slurm": (Step(0.0, signal.SIGTERM, True), Step(30.0, signal.SIGKILL, True)),
    "kubernetes": (Step(0.0, signal.SIGTERM, False), Step(30.0, signal.SIGKILL, True)),
}


def environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(ROOT) + os.pathsep + out.get("PYTHONPATH", "")
    out.pop("BENCHBENCH_STORE", None)
    out["BENCHBENCH_ROUNDS"] = "1"
    out.update(extra or {})
    return out


#: How a container starts its first process: a new PID namespace (``--kill-child``: the
#: namespace dies with ``unshare``), and, for ``tini``, the init before the command.
CONTAINERS: dict[str, list[str]] = {
    "benchbench": ["unshare", "--fork", "--pid", "--mount-proc", "--kill-child"],
    "tini": ["unshare", "--fork", "--pid", "--mount-proc", "--kill-child", "tini", "--"],
}


def start(
    args: list[str],
    cwd: Path,
    extra: Mapping[str, str] | None = None,
    container: str | None = None,
) -> subprocess.Popen[bytes]:
    """``benchbench ARGS`` behind a wrapper shell that execs it, or as a container's first
    process (:data:`CONTAINERS`), in its own group, with :func:`environ` (``extra``
    added)."""
    argv = [sys.executable, "-m", "benchbench", *args]
    wrapped = (
        CONTAINERS[container] + argv if container else ["bash", "-c", f"exec {shlex.join(argv)}"]
    )
    return subprocess.Popen(
        wrapped,
        cwd=cwd,
        env=environ(extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def pid_1(proc: subprocess.Popen[bytes]) -> int:
    """The host's pid of the first process in ``proc``'s new PID namespace (``unshare
    --fork``'s child), once it is there."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        found = children.read_text().split() if children.exists() else []
        if found:
            return int(found[0])
        time.sleep(0.01)
    raise AssertionError(f"no first process under unshare (pid {proc.pid}) after 30 s")


def play(
    proc: subprocess.Popen[bytes],
    steps: tuple[Step, ...],
    scale: float,
    runner: int | None = None,
) -> int:
    """Send ``steps`` to ``proc`` (grace periods times ``scale``) until it ends: its code.
    A step "to the runner only" goes to ``runner`` when given (a container's PID 1)."""
    for step in steps:
        deadline = time.monotonic() + step.after_s * scale
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        if proc.poll() is not None:
            break
        try:
            if step.group:
                os.killpg(proc.pid, step.signum)
            elif runner is not None:
                os.kill(runner, step.signum)
            else:
                proc.send_signal(step.signum)
        except ProcessLookupError:
            break
    code = proc.wait(timeout=120)
    if proc.stderr is not None:
        proc.stderr.read()
    return code


def stored(db: Path) -> dict[tuple[str, str], tuple[object, ...]]:
    """Every stored point, (run, benchmark) -> the row's identity (id, median, created)."""
    if not db.exists():
        return {}
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            "SELECT run_id, benchmark_id, id, median_s, created_at FROM measurement"
        ).fetchall()
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
    if check != "ok":
        raise AssertionError(f"store {db}: integrity_check says {check}")
    keys = [(r[0], r[1]) for r in rows]
    if len(set(keys)) != len(keys):
        raise AssertionError(f"store {db}: a point is stored twice")
    return {(r[0], r[1]): tuple(r[2:]) for r in rows}


def _count(db: Path) -> int:
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM measurement").fetchone()[0])
    except sqlite3.Error:
        return 0


def run_ids(db: Path) -> list[str]:
    if not db.exists():
        return []
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return [r for (r,) in conn.execute("SELECT id FROM run ORDER BY started_at")]


def cut_and_resume(
    scheduler: str,
    moment_s: float,
    db: Path,
    cwd: Path,
    run_args: list[str],
    scale: float,
    after_points: int = 0,
    container: str | None = None,
) -> tuple[int, int, int]:
    """A run cut by ``scheduler`` ``moment_s`` after it stored ``after_points`` points (0:
    after its start), then ``--resume`` to the end; the run started as ``container``'s
    first process when given (:func:`start`).

    Checks that every point stored before the resume is there after it unchanged, and
    that the run holds every planned point exactly once. Returns (the cut run's exit
    code, points stored when cut, points at the end)."""
    proc = start(["run", *run_args, "--store", str(db)], cwd, container=container)
    runner = pid_1(proc) if container else None
    while after_points and proc.poll() is None and _count(db) < after_points:
        time.sleep(0.05)
    time.sleep(moment_s)
    code = play(proc, SCHEDULERS[scheduler], scale, runner)
    before = stored(db)
    ids = run_ids(db)
    again = ["run", "--resume", ids[-1]] if ids else ["run", *run_args]
    done = subprocess.run(
        [sys.executable, "-m", "benchbench", *again, "--store", str(db)],
        cwd=cwd,
        env=environ(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(again)} failed ({done.returncode}):\n{done.stderr}")
    after = stored(db)
    changed = [key for key, row in before.items() if after.get(key) != row]
    if changed:
        raise AssertionError(f"{len(changed)} point(s) stored before the resume changed")
    return code, len(before), len(after)
