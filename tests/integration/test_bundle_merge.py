"""`import` merges a bundle into a run the store holds already, point by point: the points
a run spooled while its store's server was away complete it, and nothing is written twice."""

from __future__ import annotations

import datetime as dt

import pytest

from benchbench.core.errors import StoreError
from benchbench.interchange.bundle import bundle_of, import_bundles, parse_bundle
from benchbench.store import open_store
from tests.storedata import T0, add_run, environment, point, result

SIZES = (64, 128, 256, 512, 1024)


def _results(sizes):
    return [result(point(size=size), 1e-6 * size, seed=size) for size in sizes]


def _spool_of(store, run_id, sizes, status="finished", env=None):
    """The bundle a run spooled: its row (with its end) and the points ``sizes``."""
    env = env or environment()
    end = {"status": status, "finished_at": T0 + dt.timedelta(1), "environment_id": env.id}
    run = {**store.resolve_run(run_id), **end}
    results = _results(sizes)
    stamps = [T0 + dt.timedelta(minutes=i) for i in range(len(results))]
    document = bundle_of(run, env, results, stamps)
    return parse_bundle(document, f"run-{run_id}.json.gz")


def test_a_spooled_bundle_completes_its_run_and_a_second_import_changes_nothing(tmp_path):
    store = open_store(str(tmp_path / "store.db"))
    run_id = add_run(store, _results(SIZES[:3]))
    store.update_run(run_id, status="running", finished_at=None)  # its end never arrived
    before = {row["size"]: row["median_s"] for row in store.measurements(run_id)}
    # The spool repeats a point the store holds (a commit whose acknowledgement was lost).
    spool = _spool_of(store, run_id, SIZES[2:])
    report = import_bundles(store, [spool])
    assert report == {"imported": [], "merged": [run_id], "skipped": []}
    rows = store.measurements(run_id)
    assert sorted(row["size"] for row in rows) == list(SIZES)  # each point once
    assert {row["size"]: row["median_s"] for row in rows if row["size"] in before} == before
    assert store.resolve_run(run_id)["status"] == "finished"
    counts = store.counts()
    assert import_bundles(store, [spool]) == {"imported": [], "merged": [], "skipped": [run_id]}
    assert store.counts() == counts


def test_a_bundle_never_takes_a_finished_run_back_to_interrupted(tmp_path):
    store = open_store(str(tmp_path / "store.db"))
    run_id = add_run(store, _results(SIZES[:2]))
    report = import_bundles(store, [_spool_of(store, run_id, SIZES[1:3], status="interrupted")])
    assert report["merged"] == [run_id]
    assert store.resolve_run(run_id)["status"] == "finished"
    assert len(store.measurements(run_id)) == 3


def test_a_bundle_of_the_same_run_from_another_machine_is_refused_whole(tmp_path):
    store = open_store(str(tmp_path / "store.db"))
    run_id = add_run(store, _results(SIZES[:2]))
    counts = store.counts()
    other = environment("box-b")
    spool = _spool_of(store, run_id, SIZES[2:], env=other)
    with pytest.raises(StoreError, match=f"run {run_id}: .* never merged across machines"):
        import_bundles(store, [spool])
    assert store.counts() == counts
