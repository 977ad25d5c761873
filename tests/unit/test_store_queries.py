"""The store's read queries on a real SQLite store, filled through its own write API."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from benchbench.core.errors import NotFoundError, UsageError
from benchbench.core.values import Point, Result
from benchbench.machine.environment import Environment
from benchbench.store import Store, open_store
from benchbench.store import schema as t
from benchbench.store.profiles import profile_documents, save_profile
from benchbench.store.queries import DATAFRAME_COLUMNS, HISTORY_COLUMNS, measurement_query

UTC = dt.timezone.utc
DAY1 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
# Run ids: A1 and A2 share the prefix "aaaa" (ambiguous), B1 and C1 have unique ones.
A1 = "aaaa0000-0000-4000-8000-000000000001"
A2 = "aaaa0000-0000-4000-8000-000000000002"
B1 = "bbbb0000-0000-4000-8000-000000000001"
C1 = "cccc0000-0000-4000-8000-000000000001"
GROUP = "99990000-0000-4000-8000-000000000000"

LAPTOP = Environment(fields={"machine": "laptop", "threads": 2})
SERVER = Environment(fields={"machine": "server", "threads": 32})


def _point(variant: str = "torch.sqrt", device: str = "cpu", dtype: str = "float32") -> Point:
    return Point("s", "sqrt", variant, 1024, (1024,), dtype, device)


def _ok(point: Point, samples: Sequence[float], **extra: Any) -> Result:
    return Result(
        point=point,
        status="ok",
        samples_s=tuple(samples),
        calls_per_sample=2,
        bytes_per_call=8192.0,
        duration_s=extra.pop("duration_s", 1.5),
        **extra,
    )


def _create_run(
    store: Store,
    run_id: str,
    env: Environment,
    started: dt.datetime,
    *,
    label: str | None = None,
    status: str = "finished",
    group: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> None:
    store.create_run(
        {
            "id": run_id,
            "group_id": group or run_id,
            "kind": "adhoc",
            "label": label,
            "status": status,
            "started_at": started,
            "finished_at": None,
            "suites": [{"name": "s"}],
            "harness_version": "0.1.0",
            "git_sha": f"sha-{run_id[:4]}",
            "git_branch": "main",
            "git_dirty": False,
            "tags": [],
            "config": dict(config or {}),
            "environment_id": env.id,
        }
    )


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Four runs on two machines: A1 (laptop, day 1), A2 (laptop, day 2, label
    "nightly"), B1 (server, day 3, label "nightly", group GROUP), C1 (laptop, day 4,
    still running, label "nightly")."""
    s = open_store(str(tmp_path / "q.db"))
    s.save_environment(LAPTOP)
    s.save_environment(SERVER)
    _create_run(s, A1, LAPTOP, DAY1)
    _create_run(s, A2, LAPTOP, DAY1 + dt.timedelta(days=1), label="nightly")
    _create_run(s, B1, SERVER, DAY1 + dt.timedelta(days=2), label="nightly", group=GROUP,
                config={"shard": {"cost_runs": [A1]}})  # fmt: skip
    _create_run(s, C1, LAPTOP, DAY1 + dt.timedelta(days=3), label="nightly", status="running")
    sqrt, mul = _point(), _point("mul", dtype="float64")
    s.write_result(A1, _ok(sqrt, [2.0, 2.0, 4.0], telemetry={"load": 1.0}))
    s.write_result(A1, Result(point=mul, status="skipped", reason="no float64 here"))
    s.write_result(A2, _ok(sqrt, [3.0, 3.0, 3.0], duration_s=2.5))
    s.write_results(B1, [_ok(sqrt, [1.0, 1.0]), _ok(_point(device="cuda"), [0.5, 0.5])])
    s.write_result(C1, Result(point=sqrt, status="error", reason="boom"))
    return s


# -- runs and references ----------------------------------------------------------------


def test_runs_are_newest_first_with_machine_and_counts(store: Store) -> None:
    runs = store.runs()
    assert [r["id"] for r in runs] == [C1, B1, A2, A1]
    by_id = {r["id"]: r for r in runs}
    assert (by_id[A1]["points"], by_id[A1]["ok"], by_id[A1]["skipped"]) == (2, 1, 1)
    assert (by_id[C1]["errors"], by_id[C1]["ok"]) == (1, 0)
    assert by_id[B1]["machine"] == "server"
    assert [r["id"] for r in store.runs(limit=2)] == [C1, B1]


def test_resolve_run_by_id_prefix_label_and_latest(store: Store) -> None:
    assert store.resolve_run(A2)["id"] == A2
    assert store.resolve_run("bbbb")["id"] == B1
    assert store.resolve_run("nightly")["id"] == C1  # the newest run with the label
    assert store.resolve_run("latest")["id"] == C1
    assert store.resolve_run("latest~2")["id"] == A2
    assert store.resolve_run("latest", environment="server")["id"] == B1
    assert store.resolve_run("nightly", environment="server")["id"] == B1


