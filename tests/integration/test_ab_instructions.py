"""The two instruments that noise cannot blur, end to end through the real CLI:
instruction counts under a real callgrind, and ``benchbench ab`` in two interpreters."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from benchbench.store import open_store
from tests.integration.cli import benchbench, json_of

#: Every call of the suite's one point runs the op CALLS times on the same tensor: a known
#: amount of extra work (2 calls instead of 1 doubles the instructions of the op).
SUITE = """
import os
import torch
from benchbench import Suite, Variant

CALLS = int(os.environ.get("EXTRA_CALLS", "0")) + 1
suite = Suite("counted")


def repeated(x):
    for _ in range(CALLS - 1):
        torch.exp(x)
    return torch.exp(x)


suite.workload(
    "exp",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("torch.exp", repeated)],
    sizes=[4096],
    budget_s=0.05,
    derive=False,  # no work model: its zygotes skip the first dispatch mode (~2.4 s each)
)
"""


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "counted.py"
    path.write_text(SUITE)
    return path


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
# Two runs under callgrind, each importing torch under valgrind: 425 s on a 2-core AVX2
# EPYC with the other test worker idle, past the suite's 600 s per test beside it.
@pytest.mark.timeout(1500)
def test_an_extra_call_is_an_instruction_regression(tmp_path, monkeypatch):
    suite, store = str(_suite(tmp_path)), str(tmp_path / "s.db")
    base = benchbench(
        "run",
        suite,
        "--store",
        store,
        "--metric",
        "time,instructions",
        "--rounds",
        "1",  # the counts are what is judged; one timed process shows the merge
        "--label",
        "a",
        "--json",
        cwd=tmp_path,
        timeout=600,
    )
    assert base.returncode == 0, base.stderr
    (row,) = json_of(base)["results"]
    assert row["median_s"] > 0 and row["instructions_per_call"] > 1000
    monkeypatch.setenv("EXTRA_CALLS", "1")
    head = benchbench(
        "run",
        suite,
        "--store",
        store,
        "--metric",
        "instructions",
        "--label",
        "b",
        "--json",
        cwd=tmp_path,
        timeout=600,
    )
    assert head.returncode == 0, head.stderr
    (counted,) = json_of(head)["results"]
    assert counted["median_s"] is None  # counted, not timed
    ratio = counted["instructions_per_call"] / row["instructions_per_call"]
    assert 1.8 < ratio < 2.2  # the op twice per call
    done = benchbench("compare", "a", "b", "--store", store, "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    (point,) = json_of(done)["points"]
    assert point["instructions_mark"] == "slower" and point["mark"] == "untimed"
    table = benchbench("compare", "a", "b", "--store", store, cwd=tmp_path)
    assert "instr ratio" in table.stdout and "slower" in table.stdout


@pytest.mark.slow
def test_ab_measures_both_sides_and_stores_two_paired_runs(tmp_path):
    suite, store = str(_suite(tmp_path)), str(tmp_path / "ab.db")
    cores = sorted(os.sched_getaffinity(0))[:2]  # --cpus reaches the runs and the duet
    pinned = ["--cpus", ",".join(map(str, cores))] if len(cores) == 2 else []
    done = benchbench(
        "ab",
        suite,
        "--duet",  # granted on two idle cores, lockstep with the reason on a busy machine
        *pinned,
        "--base",
        sys.executable,
        "--head",
        sys.executable,
        "--rounds",
        "3",
        "--budget",
        "0.06",
        "--store",
        store,
        "--json",
        "--no-fail-on-regression",
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    document = json_of(done)
    assert document["paired"] is True
    assert document["base"]["label"] == "base" and document["contender"]["label"] == "head"
    (point,) = document["points"]
    assert point["base_status"] == "ok" and point["contender_status"] == "ok"
    assert point["ratio"] > 0
    shown = json_of(benchbench("show", "head", "--store", store, "--json", cwd=tmp_path))
    assert len(shown["results"][0]["samples"]) > 0
    again = benchbench("compare", "base", "head", "--store", store, "--json", cwd=tmp_path)
    assert json_of(again)["paired"] is True  # the stored pairing is found again
    # Whichever pairing the cores allowed is said while measuring, stored, and named again
    # by compare.
    pairing = (
        "duet"
        if "note: duet: base and head sample at the same moment" in done.stderr
        else "lockstep"
    )
    if pairing == "lockstep":
        assert "note: lockstep, not duet: " in done.stderr
    config = open_store(store).resolve_run(document["contender"]["run_id"])["config"]
    assert config["ab"]["pairing"] == pairing
    if pinned:
        assert config["cpus"] == cores
        assert config["ab"]["duet_cores"] == (cores if pairing == "duet" else None)
    table = benchbench("compare", "base", "head", "--store", store, cwd=tmp_path)
    assert f"measured in {pairing} (benchbench ab)" in table.stdout


def test_duet_with_more_than_one_thread_a_side_is_a_usage_error_and_creates_no_store(tmp_path):
    store = tmp_path / "ab.db"
    done = benchbench(
        "ab", str(_suite(tmp_path)), "--base", sys.executable, "--head", sys.executable,
        "--duet", "--threads", "2", "--store", str(store), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--duet gives each side one core, so --threads must be 1, got 2" in done.stderr
    assert not store.exists()


def test_ab_with_a_side_that_is_not_python_is_a_usage_error_and_creates_no_store(tmp_path):
    suite, store = str(_suite(tmp_path)), tmp_path / "ab.db"
    done = benchbench(
        "ab",
        suite,
        "--base",
        sys.executable,
        "--head",
        "/bin/echo",
        "--store",
        str(store),
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "--head /bin/echo is not a Python interpreter" in done.stderr
    assert not store.exists()
