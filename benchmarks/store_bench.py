"""The store's own performance: bulk write, history query, concurrent writers.

    PYTHONPATH=. python benchmarks/store_bench.py [--points 100000] [--runs 1000] [--skip-pg]

1. Write 100,000 measurements of 30 raw samples each into a new SQLite file with
   ``Store.write_results`` (one transaction); target <= 10 s.
2. Build a store of 1,000 runs x 100 benchmarks (SQLite, and PostgreSQL from
   tests/pgserver.py) and time ``Store.history`` of one benchmark over the 1,000
   runs (median of 20 queries after one warm-up); target <= 50 ms.
3. 4 processes write 8 runs of 25 points each into one store at once (half point by
   point like ``benchbench run``, half in bulk): every row must arrive and no
   "database is locked" may escape.

Prints one JSON document with the numbers (wall and CPU seconds).

``--fleet-year`` instead fills a store with a year of a fleet's nightlies (20 machines x
2,000 points x 365 nights, about 15 million measurements; ``benchmarks/fleet_data.py``
says how they are made) through ``Store.write_results`` and times what the fleet's users
do with it:

    PYTHONPATH=. python benchmarks/store_bench.py --fleet-year [--scale 1.0]
        [--scale-of points|nights] [--engine postgresql|sqlite|both]
        [--fill-jobs N] [--keep DIR [--fill-only]]

one point's history (``Store.history``, median of 20; target <= 50 ms), ``benchbench
regressions`` after the last night's runs (<= 60 s), ``benchbench compare`` of a
machine's last two nightlies (<= 5 s), ``benchbench dashboard build`` right after it,
reading the verdicts `regressions` stored (<= 60 s; also with ``--no-detect``), the
overview and a history page opening in headless Chromium (<= 3 s) and the store's size
on disk. ``--engine both`` (the default) runs PostgreSQL at ``--scale`` and SQLite at
1/20 of it. ``--scale`` below 1 multiplies the points per run (default; every series
keeps its 365 nights) or the nights. ``--keep DIR`` keeps the PostgreSQL cluster in DIR:
a year is filled once (``--fill-only`` stops there) and timed by later uses, each of
which first forgets the detector's stored verdicts (a night gives every series a value).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from benchbench.core.values import Point, Result  # noqa: E402
from benchbench.machine.environment import Environment  # noqa: E402
from benchbench.store import Store, open_store  # noqa: E402

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _results(count: int, samples: int, seed: int) -> list[Result]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        p = Point("bench", f"w{i % 100}", "v", i + 1, (i + 1,), "float32", "cpu")
        median = 1e-6 * (1 + i % 1000)
        out.append(
            Result(
                point=p,
                status="ok",
                samples_s=tuple(median * rng.uniform(0.95, 1.05) for _ in range(samples)),
                calls_per_sample=4,
                warnings=("noisy",) if i % 7 == 0 else (),
                bytes_per_call=8.0 * (i + 1),
            )
        )
    return out


def _new_run(store: Store, env: Environment, started_at: dt.datetime) -> str:
    run_id = str(uuid.uuid4())
    store.create_run(
        {
            "id": run_id,
            "group_id": run_id,
            "kind": "nightly",
            "label": None,
            "status": "finished",
            "started_at": started_at,
            "finished_at": started_at,
            "suites": [],
            "harness_version": "bench",
            "git_sha": None,
            "git_branch": None,
            "git_dirty": None,
            "tags": [],
            "config": {},
            "environment_id": env.id,
        }
    )
    return run_id


def bulk_write(url: str, points: int) -> dict[str, float]:
    store = open_store(url)
    env = Environment(fields={"machine": "bench"})
    store.save_environment(env)
    run_id = _new_run(store, env, T0)
    results = _results(points, 30, seed=1)
    wall, cpu = time.perf_counter(), time.process_time()
    store.write_results(run_id, results)
    out = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    if store.counts()["measurement"] != points:
        raise SystemExit("bulk write lost rows")
    return out


def history_query(url: str, runs: int, benchmarks: int) -> dict[str, float]:
    store = open_store(url)
    env = Environment(fields={"machine": "bench"})
    store.save_environment(env)
    fill = time.perf_counter()
    for index in range(runs):
        run_id = _new_run(store, env, T0 + dt.timedelta(hours=index))
        store.write_results(run_id, _results(benchmarks, 10, seed=index))
    fill_s = time.perf_counter() - fill
    target = _results(1, 1, 0)[0].point.benchmark_id()
    if len(store.history(target, env.id)) != runs:
        raise SystemExit("history is missing runs")
    timings, cpu = [], []
    for _ in range(20):
        start, start_cpu = time.perf_counter(), time.process_time()
        store.history(target, env.id)
        timings.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {
        "fill_s": fill_s,
        "history_median_ms": statistics.median(timings) * 1e3,
        "history_max_ms": max(timings) * 1e3,
        "history_cpu_median_ms": statistics.median(cpu) * 1e3,
    }


def calibration() -> dict[str, float]:
    """A fixed pure-Python workload (JSON-encoding 100,000 lists of 30 floats, what the
    bulk write spends most of its time on): how fast this machine was during the run,
    so that numbers taken on a loaded machine can be put in proportion."""
    rng = random.Random(0)
    rows = [[rng.random() for _ in range(30)] for _ in range(100_000)]
    start = time.perf_counter()
    for row in rows:
        json.dumps(row)
    return {"json_100k_rows_s": time.perf_counter() - start}


def _writer(url: str, index: int, runs: int, points: int) -> None:
    store = open_store(url)
    env = Environment(fields={"machine": f"writer-{index}"})
    store.save_environment(env)
    for run in range(runs):
        run_id = _new_run(store, env, T0 + dt.timedelta(minutes=run))
        results = _results(points, 30, seed=run)
        if run % 2:
            store.write_results(run_id, results)
        else:
            for result in results:
                store.write_result(run_id, result)


def concurrent_writers(url: str, processes: int = 4, runs: int = 8, points: int = 25) -> dict:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(url, i, runs, points)) for i in range(processes)]
    start = time.perf_counter()
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    counts = open_store(url).counts()
    return {
        "wall_s": time.perf_counter() - start,
        "exit_codes": [p.exitcode for p in procs],
        "runs": counts["run"],
        "measurements": counts["measurement"],
        "expected_measurements": processes * runs * points,
    }


def _cli(url: str, timeout: int, *args: str) -> dict[str, Any]:
    """``benchbench ARGS --store URL`` in a fresh interpreter (imports included, as a
    user waits for it): wall seconds and exit code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "benchbench", *args, "--store", url]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"wall_s": None, "rc": None, "timed_out_after_s": timeout}
    out: dict[str, Any] = {"wall_s": round(time.perf_counter() - start, 3), "rc": done.returncode}
    if done.returncode not in (0, 3):
        out["stderr"] = done.stderr[-2000:]
    return out