def test_resolve_run_ambiguous_prefix_and_unknown_ref_raise(store: Store) -> None:
    with pytest.raises(NotFoundError, match="prefix 'aaaa' is ambiguous") as info:
        store.resolve_run("aaaa")
    assert A1 in str(info.value) and A2 in str(info.value)
    with pytest.raises(NotFoundError, match=r"no run 'nope'.*recent runs: cccc0000 \(nightly\)"):
        store.resolve_run("nope")
    with pytest.raises(NotFoundError, match="no run 'latest~9'"):
        store.resolve_run("latest~9")
    with pytest.raises(NotFoundError, match=r"no environment or machine 'mars'.*laptop, server"):
        store.resolve_run("latest", environment="mars")


def test_environment_ids_by_machine_and_prefix(store: Store) -> None:
    assert store.environment_ids("laptop") == [LAPTOP.id]
    assert store.environment_ids(SERVER.id[:6]) == [SERVER.id]
    env = store.environment(SERVER.id)
    assert env is not None and env["fields"] == {"machine": "server", "threads": 32}
    assert store.environment("missing") is None
    assert {e["machine"] for e in store.environments()} == {"laptop", "server"}


# -- one run's points ------------------------------------------------------------------


def test_measurements_join_the_benchmark_and_derive_statistics(store: Store) -> None:
    rows = store.measurements(A1)
    # Suite order, not the order written: variant "mul" sorts before "torch.sqrt".
    assert [(r["variant"], r["status"]) for r in rows] == [("mul", "skipped"), ("torch.sqrt", "ok")]
    skipped, ok = rows
    assert (ok["suite"], ok["workload"], ok["dtype"]) == ("s", "sqrt", "float32")
    assert ok["shape"] == [1024]
    assert ok["median_s"] == 1.0  # median of 2, 2, 4 seconds over 2 calls per sample
    assert ok["n"] == 3 and ok["samples_s"] == [2.0, 2.0, 4.0]
    assert ok["bytes_per_s"] == 8192.0
    assert skipped["reason"] == "no float64 here" and skipped["median_s"] is None
    assert store.measurements("no-such-run") == []


def test_telemetry_and_done_benchmark_ids(store: Store) -> None:
    rows = store.measurements(A1)
    measured = next(r for r in rows if r["status"] == "ok")  # the one with telemetry
    assert store.telemetry(A1) == {measured["id"]: {"load": 1.0}}
    assert store.telemetry(A2) == {}
    assert store.done_benchmark_ids(A1) == {r["benchmark_id"] for r in rows}
    assert store.done_benchmark_ids(C1) == {_point().benchmark_id()}  # errors count as done
    assert store.done_benchmark_ids("no-such-run") == set()


# -- tables for analysis ---------------------------------------------------------------


def test_dataframe_columns_and_order(store: Store) -> None:
    frame = store.dataframe()
    assert tuple(frame.columns) == DATAFRAME_COLUMNS
    assert list(frame["run_id"]) == [A1, A1, A2, B1, B1, C1]  # oldest run first
    assert list(frame["machine"]) == ["laptop"] * 3 + ["server"] * 2 + ["laptop"]
    assert "samples_s" in store.dataframe(samples=True).columns


def test_dataframe_filters(store: Store) -> None:
    assert set(store.dataframe(device="cuda")["run_id"]) == {B1}
    assert len(store.dataframe(dtype=["float32", "float64"])) == 6
    assert list(store.dataframe(variant="mul")["status"]) == ["skipped"]
    assert set(store.dataframe(run="nightly")["run_id"]) == {C1}
    assert set(store.dataframe(run=[A1, "bbbb"])["run_id"]) == {A1, B1}
    assert set(store.dataframe(environment="server")["run_id"]) == {B1}
    window = store.dataframe(since="2026-11-02", until=DAY1 + dt.timedelta(days=3))
    assert set(window["run_id"]) == {A2, B1}
    assert store.dataframe(suite="other").empty
    with pytest.raises(UsageError, match="since= must be a datetime or an ISO date"):
        store.dataframe(since="yesterday")
    with pytest.raises(UsageError, match="filter device= needs non-empty strings"):
        store.dataframe(device=[""])
    with pytest.raises(NotFoundError):
        store.dataframe(run="nope")


