"""Flags shared by several commands, added by one helper each so they never drift.

Every command's module imports this one to build the parser, so it imports nothing
heavy at its top: `benchbench --help` must not wait for torch, scipy or SQLAlchemy
(see :mod:`benchbench.cli`). What a command needs to act (the store, the suites, the
rounds) is imported by the helper that does it, when the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from benchbench.core.defaults import (
    ALL_THREADS,
    DEFAULT_MAX_ROUNDS,
    DEFAULT_ROUNDS,
    DEFAULT_THREADS,
)
from benchbench.core.errors import UsageError
from benchbench.machine.allocator import ALLOCATORS
from benchbench.machine.cpus import parse_cpus
from benchbench.views import tables

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from benchbench.run.rounds import Rounds
    from benchbench.run.workers import StopRequest
    from benchbench.store import Store
    from benchbench.suite.load import Selection

DEVICES = ("cpu", "cuda", "mps")
#: What ``--shard auto`` reads, for the help of ``run`` and ``list``.
SHARD_AUTO_HELP = (
    "auto: I and N from $SLURM_ARRAY_TASK_ID with $SLURM_ARRAY_TASK_COUNT or _MIN/_MAX "
    "(a Slurm array job) or $JOB_COMPLETION_INDEX with $BENCHBENCH_SHARD_COUNT (a "
    "Kubernetes Indexed Job)"
)


def add_store(parser: argparse.ArgumentParser, *, create: bool = False) -> None:
    """Add ``--store``; ``create=True`` lets the command create a store that is missing.

    Only commands that write results (run, time, import, probe) pass it; every other
    command refuses a missing store. :func:`store_from` reads this choice back, so a
    command's help and its behaviour cannot disagree.
    """
    if create:
        what = "results store, created if missing"
    else:
        what = "results store to read, which must exist"
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"{what}: an SQLite file path or sqlite:///PATH, or postgresql://USER@HOST/DB "
        "(default: $BENCHBENCH_STORE, else results/benchbench.db)",
    )
    parser.set_defaults(store_create=create)


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document on stdout instead of a table"
    )


def add_threads(parser: argparse.ArgumentParser) -> None:
    """``--threads`` and ``--cpus``, the same for ``run``, ``time`` and ``ab``."""
    parser.add_argument(
        "--threads",
        type=parse_threads,
        metavar="N|all",
        help="torch threads in the workers (default {{ default.threads }}: small and mid ops "
        "agree across processes within 1-5 %% with one thread, while with two about one "
        "process in ten runs 17-39 %% slow; torch.utils.benchmark.Timer measures with one "
        f"too); '{ALL_THREADS}': torch's default, one per core (or per core of --cpus). A "
        "process with more threads than the cores other processes left idle is measured "
        "again later in its round (--rounds 2 or more) while the run's budget allows",
    )
    parser.add_argument(
        "--cpus",
        metavar="LIST",
        help="pin the worker processes to these cores, e.g. 0, 0-1 or 0,2-3 "
        "(sched_setaffinity; Linux); recorded with the run and every point",
    )


def parse_threads(text: str) -> int | str:
    """``--threads``'s value: a count (checked >= 1 by the config) or ``all``."""
    if text.strip().lower() == ALL_THREADS:
        return ALL_THREADS
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a thread count; give a number like 1 or 2, or '{ALL_THREADS}' "
            "for torch's default (one per core)"
        ) from None


def threads_from(args: argparse.Namespace) -> int | None:
    """The workers' torch threads: ``--threads N``, None for ``--threads all`` (torch's
    default), :data:`DEFAULT_THREADS` without the flag."""
    if args.threads is None:
        return DEFAULT_THREADS
    return None if args.threads == ALL_THREADS else int(args.threads)


def cpus_from(args: argparse.Namespace) -> tuple[int, ...]:
    """The cores ``--cpus`` names, checked against those this process may use; () if absent."""
    return parse_cpus(args.cpus) if args.cpus is not None else ()


def add_format(parser: argparse.ArgumentParser) -> None:
    """Add ``--format table|markdown|csv|json`` and ``--json`` (the same as
    ``--format json``); the command reads ``args.format``."""
    parser.add_argument(
        "--format",
        choices=tables.FORMATS,
        default="table",
        help="table: for people, at the width the content needs when stdout is not a "
        'terminal; markdown: GitHub tables (a job summary: >> "$GITHUB_STEP_SUMMARY"); '
        "csv: a header and a line per row, one block per table; json: one document "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="print one JSON document on stdout (the same as --format json)",
    )


