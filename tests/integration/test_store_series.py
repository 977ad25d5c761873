"""Series reads on a fleet-sized store: schema 4's covering index, its migration from
schema 3 on both engines, and the regression detector's series in run order."""

from __future__ import annotations

import datetime as dt
import shutil

import sqlalchemy as sa

from benchbench.store import open_store
from benchbench.store import schema as t
from benchbench.store.history import load_series
from benchbench.store.queries import HISTORY_COLUMNS
from tests.storedata import STORE_V3, T0, add_run, environment, point, result


def _indexes(store) -> set[str]:
    with store.engine.connect() as conn:
        return {i["name"] for i in sa.inspect(conn).get_indexes("measurement")}


def _version(store) -> list[int]:
    with store.engine.connect() as conn:
        return list(conn.execute(sa.select(t.schema_version.c.version)).scalars())


def test_checked_in_v3_store_migrates_to_the_series_index(tmp_path):
    path = tmp_path / "v3.db"
    shutil.copy(STORE_V3, path)
    store = open_store(str(path))
    assert _version(store) == [t.SCHEMA_VERSION]
    assert "ix_measurement_series" in _indexes(store)
    assert "ix_measurement_benchmark_run" not in _indexes(store)
    runs = {r["label"]: r for r in store.runs()}
    base = store.measurements(runs["base"]["id"])
    assert len(base) == 4 and all(r["process_samples"] for r in base)
    # Both runs are one series per point: base's times, contender's counts.
    env = runs["base"]["environment_id"]
    history = store.history(base[0]["benchmark_id"], env)
    assert [h["run_id"] for h in history] == [runs["base"]["id"], runs["contender"]["id"]]
    counts = load_series(store, "instructions")
    assert len(counts) == 4
    assert all(s[0].median_s is None and s[1].median_s for s in counts.values())


def test_the_series_index_migration_runs_on_both_engines(store_url):
    store = open_store(store_url)
    env = environment()
    ids = [add_run(store, [result(point(size=s), seed=i) for s in (8, 16)], env=env,
                   started_at=T0 + dt.timedelta(days=i)) for i in range(3)]  # fmt: skip
    bench = point(size=8).benchmark_id()
    before = store.history(bench, env.id)
    # Put the store back at version 3: its index, not ours.
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX ix_measurement_series")
        conn.exec_driver_sql(
            "CREATE INDEX ix_measurement_benchmark_run ON measurement (benchmark_id, run_id)"
        )
        conn.execute(t.schema_version.delete())
        conn.execute(t.schema_version.insert(), [{"version": 3}])
    store.engine.dispose()
    migrated = open_store(store_url)
    assert _version(migrated) == [t.SCHEMA_VERSION]
    assert "ix_measurement_series" in _indexes(migrated)
    assert "ix_measurement_benchmark_run" not in _indexes(migrated)
    after = migrated.history(bench, env.id)
    assert after == before and [h["run_id"] for h in after] == ids


def test_a_history_reads_the_index_alone_on_sqlite(tmp_path):
    store = open_store(str(tmp_path / "s.db"))
    add_run(store, [result(point())])
    m, r = t.measurement.c, t.run.c
    columns = [r[c] if c in ("started_at", "label", "git_sha") else m[c] for c in HISTORY_COLUMNS]
    query = (
        sa.select(*columns)
        .select_from(t.measurement.join(t.run, r.id == m.run_id))
        .where((m.benchmark_id == "x") & (r.environment_id == "y"))
    )
    sql = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    with store.engine.connect() as conn:
        plan = " | ".join(row[-1] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
    assert "COVERING INDEX ix_measurement_series" in plan, plan


def test_series_come_out_in_run_order_with_gaps_and_without_orphan_runs(store_url):
    store = open_store(store_url)
    env_a, env_b = environment("box-a"), environment("box-b")
    p = point()
    # Written out of time order, two at the same moment, one failed, one on box-b.
    days = [3, 1, 2, 2, 0]
    ids = {}
    for i, day in enumerate(days):
        status = "error" if day == 1 else "ok"
        ids[i] = add_run(store, [result(p, 1e-3 * (i + 1), status=status, seed=i)], env=env_a,
                         started_at=T0 + dt.timedelta(days=day))  # fmt: skip
    other = add_run(store, [result(p)], env=env_b)
    orphan = add_run(store, [result(p)], env=env_a)
    store.update_run(orphan, environment_id=None)
    series = load_series(store)
    assert set(series) == {(p.benchmark_id(), env_a.id), (p.benchmark_id(), env_b.id)}
    got = series[(p.benchmark_id(), env_a.id)]
    same_day = sorted([ids[2], ids[3]])
    assert [h.run_id for h in got] == [ids[4], ids[1], *same_day, ids[0]]
    assert [h.started_at for h in got] == sorted(h.started_at for h in got)
    assert got[1].median_s is None and all(h.median_s for h in got if h is not got[1])
    assert [h.run_id for h in series[(p.benchmark_id(), env_b.id)]] == [other]


def test_the_runs_a_counter_counted_are_found_on_both_engines(store_url):
    """``regressions --metric instructions`` leaves the CPU counter's runs out of
    callgrind's series by their config (a JSON path, written differently per engine)."""
    from benchbench.store.history import runs_counted_by
    from tests import synthetic

    store = open_store(store_url)
    p = synthetic.point()
    callgrind = synthetic.write_history(store, {p: [1e-3] * 2}, counts={p: [10.0, 10.0]})
    hardware = synthetic.write_history(
        store, {p: [1e-3] * 2}, counts={p: [12.0, 12.0]}, counter="pmu", seed=1, start=T0
    )
    synthetic.write_history(store, {p: [1e-3]}, seed=2, start=T0)  # timed only
    assert runs_counted_by(store, "pmu") == set(hardware)
    assert runs_counted_by(store, "callgrind") == set(callgrind)
