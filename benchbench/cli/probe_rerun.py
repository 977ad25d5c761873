"""``benchbench probe --run-to-run``: calibrate this machine's run-to-run term.

A few runs of a fixed set of points (:data:`benchbench.analysis.calibration.FILTER` of the
``quick`` suite), back to back, each as ``benchbench run`` measures (five fresh processes
a point, or ``$BENCHBENCH_ROUNDS``; one thread unless ``--threads``), into a store of
their own that is removed after; the store named by ``--store`` keeps the runs' points
as the environment's calibration, which ``run``, ``show``, ``compare`` and the dashboard
take for a suite with no earlier pair of runs of its own (:mod:`benchbench.analysis.calibration`).
"""

from __future__ import annotations

import argparse
import datetime
import tempfile
import time
from pathlib import Path
from typing import Any

from benchbench.cli import flags
from benchbench.core.defaults import RUN_TO_RUN_RUNS
from benchbench.core.errors import UsageError


def calibrate(args: argparse.Namespace) -> int:
    from benchbench.analysis import calibration as cal
    from benchbench.analysis.rerun import points
    from benchbench.machine.environment import Environment
    from benchbench.run import runner
    from benchbench.store import open_store
    from benchbench.store.profiles import save_profile
    from benchbench.suite.load import Selection, resolve_suite

    runs = int(args.run_to_run)
    if runs < 3:
        raise UsageError(
            f"--run-to-run {runs}: a calibration needs at least 3 runs (two pairs); "
            f"e.g. --run-to-run {RUN_TO_RUN_RUNS}"
        )
    if args.device != cal.DEVICE:
        raise UsageError(
            f"--run-to-run calibrates the CPU; --device {args.device!r} is not calibrated "
            "(leave --device out)"
        )
    store = flags.store_from(args)  # a bad --store fails before the runs
    config = runner.RunConfig(
        suites=(resolve_suite(cal.SUITE),),
        selection=Selection(pattern=cal.FILTER),
        threads=flags.threads_from(args),
        label="run-to-run calibration",
        rounds=flags.rounds_from(argparse.Namespace(rounds=None, max_rounds=None)),
    )
    err = flags.stderr()
    started = time.monotonic()
    read: list[dict[Any, tuple[float, float, int]]] = []
    env_row: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="benchbench-calibration-") as folder:
        scratch = open_store(str(Path(folder) / "calibration.db"), create=True)
        for index in range(runs):
            err.print(
                f"[dim]{time.monotonic() - started:5.1f} s[/dim] calibration run "
                f"{index + 1} of {runs} ({cal.SUITE}, --filter '{cal.FILTER}')"
            )
            with runner.Session(config) as session:
                summary = session.run(scratch, lambda event, data: None, runner.StopRequest())
            row = scratch.resolve_run(summary.run_id)
            read.append(points(scratch.measurements(summary.run_id)))
            env_row = env_row or scratch.environment(row["environment_id"])
        scratch.engine.dispose()
    measured_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    found = cal.Calibration.of(read, measured_at)
    if found is None or env_row is None:
        err.print(
            f"[red]the calibration's runs matched {sum(map(len, read))} point(s) in "
            f"several processes, too few (at least {cal.MIN_SCORES}); nothing stored[/red]"
        )
        return 1
    env = Environment(fields=dict(env_row["fields"]), info=dict(env_row["info"] or {}))
    store.save_environment(env)
    save_profile(store, env.id, cal.device_key(cal.DEVICE), found.to_dict())
    line = {
        "environment_id": env.id,
        "machine": env.machine,
        "runs": runs,
        "points": found.points,
        "run_level": found.level,
        "measured_at": measured_at,
    }
    if args.json:
        flags.print_json({"run_to_run": line})
    else:
        flags.stdout().print(
            f"run-to-run: {found.words}, from {found.points} matched points in "
            f"{found.pairs} pairs of runs; a point's "
            "interval takes it as sqrt(se² + level²) beside its own standard error",
            markup=False,
            highlight=False,
        )
    err.print(
        f"calibration took {time.monotonic() - started:.1f} s; stored for environment "
        f"{env.id} ({env.machine}) in {store.url}: a suite with no earlier pair of runs "
        "of its own takes it"
    )
    return 0