def test_dataframe_of_given_runs_is_exactly_their_rows_read_by_run(store: Store) -> None:
    every = store.dataframe(samples=True)
    chosen = every[every["run_id"].isin([A1, C1])].reset_index(drop=True)
    got = store.dataframe(run_ids=[C1, A1, "no-such-run"], samples=True)
    pd.testing.assert_frame_equal(got, chosen)
    assert list(got["run_id"]) == [A1, A1, C1]
    assert store.dataframe(run_ids=[]).empty and tuple(store.dataframe(run_ids=[]).columns) == (
        DATAFRAME_COLUMNS
    )
    # Any number of ids: written into the statement, not one parameter each.
    many = [f"{k:08x}-0000-4000-8000-000000000000" for k in range(40_000)]
    assert set(store.dataframe(run_ids=[*many, B1])["run_id"]) == {B1}
    # Read through the (run_id, benchmark_id) index, not a scan of every measurement.
    query = measurement_query(store.engine, run_ids=[A1, C1])
    sql = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    with store.engine.connect() as conn:
        plan = " | ".join(r[-1] for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
        # SQLite names the index of uq_measurement_run_benchmark itself.
        unique = next(
            name
            for _, name, is_unique, *_ in conn.exec_driver_sql("PRAGMA index_list(measurement)")
            if is_unique
            and [c[2] for c in conn.exec_driver_sql(f"PRAGMA index_info({name})")]
            == ["run_id", "benchmark_id"]
        )
    assert f"SEARCH measurement USING INDEX {unique} (run_id=?)" in plan, plan


def test_dataframe_reads_only_the_columns_asked_for(store: Store) -> None:
    every = store.dataframe(samples=True)
    asked = ["warnings", "machine", "median_s", "run_id", "started_at", "params"]
    got = store.dataframe(columns=asked, samples=True)
    in_order = [c for c in DATAFRAME_COLUMNS if c in asked]
    pd.testing.assert_frame_equal(got, every[[*in_order, "samples_s"]])
    with pytest.raises(UsageError, match=r"columns= names \['colour'\]"):
        store.dataframe(columns=["median_s", "colour"])


def test_history_is_one_benchmark_in_one_environment_oldest_first(store: Store) -> None:
    rows = store.history(_point().benchmark_id(), LAPTOP.id)
    assert tuple(rows[0]) == HISTORY_COLUMNS
    assert [(r["run_id"], r["status"], r["median_s"]) for r in rows] == [
        (A1, "ok", 1.0),
        (A2, "ok", 1.5),
        (C1, "error", None),
    ]
    assert store.history(_point().benchmark_id(), SERVER.id)[0]["median_s"] == 0.5


# -- sharding --------------------------------------------------------------------------


def test_group_runs_by_id_and_prefix(store: Store) -> None:
    assert [r["id"] for r in store.group_runs([GROUP])] == [B1]
    assert [r["id"] for r in store.group_runs(["x"], prefix="9999")] == [B1]
    assert store.group_runs(["x"], prefix="999") == []  # 3 characters: too short a prefix
    assert store.group_runs([GROUP])[0]["config"] == {"shard": {"cost_runs": [A1]}}


def test_recent_finished_runs_and_ok_durations(store: Store) -> None:
    assert store.recent_finished_runs(5) == [B1, A2, A1]  # C1 is still running
    assert store.recent_finished_runs(2, exclude_group=GROUP) == [A2, A1]
    sqrt = _point().benchmark_id()
    durations = store.ok_durations([A1, A2, C1])  # A1's mul was skipped, C1's point failed
    assert {k: sorted(v) for k, v in durations.items()} == {sqrt: [1.5, 2.5]}
    assert store.ok_durations([]) == {}


# -- dashboard -------------------------------------------------------------------------


def test_annotations_and_profile_documents(store: Store) -> None:
    with store.transaction() as conn:
        conn.execute(
            t.annotation.insert(),
            [{"benchmark_id": None, "environment_id": LAPTOP.id, "run_id": None,
              "alert_id": None, "kind": "note", "text": "new BIOS", "created_at": DAY1}],
        )  # fmt: skip
    notes = store.annotations()
    assert [(n["environment_id"], n["kind"], n["text"]) for n in notes] == [
        (LAPTOP.id, "note", "new BIOS")
    ]
    save_profile(store, LAPTOP.id, "cpu", {"v": 1})
    save_profile(store, SERVER.id, "cuda", {"v": 2})
    save_profile(store, LAPTOP.id, "cpu", {"v": 3})
    assert profile_documents(store, "cpu") == [(LAPTOP.id, {"v": 1}), (LAPTOP.id, {"v": 3})]
    assert profile_documents(store, "mps") == []


# -- bulk import -----------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    run: dict[str, Any]
    environment: Environment
    results: tuple[Result, ...]
    created_at: tuple[dt.datetime, ...]


def test_import_runs_writes_new_runs_once_and_skips_present_ones(store: Store) -> None:
    new_env = Environment(fields={"machine": "ci", "threads": 4})
    run_id = "dddd0000-0000-4000-8000-000000000001"
    run = {**store.resolve_run(A1), "id": run_id, "group_id": run_id, "environment_id": new_env.id}
    stamp = DAY1 - dt.timedelta(days=30)
    record = Record(run, new_env, (_ok(_point(), [4.0, 4.0], telemetry={"t": 2}),), (stamp,))
    existing = Record(store.resolve_run(A1), LAPTOP, (), ())
    before = store.counts()
    report = store.import_runs([record, existing, record])
    assert report == {"imported": [run_id], "merged": [], "skipped": [A1, run_id]}
    after = store.counts()
    assert after["run"] == before["run"] + 1 and after["environment"] == before["environment"] + 1
    (row,) = store.measurements(run_id)
    assert (row["median_s"], row["created_at"]) == (2.0, stamp)
    assert store.telemetry(run_id) == {row["id"]: {"t": 2}}
    assert store.import_runs([record]) == {"imported": [], "merged": [], "skipped": [run_id]}
    assert store.counts() == after
