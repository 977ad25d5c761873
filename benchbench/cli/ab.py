"""Measure a suite in two Python environments at once, interleaved, and judge head
against base: exit 3 on a regression.

--base and --head are Python interpreters (two virtual environments: yesterday's torch
and today's, or two checkouts of your library installed in two environments), each with
torch and benchbench. A fresh worker zygote per side and round, and one worker per side
and round; every round visits every point in a seeded shuffled order and measures it
on both sides at once, in lockstep: the two workers warm up together, then take turns,
one timed block of calls each, which side first chosen at random, so a
neighbour process that slows one side slows the other alike. --duet runs each pair's
two blocks at the same moment instead, one core each, where two cores are idle. The two
sides are stored as two runs of one group (labels --label-base and --label-head,
default base and head), each naming the other, and judged as `benchbench compare`
judges (same table, same JSON, same flags) with the paired process-level test: the
per-round log ratios, each the median over the round's pairs of blocks taken side by
side. `benchbench compare BASE HEAD` on the two stored runs judges them paired again.

A lockstep point records no peak memory, trace or machine telemetry (each would run
while the other side samples); `benchbench run` records them.

Before measuring, each side is checked: an interpreter that is missing, is not a
Python, lacks torch or benchbench, or loads the suites to other point ids is a usage
error (exit 2) naming the side.

--base-ref/--head-ref REF (for --base/--head) build a side from a commit of --repo: a
worktree and a virtual environment sharing this one's torch, cached by commit, so the
second call builds nothing; WORKTREE is the working tree with its uncommitted changes
(`ab SUITE --base-ref main --head-ref WORKTREE`). docs/compare.md, "My change against main".

Exit codes: 0 no regression; 3 a point slower in head (or failing where base measured
it), unless --no-fail-on-regression; 1 error (a side that fails to build); 2 usage;
130/143 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchbench.cli import compare, flags
from benchbench.cli import run as run_cli
from benchbench.core.defaults import AB_ROUND_S, AB_ROUNDS
from benchbench.core.errors import UsageError

if TYPE_CHECKING:
    from benchbench.run.ref_sides import ReadySide

HELP = "measure a suite in two Python environments at once, interleaved; exit 3 on regression"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_selection(parser)
    parser.add_argument("--base", metavar="PYTHON", help="the base side's Python interpreter")
    parser.add_argument("--head", metavar="PYTHON", help="the head side's Python interpreter")
    parser.add_argument(
        "--base-ref", metavar="REF", help="build the base side from this commit (not --base)"
    )
    parser.add_argument(
        "--head-ref",
        metavar="REF",
        help="build the head side from this commit; WORKTREE (or .): the working tree with "
        "its uncommitted changes (not --head)",
    )
    flags.add_repo(parser)
    parser.add_argument("--label-base", metavar="NAME", help="the base run's label (default base)")
    parser.add_argument("--label-head", metavar="NAME", help="the head run's label (default head)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=AB_ROUNDS,
        metavar="N",
        help="rounds: fresh worker pairs, one a round, each measuring every point; the "
        "paired test has N - 1 degrees of "
        "freedom (default %(default)s)",
    )
    flags.add_seed(parser)
    parser.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="sampling time per point and side, split across its rounds (default "
        "{{ default.ab_round_s }} s x --rounds)",
    )
    parser.add_argument(
        "--cache", choices=("warm", "cold", "rotate"), help="cache mode, as for run (default warm)"
    )
    flags.add_threads(parser)
    parser.add_argument(
        "--duet",
        action="store_true",
        help="both sides sample at the same moment, one core each, where two cores are idle; "
        "lockstep, with the reason, where they are not",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="a point's limit per round (default {{ default.timeout }})",
    )
    flags.add_allocator(parser)
    compare.add_verdict(parser)
    flags.add_store(parser, create=True)
    flags.add_format(parser)


def check_pairs(args: argparse.Namespace) -> None:
    """The verdict's flags, and rounds and budget a paired test can use (``ab``, ``bisect``)."""
    compare.check_verdict(args)
    if args.rounds < 2:
        raise UsageError(f"--rounds must be >= 2 for a paired test, got {args.rounds}")
    if args.budget is not None and args.budget <= 0:
        raise UsageError(f"--budget must be > 0 seconds, got {args.budget}")