def add_selection(parser: argparse.ArgumentParser, suites_nargs: str = "+") -> None:
    parser.add_argument(
        "suites",
        nargs=suites_nargs,
        metavar="SUITE",
        help="built-in suite name, suite file path, or opbench:PATH for a test module of "
        "PyTorch's benchmarks/operator_benchmark (e.g. opbench:pytorch/benchmarks/"
        "operator_benchmark/pt/unary_test.py)",
    )
    parser.add_argument(
        "--device",
        metavar="LIST",
        help="comma-separated devices replacing the suites' (cpu,cuda,mps or all; default: "
        "$BENCHBENCH_DEVICE or the settings file's device, else the suites')",
    )
    parser.add_argument(
        "--dtype", metavar="LIST", help="comma-separated dtypes replacing the suites'"
    )
    parser.add_argument("--filter", metavar="REGEX", help="keep points whose 'suite/label' matches")
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="keep workloads with this tag (repeatable)",
    )


def selection_from(args: argparse.Namespace) -> Selection:
    from benchbench.suite.load import Selection

    devices = None
    if args.device:
        names = [d.strip() for d in args.device.split(",") if d.strip()]
        if "all" in names:
            names = list(DEVICES)
        for name in names:
            if name.partition(":")[0] not in DEVICES:
                raise UsageError(
                    f"--device {name!r} is not a device; use cpu, cuda, cuda:N, mps or all"
                )
        devices = tuple(names)
    dtypes = None
    if args.dtype:
        from benchbench.core.values import ITEMSIZE

        dtypes = tuple(d.strip() for d in args.dtype.split(",") if d.strip())
        for name in dtypes:
            if name not in ITEMSIZE:
                raise UsageError(f"--dtype {name!r} is unknown; known: {', '.join(ITEMSIZE)}")
    selection = Selection(devices=devices, dtypes=dtypes, pattern=args.filter, tags=tuple(args.tag))
    selection.compiled_pattern()  # a bad --filter regex is a usage error now, not later
    return selection


def suite_paths(args: argparse.Namespace) -> tuple[Any, ...]:
    from benchbench.suite.load import resolve_suite

    return tuple(resolve_suite(name) for name in args.suites)


def check_output(flag: str, path: str, formats: Sequence[str] = ()) -> None:
    """A usage error, before anything is measured or opened, unless ``path`` can be
    written: its folder exists, it is not a folder, and (``formats``) its extension is
    one of them. ``-`` (stdout) passes."""
    if path == "-":
        return
    from pathlib import Path

    out = Path(path)
    if formats:
        suffix = out.suffix.lower().lstrip(".")
        if suffix not in formats:
            *rest, last = ("." + f for f in formats)
            choices = f"{', '.join(rest)} or {last}" if rest else last
            raise UsageError(
                f"{flag} {path!r}: the extension says the format, and "
                f"{out.suffix or '(none)'!r} is not one; use {choices}"
            )
    if out.is_dir():
        raise UsageError(f"{flag} {path!r} is a folder; give a file name in it")
    if not out.parent.is_dir():
        raise UsageError(
            f"{flag} {path!r}: folder {str(out.parent)!r} does not exist; create it or give "
            "a path in an existing folder"
        )


def store_from(args: argparse.Namespace, *, create: bool | None = None) -> Store:
    """The store ``--store`` names, created if missing only where :func:`add_store` said so
    (``create=False``: not this time, e.g. ``run --resume``, whose run must be stored).

    A command that reads (runs, show, compare, plot, export, regressions, claims, the
    dashboard, annotate) refuses a store that does not exist, so a mistyped path is an
    error naming it rather than a new empty store.
    """
    from benchbench.store import open_store  # SQLAlchemy, ~0.15 s: only when a store is read

    if create is None:
        create = bool(getattr(args, "store_create", False))
    return open_store(args.store, create=create)


def stdout() -> Console:
    return tables.console_for(sys.stdout)


def stderr() -> Console:
    return tables.console_for(sys.stderr, stderr=True)


def print_tables(args: argparse.Namespace, grids: Sequence[tables.Grid]) -> None:
    """``grids`` on stdout in the ``--format`` the command was given (not json)."""
    tables.write(grids, args.format, sys.stdout, sys.stderr)


def print_note(note: str) -> None:
    """A sentence for the reader on stderr, wrapped at ``tables.NOTE_WIDTH`` (a CI log has
    no terminal to wrap it), as the notes under a table are."""
    err = stderr()
    for line in tables.wrap_note(note):
        err.print(line, markup=False, highlight=False, soft_wrap=True)


def print_failures(failed: Sequence[tuple[str, str]]) -> None:
    """Each failed point's label and full reason on stderr, under the table, one line
    each: whole where a table cell folds it, and found by a search of the log."""
    if not failed:
        return
    from rich.text import Text

    err = stderr()
    for label, reason in failed:
        err.print(Text(f"failed: {label}: {reason}", style="red"), soft_wrap=True)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str, allow_nan=False) + "\n")


def add_allocator(parser: argparse.ArgumentParser) -> None:
    """``--allocator``: the memory allocator of the worker processes."""
    parser.add_argument(
        "--allocator",
        choices=ALLOCATORS,
        help="memory allocator of the worker processes: system (glibc, its mmap and trim "
        "thresholds fixed at 32 and 64 MiB so that no point depends on the points before it; "
        "the default), jemalloc or tcmalloc (preloaded; Debian packages libjemalloc2, "
        "libtcmalloc-minimal4). Part of the environment: a different allocator starts a new "
        "history",
    )


