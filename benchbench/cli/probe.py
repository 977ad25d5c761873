"""Measure this machine's ceilings and store them with its environment.

Memory bandwidth (read, write, copy, and update: in place, the ceiling of in-place
operators) versus working-set size from 4 KiB to past the
last-level cache (each call sweeps a small working set until it has moved 16 MiB, so the
cache is measured rather than torch's per-call overhead; each point is the best of 3
repeats), the cache boundaries found in it beside the sizes the OS reports,
peak FLOP/s per dtype from large matmuls, the timer's resolution and overhead, and
the thread count; on CUDA also host<->device bandwidth and launch / sync latency
(run on an H100 in quick mode). 35-45 s on a loaded 2-core CPU; --quick takes a
few seconds for rough figures.

The profile is stored under the environment a `benchbench run` on this machine gets
(same machine, torch build and --threads), and `show`, `run` and `plot` use the newest
one for "% of peak", cache markers and ceilings.

--run-to-run calibrates instead how far apart runs on this machine lie beyond their own
intervals (a few runs of 15 points of the quick suite, back to back, in fresh processes):
a suite with no earlier pair of runs of its own then shows "95% CI incl. run-to-run"
from it, where it would show "within this run only".
"""

from __future__ import annotations

import argparse
import math
import time
from typing import TYPE_CHECKING

from benchbench.cli import flags
from benchbench.core.defaults import RUN_TO_RUN_RUNS
from benchbench.core.errors import UsageError
from benchbench.core.units import format_bytes, format_rate
from benchbench.machine.allocator import worker_environment

if TYPE_CHECKING:
    from rich.console import Group

    from benchbench.machine.hardware import CacheLevel, Profile

HELP = "measure this machine's bandwidth, caches and peak FLOP/s; store the profile"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", default="cpu", help="cpu, cuda, cuda:N or mps (default %(default)s)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few seconds, rough figures (sizes to 16 MiB)"
    )
    parser.add_argument(
        "--threads",
        type=flags.parse_threads,
        metavar="N|all",
        help="torch threads, as given to `benchbench run --threads` (default "
        "{{ default.threads }}, as run's; 'all': torch's default, one per core)",
    )
    parser.add_argument(
        "--run-to-run",
        nargs="?",
        type=int,
        const=RUN_TO_RUN_RUNS,
        metavar="RUNS",
        help="instead of the ceilings, calibrate how far apart runs lie beyond their own "
        "intervals: RUNS (default {{ default.run_to_run_runs }}, at least 3) runs back to "
        "back of 15 points of the quick suite, as run measures them (~13 s each on a 2-core "
        "VM); stored for this environment, and taken by run, show, compare and the "
        "dashboard for a suite with no earlier pair of runs of its own",
    )
    flags.add_store(parser, create=True)
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    if args.run_to_run is not None:
        from benchbench.cli.probe_rerun import calibrate

        return calibrate(args)
    # Imported here, not at the top: the CLI imports every command module to build its
    # parser, and torch costs ~3 s to import; only this command needs it.
    import torch

    from benchbench.machine.environment import collect
    from benchbench.machine.probe import run_probe
    from benchbench.store.profiles import save_profile

    if args.device.partition(":")[0] not in flags.DEVICES:
        raise UsageError(f"--device {args.device!r} is not a device; use cpu, cuda, cuda:N or mps")
    threads = flags.threads_from(args)
    if threads is not None:
        if threads < 1:
            raise UsageError(f"--threads must be >= 1, got {threads}; e.g. --threads 1")
        torch.set_num_threads(threads)
    # Open first: a bad --store fails before 30 s of probing.
    store = flags.store_from(args)
    err = flags.stderr()
    started = time.perf_counter()

    def progress(message: str) -> None:
        err.print(f"[dim]{time.perf_counter() - started:5.1f} s[/dim] {message}")

    profile = run_probe(args.device, quick=args.quick, progress=progress)
    # The ceilings serve the runs of default workers: record their allocator settings,
    # so that those runs' environment id finds this profile.
    env = collect(torch, threads, allocator_environ=worker_environment("system"))
    store.save_environment(env)
    profile_id = save_profile(store, env.id, args.device, profile.to_dict())
    if args.json:
        flags.print_json(
            {
                "environment_id": env.id,
                "machine": env.machine,
                "profile_id": profile_id,
                "profile": profile.to_dict(),
            }
        )
    else:
        flags.stdout().print(profile_tables(profile))
    err.print(
        f"probe took {profile.duration_s:.1f} s; profile {profile_id} stored for environment "
        f"{env.id} ({env.machine}) in {store.url}"
    )
    return 0


