"""Import run bundles (from ``benchbench export RUN --format bundle``) into the store.

Every file is read and checked before anything is written, then all are written in
one transaction: one bad file (truncated, not JSON, a newer format, inconsistent)
rejects the whole import, names the file and what is wrong, and leaves the store as
it was. A run already in the store gains the points it lacks and keeps those it has,
so importing the same bundle twice changes nothing. This is how a fleet's sharded
nightly jobs are merged into one store, and how a run's spool (the points it measured
while its store's server was away: `results/spool/run-RUN_ID.json.gz`) completes it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchbench.cli import flags

HELP = "import run bundles into the store, point by point (idempotent, all or nothing)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="bundle files (.json, .json.gz)")
    flags.add_store(parser, create=True)
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    from benchbench.interchange.bundle import import_bundles, read_bundle

    bundles = [read_bundle(Path(name)) for name in args.files]
    store = flags.store_from(args)
    report = import_bundles(store, bundles)
    if args.json:
        flags.print_json({"store": store.url, **report})
    else:
        err = flags.stderr()
        for bundle in bundles:
            run_id = bundle.run["id"]
            state = (
                "imported"
                if run_id in report["imported"]
                else "merged into the stored run"
                if run_id in report["merged"]
                else "already in the store"
            )
            err.print(f"{bundle.path}: run {run_id} ({len(bundle.results)} points) {state}")
        err.print(
            f"{len(report['imported'])} runs imported, {len(report['merged'])} merged, "
            f"{len(report['skipped'])} already present, into {store.url}"
        )
    return 0
