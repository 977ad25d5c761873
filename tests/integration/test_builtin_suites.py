"""The built-in suites through the real CLI: reference checks, claims, collectives, --profile."""

from __future__ import annotations

import json

from benchbench.analysis.claims import NOT_MEASURED, VERDICTS
from tests.integration.cli import SUITES, benchbench, json_of

# A few points of every workload family: small sizes, CPU, float32 where it matters.
SUBSET = (
    r"^(elementwise/rsqrt:(torch.rsqrt|x.rsqrt_\(\))\[float32, (cpu|cuda)\]\(n=4096\)"
    r"|overhead/row sum:(torch.sum|loop over)"
    r"|precision/(softmax|bmm difference|matmul):.*(peak=8[89]|n=8x64x64|\[float32, )"
    r"|precision/sqrt magnitude:.*float(16|32).*magnitude=1e-08"
    r"|special/(logit|zeta):)"
)


def test_subset_of_every_suite_passes_its_reference_checks_and_answers_claims(tmp_path):
    db = str(tmp_path / "store.db")
    done = benchbench(
        "run", "elementwise", "overhead", "precision", "special", "--tag", "quick",
        "--filter", SUBSET, "--budget", "0.05", "--store", db, "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    results = doc["results"]
    errors = [(r["workload"], r["variant"], r["reason"]) for r in results if r["status"] == "error"]
    assert errors == []
    workloads = {r["workload"] for r in results if r["status"] == "ok"}
    assert {"rsqrt", "row sum", "softmax", "sqrt magnitude", "logit", "zeta"} <= workloads
    skipped = {r["reason"] for r in results if r["status"] == "skipped"}
    assert "CUDA is not available" in skipped  # absent devices are skips with the reason

    claims = json_of(benchbench("claims", doc["run_id"], "--store", db, "--json", cwd=tmp_path))
    by_id = {c["id"]: c for c in claims["claims"]}
    assert {c["section"] for c in by_id.values()} == {"A", "B", "C", "D"}
    for claim in by_id.values():
        assert claim["verdict"] in VERDICTS
        assert claim["figure"] or claim["reason"], claim
    assert by_id["A-float16-sqrt"]["verdict"] == "holds"
    assert by_id["C-softmax"]["verdict"] == "holds"
    assert by_id["D-tf32"]["verdict"] == "not measurable here"
    assert "CUDA is not available" in by_id["D-tf32"]["reason"]
    collectives = by_id["D-collectives"]
    assert collectives["verdict"] == NOT_MEASURED
    assert "benchbench run collectives --tag quick" in collectives["reason"]
    table = benchbench("claims", doc["run_id"], "--store", db, cwd=tmp_path)
    assert table.returncode == 0 and "A-float16-sqrt" in table.stdout
    summary = benchbench(
        "claims", doc["run_id"], "--store", db, "--format", "markdown", cwd=tmp_path
    )
    rows = [line for line in summary.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| claim | measured here | verdict |" and len(rows) == 1 + len(by_id)
    # A verdict's reason is on a second line of its cell.
    tf32 = next(row for row in rows if row.startswith("| D-tf32 "))
    assert "| not measurable here<br>" in tf32 and "CUDA is not available" in tf32


def test_collectives_with_two_ranks_report_bus_bandwidth(tmp_path):
    done = benchbench(
        "run", "collectives", "--tag", "quick", "--device", "cpu", "--budget", "0.05",
        "--filter", r"(all-reduce|all-gather):.*\(n=256,",
        "--store", str(tmp_path / "s.db"), "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json_of(done)["results"]
    assert len(results) == 2
    for r in results:
        assert r["status"] == "ok", r["reason"]
        assert r["params"] == {"ranks": 2}
        # items/s is the algorithm bandwidth (S / t), bytes/s the bus bandwidth.
        assert r["items_per_s"] == r["size"] * 4 / r["median_s"]
        factor = 1.0 if r["workload"] == "all-reduce" else 0.5  # 2(n-1)/n and (n-1)/n, n = 2
        assert abs(r["bytes_per_s"] / r["items_per_s"] - factor) < 1e-12


def test_a_rank_that_dies_takes_down_its_point_only(tmp_path):
    done = benchbench(
        "run", str(SUITES / "dying_rank.py"), "--budget", "0.05", "--device", "cpu",
        "--timeout", "90", "--store", str(tmp_path / "s.db"), "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # a failed point makes the run exit 1
    by_workload = {r["workload"]: r for r in json_of(done)["results"]}
    dies, lives = by_workload["dies"], by_workload["lives"]
    assert dies["status"] == "error"
    assert "rank 1 died (exit code 3)" in dies["reason"], dies["reason"]
    assert "during all-reduce" in dies["reason"]
    assert lives["status"] == "ok", lives["reason"]


def test_run_profile_saves_a_trace_beside_the_store_and_lists_top_operators(tmp_path):
    db = tmp_path / "store.db"
    done = benchbench(
        "run", str(SUITES / "tiny.py"), "--filter", r"sqrt:torch\.sqrt.*n=256\)", "--profile",
        "--store", str(db), "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_id = json_of(done)["run_id"]
    traces = list((tmp_path / "profiles" / run_id).glob("*.json"))
    assert len(traces) == 1
    events = json.loads(traces[0].read_text())["traceEvents"]
    assert any(e.get("name") == "aten::sqrt" for e in events)
    assert "aten::sqrt" in done.stderr and str(traces[0]) in done.stderr.replace("\n", "")