def profile_tables(profile: Profile) -> Group:
    from rich.console import Group
    from rich.table import Table

    """Bandwidth plateaus, caches, peak FLOP/s and timer figures, as rich tables."""
    bandwidth = Table(title=f"bandwidth on {profile.device}", header_style="bold")
    for name in ("op", "best in cache", "main memory (beyond LLC)"):
        bandwidth.add_column(name, justify="left" if name == "op" else "right")
    for op in sorted(profile.memory_bytes_per_s):
        bandwidth.add_row(
            op,
            format_rate(profile.cache_bytes_per_s.get(op), "B/s"),
            format_rate(profile.memory_bytes_per_s[op], "B/s"),
        )

    caches = Table(
        title="caches: boundaries found in the one-thread bandwidth vs the OS's sizes",
        header_style="bold",
    )
    for name in ("level", "OS reports", "probe found", "bandwidth before -> after"):
        caches.add_column(name, justify="left" if name == "level" else "right")
    for level, os_size, found in paired_caches(profile):
        caches.add_row(
            level,
            format_bytes(os_size) if os_size else "-",
            format_bytes(found.size_bytes) if found else "not found",
            f"{format_rate(found.bytes_per_s_before, 'B/s')} -> "
            f"{format_rate(found.bytes_per_s_after, 'B/s')}"
            if found
            else "",
        )

    peaks = Table(title="peak FLOP/s (square matmul)", header_style="bold")
    peaks.add_column("dtype")
    peaks.add_column("peak", justify="right")
    for dtype, value in profile.peak_flop_per_s.items():
        peaks.add_row(dtype, format_rate(value, "FLOP/s"))

    other = Table(title="timer, threads and method", header_style="bold")
    other.add_column("figure")
    other.add_column("value", justify="right")
    other.add_row("timer resolution (reported)", f"{profile.timer_resolution_s * 1e9:.3g} ns")
    other.add_row(
        "timer resolution (observed)", f"{profile.timer_observed_resolution_s * 1e9:.3g} ns"
    )
    other.add_row("timer overhead (pair of reads)", f"{profile.timer_overhead_s * 1e9:.3g} ns")
    other.add_row("threads", str(profile.threads))
    other.add_row("bandwidth: each point the best of", f"{profile.repeats} repeats")
    other.add_row("bandwidth: bytes moved per call, at least", format_bytes(profile.min_call_bytes))
    for name, value in profile.extra.items():
        other.add_row(name, f"{value:.4g}")
    return Group(bandwidth, caches, peaks, other)


def paired_caches(profile: Profile) -> list[tuple[str, int | None, CacheLevel | None]]:
    """``(level, OS size, detected boundary)`` rows, L1 first.

    Each detected boundary goes to the OS level nearest to it in log-size (the probe now
    finds L1 too, since its calls sweep a small working set many times); a level keeps the
    nearest of the boundaries given to it, and the others are listed on their own.
    """
    os_levels = sorted(profile.os_caches, key=lambda c: (c.level, c.size_bytes))
    matched: dict[int, CacheLevel] = {}
    unmatched: list[CacheLevel] = []

    def distance(index: int, found: CacheLevel) -> float:
        return abs(math.log(found.size_bytes / os_levels[index].size_bytes))

    for found in profile.cache_levels:
        if not os_levels:
            unmatched.append(found)
            continue
        index = min(range(len(os_levels)), key=lambda i: distance(i, found))
        held = matched.get(index)
        if held is None or distance(index, found) < distance(index, held):
            matched[index] = found
            if held is not None:
                unmatched.append(held)
        else:
            unmatched.append(found)
    rows: list[tuple[str, int | None, CacheLevel | None]] = [
        (f"L1 {c.type.lower()}" if c.level == 1 else f"L{c.level}", c.size_bytes, matched.get(i))
        for i, c in enumerate(os_levels)
    ]
    rows.extend(("not an OS level", None, found) for found in unmatched)
    return rows