def add_rounds(parser: argparse.ArgumentParser) -> None:
    """``--rounds`` and ``--max-rounds``: fresh worker processes per point."""
    parser.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="measure every point in N fresh worker processes, one per round, each round in "
        "a shuffled order; the interval comes from their spread (default $BENCHBENCH_ROUNDS "
        "or {{ default.rounds }}; 1: one process per point)",
    )
    parser.add_argument(
        "--max-rounds",
        type=int,
        metavar="M",
        help="a point whose processes disagree beyond --target may take more processes, up "
        "to M in all, while the run's sampling budget (--budget x points) lasts; the points "
        "furthest from the target get them first (default: the larger of --rounds and "
        "{{ default.max_rounds }}; with --rounds 1, none)",
    )


def add_seed(parser: argparse.ArgumentParser) -> None:
    """``--seed``: the seed of the rounds' shuffled order."""
    parser.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="seed of the order in which each round visits the points (default: the "
        "same order every run; stored with the run, so its schedule can be replayed)",
    )


def rounds_from(args: argparse.Namespace) -> Rounds:
    """The :class:`Rounds` of ``--rounds`` / ``--max-rounds``; without ``--rounds``,
    ``$BENCHBENCH_ROUNDS``, then :data:`DEFAULT_ROUNDS`."""
    from benchbench.run.rounds import Rounds  # the runner: only for a measuring command

    count = args.rounds if args.rounds is not None else default_rounds()
    seed = getattr(args, "seed", None) or 0
    if args.max_rounds is not None:
        return Rounds(count, args.max_rounds, seed)
    if count < 2:
        return Rounds.fixed(count, seed)  # one process: no spread to allocate by
    return Rounds(count, max(count, DEFAULT_MAX_ROUNDS), seed)


def default_rounds() -> int:
    """``$BENCHBENCH_ROUNDS`` when set (a machine's own default), else :data:`DEFAULT_ROUNDS`."""
    text = os.environ.get("BENCHBENCH_ROUNDS")
    if text is None or not text.strip():
        return DEFAULT_ROUNDS
    try:
        return int(text)
    except ValueError:
        raise UsageError(
            f"$BENCHBENCH_ROUNDS must be a whole number of rounds (>= 1), got {text!r}; "
            f"unset it to use the default of {DEFAULT_ROUNDS}"
        ) from None


def progress_events(progress: Progress, description: str) -> Callable[[str, dict[str, Any]], None]:
    """The runner's ``progress(event, data)`` callback drawing one bar on ``progress``:
    ``start`` adds it, ``point`` names the point (and round) being measured, ``advance``
    moves it by one request (the total grows when points take extra rounds), ``note``
    prints its message above the bar."""
    from rich.markup import escape

    task: list[Any] = []

    def on_event(event: str, data: dict[str, Any]) -> None:
        if event == "start":
            task.append(progress.add_task(description, total=data["total"], current=""))
        elif event == "point":
            step = data.get("round", 1)  # a round number, or "instructions" (callgrind)
            where = f" (round {step})" if step != 1 else ""
            # Escaped: the bar's text is markup, which would drop "[float32, cpu]".
            progress.update(task[0], current=escape(data["label"] + where))
        elif event == "advance":
            progress.update(task[0], total=data["total"], advance=1)
        elif event == "note":
            progress.console.print(f"note: {escape(data['message'])}")

    return on_event


def progress_bar(err: Any) -> Progress:
    """The progress bar of a measuring command (``run``, ``ab``), on ``err``, transient."""
    from rich import progress as bar

    return bar.Progress(
        bar.TextColumn("[bold]{task.description}"),
        bar.BarColumn(),
        bar.MofNCompleteColumn(),
        bar.TimeElapsedColumn(),
        bar.TextColumn("ETA"),
        bar.TimeRemainingColumn(),
        bar.TextColumn("{task.fields[current]}"),
        console=err,
        transient=True,
    )


@contextlib.contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` instead of raising, while the run lasts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: stop.request(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def add_repo(parser: argparse.ArgumentParser) -> None:
    """``--repo`` and ``--install``: where the commits named by refs come from and how a
    side built from one installs it (``ab --base-ref/--head-ref``, ``bisect``)."""
    from pathlib import Path

    from benchbench.run.side_build import DEFAULT_INSTALL

    parser.add_argument(
        "--repo",
        metavar="PATH",
        type=Path,
        help="the git repository the refs name commits of (default: the current folder's)",
    )
    parser.add_argument(
        "--install",
        metavar="CMD",
        help="shell command that installs a commit's checkout into its side's environment, "
        f"run in the checkout (default: {DEFAULT_INSTALL!r}; torch and the other packages "
        "come from this environment)",
    )
