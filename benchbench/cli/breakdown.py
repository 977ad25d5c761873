"""Where a captured callable's time goes, from a run of a captured suite.

Ranks the captured aten calls (`benchbench capture`, or the built-in `models` and `zoo`
suites) by count x median time, with each one's share of their sum, its throughput and its %
of the roofline ceiling (with a hardware profile from `benchbench probe`), and puts
the sum beside the whole callable measured in the same run: coverage = sum / whole.
The rest of the whole is Python, dispatch and autograd bookkeeping around the ops and
the views left out; a coverage above 1 means the ops ran faster together than alone.
A capture with a compiled whole (`zoo`: workload `whole-compiled`) gets a line with the
torch.compile'd callable beside the eager one, its compile time and the calls after
which compiling pays.

RUN is a run id, a unique prefix of one, a label or 'latest' (the default).
"""

from __future__ import annotations

import argparse

from benchbench.cli import flags
from benchbench.core.defaults import PLOT_FORMATS
from benchbench.core.errors import NotFoundError, UsageError

HELP = "rank a captured callable's aten calls by count x median, beside the whole callable"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_ref",
        nargs="?",
        default="latest",
        metavar="RUN",
        help="run id, id prefix, label or 'latest' (default latest)",
    )
    parser.add_argument(
        "--capture",
        action="append",
        default=[],
        metavar="NAME",
        help="only this captured callable (the `capture` parameter; repeatable)",
    )
    parser.add_argument(
        "--plot", metavar="FILE", help="also draw the breakdown to FILE.png|.svg|.pdf"
    )
    flags.add_store(parser)
    flags.add_format(parser)


def run(args: argparse.Namespace) -> int:
    from benchbench.analysis.breakdown import breakdowns
    from benchbench.store.profiles import latest_profiles
    from benchbench.views.breakdown import breakdown_grid, breakdown_json
    from benchbench.views.results import with_roofline

    if args.plot is not None:
        flags.check_output("--plot", args.plot, PLOT_FORMATS)
    store = flags.store_from(args)
    run_row = store.resolve_run(args.run_ref)
    rows = store.measurements(run_row["id"])
    profiles = latest_profiles(store, run_row.get("environment_id"), {r["device"] for r in rows})
    found = breakdowns(with_roofline(rows, profiles))
    if args.capture:
        known = sorted({b.capture for b in found})
        found = [b for b in found if b.capture in args.capture]
        if not found:
            raise UsageError(
                f"--capture {', '.join(args.capture)}: not in run {run_row['id'][:8]}; "
                f"its captures: {', '.join(known) or 'none'}"
            )
    if not found:
        raise NotFoundError(
            f"run {run_row['id'][:8]} holds no captured calls; run a captured suite first "
            "(benchbench capture ... -o my_ops.py && benchbench run my_ops.py, or "
            "benchbench run models)"
        )
    if args.format == "json":
        flags.print_json({"run": run_row["id"], "breakdowns": breakdown_json(found)})
    else:
        flags.print_tables(args, [breakdown_grid(b) for b in found])
    if args.plot is not None:
        from benchbench.views.breakdown import breakdown_figure
        from benchbench.views.plot import save_figure

        out = save_figure(breakdown_figure(found, title=f"run {run_row['id'][:8]}"), args.plot)
        flags.stderr().print(f"wrote {out}", highlight=False)
    if not profiles:
        flags.stderr().print(
            "no hardware profile for this environment: run `benchbench probe` for % of ceiling",
            highlight=False,
        )
    return 0
