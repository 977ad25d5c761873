"""Measure the points of one or more suites and store every result.

Each point runs in a worker process: warm-up, calibration (samples >= 1 ms), then
samples until the median's 95 % CI is within --target of it or --budget seconds
have passed. A point that crashes, hangs past --timeout, runs out of memory,
raises or computes a wrong result is stored as an error with the reason; the run
goes on with a fresh worker. Workers use one torch thread unless --threads says
otherwise (--threads all: torch's default, one per core, or per core of --cpus);
--cpus pins the workers to cores. Telemetry (CPU clocks, load, other processes,
idle cores, GPU clocks) is sampled by the runner beside each point and stored with it;
a process with more torch threads than idle cores is measured again later in its round
while the run's budget allows (noted `retaken`), and the note `busy core` stays on a
point whose retake was crowded too. --profile saves a
torch.profiler trace of each selected point (after its timing) beside the store and
lists its top operators. --metric instructions counts each point's instructions per
call under valgrind's callgrind instead of (or, with time,instructions, beside) timing it.

On CUDA the host time each sample took to launch is stored beside the event time, and
a point whose host needs about as long as its GPU is marked launch-bound; the SM clock
is read through NVML between batches and a batch on a throttled clock (< 75 % of the
application clock) is retaken. --cuda-graph times CUDA points as replays of a captured
CUDA graph (launch overhead excluded); --lock-clocks locks the GPUs to their default
clock for the run (root needed). None of the GPU paths has run on a real GPU yet.

Ctrl-C (SIGINT) or SIGTERM stops the run after the current sample: every finished
point is kept, the run is marked interrupted, and `benchbench run --resume RUN_ID`
measures the rest (a second Ctrl-C stops at once).

Exit codes:
  0    every point measured or skipped
  1    a point failed (crash, timeout, out of memory, exception, wrong result),
       nothing could be measured, or another error (store, suite file)
  2    usage error (bad flag, unknown suite, a suite's optional extra missing:
       zoo needs pip install 'benchbench[models]', --resume with conflicting options)
  130  interrupted by SIGINT (Ctrl-C); finished points are stored
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

from benchbench.cli import flags
from benchbench.core import defaults
from benchbench.core.errors import UsageError
from benchbench.core.units import format_time, parse_one_size
from benchbench.core.values import CACHE_MODES, OUTPUT_MODES

if TYPE_CHECKING:
    from benchbench.run import runner
    from benchbench.store import Store

HELP = "measure suites and store the results"

DEFAULT_TIMEOUT_S = 60.0


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
        f"--target (default {defaults.POLICY_MAX_TIME_S})",
    )
    flags.add_rounds(parser)
    parser.add_argument(
        "--points-per-process",
        type=int,
        metavar="K",
        help="a worker process of the first rounds measures K points of its round, one after "
        "another (never two processes of one point in one process); more processes a point "
        "take one each (default 1: a fresh process per point)",
    )
    flags.add_seed(parser)
    parser.add_argument(
        "--target",
        type=float,
        metavar="FRACTION",
        help="stop when the median's 95%% CI half-width is this fraction of it "
        f"(default {defaults.POLICY_TARGET_REL_CI})",
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
        "call counted under valgrind's callgrind (one instrumented worker for the run, one "
        "thread; no neighbour can change a count, but it cannot see memory stalls or other "
        "threads); time,instructions: both, stored in the same rows",
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
        help="lock the run's NVIDIA GPUs to their default application SM clock "
        "(nvmlDeviceSetGpuLockedClocks; needs root and NVML) and reset them after",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="a point running longer is stopped and recorded as an error (default "
        f"{DEFAULT_TIMEOUT_S:g}; {defaults.COMPILE_TIMEOUT_S:g} for torch.compile variants, "
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
        "filters and policy (SUITE and those flags may be omitted; if given they must match)",
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


def _repo(value: str | None) -> Path | None:
    if value is None:
        return None
    from benchbench.machine.vcs import git_state

    path = Path(value).expanduser()
    if git_state(path).sha is None:
        raise UsageError(
            f"--repo {value!r} is not a git checkout (git rev-parse HEAD fails there); "
            "give the directory of the code under test"
        )
    return path


def _fresh_config(args: argparse.Namespace) -> runner.RunConfig:
    from benchbench.measure.policy import Policy
    from benchbench.run import runner, sharding
    from benchbench.run.instrumented import parse_metrics

    if not args.suites:
        raise UsageError("give at least one SUITE (or --resume RUN_ID to finish a stored run)")
    shard, auto = sharding.parse_shard(args.shard, os.environ) if args.shard else (None, None)
    if auto is not None:
        flags.stderr().print(str(auto), markup=False, highlight=False, soft_wrap=True)
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
        threads=flags.threads_from(args),
        cpus=flags.cpus_from(args),
        timeout_s=args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_S,
        compile_timeout_s=args.timeout,  # None: COMPILE_TIMEOUT_S for compile variants
        memory_limit_bytes=_memory_limit(args.memory_limit),
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
        repo=_repo(args.repo),
    )


def _memory_limit(text: str | None) -> int:
    return parse_one_size(text) if text not in (None, "0") else 0


def _resumed_config(args: argparse.Namespace, store: Store) -> runner.RunConfig:
    """The run's stored config; flags given must agree with it (timeout/memory may change)."""
    from benchbench.run import runner, sharding
    from benchbench.run.instrumented import parse_metrics

    stored = runner.resume_config(store, args.resume)
    shard = sharding.parse_shard(args.shard, os.environ)[0] if args.shard else None
    given: dict[str, tuple[object, object]] = {}
    if args.suites:
        paths = tuple(Path(p).resolve() for p in flags.suite_paths(args))
        given["SUITE"] = (paths, tuple(p.resolve() for p in stored.suites))
    if any(v for v in (args.device, args.dtype, args.filter, args.tag)):
        selection = flags.selection_from(args)
        for flag, name in (
            ("--device", "devices"),
            ("--dtype", "dtypes"),
            ("--filter", "pattern"),
            ("--tag", "tags"),
        ):
            value = getattr(selection, name)
            if value not in (None, ()):
                given[flag] = (value, getattr(stored.selection, name))
    for flag, value, before in (
        ("--budget", args.budget, stored.policy.max_time_s),
        ("--target", args.target, stored.policy.target_rel_ci),
        ("--cuda-graph", args.cuda_graph, stored.policy.cuda_graph),
        ("--cache", args.cache, stored.cache),
        ("--outputs", args.outputs, stored.outputs),
        ("--metric", parse_metrics(args.metric) if args.metric else None, stored.metrics),
        ("--threads", args.threads, stored.threads or defaults.ALL_THREADS),
        ("--cpus", flags.cpus_from(args) or None, stored.cpus or None),
        ("--allocator", args.allocator, stored.allocator),
        ("--rounds", args.rounds, stored.rounds.count),
        ("--max-rounds", args.max_rounds, stored.rounds.max_count),
        ("--seed", args.seed, stored.rounds.seed),
        ("--points-per-process", args.points_per_process, stored.rounds.per_process),
        ("--kind", args.kind, stored.kind),
        ("--label", args.label, stored.label),
        ("--shard", shard, stored.shard),
    ):
        if value is not None:
            given[flag] = (value, before)
    conflicts = [
        f"{flag} {now} (the run has {then})" for flag, (now, then) in given.items() if now != then
    ]
    if conflicts:
        raise UsageError(
            f"--resume {args.resume}: " + "; ".join(conflicts) + ". A resumed run keeps its "
            "own suites, filters and policy: drop these flags, or start a new run"
        )
    timeout = args.timeout if args.timeout is not None else stored.timeout_s
    compile_timeout = args.timeout if args.timeout is not None else stored.compile_timeout_s
    memory = _memory_limit(args.memory_limit) if args.memory_limit else stored.memory_limit_bytes
    return runner.RunConfig(
        **{
            **{f: getattr(stored, f) for f in runner.RunConfig.__dataclass_fields__},
            "timeout_s": timeout,
            "compile_timeout_s": compile_timeout,
            "memory_limit_bytes": memory,
        }
    )


