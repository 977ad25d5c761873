"""The hardware tier of ``run --metric instructions`` through the real CLI: a machine
without hardware counters refuses ``--counter pmu`` before any store exists, ``doctor``
says whether it has them, and, where it does, a run counts with them."""

from __future__ import annotations

import json

import pytest

from benchbench.machine import pmu
from benchbench.store import open_store
from tests.integration.cli import SUITES, benchbench, json_of
from tests.integration.test_ab_instructions import _suite


def _hardware() -> str:
    """Why this machine has no hardware instruction counts ("" where it has them)."""
    counter, why = pmu.instruction_counter()
    if counter is not None:
        counter.close()
    return why


def test_counter_pmu_without_hardware_counters_is_a_usage_error_before_any_store(tmp_path):
    why = _hardware()
    if not why:
        pytest.skip("this machine has hardware counters: --counter pmu is accepted here")
    done = benchbench(
        "run", str(SUITES / "tiny.py"), "--metric", "instructions", "--counter", "pmu",
        "--store", "s.db", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("benchbench: error: --counter pmu counts with the CPU's hardware")
    assert why in line and "--counter callgrind" in line and "Traceback" not in line
    assert list(tmp_path.iterdir()) == []  # no store, no results/


def test_doctor_says_whether_the_machine_has_hardware_counters(tmp_path):
    done = benchbench("doctor", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (check,) = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "hardware counters"]
    why = _hardware()
    if why:
        assert check["status"] == "info" and check["value"] == f"none ({why})"
        assert "callgrind" in check["advice"]
    else:
        assert check["status"] == "ok" and check["value"].startswith(pmu.AVAILABLE)


def test_the_hardware_tier_counts_an_extra_call(tmp_path, monkeypatch):
    why = _hardware()
    if why:
        pytest.skip(f"no hardware instruction counts on this machine: {why}")
    suite, store = str(_suite(tmp_path)), str(tmp_path / "s.db")
    runs = []
    for label, extra in (("a", "0"), ("b", "1")):
        monkeypatch.setenv("EXTRA_CALLS", extra)
        done = benchbench(
            "run", suite, "--store", store, "--metric", "instructions", "--counter", "pmu",
            "--label", label, "--json", cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        document = json_of(done)
        (row,) = document["results"]
        assert row["median_s"] is None and row["instructions_per_call"] > 1000
        stored = open_store(store)
        (measured,) = stored.measurements(document["run_id"])
        assert measured["extra"]["instructions"]["tool"] == "pmu"
        assert stored.resolve_run(label)["config"]["counter"] == "pmu"
        stored.engine.dispose()
        runs.append(row)
    ratio = runs[1]["instructions_per_call"] / runs[0]["instructions_per_call"]
    assert 1.7 < ratio < 2.3  # the op twice per call (the C allocator's share included)
    done = benchbench("compare", "a", "b", "--store", store, "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    (point,) = json_of(done)["points"]
    assert point["instructions_mark"] == "slower"


def test_a_run_s_environment_names_the_hardware_counters(tmp_path):
    done = benchbench(
        "run", str(SUITES / "tiny.py"), "--filter", "sum", "--budget", "0.05",
        "--store", "s.db", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    store = open_store(str(tmp_path / "s.db"))
    run = store.resolve_run(json_of(done)["run_id"])
    environment = store.environment(run["environment_id"])
    store.engine.dispose()
    assert environment is not None and "pmu" not in environment["fields"]  # no new history
    why = _hardware()
    assert environment["info"]["pmu"] == (f"none ({why})" if why else pmu.AVAILABLE)
    assert run["config"]["counter"] is None  # nothing counted


def test_compare_keeps_two_counters_apart(tmp_path):
    """A callgrind run against a run counted with the CPU's counter, 30 % more: not a
    regression, the point marked and the note under the table saying why."""
    from tests import synthetic

    store = open_store(str(tmp_path / "s.db"))
    p = synthetic.point()
    synthetic.write_history(store, {p: [1e-3]}, counts={p: [10_000.0]}, label="base")
    synthetic.write_history(store, {p: [1e-3]}, counts={p: [13_000.0]}, label="head",
                            counter="pmu", seed=1, timed=False)  # fmt: skip
    store.engine.dispose()
    done = benchbench("compare", "base", "head", "--store", "s.db", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (point,) = json_of(done)["points"]
    assert point["instructions_mark"] == "counters differ"
    assert point["instructions_ratio"] is None and point["contender_instructions"] is None
    table = benchbench("compare", "base", "head", "--store", "s.db", cwd=tmp_path)
    assert table.returncode == 0 and "counters differ" in table.stdout
    assert "instructions not compared at 1 point(s)" in " ".join(table.stderr.split())
