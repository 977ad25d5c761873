"""Measure the points of one or more suites and store every result.

Each point runs in a worker process: warm-up, calibration (samples >= 1 ms), then
samples until the median's {{ default.confidence_pct }} CI is within --target of it or
--budget seconds have passed. A point that crashes, hangs past --timeout, runs out of
memory, raises or computes a wrong result is stored as an error with the reason; the run
goes on with a fresh worker. Workers use {{ default.threads }} torch thread(s) unless
--threads says otherwise (--threads all: torch's default, one per core, or per core of --cpus);
--cpus pins the workers to cores. Telemetry (CPU clocks, load, other processes,
idle cores, GPU clocks) is sampled by the runner beside each point and stored with it;
a process with more torch threads than idle cores is measured again later in its round
while the run's budget allows (noted `retaken`), and the note `busy core` stays on a
point whose retake was crowded too. --profile saves a
torch.profiler trace of each selected point (after its timing) beside the store and
lists its top operators. --metric instructions counts each point's instructions per
call under valgrind's callgrind instead of (or, with time,instructions, beside) timing it;
--counter pmu counts them with the CPU's own counter instead, natively, where the machine
exposes one (`benchbench doctor` says whether it does; where not, exit 2 before a store is
made).
{{ fact.hardware }}

On CUDA the host time each sample took to launch is stored beside the event time, and
a point whose host needs about as long as its GPU is marked launch-bound; the SM clock
is read through NVML between batches and a batch on a throttled clock (< 75 % of the
application clock) is retaken. --cuda-graph times CUDA points as replays of a captured
CUDA graph (launch overhead excluded); --lock-clocks locks the GPUs to their base
clock for the run (root needed).

Ctrl-C (SIGINT) or SIGTERM stops the run after the current sample: every finished
point is kept, the run is marked interrupted, and `benchbench run --resume RUN_ID`
measures the rest (a second Ctrl-C stops at once). A resume is refused (exit 2, naming
what differs) when the environment ($BENCHBENCH_MACHINE or the hostname, CPU, torch,
threads, ...), benchbench, a suite file or the git sha is not the run's: a requeued job
on another node would mix two machines in one run. --resume RUN_ID --force measures the
rest into a new run of the same group, under its own environment. --deadline WHEN
stops the run the same way on its own (a duration, 25m, or a time of day, 02:30):
give it a scheduler's time limit less its grace period. Under a scheduler, start
benchbench with `exec` in a wrapper script (and a tini-like init as a container's
PID 1), so that the scheduler's SIGTERM reaches it, not only the shell.

Every flag, the suites and the points they select are checked before the store is
opened, so a bad command line creates no store.

Exit codes:
  0    every point measured or skipped
  1    a point failed (crash, timeout, out of memory, exception, wrong result),
       nothing could be measured, or another error (a suite file; the store damaged,
       read-only, full or gone: every finished point is kept, whole)
  2    usage error (bad flag, unknown suite, a suite's optional extra missing:
       zoo needs pip install 'benchbench[models]', --resume with conflicting options,
       or on another machine or code without --force)
  130  interrupted by SIGINT (Ctrl-C); finished points are stored
  142  stopped at --deadline; finished points are stored
  143  interrupted by SIGTERM; finished points are stored
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbench.cli import flags, run_input
from benchbench.core import defaults
from benchbench.core.errors import StoreError, UsageError
from benchbench.core.units import format_time
from benchbench.core.values import CACHE_MODES, OUTPUT_MODES

if TYPE_CHECKING:
    from benchbench.run import runner

HELP = "measure suites and store the results"

DEFAULT_TIMEOUT_S = defaults.RUN_TIMEOUT_S
DEFAULT_COUNTER = defaults.DEFAULT_COUNTER


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_selection(parser, suites_nargs="*")
    flags.add_store(parser, create=True)
    flags.add_format(parser)
    parser.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="sampling budget per point: the run's is this times its points; the first "
        "rounds spend half, the rest goes a process at a time to the points furthest from "
        "--target (default {{ default.budget }})",
    )
    flags.add_rounds(parser)
    parser.add_argument(
        "--points-per-process",
        type=int,
        metavar="K",
        help="a worker process of the first rounds measures K points of its round, one after "
        "another (never two processes of one point in one process); more processes a point "
        "take one each (default: one, a fresh process per point)",
    )
    flags.add_seed(parser)
    parser.add_argument(
        "--target",
        type=float,
        metavar="FRACTION",
        help="stop when the median's 95%% CI half-width is this fraction of it "
        "(default {{ default.target }})",
    )
    parser.add_argument(
        "--cache",
        choices=CACHE_MODES,
        help="warm: back-to-back calls; cold: evict 2x the last-level cache before each sample; "
        "rotate: cycle through copies of the inputs (default warm)",
    )
    parser.add_argument(
        "--outputs",
        choices=OUTPUT_MODES,
        help="output lifetime in the timed loop, for every point: keep holds the previous "
        "call's output until the next call returns, as model code does (y = f(x) in a loop); "
        "drop frees it first, so the allocator hands the same cache-hot block back "
        "(default: each workload's outputs=, keep unless the suite says drop)",
    )
    flags.add_threads(parser)
    parser.add_argument(
        "--metric",
        metavar="METRIC[,METRIC]",
        help="time: wall time over fresh processes (default); instructions: instructions per "
        "call counted under valgrind's callgrind (one instrumented worker per core, up to 4, "
        "each counting its share of the points on one thread; no neighbour can change a "
        "count, but it cannot see memory stalls or other threads); time,instructions: both, "
        "stored in the same rows",
    )
    parser.add_argument(
        "--counter",
        choices=defaults.COUNTERS,
        help="what counts --metric instructions: callgrind (every instruction, the C "
        "allocator's kept apart; ~50x slower than native) or pmu (the CPU's retired-"
        "instructions counter through perf_event_open, natively, allocator included; "
        "where the machine has one: not in most VMs). Counts of two counters are never "
        "compared (default: {{ default.counter }})",
    )
    parser.add_argument(
        "--cuda-graph",
        action="store_true",
        default=None,
        help="CUDA points: capture K calls in a CUDA graph after warm-up and time its replays "
        "(time per call = replay / K; excludes launch overhead; a workload the graph "
        "cannot capture is skipped with torch's reason); ignored with a note elsewhere",
    )
    parser.add_argument(
        "--lock-clocks",
        action="store_true",
        help="lock the run's NVIDIA GPUs (matched to NVML by UUID) to their base clock, "
        "the one power-cap dips do not undercut (nvmlDeviceSetGpuLockedClocks at the TDP "
        "limit, as nvbench's 'base'; needs root and NVML), and reset them after",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="a point running longer is stopped and recorded as an error (default "
        "{{ default.timeout }}; {{ default.compile_timeout }} for torch.compile variants, "
        "whose every point compiles afresh)",
    )
    parser.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="memory limit per worker, e.g. 8G; a point past it is recorded as 'out of "
        "memory'. cpu and mps points: an address-space limit. cuda points: the point's GPU "
        "capped at SIZE (torch.cuda.set_per_process_memory_fraction) and the worker's "
        "resident host memory watched by the runner, which kills it past SIZE (an "
        "address-space limit would break CUDA) (default: none)",
    )
    flags.add_allocator(parser)
    parser.add_argument(
        "--label", metavar="NAME", help="a name for this run (compare and show accept it)"
    )
    parser.add_argument("--kind", choices=defaults.RUN_KINDS, help="run kind (default adhoc)")
    parser.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="measure only the points RUN_ID has not stored yet, with the run's own suites, "
        "filters and policy (SUITE and those flags may be omitted; if given they must match); "
        "refused when the environment (e.g. $BENCHBENCH_MACHINE), torch, benchbench, a suite "
        "file or the git sha differs from the run's",
    )
    parser.add_argument(
        "--deadline",
        metavar="WHEN",
        help="stop cleanly at WHEN, a duration (25m, 1h30m) or a time of day (02:30): "
        "finished points kept, the run left for --resume (exit 142); give the scheduler's "
        "limit less its grace period",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --resume, where the machine or code differs: measure the rest into a new "
        "run of RUN_ID's group, under its own environment (its config's 'continues' names "
        "RUN_ID; resuming it measures none of RUN_ID's points again)",
    )
    parser.add_argument(
        "--shard",
        metavar="I/N|auto",
        help="measure only shard I of N: a deterministic, disjoint part of the points, "
        f"balanced by the stored durations of earlier runs; {flags.SHARD_AUTO_HELP}",
    )
    parser.add_argument(
        "--shard-by",
        choices=("cost", "count"),
        help="balance shards by expected cost from the store's history (default) or by count",
    )
    parser.add_argument(
        "--group",
        metavar="ID",
        help="run-group id shared by the shards of one run (default with --shard: "
        "$BENCHBENCH_GROUP, $GITHUB_RUN_ID or $SLURM_ARRAY_JOB_ID)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after measuring each selected point (use --filter), save a torch.profiler "
        "Chrome trace to profiles/RUN_ID/ beside the store and list its top operators",
    )
    parser.add_argument(
        "--repo",
        metavar="PATH",
        help="git checkout of the code under test; its sha, branch and dirty state are stored "
        "with the run (default: the current directory when it is a checkout)",
    )


def profile_dir_for(store_url: str, database: str | None) -> Path:
    """``profiles/`` beside an SQLite store's file, else ``results/profiles``."""
    if store_url.startswith("sqlite") and database and database != ":memory:":
        return Path(database).resolve().parent / "profiles"
    return Path("results") / "profiles"


