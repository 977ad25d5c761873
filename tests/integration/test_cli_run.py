"""`benchbench run / list / runs / show` end to end on a real SQLite store."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from benchbench.store import open_store
from benchbench.views.results import RESULT_KEYS
from tests.integration.cli import SUITES, benchbench, env, json_of


def test_run_stores_every_point_and_prints_json(tmp_path):
    db = tmp_path / "store.db"
    done = benchbench("run", str(SUITES / "tiny.py"), "--store", str(db), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    results = doc["results"]
    assert len(results) == 4
    for result in results:
        assert set(RESULT_KEYS) <= set(result)
        assert result["status"] == "ok", result
        assert result["median_s"] > 0
        assert result["ci_low_s"] <= result["median_s"] <= result["ci_high_s"]
        # >= 10 samples unless a loaded machine overran 10x the 0.05 s budget (unit-tested)
        assert len(result["samples"]) >= 2
        assert result["calls_per_sample"] >= 1
        assert result["max_rel_error"] is not None and result["max_rel_error"] < 1e-4
    sqrt = [r for r in results if r["workload"] == "sqrt"]
    assert all(r["bytes_per_s"] and r["flop_per_s"] for r in sqrt)
    summed = [r for r in results if r["workload"] == "sum"]
    assert summed[0]["bytes_per_s"] is None  # no work model declared: no invented throughput

    store = open_store(str(db))
    run = store.resolve_run(doc["run_id"])
    assert run["status"] == "finished"
    assert run["environment_id"]
    assert len(store.measurements(doc["run_id"])) == 4

    shown = json_of(
        benchbench("show", doc["run_id"][:8], "--store", str(db), "--json", cwd=tmp_path)
    )
    assert [r["median_s"] for r in shown["results"]] == [r["median_s"] for r in results]
    runs = json_of(benchbench("runs", "--store", str(db), "--json", cwd=tmp_path))
    assert [r["id"] for r in runs["runs"]] == [doc["run_id"]]
    table = benchbench("show", "latest", "--store", str(db), cwd=tmp_path)
    assert table.returncode == 0 and "x.sqrt_()" in table.stdout


def test_default_store_is_results_sqlite_in_the_working_directory(tmp_path):
    done = benchbench("run", str(SUITES / "tiny.py"), "--filter", "sum", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "results" / "benchbench.db").is_file()
    assert "torch.sum" in done.stdout


def test_failures_are_isolated_and_recorded_with_their_reason(tmp_path):
    db = tmp_path / "store.db"
    done = benchbench(
        "run",
        str(SUITES / "faulty.py"),
        "--store",
        str(db),
        "--json",
        "--timeout",
        "8",
        "--memory-limit",
        "8G",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr  # 1: the run had errors
    assert "Traceback" not in done.stderr
    by_variant = {r["variant"]: r for r in json_of(done)["results"]}
    for good in ("good", "after"):  # the run went on past every failure
        assert by_variant[good]["status"] == "ok"
        assert by_variant[good]["median_s"] > 0 and len(by_variant[good]["samples"]) >= 10
    assert by_variant["abort"]["reason"] == "crashed: SIGABRT"
    assert by_variant["hang"]["reason"] == "timed out after 8 s"
    assert by_variant["raise"]["reason"] == (
        f"ValueError: boom from the suite (at {SUITES / 'faulty.py'}:14)"
    )
    assert re.fullmatch(
        r"wrong result: 512 of 512 float32 elements beyond "
        r"atol 1e-05 \+ rtol 1\.3e-06·\|expected\|; "
        r"max abs error 1; worst at index \d+ \(expected [0-9.]+, got [0-9.]+\)",
        by_variant["wrong"]["reason"],
    ), by_variant["wrong"]["reason"]
    assert by_variant["oom"]["reason"].startswith("out of memory: ")
    assert "1099511627776 bytes" in by_variant["oom"]["reason"]  # the 1 TiB the suite asked for
    assert all(
        by_variant[v]["status"] == "error" for v in ("abort", "hang", "raise", "wrong", "oom")
    )
    store = open_store(str(db))
    run_id = json_of(done)["run_id"]
    assert len(store.measurements(run_id)) == 7
    assert store.resolve_run(run_id)["status"] == "finished"


def test_sigkill_leaves_every_finished_point_readable(tmp_path):
    db = tmp_path / "store.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchbench",
            "run",
            str(SUITES / "tiny.py"),
            "--store",
            str(db),
            "--budget",
            "0.3",
        ],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        stored = 0
        while time.monotonic() < deadline and stored < 2:
            time.sleep(0.2)
            if db.exists():
                try:
                    store = open_store(str(db))
                    runs = store.runs()
                    stored = len(store.measurements(runs[0]["id"])) if runs else 0
                except Exception:
                    stored = 0
        assert stored >= 2, "the run never stored two points"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    store = open_store(str(db))
    run = store.runs()[0]
    rows = store.measurements(run["id"])
    assert 2 <= len(rows) < 4
    assert all(r["status"] == "ok" and r["median_s"] > 0 and r["samples_s"] for r in rows)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch\nsuite = (\n", "line 2: syntax error"),
        ("import torch\nimport no_such_module_here\n", "line 2: ModuleNotFoundError"),
    ],
)
def test_broken_suite_files_exit_1_naming_file_and_line(tmp_path, source, expected):
    path = tmp_path / "broken.py"
    path.write_text(source)
    done = benchbench("run", str(path), "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 1
    assert "broken.py" in done.stderr and expected in done.stderr


def test_invalid_axis_value_names_workload_and_value(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(
        "import torch\nfrom benchbench import Suite, Variant\nsuite = Suite('bad')\n"
        "suite.workload('neg', setup=lambda c: c.uniform(), variants=[Variant('v', torch.sqrt)],\n"
        "               sizes=[-4])\n"
    )
    done = benchbench("list", str(path), cwd=tmp_path)
    assert done.returncode == 1
    assert "workload 'neg'" in done.stderr and "got -4" in done.stderr and "bad.py" in done.stderr


def test_unknown_suite_is_a_usage_error_listing_the_builtins(tmp_path):
    done = benchbench("run", "no-such-suite", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown suite 'no-such-suite'" in done.stderr and "quick" in done.stderr


def test_absent_device_is_skipped_with_the_reason(tmp_path):
    done = benchbench(
        "run",
        str(SUITES / "tiny.py"),
        "--device",
        "cuda",
        "--store",
        str(tmp_path / "s.db"),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 1  # nothing could be measured
    results = json_of(done)["results"]
    assert results and all(r["status"] == "skipped" for r in results)
    assert all(r["reason"] == "CUDA is not available" for r in results)
    assert "nothing could be measured" in done.stderr


def test_list_shows_points_without_measuring(tmp_path):
    done = benchbench("list", "quick", "--json", cwd=tmp_path)
    assert done.returncode == 0
    labels = [p["label"] for p in json_of(done)["points"]]
    assert "sqrt:x.sqrt_()[float32, cpu](n=4194304)" in labels
    assert "matmul:torch.matmul[float32, cpu](n=256x256)" in labels


def test_show_unknown_run_lists_what_exists(tmp_path):
    open_store(str(tmp_path / "s.db"))  # `show` reads only: it needs an existing store
    done = benchbench("show", "nope", "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 1
    assert "no run 'nope'" in done.stderr and "no runs yet" in done.stderr


PROCESS_STATE_SUITE = """
import gc
import os
from pathlib import Path

