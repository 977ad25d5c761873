"""Soak: simulated nights of the nightly example, a random fault on a third of them, and the
store they end in compared with the same nights merged without faults (issue 44;
BENCHMARKS.md, "Soak").

    python benchmarks/soak.py [--nights 24] [--seed 0] [--json]

Each night runs the example's shard step for real (``docs/examples/nightly/suite.py``,
4 points, one process each; from two thirds of the nights on, sqrt at 2^16 makes 3
extra calls, so that `regressions` has a step to find) and exports the night's bundle.
The faulted store is a PostgreSQL server's database that gets every night through the
faults; the reference is an SQLite store that imports the same bundles, in the same
order, without any. On a third of the nights (seeded) one fault strikes:

- ``github`` / ``slurm`` / ``kubernetes``: the shard's run is cancelled at a random
  moment with the scheduler's signal sequence (``tests/schedulers.py``, grace periods
  x0.1, through a wrapper shell), then ``--resume`` finishes it;
- ``deadline``: the run stops at a random ``--deadline`` of 1-4 s, then ``--resume``;
- ``outage``: the shard measures straight into the PostgreSQL store, whose server is
  stopped (``pg_ctl stop -m immediate``) after its first point and started 1 s later:
  the run spools and writes the spool when the server is back;
- ``kill-import``: the merge's ``import`` is SIGKILLed at a random moment and run again;
- ``import-outage``: the server is stopped under the merge's ``import`` (which fails
  with one line) and started again; the import is run again.

The measured values are the same in both stores by construction (one measurement per
night); what is compared is what the faults could break: the runs (ids, groups,
labels, statuses), every stored point and its statistics, the alerts of `regressions`
and the dashboard's files (timestamps masked; not the marker file, whose build id is
random). The points a fault lost (planned but
absent after the resume) are listed; the expected list is empty.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from tests.pgserver import PgServer, find_binaries  # noqa: E402
from tests.schedulers import SCHEDULERS, environ, play, start  # noqa: E402

SUITE = ROOT / "docs" / "examples" / "nightly" / "suite.py"
POINTS = 4
MARKER = ".benchbench-dashboard"
FAULTS = ("github", "slurm", "kubernetes", "deadline", "outage", "kill-import", "import-outage")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?")
#: An alert's time on the dashboard (ms since the epoch): when it was raised, a moment
#: that differs between any two stores, faulted or not, as the masked timestamps do.
_ALERT_TIME = re.compile(r'("status":"[a-z]+","t":)\d+')


def bb(
    args: list[str], cwd: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchbench", *args],
        cwd=cwd, env=environ(extra), capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _run_args(night: str, store: str) -> list[str]:
    return [
        "run", str(SUITE), "--kind", "nightly", "--threads", "1", "--group", f"nightly-{night}",
        "--label", f"nightly-{night}-shard-1", "--store", store,
    ]  # fmt: skip


def _run_id(store: str) -> str | None:
    engine = sa.create_engine(store if "://" in store else f"sqlite:///{store}")
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT id FROM run ORDER BY started_at DESC")).first()
    except sa.exc.SQLAlchemyError:
        return None
    finally:
        engine.dispose()
    return None if row is None else str(row[0])


def _finish(night: str, store: str, cwd: Path, extra: dict[str, str]) -> None:
    """The night's run resumed to the end (or run whole when it never started)."""
    run_id = _run_id(store)
    args = ["run", "--resume", run_id, "--store", store] if run_id else _run_args(night, store)
    done = bb(args, cwd, extra)
    if done.returncode != 0:
        raise AssertionError(f"night {night}: {' '.join(args[:3])} failed: {done.stderr[-800:]}")


def shard(night: str, fault: str | None, folder: Path, server: PgServer, url: str,
          rng: random.Random, extra: dict[str, str]) -> Path:  # fmt: skip
    """The night's run (cut by ``fault``), resumed to the end; its bundle."""
    store = url if fault == "outage" else str(folder / f"shard-{night}.db")
    args = _run_args(night, store)
    if fault in SCHEDULERS:
        proc = start(args, folder, extra)  # the machine and the calls of the night
        time.sleep(rng.uniform(0.5, 6.0))
        play(proc, SCHEDULERS[fault], 0.1)
        _finish(night, store, folder, extra)
    elif fault == "deadline":
        bb([*args, "--deadline", f"{rng.randint(1, 4)}s"], folder, extra)
        _finish(night, store, folder, extra)
    elif fault == "outage":
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchbench", *args], cwd=folder, env=environ(extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        while _points(url, night) < 1 and proc.poll() is None:
            time.sleep(0.1)
        server.halt()
        time.sleep(1.0)
        server.restart()
        _out, err = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"night {night}: the run under the outage failed: {err[-800:]}")
    else:
        done = bb(args, folder, extra)
        if done.returncode != 0:
            raise AssertionError(f"night {night}: run failed: {done.stderr[-800:]}")
    bundle = folder / f"bundle-{night}.json.gz"
    done = bb(["export", f"nightly-{night}-shard-1", "--store", store, "--format", "bundle",
               "-o", str(bundle)], folder)  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"night {night}: export failed: {done.stderr[-800:]}")
    return bundle


