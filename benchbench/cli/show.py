"""Show the results of one run: median with CI, throughput, % of peak, accuracy, warnings,
then a "fits" table: per curve the fixed cost t0 and asymptotic rate of
time = t0 + work / rate, its R², and the sizes where one variant or device overtakes
another.

RUN is a run id, a unique prefix of one, a label (the newest run with it),
``latest``, or a run group (the ``--group`` value or group id shared by the shards
of one run): a group shows every shard's points as one run. "% of peak" needs a
hardware profile of the run's environment: run ``benchbench probe`` once on the
machine. Named axes (a workload's parameters; ``mode=fwd|bwd|fwd_bwd`` for one
declared with backward ``modes``) have a ``params`` column. A GB/s or GFLOP/s
ending in ``*`` comes from a derived work model (FLOPs counted by torch's
FlopCounterMode, bytes of the call's tensors); ``--format json`` lists those figures
per result as ``derived``.
"""

from __future__ import annotations

import argparse

from benchbench.cli import flags

HELP = "show the results of a run, with percent of peak and model fits"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help="run id, id prefix, label or 'latest'")
    flags.add_store(parser)
    flags.add_format(parser)


def run(args: argparse.Namespace) -> int:
    from benchbench.analysis.curves import analyze, with_run
    from benchbench.run import sharding
    from benchbench.store.profiles import latest_profiles
    from benchbench.views.fits import fits_grid, fits_json
    from benchbench.views.results import (
        failures,
        results_grid,
        run_document,
        summary_line,
        with_roofline,
    )
    from benchbench.views.run_notes import run_footer, shown

    store = flags.store_from(args)
    run_row, stored = sharding.run_or_group(store, args.run_ref)
    if "shards" in run_row:
        run_row["label"] = (run_row["label"] or "") + f" ({run_row['shards']} shard(s))"
    profiles = latest_profiles(store, run_row.get("environment_id"), {r["device"] for r in stored})
    rows = with_roofline(stored, profiles)
    analysis = analyze(with_run(run_row, stored))
    table = shown(store, run_row, rows)
    if args.format == "json":
        document = {**fits_json(analysis), "run_to_run": table.rerun}
        flags.print_json(run_document(run_row, rows, document))
        return 0
    title = f"run {run_row['id']}" + (f" ({run_row['label']})" if run_row["label"] else "")
    footer = run_footer(run_row, table.rows, table.previous, table.shift)
    grids = [
        results_grid(
            table.rows, title=f"{title} · {table.words}", profiled=bool(profiles), footer=footer
        )
    ]
    if analysis.curves:
        grids.append(fits_grid(analysis))
    flags.print_tables(args, grids)
    flags.print_failures(failures(rows))
    flags.stderr().print(f"{summary_line(rows)}; status {run_row['status']}")
    return 0
