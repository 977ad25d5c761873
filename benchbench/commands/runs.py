"""List the runs the store holds, newest first."""

from __future__ import annotations

import argparse

from rich.table import Table

from benchbench.commands import flags
from benchbench.views.results import _iso

HELP = "list the runs in the store"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_store(parser)
    flags.add_json(parser)
    parser.add_argument("--limit", type=int, default=50, help="at most this many runs (default 50)")


def run(args: argparse.Namespace) -> int:
    store = flags.store_from(args)
    runs = store.runs(limit=args.limit)
    if args.json:
        flags.print_json(
            {
                "store": store.url,
                "runs": [{**{k: _iso(v) for k, v in r.items()}, "config": None} for r in runs],
            }
        )
        return 0
    if not runs:
        flags.stderr().print(f"no runs in {store.url}; add one with: benchbench run quick")
        return 0
    table = Table(header_style="bold", title=f"runs in {store.url}")
    for name in (
        "run",
        "started (UTC)",
        "label",
        "kind",
        "status",
        "machine",
        "ok",
        "failed",
        "skipped",
    ):
        table.add_column(name)
    for r in runs:
        table.add_row(
            r["id"][:8],
            r["started_at"].strftime("%Y-%m-%d %H:%M:%S") if r["started_at"] else "",
            r["label"] or "",
            r["kind"],
            r["status"],
            r.get("machine") or "",
            str(r["ok"]),
            str(r["errors"]),
            str(r["skipped"]),
        )
    flags.stdout().print(table)
    return 0
