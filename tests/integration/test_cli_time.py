"""`benchbench time` end to end: the real CLI, a worker process, a real SQLite store."""

from __future__ import annotations

import pytest

from benchbench.analysis.verdict import VERDICTS
from benchbench.cli import main
from benchbench.store import open_store
from tests.integration.cli import benchbench, json_of

ROW_KEYS = {
    "device",
    "dtype",
    "size",
    "shape",
    "variant",
    "reference",
    "status",
    "reason",
    "median_s",
    "ci_low_s",
    "ci_high_s",
    "q1_s",
    "q3_s",
    "n",
    "items_per_s",
    "ratio",
    "ratio_ci_low",
    "ratio_ci_high",
    "verdict",
    "p_value",
    "max_rel_error",
    "warnings",
}


def test_json_store_and_plot(tmp_path):
    db = tmp_path / "store.db"
    plot = tmp_path / "time.png"
    statements = ["torch.rsqrt(x)", "1 / torch.sqrt(x)"]
    done = benchbench(
        "time",
        *statements,
        "--size",
        "1k,4k",
        "--budget",
        "0.2",  # >= 2 samples a side even on a loaded machine: a ratio needs them
        "--store",
        str(db),
        "--plot",
        str(plot),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    assert doc["statements"] == statements and doc["reference"] == statements[0]
    assert doc["label"] == "time: torch.rsqrt(x) vs 1 / torch.sqrt(x)"
    results = doc["results"]
    assert [(r["size"], r["variant"]) for r in results] == [
        (1024, statements[0]),
        (1024, statements[1]),
        (4096, statements[0]),
        (4096, statements[1]),
    ]
    for row in results:
        assert set(row) == ROW_KEYS
        assert row["status"] == "ok", row
        assert row["ci_low_s"] <= row["median_s"] <= row["ci_high_s"]
        assert row["items_per_s"] == pytest.approx(row["size"] / row["median_s"])
    for row in results[1::2]:
        assert row["ratio_ci_low"] <= row["ratio"] <= row["ratio_ci_high"]
        assert row["verdict"] in VERDICTS
        assert (row["p_value"] < 0.05) == (row["verdict"] != "not significant")
        assert row["max_rel_error"] < 1e-4
    assert all(r["verdict"] == "reference" and r["ratio"] == 1.0 for r in results[::2])
    for c in doc["crossovers"]:  # timing decides whether there is one; its shape is fixed
        assert (c["variant"], c["reference"]) == (statements[1], statements[0])
        assert 1024 <= c["size"] <= 4096 and {c["below"], c["above"]} == {"faster", "slower"}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    store = open_store(str(db))
    run = store.resolve_run(doc["run_id"])
    assert (run["kind"], run["status"], run["label"]) == ("adhoc", "finished", doc["label"])
    assert run["suites"][0]["name"] == "time"
    assert run["config"]["statements"] == statements
    # Stored as their rounds finished (a shuffled order); the same points and medians.
    rows = sorted(store.measurements(doc["run_id"]), key=lambda r: (r["size"], r["variant"]))
    results = sorted(results, key=lambda r: (r["size"], r["variant"]))
    assert [(r["suite"], r["workload"], r["variant"], r["size"]) for r in rows] == [
        ("time", "time", r["variant"], r["size"]) for r in results
    ]
    assert all(r["samples_s"] and r["items_per_s"] for r in rows)
    assert [r["median_s"] for r in rows] == pytest.approx([r["median_s"] for r in results])


def test_wrong_result_crash_and_no_store(tmp_path):
    setup = "import os\nx = torch.rand(n, device=device, dtype=dtype) + 0.5"
    done = benchbench(
        "time",
        "x * 2",
        "x * 2 + 1",
        "x + x if n < 2048 else os.abort()",
        "--setup",
        setup,
        "--size",
        "1k,4k",
        "--budget",
        "0.05",
        "--no-store",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    doc = json_of(done)
    assert doc["run_id"] is None
    assert not (tmp_path / "results").exists()
    by = {(r["size"], r["variant"]): r for r in doc["results"]}
    assert by[1024, "x * 2"]["status"] == "ok"
    wrong = by[1024, "x * 2 + 1"]
    assert wrong["status"] == "error" and wrong["median_s"] is None
    assert wrong["reason"].startswith("wrong result against 'x * 2': 1024 of 1024 float32 elements")
    assert by[1024, "x + x if n < 2048 else os.abort()"]["ratio"] is not None
    # The crash at 4096 costs that point only, for every statement of it.
    assert {r["reason"] for r in doc["results"] if r["size"] == 4096} == {"crashed: SIGABRT"}
    # Each failed statement's label and full reason follow on stderr.
    assert "failed: time:x * 2 + 1[float32, cpu](n=1024): wrong result against" in done.stderr
    assert "failed: time:x * 2[float32, cpu](n=4096): crashed: SIGABRT" in done.stderr


def test_shapes_with_a_range_on_one_dimension(tmp_path):
    done = benchbench(
        "time",
        "x.sum(-1)",
        "x.reshape(shape).sum(len(shape) - 1)",
        "--size",
        "4x64..128,(2, 32)",
        "--budget",
        "0.05",
        "--no-store",
        "--format",
        "markdown",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    # Header, alignment, then one row per shape by number of elements.
    assert [row.split("|")[1].strip() for row in table[2:]] == ["2x32", "4x64", "4x128"]
    assert table[0].startswith("| size | #1 x.sum(-1) |")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["torch.rsqrt(x)", "1 / torch.sqrt(x"], "statement 2 '1 / torch.sqrt(x': syntax error"),
        (["torch.rsqrt(z)"], "statement 1 'torch.rsqrt(z)': name 'z' is not defined"),
        (["x", "--size", "2**10..2**5"], "accepted forms: 2**10..2**24, 1024,4096, 1k..16M"),
        (["x", "--size", "ten"], "size 'ten' is not a number; accepted forms"),
        (["x", "--size", "-4"], "size '-4' must be >= 1"),
        (["x", "--size=64x0"], "size '0' must be >= 1"),
        (["x", "--size", "8x1..2x3..4"], "has a range on 2 dimensions"),
        (["x", "--setup", "x = ("], "--setup 'x = (': syntax error"),
        (["x", "--cpus", "0,100000"], "--cpus '0,100000': this machine has no usable core 100000"),
        (["x", "--cpus", "1-0"], "--cpus '1-0': '1-0' is not an ascending range"),
        (["x", "--threads", "0"], "--threads must be >= 1, got 0"),
    ],
)
def test_bad_statements_and_sizes_exit_2_before_anything_starts(
    tmp_path, monkeypatch, capsys, args, message
):
    # In-process (the same main() the console script runs): these stop before a worker
    # or a store exists, so a subprocess would only add torch-free start-up time.
    monkeypatch.chdir(tmp_path)
    assert main(["time", *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err and not captured.out
    assert not (tmp_path / "results").exists()


def test_attribute_error_is_found_before_anything_is_measured(tmp_path):
    db = tmp_path / "s.db"
    done = benchbench("time", "x", "torch.rsqrtt(x)", "--store", str(db), cwd=tmp_path)
    assert done.returncode == 2
    assert "statement 2 'torch.rsqrtt(x)': AttributeError" in done.stderr
    assert "nothing was measured" in done.stderr and "Traceback" not in done.stderr
    assert open_store(str(db)).runs() == []


def test_threads_and_cpus_reach_the_worker_and_telemetry_comes_back(tmp_path):
    from benchbench.store import open_store

    db = tmp_path / "s.db"
    done = benchbench(
        "time", "x + 1", "--size", "1k", "--budget", "0.05", "--threads", "1", "--cpus", "0",
        "--store", str(db), "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    store = open_store(str(db))
    run = store.resolve_run(doc["run_id"])
    assert (run["config"]["threads"], run["config"]["cpus"]) == (1, [0])
    (row,) = store.measurements(doc["run_id"])
    assert row["threads"] == 1
    (telemetry,) = store.telemetry(doc["run_id"]).values()
    assert telemetry["cpus"] == [0] and "0" in telemetry["cpu_idle_share"]
