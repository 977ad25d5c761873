"""Plot throughput versus size of one or more runs (PNG, SVG or PDF by the extension).

One subplot per workload, one line per variant / device / dtype / environment (--by),
a band from Q1 to Q3, vertical markers at the cache sizes (found by `benchbench probe`,
else the OS's), the probe's ceilings as horizontal lines and the sizes where one line
overtakes another. --roofline instead plots achieved FLOP/s against arithmetic
intensity under the bandwidth and compute roofs.

RUN is a run id, a unique prefix of one, a label or 'latest'.
"""

from __future__ import annotations

import argparse
from typing import Any

from benchbench.cli import flags

HELP = "plot throughput versus size (or a roofline) of runs to PNG, SVG or PDF"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="+", metavar="RUN", help="run id, id prefix, label or 'latest'"
    )
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="FILE.png|.svg|.pdf")
    parser.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="W",
        help="only this workload (repeatable)",
    )
    parser.add_argument(
        "--by",
        choices=("variant", "device", "dtype", "environment"),
        default="variant",
        help="what the line colours tell apart (default variant)",
    )
    parser.add_argument(
        "--metric",
        choices=("throughput", "time"),
        default="throughput",
        help="y-axis: work per second or median time per call (default throughput)",
    )
    parser.add_argument(
        "--roofline", action="store_true", help="FLOP/s versus arithmetic intensity instead"
    )
    flags.add_store(parser)


def run(args: argparse.Namespace) -> int:
    # pandas, scipy and matplotlib come with the curves and plots: here, not at the top,
    # so that `plot --help` answers at once.
    from benchbench.analysis.curves import with_run
    from benchbench.machine.caches import cpu_cache_sizes
    from benchbench.store.profiles import latest_profiles

    # matplotlib costs ~1.5 s to import: only this command pays it, not every CLI start.
    from benchbench.views.plot import FORMATS, roofline_figure, save_figure, throughput_figure
    from benchbench.views.results import above_ceiling_note

    flags.check_output("-o", args.output, FORMATS)
    store = flags.store_from(args)
    run_rows = [store.resolve_run(ref) for ref in args.runs]
    rows: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for run_row in run_rows:
        rows += with_run(run_row, store.measurements(run_row["id"]))
        names[run_row["id"]] = run_row.get("label") or run_row["id"][:8]
        env_id = run_row.get("environment_id")
        env = store.environment(env_id) if env_id else None
        if env_id and env:
            names[env_id] = f"{env['machine']} {env_id[:6]}"
    first = run_rows[0]
    devices = {r["device"] for r in rows}
    profiles = latest_profiles(store, first.get("environment_id"), devices)
    # One profile per figure: the first run's environment, on its first profiled device.
    profile = next(iter(profiles.values()), None)
    title = "runs " + ", ".join(names[r["id"]] for r in run_rows)
    if len(run_rows) == 1:
        env = store.environment(first["environment_id"]) if first.get("environment_id") else None
        started = first.get("started_at")
        title = f"run {names[first['id']]}" + "".join(
            f" · {part}"
            for part in (
                env and env["machine"],
                env and env["fields"].get("cpu_model"),
                env and f"{env['fields'].get('threads')} thread(s)",
                env and f"torch {env['fields'].get('torch')}",
                started and started.strftime("%Y-%m-%d"),
            )
            if part
        )
    if args.roofline:
        figure = roofline_figure(
            rows, workloads=args.workload, profile=profile, names=names, title=title
        )
    else:
        figure = throughput_figure(
            rows,
            by=args.by,
            metric=args.metric,
            workloads=args.workload,
            profile=profile,
            os_caches=cpu_cache_sizes(),
            names=names,
            title=title,
        )
    out = save_figure(figure, args.output)
    err = flags.stderr()
    if profile is None:
        err.print("no hardware profile for this environment: run `benchbench probe` for ceilings")
    elif note := above_ceiling_note(rows, profile):
        err.print(f"[yellow]warning:[/yellow] {note}", highlight=False)
    err.print(f"wrote {out}")
    return 0