def _store_bytes(store: Store) -> dict[str, int]:
    """The store's size on disk: the SQLite file (and its WAL), or PostgreSQL's database
    and each table with its indexes and TOAST."""
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            path = Path(store.engine.url.database or "")
            return {"total": sum(f.stat().st_size for f in path.parent.glob(path.name + "*"))}
        sizes = {"total": conn.exec_driver_sql(
            "SELECT pg_database_size(current_database())").scalar_one()}  # fmt: skip
        for name in ("measurement", "telemetry", "run", "benchmark", "alert"):
            sizes[name] = conn.exec_driver_sql(
                f"SELECT pg_total_relation_size('{name}')"
            ).scalar_one()
    return sizes


def _measurement_scan(store: Store, read: Any) -> dict[str, Any]:
    """How PostgreSQL read the measurement table for the statement ``read()`` runs last:
    the plan node, the rows it returned and the table rows it fetched (an index-only scan
    fetches none): what a read costs from disk on a store larger than memory, which a
    small store, all in cache, does not show in its times."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    sa.event.listen(store.engine, "before_cursor_execute", capture)
    try:
        read()
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", capture)
    statement, params = seen[-1]
    with store.engine.connect() as conn:
        plan = conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", params
        ).scalar_one()
    nodes = [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        if node.get("Relation Name") == "measurement":
            rows = node["Actual Rows"] * node["Actual Loops"]  # per loop in a nested loop
            fetched = node.get("Heap Fetches", node.get("Exact Heap Blocks"))
            if node["Node Type"] == "Index Scan":
                fetched = rows  # one table row per index entry
            return {
                "node": node["Node Type"],
                "index": node.get("Index Name"),
                "loops": node["Actual Loops"],
                "rows": rows,
                "table_rows_or_pages_fetched": fetched,
            }
        nodes.extend(node.get("Plans", []))
    return {"node": None}


def fleet_year(
    url: str,
    shape: Any,
    timeout: int,
    out_dir: Path,
    jobs: int = 1,
    filled: Path | None = None,
    fill_only: bool = False,
) -> dict[str, Any]:
    """Fill ``url`` with ``shape``'s year, then time what the fleet's users do.

    ``filled``: a file that records a finished fill of the year before the last night;
    when it exists the fill is skipped (a store kept from an earlier use), else it is
    written once the fill is done."""
    import fleet_data
    from dashboard_scale import CHROMIUM, page_load_ms

    store = open_store(url)
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    report: dict[str, Any] = {"machines": shape.machines, "points": shape.points,
                              "nights": shape.nights}  # fmt: skip
    if filled is not None and filled.exists():
        report.update(json.loads(filled.read_text()), reused_fill=str(filled))
    else:
        report.update(fleet_data.fill(store, shape, range(shape.nights - 1), log, jobs))
        if store.dialect == "postgresql":
            # What autovacuum has done to a year-old store: planner statistics, and the
            # visibility map that lets a covering index answer without the table's rows.
            start = time.perf_counter()
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("VACUUM ANALYZE")
            report["vacuum_analyze_s"] = round(time.perf_counter() - start, 3)
        if filled is not None:
            filled.write_text(json.dumps(report))
    if fill_only:
        return report
    # The nightly job's order: the fleet's runs of the last night come in, then the
    # regressions are looked for (the first look, over the year before, untimed below).
    last_night = fleet_data.T0 + dt.timedelta(days=shape.nights - 1)
    with store.engine.connect() as conn:
        written = conn.execute(
            sa.select(sa.func.count()).where(sa.column("started_at") >= last_night)
            .select_from(sa.table("run"))
        ).scalar_one()  # fmt: skip
    if written:  # a kept store timed before: its last night is in already
        report["last_night_reused_runs"] = written
        with store.engine.connect() as conn:
            report["measurements"] = conn.execute(
                sa.select(sa.func.count()).select_from(sa.table("measurement"))
            ).scalar_one()
    else:
        report["regressions_before_last_night"] = _cli(url, timeout, "regressions", "--format",
                                                       "json")  # fmt: skip
        one = fleet_data.fill(store, shape, range(shape.nights - 1, shape.nights))
        report["last_night_write_s"], report["measurements"] = (
            one["fill_s"],
            (report["measurements"] + one["measurements"]),
        )
    env = fleet_data.environment(0)
    target = fleet_data.fleet_points(shape.points, "cpu")[shape.points // 2]
    bench = target.benchmark_id()
    runs = len(store.history(bench, env.id))  # warm-up
    timings = []
    for _ in range(20):
        start = time.perf_counter()
        store.history(bench, env.id)
        timings.append(time.perf_counter() - start)
    report["history"] = {"runs": runs, "median_ms": statistics.median(timings) * 1e3,
                         "max_ms": max(timings) * 1e3}  # fmt: skip
    if store.dialect == "postgresql":
        # The series read (``store.scan``) goes through the driver's own cursor, which
        # this capture does not see: its plan is in BENCHMARKS.md.
        report["measurement_scan"] = {
            "history": _measurement_scan(store, lambda: store.history(bench, env.id)),
        }
    if written:
        # A kept store's verdicts are those of its last timing: forget them, so that
        # `regressions` judges every series, as after a night that added a value to each.
        with store.engine.begin() as conn:
            report["judgements_forgotten"] = conn.execute(
                sa.delete(sa.table("series_judgement"))
            ).rowcount
    report["regressions"] = _cli(url, timeout, "regressions", "--format", "json")
    nightly_pair = ("latest~1", "latest", "--environment", env.machine)
    report["compare"] = _cli(
        url, timeout, "compare", *nightly_pair, "--format", "json", "--no-fail-on-regression"
    )
    site = out_dir / "dashboard"
    # Right after `regressions`, as a nightly runs it: the verdicts it stored are read back.
    report["dashboard_build"] = _cli(url, timeout, "dashboard", "build", "-o", str(site))
    # What a nightly runs right after `regressions`: the stored alerts, no detection.
    report["dashboard_build_no_detect"] = _cli(
        url, timeout, "dashboard", "build", "--no-detect", "-o", str(out_dir / "nightly")
    )
    if (site / "index.html").exists() and CHROMIUM.exists():
        report["page_open_ms"] = {
            page: page_load_ms(site / page, 3) for page in ("index.html", "history.html")
        }
    report["store_bytes"] = _store_bytes(store)
    report["bytes_per_measurement"] = round(report["store_bytes"]["total"] / report["measurements"])
    return report


def fleet_report(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--fleet-year`` document: scale, machine, and each engine's figures."""
    from fleet_data import FleetShape

    report: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "scale": args.scale,
        "scale_of": args.scale_of,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "load_1m_before": os.getloadavg()[0],
        "calibration": calibration(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        if args.engine in ("postgresql", "both"):
            from tests.pgserver import PgServer, find_binaries

            shape = FleetShape.scaled(args.scale, args.scale_of)
            with PgServer(find_binaries(), keep=args.keep) as server:
                filled = None
                if args.keep is None:
                    url = server.create_database()
                else:
                    url, filled = server.url("postgres"), args.keep / "fleet-fill.json"
                report["postgresql"] = fleet_year(
                    url, shape, args.timeout, Path(tmp) / "pg", args.fill_jobs, filled,
                    args.fill_only,
                )  # fmt: skip
        if args.engine in ("sqlite", "both"):
            scale = args.scale / 20 if args.engine == "both" else args.scale
            shape = FleetShape.scaled(scale, args.scale_of)
            report["sqlite"] = fleet_year(
                f"{tmp}/fleet.db", shape, args.timeout, Path(tmp) / "lite", args.fill_jobs
            )
            report["sqlite"]["scale"] = scale
    report["load_1m_after"] = os.getloadavg()[0]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--benchmarks", type=int, default=100)
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--fleet-year", action="store_true", help="the fleet-year store")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the fleet year")
    parser.add_argument("--scale-of", choices=("points", "nights"), default="points")
    parser.add_argument(
        "--engine", choices=("postgresql", "sqlite", "both"), default="both"
    )  # fmt: skip
    parser.add_argument("--timeout", type=int, default=1800, help="per CLI command, seconds")
    parser.add_argument(
        "--fill-jobs", type=int, default=1, metavar="N", help="write the year in N processes"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep the PostgreSQL cluster in DIR; a later use with the same DIR skips the fill",
    )
    parser.add_argument(
        "--fill-only", action="store_true", help="with --keep: fill the year, time nothing"
    )
    args = parser.parse_args()
    if args.fleet_year:
        print(json.dumps(fleet_report(args), indent=2))
        return
    report: dict[str, object] = {"calibration": calibration()}
    with tempfile.TemporaryDirectory() as tmp:
        report["sqlite_bulk_write"] = bulk_write(f"{tmp}/bulk.db", args.points)
        report["sqlite_history"] = history_query(f"{tmp}/hist.db", args.runs, args.benchmarks)
        report["sqlite_concurrent"] = concurrent_writers(f"{tmp}/conc.db")
    if not args.skip_pg:
        from tests.pgserver import PgServer, find_binaries

        with PgServer(find_binaries()) as server:
            report["postgresql_bulk_write"] = bulk_write(server.create_database(), args.points)
            report["postgresql_history"] = history_query(
                server.create_database(), args.runs, args.benchmarks
            )
            report["postgresql_concurrent"] = concurrent_writers(server.create_database())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
