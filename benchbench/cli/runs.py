"""List the runs the store holds, newest first.

The shards of one run (``benchbench run --shard I/N --group ID``) are listed as one
row: the group id, the number of shards and their summed counts. ``--json`` keeps
one entry per shard run, each with its ``group_id``.
"""

from __future__ import annotations

import argparse
from typing import Any

from benchbench.cli import flags
from benchbench.core.errors import UsageError
from benchbench.views.tables import Column, Grid

HELP = "list the runs in the store"

COLUMNS = (
    *(Column(name) for name in ("run", "started (UTC)", "label", "kind", "status", "machine")),
    *(Column(name, "right") for name in ("ok", "failed", "skipped")),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_store(parser)
    flags.add_format(parser)
    parser.add_argument(
        "--limit", type=int, default=50, help="at most this many runs (default %(default)s)"
    )


def run(args: argparse.Namespace) -> int:
    from benchbench.views.results import _iso

    if args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}; e.g. --limit 50")
    store = flags.store_from(args)
    runs = store.runs(limit=args.limit)
    if args.format == "json":
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
    rows = [
        (
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
        for r in _collapse_groups(runs)
    ]
    flags.print_tables(args, [Grid.of(COLUMNS, rows, title=f"runs in {store.url}")])
    return 0


def _collapse_groups(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run group (at the position of its newest shard), counts summed."""
    members: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        members.setdefault(r["group_id"], []).append(r)
    out: list[dict[str, Any]] = []
    for r in runs:
        shards = members.pop(r["group_id"], None)
        if shards is None:
            continue
        if len(shards) == 1:
            out.append(r)
            continue
        statuses = {s["status"] for s in shards}
        out.append(
            {
                **r,
                "id": r["group_id"],
                "label": f"{r['label'] or ''} ({len(shards)} shards)".strip(),
                "status": statuses.pop() if len(statuses) == 1 else "mixed",
                "started_at": min(s["started_at"] for s in shards),
                **{k: sum(s[k] for s in shards) for k in ("ok", "errors", "skipped")},
            }
        )
    return out