def _fresh_config(args: argparse.Namespace) -> runner.RunConfig:
    from benchbench.measure.policy import Policy
    from benchbench.run import runner, sharding
    from benchbench.run.instrumented import parse_metrics

    if not args.suites:
        raise UsageError("give at least one SUITE (or --resume RUN_ID to finish a stored run)")
    shard, auto = sharding.parse_shard(args.shard, os.environ) if args.shard else (None, None)
    if auto is not None:
        flags.print_note(str(auto))
    group = args.group
    if shard is not None and shard.count > 1 and group is None:
        group = sharding.scheduler_group(os.environ)
        if group is None:
            raise UsageError(
                f"--shard {shard} needs --group ID so that the shards of one run share a group, "
                "e.g. --group $GITHUB_RUN_ID or --group $SLURM_ARRAY_JOB_ID"
            )
    defaults = Policy()
    return runner.RunConfig(
        suites=flags.suite_paths(args),
        selection=flags.selection_from(args),
        policy=Policy(
            max_time_s=args.budget if args.budget is not None else defaults.max_time_s,
            target_rel_ci=args.target if args.target is not None else defaults.target_rel_ci,
            cuda_graph=bool(args.cuda_graph),
        ),
        cache=args.cache or "warm",
        outputs=args.outputs,
        metrics=parse_metrics(args.metric),
        counter=args.counter or DEFAULT_COUNTER,
        threads=flags.threads_from(args),
        cpus=flags.cpus_from(args),
        timeout_s=args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S,
        compile_timeout_s=args.timeout,  # None: COMPILE_TIMEOUT_S for compile variants
        memory_limit_bytes=run_input.memory_limit(args.memory_limit),
        allocator=args.allocator or "system",
        rounds=dataclasses.replace(
            flags.rounds_from(args),
            per_process=1 if args.points_per_process is None else args.points_per_process,
        ),
        kind=args.kind or "adhoc",
        label=args.label,
        shard=shard,
        shard_by=args.shard_by or "cost",
        group=group,
        repo=run_input.repo(args.repo),
    )


