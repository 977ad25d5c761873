"""`benchbench compare / export / import / runs` end to end, and the other tools reading
our exports: pyperf (stats, hist, compare_to) and pytest-benchmark (compare)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys

import pytest
import sqlalchemy as sa

from benchbench.store import open_store
from benchbench.store import schema as t
from tests import synthetic
from tests.integration.cli import benchbench, env
from tests.storedata import STORE_V1, T0, add_run, environment, point, result


@pytest.fixture
def v1(tmp_path):
    path = tmp_path / "v1.db"
    shutil.copy(STORE_V1, path)
    return path


def _tool(*argv: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=cwd, env=env(), capture_output=True, text=True
    )


def test_pyperf_reads_our_export_with_stats_hist_and_compare_to(tmp_path, v1):
    for label in ("base", "contender"):
        done = benchbench("export", label, "--format", "pyperf", "-o", f"{label}.json",
                          "--store", str(v1), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
    name = "sqrt:torch.sqrt[float32, cpu](n=4096)"
    stats = _tool("pyperf", "stats", "base.json", cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    assert "Number of benchmarks: 5" in stats.stdout and name in stats.stdout
    hist = _tool("pyperf", "hist", "base.json", cwd=tmp_path)
    assert hist.returncode == 0 and "#" in hist.stdout
    compared = _tool("pyperf", "compare_to", "base.json", "contender.json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert name in compared.stdout and "Geometric mean" in compared.stdout
    # The values are per-call seconds, nine quantiles of them: pyperf's median, min
    # and max equal the stored ones.
    import pyperf

    bench = pyperf.BenchmarkSuite.load(str(tmp_path / "base.json")).get_benchmark(name)
    stored = next(
        r
        for r in open_store(str(v1)).measurements(open_store(str(v1)).resolve_run("base")["id"])
        if r["variant"] == "torch.sqrt" and r["size"] == 4096
    )
    values = bench.get_values()
    assert len(values) == 9 and stored["n"] != 9
    assert bench.median() == pytest.approx(stored["median_s"], rel=1e-9)
    assert (min(values), max(values)) == pytest.approx((stored["min_s"], stored["max_s"]))
    assert bench.get_metadata()["benchbench_samples"] == stored["n"]
    assert bench.get_unit() == "second"


def test_pyperf_compare_to_tests_significance_when_sample_counts_differ(tmp_path):
    # Points stop after different sample counts; pyperf's t-test needs equal counts and
    # printed "ERROR when testing if values are significant" for every benchmark.
    db = tmp_path / "s.db"
    store = open_store(str(db))
    slower, same = point(size=1024), point(size=2048)
    add_run(store, [result(slower, 1e-3, n=12, seed=1), result(same, 2e-3, n=40, seed=2)],
            label="a")  # fmt: skip
    add_run(store, [result(slower, 1.5e-3, n=31, seed=3), result(same, 2e-3, n=17, seed=4)],
            label="b", started_at=T0.replace(day=2))  # fmt: skip
    for label in ("a", "b"):
        done = benchbench("export", label, "--format", "pyperf", "-o", f"{label}.json",
                          "--store", str(db), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
    compared = _tool("pyperf", "compare_to", "-v", "a.json", "b.json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    out = compared.stdout
    assert "ERROR" not in out, out
    assert out.count("Significant (t=") == 1 and out.count("Not significant") == 1, out
    assert "1.50x slower" in out


def test_pytest_benchmark_compare_reads_our_export(tmp_path, v1):
    for label in ("base", "contender"):
        done = benchbench("export", label, "--format", "pytest-benchmark", "-o", f"{label}.json",
                          "--store", str(v1), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "base.json").read_text())
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= set(doc)
    assert doc["commit_info"]["id"] and len(doc["benchmarks"]) == 5
    compared = subprocess.run(
        [shutil.which("pytest-benchmark") or "pytest-benchmark", "compare", "base.json",
         "contender.json", "--columns", "min,median,iqr,rounds"],
        cwd=tmp_path, env=env(), capture_output=True, text=True,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    assert "sum:torch.sum[float32, cpu](n=1024) (base)" in compared.stdout
    assert "(contender)" in compared.stdout and "Failed to load" not in compared.stderr


def test_csv_has_one_row_per_point(tmp_path, v1):
    done = benchbench("export", "base", "--format", "csv", "-o", "-", "--store", str(v1),
                      cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert len(rows) == 5
    assert {r["label"] for r in rows} >= {"sum:torch.sum[float32, cpu](n=1024)"}
    assert all(float(r["median_s"]) > 0 and r["run_label"] == "base" for r in rows)
    assert rows[0]["started_at"].endswith("+00:00")


def test_counts_are_exported_where_a_format_holds_them(tmp_path):
    """CSV and bundles carry instruction counts; pyperf and pytest-benchmark hold times,
    so a run that only counted is refused with the formats that carry counts."""
    store = open_store(str(tmp_path / "s.db"))
    p = synthetic.point()
    counts = {p: [1000.0]}
    synthetic.write_history(store, {p: [1e-6]}, counts=counts, label="both")
    synthetic.write_history(store, {p: [1e-6]}, counts=counts, label="counted", timed=False,
                            seed=1, start=T0)  # fmt: skip
    db = str(tmp_path / "s.db")
    for label in ("both", "counted"):
        done = benchbench("export", label, "--format", "csv", "-o", "-", "--store", db,
                          cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        (row,) = csv.DictReader(io.StringIO(done.stdout))
        assert float(row["instructions_per_call"]) == 1000.0
        assert json.loads(row["instruction_counts"]) == [1000.0]
        assert (row["median_s"] == "") == (label == "counted")
        done = benchbench("export", label, "-o", "-", "--store", db, cwd=tmp_path)
        (measurement,) = json.loads(done.stdout)["measurements"]
        assert measurement["instructions_per_call"] == 1000.0
    done = benchbench("export", "both", "--format", "pyperf", "-o", "both.json",
                      "--store", db, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0 and "1 points written" in done.stderr, done.stderr
    for fmt in ("pyperf", "pytest-benchmark"):
        done = benchbench("export", "counted", "--format", fmt, "-o", "x.json", "--store", db,
                          cwd=tmp_path)  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "counted instructions only" in done.stderr and "--format csv" in done.stderr
        assert f"a {fmt} file holds times" in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / "x.json").exists()


def _synthetic_store(path):
    store = open_store(str(path))
    p, q = point(size=64), point("add", size=64)
    add_run(store, [result(p, 1e-3), result(q, 1e-3)], started_at=T0, label="before")
    add_run(
        store,
        [result(p, 1.2e-3, seed=1), result(q, 1e-3, seed=2)],
        env=environment("box-a", torch="2.14.0"),
        started_at=T0.replace(day=2),
        label="after",
    )


def test_compare_exits_3_on_a_regression_and_labels_other_environments(tmp_path):
    db = tmp_path / "s.db"
    _synthetic_store(db)
    done = benchbench("compare", "before", "after", "--store", str(db), "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    marks = {p["label"]: p["mark"] for p in doc["points"]}
    assert marks["sqrt:torch.sqrt[float32, cpu](n=64)"] == "slower"
    assert doc["regressed"] == 1 and doc["base"]["label"] == "before"
    assert doc["same_environment"] is False
    assert doc["environment_diff"] == {"torch": {"base": "2.13.0", "contender": "2.14.0"}}
    table = benchbench("compare", "before", "after", "--store", str(db),
                       "--no-fail-on-regression", cwd=tmp_path)  # fmt: skip
    assert table.returncode == 0
    assert "slower" in table.stdout and "geometric mean overall" in table.stdout
    assert (
        "different environments" in table.stderr and "torch: '2.13.0' -> '2.14.0'" in table.stderr
    )
    lenient = benchbench("compare", "latest~1", "latest", "--min-effect", "0.5", "--store",
                         str(db), "--json", cwd=tmp_path)  # fmt: skip
    assert lenient.returncode == 0, lenient.stderr
    assert json.loads(lenient.stdout)["counts"]["same"] >= 1


def test_a_store_from_a_newer_benchbench_exits_1_with_the_fix(tmp_path):
    db = tmp_path / "new.db"
    open_store(str(db))
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(t.schema_version.update().values(version=t.SCHEMA_VERSION + 1))
    engine.dispose()
    done = benchbench("runs", "--store", str(db), cwd=tmp_path)
    assert done.returncode == 1
    assert "newer than this benchbench understands" in done.stderr
    assert "upgrade benchbench" in done.stderr


@pytest.mark.postgres
def test_passwords_never_printed_wrong_password_unreachable_and_runs(
    tmp_path, pg_server, pg_database
):
    user, right, wrong = "bb_pw_user", "RightPass4567", "WrongPass1234"
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    database = pg_database.rsplit("/", 1)[1]
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {user} LOGIN PASSWORD '{right}'"))
        conn.execute(sa.text(f'ALTER DATABASE "{database}" OWNER TO {user}'))
        hba = pg_server.data_dir / "pg_hba.conf"
        rule = f"host all {user} 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(rule + hba.read_text())  # checked first: this role needs its password
        conn.execute(sa.text("SELECT pg_reload_conf()"))
    try:
        base = f"postgresql://{user}:{{}}@127.0.0.1:{pg_server.port}/{database}"
        denied = benchbench("runs", "--store", base.format(wrong), cwd=tmp_path)
        assert denied.returncode == 1
        assert "password authentication failed" in denied.stderr
        assert wrong not in denied.stderr + denied.stdout and "***" in denied.stderr
        gone = benchbench("runs", "--store", f"postgresql://u:{wrong}@127.0.0.1:1/x", cwd=tmp_path)
        assert gone.returncode == 1 and "cannot open store" in gone.stderr
        assert wrong not in gone.stderr + gone.stdout
        # `runs` reads only, so the store is created first (as its user, as `run` would).
        empty = benchbench("runs", "--store", base.format(right), cwd=tmp_path)
        assert empty.returncode == 1 and "no store at postgresql+psycopg://" in empty.stderr
        assert "the database has no benchbench tables; give --store URL" in empty.stderr
        assert right not in empty.stderr + empty.stdout
        open_store(base.format(right)).engine.dispose()
        listed = benchbench("runs", "--store", base.format(right), "--json", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert right not in listed.stdout + listed.stderr
        assert json.loads(listed.stdout)["store"].startswith(f"postgresql+psycopg://{user}:***@")
    finally:
        hba.write_text(hba.read_text().replace(rule, ""))
        owned = sa.create_engine(pg_database, isolation_level="AUTOCOMMIT")
        with owned.connect() as conn:  # the tables it created live in the test database
            conn.execute(sa.text(f"DROP OWNED BY {user}"))
        owned.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_reload_conf()"))
            conn.execute(sa.text(f'ALTER DATABASE "{database}" OWNER TO postgres'))
            conn.execute(sa.text(f"DROP ROLE {user}"))
        admin.dispose()


def test_an_unsupported_store_url_exits_2_naming_the_engines(tmp_path):
    done = benchbench("runs", "--store", "mysql://bench:hunter2@db/bench", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr
    assert "engine 'mysql' is not supported" in done.stderr
    assert "sqlite:///PATH" in done.stderr and "postgresql://" in done.stderr


def test_reading_a_mistyped_store_is_an_error_and_writing_creates_it(tmp_path):
    typo = tmp_path / "reslts" / "benchbench.db"
    for argv in (["runs"], ["export", "latest", "-o", "x.json"]):
        done = benchbench(*argv, "--store", str(typo), cwd=tmp_path)
        assert done.returncode == 1
        assert f"no store at {typo}: no such file" in done.stderr
        assert "give --store PATH of an existing store, or run `benchbench run` first" in (
            done.stderr
        )
    assert not typo.parent.exists()
    bundle = tmp_path / "run.json"
    source = open_store(str(tmp_path / "source.db"))
    add_run(source, [result(point())], label="one")
    exported = benchbench("export", "one", "-o", str(bundle), "--store",
                          str(tmp_path / "source.db"), cwd=tmp_path)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    imported = benchbench("import", str(bundle), "--store", str(typo), cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    listed = benchbench("runs", "--store", str(typo), "--json", cwd=tmp_path)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["runs"]) == 1


def test_compare_takes_two_sharded_runs_as_groups_of_all_their_points(tmp_path, capsys):
    from benchbench.cli import main
    from benchbench.run.sharding import group_id_for

    db = tmp_path / "s.db"
    store = open_store(str(db))
    a, b = point(size=64), point("add", size=64)
    for night, day, slow in (("nightly-1", 1, 1.0), ("nightly-2", 2, 1.3)):
        # Two shards a night, one point each: only the group holds both points.
        for shard, (p, seed) in enumerate(((a, 1), (b, 2))):
            add_run(store, [result(p, 1e-3 * (slow if p is a else 1.0), seed=seed + day)],
                    started_at=T0.replace(day=day, hour=shard),
                    group_id=group_id_for(night))  # fmt: skip
    code = main(["compare", "nightly-1", "nightly-2", "--store", str(db), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 3
    assert {p["label"]: p["mark"] for p in doc["points"]} == {
        "sqrt:torch.sqrt[float32, cpu](n=64)": "slower",
        "add:torch.sqrt[float32, cpu](n=64)": "not significant",
    }
    assert doc["base"]["run_id"] == group_id_for("nightly-1")
    assert (doc["base"]["label"], doc["contender"]["label"]) == ("nightly-1", "nightly-2")
    missing = main(["compare", "nightly-0", "nightly-2", "--store", str(db)])
    assert missing == 1 and "no run 'nightly-0'" in capsys.readouterr().err