import torch
from benchbench import Suite, Variant


def under_allocator(x):
    wanted = os.environ["BENCHBENCH_ALLOCATOR"]
    maps = Path("/proc/self/maps").read_text()
    loaded = {"jemalloc": "libjemalloc" in maps, "tcmalloc": "libtcmalloc" in maps}
    if wanted == "system" and any(loaded.values()) or wanted != "system" and not loaded[wanted]:
        raise RuntimeError(f"worker not under {wanted}: {loaded}")
    if gc.get_freeze_count() < 10_000:  # torch's objects: gc.collect() per point stays cheap
        raise RuntimeError(f"imports not frozen: {gc.get_freeze_count()} objects")
    return torch.sqrt(x)


suite = Suite("procstate")
suite.workload(
    "sqrt",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[Variant("checked", under_allocator)],
    sizes=[4096],
    budget_s=0.05,
)
"""


def _allocator_run(tmp_path, allocator: str | None):
    suite = tmp_path / "procstate.py"
    suite.write_text(PROCESS_STATE_SUITE)
    db = tmp_path / "store.db"
    extra = ("--allocator", allocator) if allocator else ()
    done = benchbench("run", str(suite), "--store", str(db), "--json", *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json_of(done)
    store = open_store(str(db))
    run = store.resolve_run(doc["run_id"])
    environment = store.environment(run["environment_id"])
    assert environment is not None
    return run, environment["fields"], store.measurements(doc["run_id"])


def test_workers_run_with_fixed_malloc_thresholds_recorded_in_the_environment(tmp_path):
    run, fields, measurements = _allocator_run(tmp_path, None)
    assert run["config"]["allocator"] == "system"
    assert fields["allocator"] == "system"
    assert fields["malloc_mmap_threshold_bytes"] == 32 * 2**20
    assert fields["malloc_trim_threshold_bytes"] == 64 * 2**20
    assert "transparent_hugepages" in fields
    (row,) = measurements
    assert row["status"] == "ok", row
    assert row["extra"]["gc"] == "collected, disabled while timing"
    assert row["extra"]["minor_faults_per_call"] >= 0


@pytest.mark.parametrize(
    ("allocator", "library"),
    [("jemalloc", "libjemalloc.so.2"), ("tcmalloc", "libtcmalloc_minimal.so.4")],
)
def test_a_preloaded_allocator_is_in_the_workers_and_splits_the_environment(
    tmp_path, allocator, library
):
    from benchbench.machine.allocator import SEARCH_PATH

    if not any(os.path.isfile(os.path.join(folder, library)) for folder in SEARCH_PATH):
        pytest.skip(f"{library} is not installed (Debian: apt-get install the allocator package)")
    run, fields, measurements = _allocator_run(tmp_path, allocator)
    assert run["config"]["allocator"] == allocator
    assert fields["allocator"] == allocator
    (row,) = measurements
    assert row["status"] == "ok", row["reason"]  # the suite raises unless the library is mapped


def test_a_missing_allocator_library_exits_2_naming_the_package(tmp_path, monkeypatch, capsys):
    from benchbench.cli import main

    monkeypatch.setattr("benchbench.machine.allocator.SEARCH_PATH", (str(tmp_path),))
    store = str(tmp_path / "s.db")
    code = main(["run", str(SUITES / "tiny.py"), "--store", store, "--allocator", "jemalloc"])
    assert code == 2
    assert "apt-get install libjemalloc2" in capsys.readouterr().err


def test_cpus_pins_the_workers_and_the_runner_samples_telemetry(tmp_path):
    from benchbench.run.runner import resume_config

    db = tmp_path / "store.db"
    args = ("--filter", "sum", "--budget", "0.05", "--store", str(db))
    run_flags = ("--cpus", "0", "--threads", "all", "--json")
    done = benchbench("run", str(SUITES / "tiny.py"), *args, *run_flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    store = open_store(str(db))
    run = store.resolve_run(doc["run_id"])
    assert run["config"]["cpus"] == [0] and run["config"]["threads"] is None  # torch's
    environment = store.environment(run["environment_id"])
    assert environment is not None
    assert environment["info"]["cpu_affinity"] == "0"
    assert environment["fields"]["threads"] == 1  # one torch thread per pinned core
    (result,) = doc["results"]
    assert result["status"] == "ok" and result["threads"] == 1
    (telemetry,) = store.telemetry(doc["run_id"]).values()
    assert telemetry["cpus"] == [0]  # the worker's affinity, read by the runner
    assert "0" in telemetry["cpu_idle_share"]
    assert telemetry["n_samples"] >= 2 and telemetry["measured_cpu_s"] is not None
    assert "load_1m" in telemetry["metrics"]
    # --resume keeps the pinning, and a different --cpus is a conflict.
    assert resume_config(store, doc["run_id"]).cpus == (0,)
    conflict = benchbench(
        "run", "--resume", doc["run_id"], "--cpus", "0-1", "--store", str(db), cwd=tmp_path
    )
    assert conflict.returncode == 2
    assert "--cpus (0, 1) (the run has (0,))" in conflict.stderr


def test_cpus_the_machine_lacks_exit_2_with_the_valid_range(tmp_path, monkeypatch, capsys):
    from benchbench.cli import main
    from benchbench.machine.cpus import format_cpus, usable_cpus

    monkeypatch.chdir(tmp_path)
    assert main(["run", str(SUITES / "tiny.py"), "--cpus", "0,100000"]) == 2
    err = capsys.readouterr().err
    assert "--cpus '0,100000': this machine has no usable core 100000" in err
    assert f"the cores here are {format_cpus(usable_cpus())}" in err
    assert not (tmp_path / "results").exists()


def test_operators_around_zero_pass_the_check_and_a_wrong_one_fails(tmp_path):
    db = tmp_path / "store.db"
    done = benchbench(
        "run",
        str(SUITES / "around_zero.py"),
        "--rounds",
        "1",
        "--store",
        str(db),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr  # 1: the wrong variant is an error
    results = {(r["workload"], r["variant"], r["dtype"]): r for r in json_of(done)["results"]}
    assert len(results) == 8
    for (workload, variant, dtype), result in results.items():
        if variant == "relu":
            assert result["status"] == "error"
            assert result["reason"].startswith("wrong result: ")
            assert f"{dtype} elements beyond atol 1e-05 + rtol " in result["reason"]
            assert result["max_abs_error"] == pytest.approx(0.17, abs=0.01)
        else:
            assert result["status"] == "ok", (workload, dtype, result["reason"])
            assert 0 < result["max_abs_error"] < 0.1
    stored = open_store(str(db)).measurements(json_of(done)["run_id"])
    assert all(m["max_abs_error"] is not None and m["max_abs_error"] > 0 for m in stored)


def test_lock_clocks_without_nvml_exits_2_before_measuring(tmp_path, monkeypatch, capsys):
    from benchbench.cli import main

    monkeypatch.setattr(
        "benchbench.machine.nvml.load_nvml", lambda: (None, "nvmlInit failed: no driver")
    )
    store = str(tmp_path / "s.db")
    assert main(["run", str(SUITES / "tiny.py"), "--store", store, "--lock-clocks"]) == 2
    err = capsys.readouterr().err
    assert "--lock-clocks needs NVML: nvmlInit failed: no driver" in err
    assert "run without --lock-clocks" in err
    assert open_store(store).runs() == []


def test_cuda_graph_is_stored_with_the_run_and_noted_on_cpu_points(tmp_path):
    db = tmp_path / "store.db"
    args = ("--filter", "sum", "--budget", "0.05", "--store", str(db))
    done = benchbench("run", str(SUITES / "tiny.py"), *args, "--cuda-graph", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    store = open_store(str(db))
    assert store.resolve_run(doc["run_id"])["config"]["policy"]["cuda_graph"] is True
    (result,) = doc["results"]
    assert result["status"] == "ok" and result["timing"] is None
    (row,) = store.measurements(doc["run_id"])
    assert row["extra"]["cuda_graph_note"] == "CUDA graph not used: cpu is not a CUDA device"


def test_lock_clocks_locks_the_gpu_cuda_sees_by_uuid_and_refuses_an_unknown_one(
    tmp_path, monkeypatch, capsys
):
    """Under CUDA_VISIBLE_DEVICES=2, cuda:0 is NVML's GPU 2: that one is locked, by UUID,
    to its base clock; never NVML's GPU 0 (someone else's). On fakes only: no test locks
    a real GPU's clocks."""
    from benchbench.cli import main
    from tests.unit.test_nvml import TDP, ClockNvml, FakeNvmlError

    nvml = ClockNvml()
    monkeypatch.setattr("benchbench.machine.nvml.load_nvml", lambda: (nvml, ""))
    monkeypatch.setattr("benchbench.machine.nvml.visible_cuda_uuids", lambda: {0: "cccc"})
    # The run itself stops before measuring (no CUDA here): a refused device is enough.
    monkeypatch.setattr(
        "benchbench.run.runner.Session.run",
        lambda *a, **k: (_ for _ in ()).throw(FakeNvmlError("stop here")),
    )
    store = str(tmp_path / "s.db")
    argv = ["run", str(SUITES / "tiny.py"), "--store", store, "--lock-clocks"]
    with pytest.raises(FakeNvmlError, match="stop here"):
        main([*argv, "--device", "cuda:0"])
    assert nvml.log == [("lock", 2, TDP), ("reset", 2, 0)]
    assert "clocks locked for this run: cuda:0 at its base clock" in capsys.readouterr().err
    nvml.log.clear()
    assert main([*argv, "--device", "cuda:1"]) == 2  # CUDA shows no cuda:1 here
    assert "cannot lock the clocks of cuda:1 (its UUID is unknown)" in capsys.readouterr().err
    assert nvml.log == []