@contextlib.contextmanager
def _locked_clocks(args: argparse.Namespace, config: runner.RunConfig, err: Any) -> Iterator[None]:
    """``--lock-clocks``: the run's GPUs (``cuda`` is 0; GPU 0 when none is named)
    locked to their default clock while the run lasts; a UsageError before measuring
    when NVML or permissions do not allow it."""
    if not args.lock_clocks:
        yield
        return
    from benchbench.machine import nvml

    named = config.selection.devices or ()
    indices = sorted({int(d.partition(":")[2] or 0) for d in named if d.startswith("cuda")})
    with nvml.locked_clocks(*nvml.load_nvml(), indices or [0]) as mhz:
        locked = ", ".join(f"GPU {i} at {m} MHz" for i, m in mhz.items())
        err.print(f"clocks locked for this run: {locked}")
        yield


def run(args: argparse.Namespace) -> int:
    # The runner imports torch (~1.2 s) and the views scipy: here, not at the top, so
    # that `benchbench --help` and `run --help` answer at once.
    from benchbench.run import runner
    from benchbench.store.profiles import latest_profiles
    from benchbench.views import results as views
    from benchbench.views.run_notes import run_footer

    if args.budget is not None and args.budget <= 0:
        raise UsageError(f"--budget must be > 0 seconds, got {args.budget}")
    if args.target is not None and not 0 < args.target < 1:
        raise UsageError(f"--target must be a fraction between 0 and 1, got {args.target}")
    flags.cpus_from(args)  # checked before a store is created
    store = flags.store_from(args)
    config = _resumed_config(args, store) if args.resume else _fresh_config(args)
    if args.profile:
        config = dataclasses.replace(
            config, profile_dir=profile_dir_for(store.url, store.engine.url.database)
        )
    err = flags.stderr()
    stop = runner.StopRequest()
    with (
        _locked_clocks(args, config, err),
        flags.progress_bar(err) as progress,
        flags.stop_on_signals(stop),
    ):
        started = time.monotonic()
        on_event = flags.progress_events(progress, "measuring")

        summary = runner.run(config, store, on_event, stop)
    run_row = store.resolve_run(summary.run_id)
    stored = store.measurements(summary.run_id)
    profiles = latest_profiles(store, run_row["environment_id"], {r["device"] for r in stored})
    rows = views.with_roofline(stored, profiles)
    elapsed = time.monotonic() - started
    if args.format == "json":
        flags.print_json(views.run_document(run_row, rows))
    else:
        grid = views.results_grid(
            rows,
            title=f"run {summary.run_id}",
            profiled=bool(profiles),
            footer=run_footer(store, run_row, rows),
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
