"""Jobs cancelled and preempted as GitHub Actions, Slurm and Kubernetes do it, through a
wrapper shell, at a seeded random moment each: ``--resume`` completes the run with every
finished point exactly once. A pod deleted while benchbench, or tini above it, is the
container's PID 1. And ``run --deadline``, which stops before the scheduler.

The longer loop (10 moments per scheduler, real grace periods) is
``benchmarks/fault_injection.py --schedulers 10``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys

import pytest

from benchbench.store import open_store
from tests.integration.cli import SUITES, env
from tests.pgserver import missing_is_failure
from tests.schedulers import CONTAINERS, SCHEDULERS, cut_and_resume

#: 10 of grid.py's cheap points.
RUN_ARGS = [
    str(SUITES / "grid.py"),
    "--filter",
    r"/sqrt:.*n=(64|128|192|256|320|384|448|512|576|640)\)",
]
POINTS = 10
SEED = 44


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_a_cancelled_job_resumes_with_every_finished_point_once(scheduler, tmp_path):
    rng = random.Random(f"{SEED}-{scheduler}")
    # Mid-run: after 1-4 points are stored, and up to half a second more.
    after, moment_s = rng.randint(1, 4), rng.uniform(0.0, 0.5)
    code, cut, end = cut_and_resume(
        scheduler, moment_s, tmp_path / "store.db", tmp_path, RUN_ARGS, 0.1, after
    )
    # Finished first, stopped by the signal (130, 143), killed in its clean-up (-9), or
    # signalled before it set its handlers, in start-up, when nothing was measured yet.
    assert code in (0, 130, 143, -9, -2, -15), code
    assert cut <= end == POINTS


def _pid_namespaces() -> bool:
    try:
        done = subprocess.run([*CONTAINERS["benchbench"], "true"], capture_output=True, timeout=30)
    except OSError:
        return False
    return done.returncode == 0


@pytest.mark.parametrize("init", sorted(CONTAINERS))
def test_a_deleted_pod_stops_the_run_as_pid_1(init, tmp_path):
    if not _pid_namespaces():
        pytest.skip("a new PID namespace (unshare --pid) needs root or user namespaces")
    if init == "tini" and shutil.which("tini") is None:
        what = "tini is not installed: apt-get install -y tini (.ci/run does it as root)"
        if missing_is_failure(os.environ):
            pytest.fail(f"{what} (required when CI=true)", pytrace=False)
        pytest.skip(what)
    # The kubelet's SIGTERM to PID 1 once a point is stored (the run's handlers are set by
    # then), the real 30 s grace, SIGKILL. A PID 1 gets only the signals it has a handler
    # for: had benchbench none, or tini not passed it on, the run would finish (0) or be
    # killed at the end of the grace (-9), not stop on the signal.
    code, cut, end = cut_and_resume(
        "kubernetes", 0.0, tmp_path / "store.db", tmp_path, RUN_ARGS, 1.0, 1, init
    )
    assert code in (130, 143), code
    assert 1 <= cut <= end == POINTS


def test_a_deadline_stops_the_run_cleanly_for_resume(tmp_path):
    db = tmp_path / "store.db"
    argv = [str(SUITES / "slowish.py"), "--target", "1e-9", "--store", str(db)]
    done = subprocess.run(
        [sys.executable, "-m", "benchbench", "run", *argv, "--deadline", "8s", "--json"],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 142, done.stderr
    said = " ".join(done.stderr.split())
    run = open_store(str(db)).runs()[0]
    assert "stopped at the deadline (--deadline 8s)" in said
    assert f"finish with: benchbench run --resume {run['id']}" in said
    assert run["status"] == "interrupted"
    rows = open_store(str(db)).measurements(run["id"])
    assert all(r["workload"] == "quick" and r["status"] == "ok" for r in rows)
