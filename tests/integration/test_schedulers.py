"""Jobs cancelled and preempted as GitHub Actions, Slurm and Kubernetes do it, through a
wrapper shell, at a seeded random moment each: ``--resume`` completes the run with every
finished point exactly once. And ``run --deadline``, which stops before the scheduler.

The longer loop (10 moments per scheduler, real grace periods) is
``benchmarks/fault_injection.py --schedulers 10``.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from benchbench.store import open_store
from tests.integration.cli import SUITES, env
from tests.schedulers import SCHEDULERS, cut_and_resume

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