def run(args: argparse.Namespace) -> int:
    # torch comes with the runner: here, not at the top, so that `ab --help` answers at once.
    from benchbench.measure.policy import Policy
    from benchbench.run import runner
    from benchbench.run.ab import Side, check_sides, run_ab
    from benchbench.run.ref_sides import record
    from benchbench.run.rounds import Rounds

    check_pairs(args)
    if args.duet:
        from benchbench.run.duet import check_threads

        check_threads(flags.threads_from(args))
    refs = sides_from_refs(args)
    sides = tuple(
        refs[name].side(name, label) if name in refs else Side(name, str(Path(python)), label)
        for name, python, label in (
            ("base", args.base, args.label_base or "base"),
            ("head", args.head, args.label_head or "head"),
        )
    )
    defaults = Policy()
    config = runner.RunConfig(
        suites=flags.suite_paths(args),
        selection=flags.selection_from(args),
        policy=dataclasses.replace(
            defaults,
            max_time_s=args.budget if args.budget is not None else AB_ROUND_S * args.rounds,
        ),
        cache=args.cache or "warm",
        threads=flags.threads_from(args),
        cpus=flags.cpus_from(args),
        timeout_s=args.timeout if args.timeout is not None else run_cli.DEFAULT_TIMEOUT_S,
        allocator=args.allocator or "system",
        rounds=Rounds.fixed(args.rounds, args.seed or 0),
    )
    check_sides(sides)  # before the store is opened: a usage error creates no store
    store = flags.store_from(args)
    err = flags.stderr()
    stop = runner.StopRequest()
    started = time.monotonic()
    with flags.progress_bar(err) as progress, flags.stop_on_signals(stop):
        summary = run_ab(
            config,
            (sides[0], sides[1]),
            store,
            flags.progress_events(progress, "ab"),
            stop,
            checked=True,
            duet=args.duet,
        )
    for k, name in enumerate(("base", "head")):
        if name in refs:
            record(store, summary.run_ids[k], refs[name].built.commit)
    err.print(
        f"ab: {len(summary.results[1])} point(s) on both sides in "
        f"{time.monotonic() - started:.1f} s; runs {summary.run_ids[0][:8]} (base) and "
        f"{summary.run_ids[1][:8]} (head) stored in {store.url}"
    )
    if summary.status == "interrupted":
        signum = stop.signum or 2
        err.print("[yellow]interrupted: the points measured on both sides are stored[/yellow]")
        return 128 + int(signum)
    base, head = (store.resolve_run(run_id) for run_id in summary.run_ids)
    return compare.judge(args, store, base, head)


def sides_from_refs(args: argparse.Namespace) -> dict[str, ReadySide]:
    """The sides named by --base-ref / --head-ref, built or from the cache, by side name;
    a usage error for a side given twice or not at all, or a ref that names no commit,
    before anything is built."""
    for name in ("base", "head"):
        python, ref = getattr(args, name), getattr(args, f"{name}_ref")
        if python and ref:
            raise UsageError(f"--{name} and --{name}-ref both given: give one of them")
        if not python and not ref:
            raise UsageError(
                f"the {name} side is missing: give --{name} PYTHON or --{name}-ref REF"
            )
    named = {n: getattr(args, f"{n}_ref") for n in ("base", "head") if getattr(args, f"{n}_ref")}
    if not named:
        return {}
    from benchbench.run import refs
    from benchbench.run.ref_sides import plan_here, ready

    repo = refs.repository(args.repo)
    commits = {n: refs.resolve(repo, ref, f"--{n}-ref") for n, ref in named.items()}
    err = flags.stderr()
    out: dict[str, ReadySide] = {}
    for name, commit in commits.items():
        out[name] = ready(repo, commit, f"--{name}-ref", args.install)
        err.print(out[name].describe(), markup=False, highlight=False, soft_wrap=True)
    plan_here(out["base"] if "base" in out else out["head"])
    return out
