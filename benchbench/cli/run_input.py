"""The command line of `benchbench run` checked: each flag on its own, before any store is
opened (so a bad command line creates no store), and a resume's flags against the run.

:func:`check_flags` is what ``run`` calls first; :func:`resumed_config` is the stored
run's configuration with the flags given again, which must agree with it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from benchbench.cli import flags
from benchbench.core import defaults
from benchbench.core.errors import UsageError
from benchbench.core.units import parse_one_size

if TYPE_CHECKING:
    from benchbench.run import runner
    from benchbench.store import Store


def repo(value: str | None) -> Path | None:
    """The checkout ``--repo`` names (None when absent); a usage error if not one."""
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


#: What ``--memory-limit`` accepts, for its error.
MEMORY_FORMS = "8G, 512M, 64k or a number of bytes such as 2**33; 0 for no limit"


def memory_limit(text: str | None) -> int:
    """``--memory-limit`` in bytes (0: none); a usage error naming the forms it takes."""
    if text is None or text.strip() == "0":
        return 0
    try:
        return parse_one_size(text, MEMORY_FORMS)
    except UsageError:
        raise UsageError(
            f"--memory-limit {text!r} is not a size: give {MEMORY_FORMS} "
            "(binary units, no B: 8G is 8 GiB)"
        ) from None


def deadline_seconds(text: str | None) -> float | None:
    """Seconds from now to ``--deadline`` (None when absent); a usage error if not one."""
    if text is None:
        return None
    import datetime as dt

    from benchbench.run.deadline import seconds_until

    return seconds_until(text, dt.datetime.now())


def check_flags(args: argparse.Namespace) -> None:
    """Every flag whose value can be wrong on its own, before anything is opened."""
    from benchbench.run import sharding
    from benchbench.run.instrumented import parse_metrics

    if args.budget is not None and not args.budget > 0:
        raise UsageError(f"--budget must be > 0 seconds, got {args.budget}; e.g. --budget 0.5")
    if args.target is not None and not 0 < args.target < 1:
        raise UsageError(
            f"--target must be a fraction between 0 and 1, got {args.target}; e.g. --target 0.03"
        )
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be > 0 seconds, got {args.timeout}; e.g. --timeout 60")
    threads = flags.threads_from(args)
    if threads is not None and threads < 1:
        raise UsageError(f"--threads must be >= 1 or 'all', got {threads}; e.g. --threads 1")
    for flag, value in (
        ("--rounds", args.rounds),
        ("--max-rounds", args.max_rounds),
        ("--points-per-process", args.points_per_process),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}; e.g. {flag} 3")
    if args.force and not args.resume:
        raise UsageError("--force goes with --resume RUN_ID; drop it for a new run")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}; e.g. --seed 0")
    flags.cpus_from(args)
    flags.selection_from(args)
    flags.default_rounds()
    if args.metric is not None:
        parse_metrics(args.metric)
    if args.counter is not None:
        counter(args)
    if args.shard is not None:
        sharding.parse_shard(args.shard, os.environ)
    memory_limit(args.memory_limit)
    deadline_seconds(args.deadline)
    repo(args.repo)
    if args.suites:
        flags.suite_paths(args)


def counter(args: argparse.Namespace) -> str:
    """``--counter``, with ``--metric instructions`` and, for ``pmu``, hardware counters
    here (UsageError naming why not and the fix: callgrind)."""
    from benchbench.run.instrumented import check_counter, parse_metrics

    if not args.resume and "instructions" not in parse_metrics(args.metric):
        raise UsageError(
            f"--counter {args.counter} chooses what counts instructions: add --metric "
            "instructions (or time,instructions), or drop --counter"
        )
    return check_counter(args.counter)


def resumed_config(args: argparse.Namespace, store: Store) -> runner.RunConfig:
    """The run's stored config; flags given must agree with it (timeout/memory may change)."""
    from benchbench.run import runner, sharding
    from benchbench.run.instrumented import parse_metrics

    stored = runner.resume_config(store, args.resume, force=args.force, repo=repo(args.repo))
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
        ("--counter", args.counter, stored.counter),
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
    memory = memory_limit(args.memory_limit) if args.memory_limit else stored.memory_limit_bytes
    return runner.RunConfig(
        **{
            **{f: getattr(stored, f) for f in runner.RunConfig.__dataclass_fields__},
            "timeout_s": timeout,
            "compile_timeout_s": compile_timeout,
            "memory_limit_bytes": memory,
        }
    )
