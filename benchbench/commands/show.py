"""Show the results of one run: median with CI, throughput, accuracy, warnings.

RUN is a run id, a unique prefix of one, a label (the newest run with it),
``latest``, or a run group (the ``--group`` value or group id shared by the shards
of one run): a group shows every shard's points as one run.
"""

from __future__ import annotations

import argparse

from benchbench import sharding
from benchbench.commands import flags
from benchbench.errors import NotFoundError
from benchbench.views.results import results_table, run_document, summary_line

HELP = "show the results of a run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ref", metavar="RUN", help="run id, id prefix, label or 'latest'")
    flags.add_store(parser)
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    store = flags.store_from(args)
    try:
        run_row = store.resolve_run(args.run_ref)
        rows = store.measurements(run_row["id"])
    except NotFoundError as not_a_run:
        try:
            shards = sharding.group_runs(store, args.run_ref)
        except NotFoundError:
            raise not_a_run from None
        run_row = {
            **shards[0],
            "id": shards[0]["group_id"],
            "label": shards[0]["label"],
            "status": _group_status([r["status"] for r in shards]),
            "finished_at": max(
                (r["finished_at"] for r in shards if r["finished_at"]), default=None
            ),
        }
        rows = [m for r in shards for m in store.measurements(r["id"])]
        run_row["label"] = (run_row["label"] or "") + f" ({len(shards)} shard(s))"
    if args.json:
        flags.print_json(run_document(run_row, rows))
        return 0
    title = f"run {run_row['id']}" + (f" ({run_row['label']})" if run_row["label"] else "")
    flags.stdout().print(results_table(rows, title=title))
    flags.stderr().print(f"{summary_line(rows)}; status {run_row['status']}")
    return 0


def _group_status(statuses: list[str]) -> str:
    """A group is finished when every shard is; else the first of running/interrupted."""
    for status in ("running", "interrupted"):
        if status in statuses:
            return status
    return statuses[0] if len(set(statuses)) == 1 else "mixed"
