"""`benchbench run/list opbench:PATH` end to end: the real CLI, a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchbench.store import open_store
from tests.integration.cli import benchbench, json_of

PT = Path(__file__).resolve().parents[1] / "data" / "operator_benchmark" / "pt"


def test_run_measures_and_stores_operator_benchmark_tests(tmp_path):
    db = tmp_path / "store.db"
    done = benchbench(
        "run",
        f"opbench:{PT / 'unary_test.py'}",
        "--filter",
        "/(sqrt|neg)_M256_N256_(cpu|cuda):",
        "--budget",
        "0.1",
        "--store",
        str(db),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    results = {r["workload"]: r for r in json_of(done)["results"]}
    assert set(results) == {
        "sqrt_M256_N256_cpu",
        "sqrt_M256_N256_cuda",
        "neg_M256_N256_cpu",
        "neg_M256_N256_cuda",
    }
    for name in ("sqrt_M256_N256_cpu", "neg_M256_N256_cpu"):
        assert results[name]["status"] == "ok", results[name]
        assert results[name]["suite"] == "opbench.unary_test"
        assert results[name]["median_s"] > 0
        # No work model is declared: bytes are derived (input and output, 256x256 float32
        # each), FLOPs are not (FlopCounterMode counts none for elementwise ops).
        assert results[name]["derived"] == ["bytes"]
        assert results[name]["bytes_per_s"] * results[name]["median_s"] == pytest.approx(
            2 * 256 * 256 * 4
        )
        assert results[name]["flop_per_s"] is None
    for name in ("sqrt_M256_N256_cuda", "neg_M256_N256_cuda"):
        # This machine has no GPU: a CUDA test is a skipped point, never a crash.
        assert results[name]["status"] == "skipped"
        assert "CUDA" in results[name]["reason"]
    run = open_store(str(db)).resolve_run(json_of(done)["run_id"])
    assert run["suites"][0]["name"] == "opbench.unary_test"
    assert run["suites"][0]["path"] == str(PT / "unary_test.py")


def test_list_keeps_the_tests_of_a_device(tmp_path):
    done = benchbench(
        "list", f"opbench:{PT / 'add_test.py'}", "--device", "cpu", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    points = json_of(done)["points"]
    assert {p["device"] for p in points} == {"cpu"}
    assert len(points) == 3 + 3 + 2  # forward, gradient (skipped when run), int32
    assert "add_M64_N64_K128_cpu_bwdall" in {p["workload"] for p in points}


def test_a_bad_path_is_a_usage_error(tmp_path):
    (tmp_path / "plain.py").write_text("import torch\n")
    for spec, expected in (
        (f"opbench:{tmp_path / 'nope.py'}", "does not exist"),
        (f"opbench:{tmp_path / 'plain.py'}", "is not an operator_benchmark test"),
    ):
        done = benchbench("list", spec, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr and spec in done.stderr