@contextlib.contextmanager
def _locked_clocks(args: argparse.Namespace, config: runner.RunConfig, err: Any) -> Iterator[None]:
    """``--lock-clocks``: the run's GPUs (``cuda`` is 0; cuda:0 when none is named),
    matched to NVML by UUID, locked to their base clock while the run lasts; a
    UsageError before measuring when NVML, the UUIDs or permissions do not allow it."""
    if not args.lock_clocks:
        yield
        return
    from benchbench.machine import nvml

    named = config.selection.devices or ()
    indices = sorted({int(d.partition(":")[2] or 0) for d in named if d.startswith("cuda")})
    loaded, why_not = nvml.load_nvml()
    # The workers' CUDA indices, read in a child: the runner starts no CUDA context.
    uuids = (nvml.visible_cuda_uuids() or {}) if loaded is not None else {}
    wanted = {i: uuids.get(i) for i in indices or [0]}
    with nvml.locked_clocks(loaded, why_not, wanted) as mhz:
        locked = ", ".join(
            f"cuda:{i} at its base clock" + (f" (SM {m} MHz now)" if m else "")
            for i, m in mhz.items()
        )
        err.print(f"clocks locked for this run: {locked}")
        yield


def run(args: argparse.Namespace) -> int:
    # The runner and the views import scipy and SQLAlchemy (never torch: the suites load
    # in a worker): here, not at the top, so that `run --help` answers at once.
    from benchbench.interchange.spool import SpoolingStore, spooled
    from benchbench.run import runner
    from benchbench.run.deadline import DEADLINE_SIGNAL, deadline
    from benchbench.store.profiles import latest_profiles
    from benchbench.views import results as views
    from benchbench.views.run_notes import run_footer, shown

    # Every flag, the suites and the points they select are checked before the store is
    # opened: a bad command line never creates a store (or its folder).
    run_input.check_flags(args)
    stop_in_s = run_input.deadline_seconds(args.deadline)
    if args.resume:
        store = flags.store_from(args, create=False)  # the run to resume must be there
        config = run_input.resumed_config(args, store)
    else:
        config = _fresh_config(args)
    # The workers start here; the first lists the suites' points (the suites import torch,
    # this process never does).
    with runner.Session(config) as session:
        if not args.resume:
            if not session.plan.points:
                raise UsageError(runner.NO_POINTS)
            store = flags.store_from(args)
        if args.profile:
            config = session.config = dataclasses.replace(
                config, profile_dir=profile_dir_for(store.url, store.engine.url.database)
            )
        _check_room(store)  # a read-only or full folder: refused before anything is measured
        err = flags.stderr()
        # A server's store that goes away mid-run: the points go to a spool meanwhile.
        store = spooled(store, lambda line: err.print(f"[yellow]{line}[/yellow]"))
        stop = runner.StopRequest()
        with (
            _locked_clocks(args, config, err),
            flags.progress_bar(err) as progress,
            flags.stop_on_signals(stop),
            deadline(stop_in_s, stop),
        ):
            started = time.monotonic()
            on_event = flags.progress_events(progress, "measuring")

            summary = session.run(store, on_event, stop)
    if isinstance(store, SpoolingStore) and store.stranded is not None:
        raise StoreError(store.stranded_line())
    run_row = store.resolve_run(summary.run_id)
    stored = store.measurements(summary.run_id)
    profiles = latest_profiles(store, run_row["environment_id"], {r["device"] for r in stored})
    rows = views.with_roofline(stored, profiles)
    elapsed = time.monotonic() - started
    table = shown(store, run_row, rows)
    if args.format == "json":
        flags.print_json(views.run_document(run_row, rows, {"run_to_run": table.rerun}))
    else:
        grid = views.results_grid(
            table.rows,
            title=f"run {summary.run_id} · {table.words}",
            profiled=bool(profiles),
            footer=run_footer(run_row, table.rows, table.previous, table.shift),
        )
        flags.print_tables(args, [grid])
    flags.print_failures(views.failures(rows))
    where = f"run {summary.run_id} stored in {store.url}"
    if config.shard is not None:
        where += f" (shard {config.shard} of group {run_row['group_id']})"
    err.print(f"{views.summary_line(rows)} in {elapsed:.1f} s; {where}")
    if args.profile:
        _print_profiles(summary.results, err)
    skipped = {r.reason for r in summary.results if r.status == "skipped" and r.reason}
    for reason in sorted(skipped):
        err.print(f"[yellow]skipped: {reason}[/yellow]")
    if summary.status == "interrupted":
        signum = summary.stop_signal or signal.SIGINT
        if signum == DEADLINE_SIGNAL:
            err.print(
                f"[yellow]stopped at the deadline (--deadline {args.deadline}): "
                f"{len(summary.results)} point(s) stored; finish with: benchbench run "
                f"--resume {summary.run_id}[/yellow]"
            )
            return 128 + int(signum)
        err.print(
            f"[yellow]interrupted by {signal.Signals(signum).name}: {len(summary.results)} "
            f"point(s) stored; finish with: benchbench run --resume {summary.run_id}[/yellow]"
        )
        return 128 + int(signum)
    if not rows:
        err.print("no points to measure" + (f" in shard {config.shard}" if config.shard else ""))
        return 0
    statuses = {r["status"] for r in rows}
    if "ok" not in statuses:
        err.print("[red]nothing could be measured[/red]")
        return 1
    return 1 if "error" in statuses else 0


def _check_room(store: Any) -> None:
    """Refuse an SQLite store whose folder is read-only or short of space, naming it."""
    from benchbench.store.failures import unwritable
    from benchbench.store.migrations import sqlite_path

    path = sqlite_path(store.url)
    if path is not None and (line := unwritable(path)) is not None:
        raise StoreError(line)


def _print_profiles(results: list[Any], err: Any) -> None:
    """Each profiled point's trace file and its top operators by self CPU time."""
    from rich.markup import escape

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
