"""Show the results of one run: median with CI, throughput, accuracy, warnings.

RUN is a run id, a unique prefix of one, a label (the newest run with it) or
``latest``.
"""

from __future__ import annotations

import argparse

from benchbench.commands import flags
from benchbench.views.results import results_table, run_document, summary_line

HELP = "show the results of a run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help="run id, id prefix, label or 'latest'")
    flags.add_store(parser)
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    store = flags.store_from(args)
    run_row = store.resolve_run(args.run_ref)
    rows = store.measurements(run_row["id"])
    if args.json:
        flags.print_json(run_document(run_row, rows))
        return 0
    title = f"run {run_row['id']}" + (f" ({run_row['label']})" if run_row["label"] else "")
    flags.stdout().print(results_table(rows, title=title))
    flags.stderr().print(f"{summary_line(rows)}; status {run_row['status']}")
    return 0
