"""Check what makes numbers noisy on this machine, with the fix for each, and say where
each setting (store, machine, device, rounds) came from.

CPU frequency governor, turbo boost, ASLR, load, swap, busy processes, thread
settings, idle cores against torch's default thread count (fix: --threads or --cpus
on run and time), torch debug build, CPU isolation, the CPU's hardware counters (whether
run --metric instructions --counter pmu can count here, or why not), and per GPU
persistence mode, application clocks and other processes (in the spirit of
``python -m pyperf system show``). Then the ceilings, from the store: the shape of the
hardware profile the latest run is held to, and the run's points above their measured
ceiling (either means: run `benchbench probe` again), and whether that run's
environment has a run-to-run calibration (`benchbench probe --run-to-run`). Exit 0
whatever it finds: it advises.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from rich.text import Text

from benchbench.cli import flags
from benchbench.core.errors import NotFoundError
from benchbench.views.tables import Column, Grid

if TYPE_CHECKING:
    from benchbench.machine.doctor import Check

HELP = "check this machine for sources of noise and its stored ceilings, with fixes"

_STYLE = {"ok": "green", "warn": "yellow", "info": "cyan", "unknown": "dim"}
#: What a check found and its fix are the machine's words (a path in /sys, a process's
#: name): they wrap within these widths, so that the table keeps to 160 characters in a
#: CI log (on a VM with no cpufreq it was 328 wide).
COLUMNS = (
    Column("check", max_width=24),
    Column("status"),
    Column("value", max_width=66),
    Column("fix", max_width=48),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_store(parser)
    flags.add_format(parser)


def run(args: argparse.Namespace) -> int:
    from benchbench.machine.doctor import check_system

    checks = check_system() + setting_checks() + ceiling_checks(args)
    if args.format == "json":
        flags.print_json({"checks": [c.to_dict() for c in checks]})
        return 0
    rows = [
        (c.name, Text(c.status, style=_STYLE.get(c.status, "")), c.value, c.advice) for c in checks
    ]
    grid = Grid.of(COLUMNS, rows, title="benchbench doctor")
    flags.print_tables(args, [grid])
    warned = sum(1 for c in checks if c.status == "warn")
    flags.stderr().print(f"{warned} warning(s) of {len(checks)} checks")
    return 0


def setting_checks() -> list[Check]:
    """Where each setting came from: a variable, the settings file, or the default (a
    command's flag wins over all three)."""
    import socket

    from benchbench.cli import ENVIRONMENT_BEFORE_SETTINGS
    from benchbench.core import config
    from benchbench.core.defaults import DEFAULT_ROUNDS
    from benchbench.machine.doctor import Check

    defaults = {
        "store": "results/benchbench.db",
        "machine": socket.gethostname(),
        "device": "the suites' (time: cpu)",
        "rounds": str(DEFAULT_ROUNDS),
    }
    before = ENVIRONMENT_BEFORE_SETTINGS or dict(os.environ)
    found = config.sources(config.find(), before, defaults.__getitem__)
    return [
        Check(f"setting: {key}", "info", f"{value} (from {source})") for key, value, source in found
    ]


def ceiling_checks(args: argparse.Namespace) -> list[Check]:
    from benchbench.machine.doctor import Check
    from benchbench.machine.doctor_ceilings import check_profile, check_run
    from benchbench.store.migrations import sqlite_path
    from benchbench.store.profiles import latest_profiles
    from benchbench.store.store import normalize_url
    from benchbench.views.results import with_roofline

    """The profile and latest-run checks of :mod:`benchbench.machine.doctor_ceilings`.

    Without ``--store`` and without the default store there is nothing to check (one
    ``unknown`` line); a ``--store`` that does not exist is an error, as everywhere.
    """
    if args.store is None and not os.environ.get("BENCHBENCH_STORE"):
        path = sqlite_path(normalize_url(None))
        if path is not None and not path.exists():
            return [
                Check(
                    "ceilings",
                    "unknown",
                    f"no results store at {path}: no profile or run to check",
                    "benchbench probe; benchbench run SUITE  # or pass --store URL",
                )
            ]
    store = flags.store_from(args)
    try:
        run_row = store.resolve_run("latest")
    except NotFoundError:
        return [
            Check("ceilings", "unknown", f"no run in {store.url}: nothing to hold to a profile")
        ]
    rows = store.measurements(run_row["id"])
    profiles = latest_profiles(store, run_row.get("environment_id"), {r["device"] for r in rows})
    name = run_row.get("label") or str(run_row["id"])[:8]
    found = [check for profile in profiles.values() for check in check_profile(profile)]
    first = next(iter(profiles.values()), None)
    return [
        *found,
        *check_run(name, with_roofline(rows, profiles), first),
        calibration_check(store, run_row, rows),
    ]


def calibration_check(store: object, run_row: dict, rows: list) -> Check:
    """Whether the latest run's environment has a run-to-run calibration (``probe
    --run-to-run``), which a suite with no earlier pair of runs of its own takes."""
    from benchbench.analysis.calibration import calibration_of
    from benchbench.machine.doctor import Check

    name = "run-to-run calibration"
    if any(r.get("device") != "cpu" for r in rows):
        return Check(name, "info", "the latest run has points off the CPU: none applies")
    found = calibration_of(store, run_row, rows)
    if found is None:
        return Check(
            name,
            "info",
            "none for the latest run's environment: a suite's first runs here show "
            "intervals within that run only",
            "benchbench probe --run-to-run",
        )
    return Check(name, "ok", f"{found.words} (from {found.pairs} pairs of runs)")
