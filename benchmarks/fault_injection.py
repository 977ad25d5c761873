"""SIGKILL benchbench's writing commands at random moments and check nothing is lost or mixed
(issue 35; BENCHMARKS.md, "Fault injection").

    python benchmarks/fault_injection.py [--run 50] [--others 20] [--schedulers 10]
        [--only-schedulers] [--seed 0] [--json]

Each kill sends SIGKILL to the command's whole process group (the runner, its zygote and
workers) at a random moment: half of the kills at a uniform time since the command
started (start-up, store creation, the run row, the first worker), half just after the
store holds one more point (mid-run). After every kill:

- ``run`` (the 40 points of ``tests/integration/suites/grid.py``, one process each):
  the store opens, passes SQLite's ``integrity_check``, every stored point is whole (an
  ok point has its samples, a median inside its interval, ``n`` samples) and no point is
  stored twice; the next attempt is ``--resume`` of the same run (killed in its turn);
  at the end a ``--resume`` without a kill completes it, and every planned point is
  stored exactly once. A run that finishes before its kill is replaced by a new one.
- ``import`` of a bundle of that run (under a new run id each time) into a store that
  accumulates them: the store opens and each run is absent or whole (all its points);
  importing the bundle again completes it.
- ``regressions`` over a 12-night history with a step in it: the store opens and holds
  the same runs; run to completion afterwards, the alerts equal a clean run's.
- ``dashboard build``: the folder is the old site, byte for byte, or a whole new site
  (the same files, each data script a complete document), never a mix.

- the schedulers' cancels (``--schedulers``): GitHub Actions' SIGINT, SIGTERM 7.5 s
  later, SIGKILL 2.5 s after; Slurm's SIGTERM, 30 s, SIGKILL; Kubernetes' SIGTERM, 30 s,
  SIGKILL, sent through a wrapper shell that execs the run (``tests/schedulers.py``), at
  random moments; ``--resume`` then completes the run with every planned point exactly
  once, and the points stored before it unchanged.

This checks correctness, not speed: its counts go to BENCHMARKS.md, not its times.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchbench.core.values import Point  # noqa: E402
from benchbench.store import open_store  # noqa: E402
from tests.synthetic import write_history  # noqa: E402

GRID = ROOT / "tests" / "integration" / "suites" / "grid.py"
POINTS = 40


def _env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(ROOT) + os.pathsep + out.get("PYTHONPATH", "")
    out.pop("BENCHBENCH_STORE", None)
    out["BENCHBENCH_ROUNDS"] = "1"
    return out


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchbench", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _finish(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchbench", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _kill_at(
    proc: subprocess.Popen[bytes],
    rng: random.Random,
    max_delay_s: float,
    progressed: Callable[[], bool] | None = None,
) -> bool:
    """SIGKILL ``proc``'s group: after a uniform delay, or (half the time, when
    ``progressed`` is given) just after ``progressed()`` turns true. True if it was
    killed, False if it exited first."""
    started = time.monotonic()
    mid_run = progressed is not None and rng.random() < 0.5
    delay = rng.uniform(0.0, max_delay_s) if not mid_run else rng.uniform(0.0, 0.3)
    deadline = started + 300
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
        if mid_run:
            assert progressed is not None
            if progressed():
                time.sleep(delay)
                break
        elif time.monotonic() - started >= delay:
            break
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def _integrity(db: Path) -> None:
    if not db.exists():
        return
    with sqlite3.connect(db) as conn:
        found = conn.execute("PRAGMA integrity_check").fetchone()[0]
    if found != "ok":
        raise AssertionError(f"{db}: integrity_check says {found}")


def _whole(row: dict[str, Any]) -> bool:
    if row["status"] != "ok":
        return row["status"] in ("error", "skipped")
    samples = row.get("samples_s") or []
    median, lo, hi = row.get("median_s"), row.get("ci_low_s"), row.get("ci_high_s")
    return (
        bool(samples)
        and row.get("n") == len(samples)
        and median is not None
        and math.isfinite(median)
        and (lo is None or hi is None or lo <= median <= hi)
    )


def _label(row: dict[str, Any]) -> str:
    return f"{row['workload']}:{row['variant']}[{row['dtype']}, {row['device']}](n={row['size']})"


def _check_run_store(db: Path) -> dict[str, int]:
    """Opens, intact, every point whole and once; run id -> points stored."""
    if not db.exists():
        return {}
    _integrity(db)
    store = open_store(str(db), create=False)
    out = {}
    for run in store.runs():
        rows = store.measurements(run["id"])
        labels = [_label(r) for r in rows]
        if len(labels) != len(set(labels)):
            raise AssertionError(f"run {run['id']}: a point stored twice")
        broken = [_label(r) for r in rows if not _whole(r)]
        if broken:
            raise AssertionError(f"run {run['id']}: points not whole: {broken[:3]}")
        out[run["id"]] = len(rows)
    store.engine.dispose()
    return out


def _points(db: Path) -> int:
    try:
        with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM measurement").fetchone()[0])
    except sqlite3.Error:
        return 0


def inject_run(folder: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    db = folder / "run.db"
    args = ["--budget", "0.02", "--rounds", "1", str(GRID), "--store", str(db)]
    landed, finished_first, runs = 0, 0, []
    current: str | None = None
    while landed < kills:
        before = _points(db)
        command = ["run", "--resume", current, "--store", str(db)] if current else ["run", *args]
        proc = _start(command, folder)
        if _kill_at(proc, rng, 6.0, lambda before=before: _points(db) > before):
            landed += 1
        else:
            finished_first += 1
        stored = _check_run_store(db)
        if current is None and stored:
            new = set(stored) - set(runs)
            current = new.pop() if new else None
            if current:
                runs.append(current)
        if current and stored.get(current) == POINTS:
            current = None  # complete: the next kill starts a new run
    for run_id in runs:
        done = _finish(["run", "--resume", run_id, "--store", str(db)], folder)
        if done.returncode != 0:
            raise AssertionError(f"--resume {run_id} failed: {done.stderr[-500:]}")
    stored = _check_run_store(db)
    incomplete = {r: n for r, n in stored.items() if r in runs and n != POINTS}
    if incomplete:
        raise AssertionError(f"runs not complete after --resume: {incomplete}")
    return {
        "kills": landed,
        "finished_before_kill": finished_first,
        "runs": len(runs),
        "points_each": POINTS,
        "stores_opened": landed + finished_first,
    }


def inject_import(folder: Path, source: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    store = open_store(str(source), create=False)
    run_id = store.runs()[0]["id"]
    from benchbench.interchange.bundle import export_bundle

    document = export_bundle(store, run_id)
    db = folder / "import.db"
    landed, absent, whole, k = 0, 0, 0, 0
    while landed < kills and k < 3 * kills:
        k += 1
        bundle = json.loads(json.dumps(document))
        new_id = f"{k:08d}-0000-4000-8000-{rng.getrandbits(48):012x}"
        bundle["run"]["id"] = bundle["run"]["group_id"] = new_id
        path = folder / f"bundle-{k}.json"
        path.write_text(json.dumps(bundle))
        proc = _start(["import", str(path), "--store", str(db)], folder)
        landed += _kill_at(proc, rng, 2.5)
        stored = _check_run_store(db)
        if new_id in stored:
            if stored[new_id] != len(document["measurements"]):
                raise AssertionError(f"import of {new_id}: {stored[new_id]} points, half a run")
            whole += 1
        else:
            absent += 1
        done = _finish(["import", str(path), "--store", str(db)], folder)
        if done.returncode != 0:
            raise AssertionError(f"import again failed: {done.stderr[-500:]}")
        if _check_run_store(db).get(new_id) != len(document["measurements"]):
            raise AssertionError(f"import of {new_id} again did not complete it")
    return {
        "kills": landed,
        "finished_before_kill": k - landed,
        "run_absent_after_kill": absent,
        "run_whole_after_kill": whole,
    }


def _history(db: Path) -> None:
    store = open_store(str(db))
    points = [Point("synthetic", "sqrt", "torch.sqrt", n, (n,), "float32", "cpu") for n in
              (2**k for k in range(10, 22))]  # fmt: skip
    series: dict[Point, list[float | None]] = {
        p: [1e-3 * (1.0 if night < 6 else 1.3) for night in range(12)] for p in points
    }
    write_history(store, series, seed=3)
    store.engine.dispose()


def _alerts(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return sorted(
            conn.execute(
                "SELECT benchmark_id, environment_id, first_bad_run_id, status FROM alert"
            ).fetchall()
        )


def inject_regressions(folder: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    clean = folder / "clean.db"
    _history(clean)
    reference = folder / "reference.db"
    shutil.copy(clean, reference)
    done = _finish(["regressions", "--store", str(reference)], folder)
    if done.returncode not in (0, 3):
        raise AssertionError(f"regressions failed: {done.stderr[-500:]}")
    expected = _alerts(reference)
    landed, k = 0, 0
    while landed < kills and k < 3 * kills:
        k += 1
        db = folder / f"regressions-{k}.db"
        shutil.copy(clean, db)
        landed += _kill_at(_start(["regressions", "--store", str(db)], folder), rng, 2.0)
        runs = _check_run_store(db)
        if len(runs) != 12:
            raise AssertionError(f"regressions killed: the store holds {len(runs)} runs, not 12")
        done = _finish(["regressions", "--store", str(db)], folder)
        if done.returncode not in (0, 3) or _alerts(db) != expected:
            raise AssertionError(f"regressions after a kill: alerts {_alerts(db)} != {expected}")
    return {"kills": landed, "finished_before_kill": k - landed, "alerts_each": len(expected)}


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _complete(tree: dict[str, bytes], files: set[str]) -> bool:
    if set(tree) != files:
        return False
    for name, data in tree.items():
        if name.startswith("data/") and name.endswith(".js"):
            text = data.decode()
            start = text.index("]=") + 2  # (window.BB_DATA=...)["key"]=<json>;
            json.loads(text[start:].strip().rstrip(";"))  # raises if cut short
    return True


def inject_dashboard(folder: Path, source: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    site = folder / "site"
    done = _finish(["dashboard", "build", "-o", str(site), "--store", str(source)], folder)
    if done.returncode != 0:
        raise AssertionError(f"dashboard build failed: {done.stderr[-500:]}")
    files = set(_tree(site))
    landed, old, new, k = 0, 0, 0, 0
    while landed < kills and k < 3 * kills:
        k += 1
        before = _tree(site)
        proc = _start(["dashboard", "build", "-o", str(site), "--store", str(source)], folder)
        landed += _kill_at(proc, rng, 2.5)
        after = _tree(site)
        if after == before:
            old += 1
        elif _complete(after, files):
            new += 1
        else:
            raise AssertionError("the dashboard folder mixes two builds or is incomplete")
    return {"kills": landed, "finished_before_kill": k - landed, "old_site": old, "new_site": new}


def inject_schedulers(folder: Path, moments: int, rng: random.Random) -> dict[str, Any]:
    """Each scheduler's signal sequence (``tests/schedulers.py``, real grace periods) at
    ``moments`` random moments of a ``run``, each followed by ``--resume`` to the end:
    every planned point exactly once, those stored before the resume unchanged."""
    from tests.schedulers import SCHEDULERS, cut_and_resume

    out: dict[str, Any] = {}
    for scheduler in sorted(SCHEDULERS):
        codes: dict[str, int] = {}
        for k in range(moments):
            case = folder / f"{scheduler}-{k}"
            case.mkdir()
            # Half in start-up or at any time, half just after a random number of points.
            after = rng.randint(1, POINTS - 5) if rng.random() < 0.5 else 0
            moment = rng.uniform(0.0, 0.5) if after else rng.uniform(0.0, 8.0)
            args = ["--budget", "0.02", str(GRID)]
            code, _cut, end = cut_and_resume(
                scheduler, moment, case / "run.db", case, args, 1.0, after
            )
            if end != POINTS:
                raise AssertionError(f"{scheduler} at {moment:.1f} s: {end} of {POINTS} points")
            codes[str(code)] = codes.get(str(code), 0) + 1
        out[scheduler] = {"moments": moments, "exit codes of the cut run": codes}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=int, default=50, help="kills of `run` (default 50)")
    parser.add_argument("--others", type=int, default=20, help="kills of each other command")
    parser.add_argument(
        "--schedulers",
        type=int,
        default=10,
        help="random moments each scheduler's cancel (GitHub Actions, Slurm, Kubernetes) "
        "cuts a run at, each resumed (default 10; 0: none)",
    )
    parser.add_argument(
        "--only-schedulers", action="store_true", help="skip the SIGKILLs: schedulers only"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    report: dict[str, Any] = {"started": dt.datetime.now(dt.timezone.utc).isoformat()}
    with tempfile.TemporaryDirectory(prefix="fault-") as tmp:
        folder = Path(tmp)
        started = time.monotonic()
        if not args.only_schedulers:
            report["run"] = inject_run(folder, args.run, rng)
            report["import"] = inject_import(folder, folder / "run.db", args.others, rng)
            report["regressions"] = inject_regressions(folder, args.others, rng)
            report["dashboard build"] = inject_dashboard(
                folder, folder / "clean.db", args.others, rng
            )
        if args.schedulers:
            report["schedulers"] = inject_schedulers(folder, args.schedulers, rng)
        report["seconds"] = round(time.monotonic() - started)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, found in report.items():
            print(f"{name}: {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
