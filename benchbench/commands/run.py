"""Measure the points of one or more suites and store every result.

Each point runs in a worker process: warm-up, calibration (samples >= 1 ms), then
samples until the median's 95 % CI is within --target of it or --budget seconds
have passed. A point that crashes, hangs past --timeout or runs out of memory is
recorded as an error; the run goes on. --profile saves a torch.profiler trace of
each selected point (after its timing) beside the store and lists its top operators.

Exit codes: 0 every point measured or skipped; 1 a point failed, or nothing could
be measured; 2 usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from benchbench import runner
from benchbench.commands import flags
from benchbench.engine import Policy
from benchbench.errors import UsageError
from benchbench.model import CACHE_MODES
from benchbench.units import format_time, parse_one_size
from benchbench.views.results import results_table, run_document, summary_line

HELP = "measure suites and store the results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_selection(parser)
    flags.add_store(parser)
    flags.add_json(parser)
    parser.add_argument(
        "--budget",
        type=float,
        default=Policy.max_time_s,
        metavar="SECONDS",
        help="sampling time cap per point (default %(default)s)",
    )
    parser.add_argument(
        "--target",
        type=float,
        default=Policy.target_rel_ci,
        metavar="FRACTION",
        help="stop when the median's 95%% CI half-width is this fraction of it "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--cache",
        choices=CACHE_MODES,
        default="warm",
        help="warm: back-to-back calls; cold: evict 2x the last-level cache before each sample; "
        "rotate: cycle through copies of the inputs (default warm)",
    )
    parser.add_argument("--threads", type=int, metavar="N", help="torch threads (default: torch's)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a point running longer is stopped and recorded as an error (default %(default)s)",
    )
    parser.add_argument(
        "--memory-limit",
        metavar="SIZE",
        default="0",
        help="address-space limit per worker, e.g. 8G; an allocation past it is recorded as "
        "'out of memory' for that point (default: none)",
    )
    parser.add_argument(
        "--label", metavar="NAME", help="a name for this run (compare and show accept it)"
    )
    parser.add_argument(
        "--kind", choices=runner.RUN_KINDS, default="adhoc", help="run kind (default adhoc)"
    )
    parser.add_argument(
        "--resume", metavar="RUN_ID", help="measure only the points RUN_ID has not stored yet"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after measuring each selected point (use --filter), save a torch.profiler "
        "Chrome trace to profiles/RUN_ID/ beside the store and list its top operators",
    )


def profile_dir_for(store_url: str, database: str | None) -> Path:
    """``profiles/`` beside an SQLite store's file, else ``results/profiles``."""
    if store_url.startswith("sqlite") and database and database != ":memory:":
        return Path(database).resolve().parent / "profiles"
    return Path("results") / "profiles"


def run(args: argparse.Namespace) -> int:
    if args.budget <= 0:
        raise UsageError(f"--budget must be > 0 seconds, got {args.budget}")
    if not 0 < args.target < 1:
        raise UsageError(f"--target must be a fraction between 0 and 1, got {args.target}")
    config = runner.RunConfig(
        suites=flags.suite_paths(args),
        selection=flags.selection_from(args),
        policy=Policy(max_time_s=args.budget, target_rel_ci=args.target),
        cache=args.cache,
        threads=args.threads,
        timeout_s=args.timeout,
        memory_limit_bytes=parse_one_size(args.memory_limit) if args.memory_limit != "0" else 0,
        kind=args.kind,
        label=args.label,
        resume=args.resume,
    )
    store = flags.store_from(args)
    if args.profile:
        config = dataclasses.replace(
            config, profile_dir=profile_dir_for(store.url, store.engine.url.database)
        )
    err = flags.stderr()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[current]}"),
        console=err,
        transient=True,
    ) as progress:
        task: list[Any] = []
        started = time.monotonic()

        def on_event(event: str, data: dict[str, Any]) -> None:
            if event == "start":
                task.append(progress.add_task("measuring", total=data["total"], current=""))
            elif event == "point":
                progress.update(task[0], current=data["label"])
            elif event == "result":
                progress.advance(task[0])

        summary = runner.run(config, store, on_event)
    rows = store.measurements(summary.run_id)
    run_row = store.resolve_run(summary.run_id)
    elapsed = time.monotonic() - started
    if args.json:
        flags.print_json(run_document(run_row, rows))
    else:
        flags.stdout().print(results_table(rows, title=f"run {summary.run_id}"))
    err.print(
        f"{summary_line(rows)} in {elapsed:.1f} s; run {summary.run_id} stored in {store.url}"
    )
    if args.profile:
        _print_profiles(summary.results, err)
    skipped = {r.reason for r in summary.results if r.status == "skipped" and r.reason}
    for reason in sorted(skipped):
        err.print(f"[yellow]skipped: {reason}[/yellow]")
    if summary.count("ok") == 0:
        err.print("[red]nothing could be measured[/red]")
        return 1
    return 1 if summary.count("error") else 0


def _print_profiles(results: list[Any], err: Any) -> None:
    """Each profiled point's trace file and its top operators by self CPU time."""
    for result in results:
        profiled = result.extra.get("profile") if result.status == "ok" else None
        if not profiled:
            continue
        err.print(f"[bold]profile[/bold] {escape(result.point.label)}: {escape(profiled['trace'])}")
        calls = profiled["calls"]
        for op in profiled["top"]:
            device = (
                f", device {format_time(op['self_device_s'] / calls)}/call"
                if op["self_device_s"]
                else ""
            )
            err.print(
                f"  {format_time(op['self_cpu_s'] / calls):>10}/call self CPU"
                f"{device}  x{op['calls'] / calls:g}  {escape(op['name'])}"
            )
