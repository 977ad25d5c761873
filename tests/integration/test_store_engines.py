"""The store on both engines: the same writes, reads, queries and guarantees on SQLite and
a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import shutil

import pytest
import sqlalchemy as sa

from benchbench import open_store as top_level_open_store
from benchbench.core.errors import NotFoundError, SchemaVersionError, StoreError, UsageError
from benchbench.store import open_store
from benchbench.store import schema as t
from tests.storedata import STORE_V1, STORE_V2, T0, add_run, environment, point, result


def test_open_store_is_exported_from_the_package():
    assert top_level_open_store is open_store


def test_bulk_and_per_point_writes_store_the_same_rows(store_url):
    store = open_store(store_url)
    points = [point(size=2**k) for k in range(4)]
    telemetry = {"cpu_mhz": [2000, 2100]}
    results = [result(p, 1e-3 * (i + 1), seed=i, telemetry=telemetry) for i, p in enumerate(points)]
    results.append(result(point("add"), status="error", reason="boom"))
    bulk = add_run(store, results, bulk=True)
    single = add_run(store, results, bulk=False)
    strip = ("id", "run_id", "created_at")
    rows_bulk = [{k: v for k, v in r.items() if k not in strip} for r in store.measurements(bulk)]
    rows_one = [{k: v for k, v in r.items() if k not in strip} for r in store.measurements(single)]
    assert rows_bulk == rows_one
    by_size = {(r["workload"], r["size"]): r for r in rows_bulk}  # rows come in suite order
    assert by_size[("sqrt", 2)]["median_s"] == pytest.approx(2e-3, rel=0.03)
    failed = by_size[("add", 1024)]
    assert failed["status"] == "error" and failed["median_s"] is None
    assert list(store.telemetry(bulk).values()) == [telemetry] * 4
    counts = store.counts()
    assert counts["measurement"] == 10 and counts["benchmark"] == 5 and counts["telemetry"] == 8
    # Writing a run's points again replaces them: no duplicates.
    store.write_results(bulk, results)
    assert store.counts() == counts


def test_dataframe_filters_and_columns(store_url):
    store = open_store(store_url)
    a, b = environment("box-a"), environment("box-b")
    add_run(store, [result(point(size=8)), result(point("add"))], env=a, started_at=T0, label="r1")
    later = T0 + dt.timedelta(days=2)
    add_run(store, [result(point(size=8), 2e-3)], env=b, started_at=later, label="r2")
    frame = store.dataframe()
    assert len(frame) == 3
    for column in ("run_id", "label", "started_at", "git_sha", "environment_id", "machine",
                   "workload", "median_s", "ci_low_s", "q3_s", "n", "bytes_per_s",
                   "max_rel_error", "warnings", "benchmark_id"):  # fmt: skip
        assert column in frame.columns
    assert list(store.dataframe(workload="add")["workload"]) == ["add"]
    assert list(store.dataframe(environment="box-b")["machine"]) == ["box-b"]
    assert list(store.dataframe(run="r2")["label"]) == ["r2"]
    assert len(store.dataframe(since=T0 + dt.timedelta(days=1))) == 1
    assert len(store.dataframe(until="2026-11-02")) == 2
    assert store.dataframe(device="cuda").empty
    assert str(store.dataframe()["started_at"].dt.tz) == "UTC"
    assert "samples_s" in store.dataframe(samples=True).columns
    with pytest.raises(NotFoundError, match="known machines: box-a, box-b"):
        store.dataframe(environment="box-z")


def test_history_and_latest_per_environment(store_url):
    store = open_store(store_url)
    a, b = environment("box-a"), environment("box-b")
    p = point()
    ids = []
    for day in range(5):
        ids.append(
            add_run(
                store, [result(p, 1e-3 + day * 1e-4)], env=a, started_at=T0 + dt.timedelta(days=day)
            )
        )
    other = add_run(store, [result(p)], env=b, started_at=T0 + dt.timedelta(days=9))
    history = store.history(p.benchmark_id(), a.id)
    assert [h["run_id"] for h in history] == ids
    assert history[-1]["median_s"] == pytest.approx(1.4e-3, rel=0.03)
    assert store.resolve_run("latest")["id"] == other
    assert store.resolve_run("latest", environment="box-a")["id"] == ids[-1]
    assert store.resolve_run("latest~1", environment=a.id)["id"] == ids[-2]
    with pytest.raises(NotFoundError, match="in environment 'box-b'"):
        store.resolve_run(ids[0], environment="box-b")


def test_newer_schema_version_is_refused_clearly(store_url):
    open_store(store_url)
    engine = sa.create_engine(open_store(store_url).engine.url)
    with engine.begin() as conn:
        conn.execute(t.schema_version.delete())
        conn.execute(t.schema_version.insert(), [{"version": t.SCHEMA_VERSION + 1}])
    engine.dispose()
    newer = rf"schema version {t.SCHEMA_VERSION + 1}, newer .* upgrade benchbench"
    with pytest.raises(SchemaVersionError, match=newer):
        open_store(store_url)


def test_checked_in_v1_store_opens_and_reads(tmp_path):
    path = tmp_path / "v1.db"
    shutil.copy(STORE_V1, path)
    store = open_store(str(path))
    runs = {r["label"]: r for r in store.runs()}
    assert set(runs) == {"base", "contender"}
    rows = store.measurements(runs["base"]["id"])
    assert len(rows) == 5 and all(r["status"] == "ok" and r["samples_s"] for r in rows)
    # Migrated to the current schema: the columns of version 2 are there, empty.
    assert all(r["process_samples"] is None and r["max_abs_error"] is None for r in rows)
    assert runs["base"]["git_sha"] and runs["base"]["machine"] == "fixture-box"
    frame = store.dataframe(run="contender")
    assert len(frame) == 5 and frame["median_s"].gt(0).all()


def test_checked_in_v2_store_migrates_to_instruction_counts(tmp_path):
    path = tmp_path / "v2.db"
    shutil.copy(STORE_V2, path)
    store = open_store(str(path))
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(t.schema_version.c.version)).scalars().all() == [
            t.SCHEMA_VERSION
        ]
    runs = {r["label"]: r for r in store.runs()}
    rows = store.measurements(runs["base"]["id"])
    assert rows and all(r["status"] == "ok" and r["process_samples"] for r in rows)
    # The columns of version 3 are there, empty: these runs counted no instructions.
    assert all(r["instructions_per_call"] is None and not r["instruction_counts"] for r in rows)


def _open_and_write(url: str, index: int, runs: int, points: int) -> None:
    store = open_store(url)
    env = environment(f"proc-{index}")
    for run in range(runs):
        results = [result(point(size=s + 1), seed=run) for s in range(points)]
        if run % 2:
            add_run(store, results, env=env, bulk=True)
        else:
            add_run(store, results, env=env, bulk=False)


@pytest.mark.slow
def test_four_processes_create_and_write_one_store_at_once(store_url):
    # All four open a store that does not exist yet and write at the same time: the
    # schema is created once, every row arrives, and no lock error escapes.
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_open_and_write, args=(store_url, i, 4, 10)) for i in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    counts = open_store(store_url).counts()
    assert counts["run"] == 16 and counts["measurement"] == 160 and counts["schema_version"] == 1


def test_unreachable_and_unusable_urls_are_store_errors_without_password(tmp_path):
    with pytest.raises(StoreError) as info:
        open_store("postgresql://user:hunter2secret@127.0.0.1:1/db")
    assert "hunter2secret" not in str(info.value) and "***" in str(info.value)
    with pytest.raises(UsageError, match="engine 'nosuchdialect' is not supported") as usage:
        open_store("nosuchdialect://x:hunter2secret@h/db")
    assert "hunter2secret" not in str(usage.value)


def test_an_older_store_is_migrated_forward_when_opened(tmp_path, monkeypatch):
    # Pretend this benchbench is at version 2 with a 1 -> 2 step: the checked-in v1
    # store must come out at version 2 with the step applied, its data intact.
    from benchbench.store import migrations

    path = tmp_path / "v1.db"
    shutil.copy(STORE_V1, path)

    def add_note(conn):
        conn.execute(sa.text("ALTER TABLE run ADD COLUMN note TEXT"))

    monkeypatch.setattr(t, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(migrations.MIGRATIONS, 1, add_note)
    store = open_store(str(path))
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(t.schema_version.c.version)).scalars().all() == [2]
        assert "note" in {c["name"] for c in sa.inspect(conn).get_columns("run")}
    assert len(store.runs()) == 2