def _points(url: str, night: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            query = (
                "SELECT count(*) FROM measurement m JOIN run r ON r.id = m.run_id "
                "WHERE r.label = :l"
            )
            return int(conn.execute(sa.text(query), {"l": f"nightly-{night}-shard-1"}).scalar_one())
    except sa.exc.SQLAlchemyError:
        return 0
    finally:
        engine.dispose()


def merge(bundle: Path, fault: str | None, folder: Path, server: PgServer, url: str,
          rng: random.Random) -> None:  # fmt: skip
    """``import`` of the night's bundle into the PostgreSQL store, through ``fault``."""
    argv = [sys.executable, "-m", "benchbench", "import", str(bundle), "--store", url]
    if fault == "kill-import":
        proc = subprocess.Popen(argv, cwd=folder, env=environ(), start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(rng.uniform(0.0, 3.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    elif fault == "import-outage":
        server.halt()
        done = bb(argv[3:], folder)
        lines = [line for line in done.stderr.splitlines() if line.startswith("benchbench: error:")]
        if done.returncode != 1 or len(lines) != 1 or "server" not in lines[0]:
            raise AssertionError(f"import with the server away: {done.stderr[-800:]}")
        server.restart()
    done = bb(argv[3:], folder)
    if done.returncode != 0:
        raise AssertionError(f"import {bundle.name} failed: {done.stderr[-800:]}")


def _masked(text: str) -> str:
    return _ALERT_TIME.sub(r"\1<time>", _STAMP.sub("<time>", text))


def snapshot(store: str, folder: Path, name: str) -> dict[str, Any]:
    """What a fault could break: runs, points with their statistics, alerts, dashboard."""
    engine = sa.create_engine(store)
    with engine.connect() as conn:
        runs = sorted(tuple(r) for r in conn.execute(sa.text(
            "SELECT id, group_id, label, status FROM run")))  # fmt: skip
        points = sorted(
            (str(r[0]), str(r[1]), str(r[2]), repr(r[3]), repr(r[4]), repr(r[5]), r[6])
            for r in conn.execute(sa.text(
                "SELECT run_id, benchmark_id, status, median_s, ci_low_s, ci_high_s, n "
                "FROM measurement"))
        )  # fmt: skip
    engine.dispose()
    alerts = bb(["regressions", "--store", store, "--json"], folder)
    (folder / f"alerts-{name}.json").write_text(alerts.stdout)
    site = folder / f"site-{name}"
    built = bb(["dashboard", "build", "-o", str(site), "--store", store], folder)
    if built.returncode != 0:
        raise AssertionError(f"dashboard build of {name} failed: {built.stderr[-800:]}")
    # The marker file holds a random build id, different in every build by design.
    files = {str(p.relative_to(site)): _masked(p.read_text(errors="replace"))
             for p in sorted(site.rglob("*")) if p.is_file() and p.name != MARKER}  # fmt: skip
    return {
        "runs": runs,
        "points": points,
        "alerts": _STAMP.sub("<time>", alerts.stdout),
        "regressions_exit": alerts.returncode,
        "dashboard": files,
    }


def _first_difference(ours: str, theirs: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)
    at = min(len(ours), len(theirs)) if at is None else at
    window = slice(max(0, at - 80), at + 80)
    return f"faulted: ...{ours[window]}... clean: ...{theirs[window]}..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=24, help="nights (default 24)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, help="copy the nights' folder here at the end")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    faulted = set(rng.sample(range(args.nights), max(1, args.nights // 3)))
    faults = {n: rng.choice(FAULTS) for n in sorted(faulted)}
    slowdown = (2 * args.nights) // 3
    started = time.monotonic()
    server = PgServer(find_binaries(), crash_safe=True)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, server:
        folder = Path(tmp)
        url = server.create_database("soak")
        clean = f"sqlite:///{folder / 'clean.db'}"
        lost: list[str] = []
        for n in range(args.nights):
            night = f"2026-01-{n + 1:02d}"
            extra = {"EXTRA_CALLS": "3" if n >= slowdown else "0",
                     "BENCHBENCH_MACHINE": "soak", "BENCHBENCH_STORE_RETRY_S": "60"}  # fmt: skip
            fault = faults.get(n)
            bundle = shard(night, fault, folder, server, url, rng, extra)
            merge(bundle, fault if fault in ("kill-import", "import-outage") else None,
                  folder, server, url, rng)  # fmt: skip
            done = bb(["import", str(bundle), "--store", clean], folder)
            if done.returncode != 0:
                raise AssertionError(f"clean import failed: {done.stderr[-800:]}")
            stored = _points(url, night)
            if stored != POINTS:
                lost.append(f"night {night}: {POINTS - stored} point(s)")
            print(f"night {n + 1}/{args.nights}: {fault or 'no fault'}", file=sys.stderr)
        ours, theirs = snapshot(url, folder, "faulted"), snapshot(clean, folder, "clean")
        if args.keep:
            shutil.copytree(folder, args.keep)
    differ = [key for key in ours if ours[key] != theirs[key]]
    files = [n for n in ours["dashboard"] if ours["dashboard"][n] != theirs["dashboard"].get(n)]
    report = {
        "nights": args.nights,
        "faults": {f"night {n + 1}": kind for n, kind in faults.items()},
        "lost points": lost,
        "runs": len(ours["runs"]),
        "points": len(ours["points"]),
        "dashboard files": len(ours["dashboard"]),
        "differs from the fault-free nights in": differ,
        "alerts that differ": (
            _first_difference(ours["alerts"], theirs["alerts"]) if "alerts" in differ else ""
        ),
        "dashboard files that differ": {
            name: _first_difference(ours["dashboard"][name], theirs["dashboard"].get(name, ""))
            for name in files
        },
        "seconds": round(time.monotonic() - started),
    }
    print(
        json.dumps(report, indent=2)
        if args.json
        else "\n".join(f"{k}: {v}" for k, v in report.items())
    )
    return 1 if differ or lost else 0


if __name__ == "__main__":
    sys.exit(main())
