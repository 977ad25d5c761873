"""List the points a run would measure, without measuring anything.

A point's label carries its named axes: ``mm:torch.matmul[float32, cpu](n=256x256,
mode=bwd)`` is the backward pass of a workload declared with ``modes``.

``--shard I/N`` lists what ``benchbench run --shard I/N`` would measure: the same
assignment (:func:`benchbench.run.runner.shard_points`), balanced by the expected
durations of earlier runs in the store the run would use (``--store``,
$BENCHBENCH_STORE, else results/benchbench.db; ``--group`` as for the run, since the
shards of a group reuse the history the first one priced its points with). Where no
store exists yet, or with ``--shard-by count``, every point costs the same: the run
does the same then, and the command says which it used.
"""

from __future__ import annotations

import argparse
import os
import uuid
from typing import TYPE_CHECKING, Any

from benchbench.cli import flags
from benchbench.core.errors import StoreError
from benchbench.views.tables import Grid

if TYPE_CHECKING:
    from benchbench.store import Store

HELP = "list the points a run would measure (or one shard of them)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_selection(parser)
    flags.add_format(parser)
    parser.add_argument(
        "--shard",
        metavar="I/N|auto",
        help="list only the points `run --shard I/N` would measure, balanced by the stored "
        "durations of earlier runs (by count where the store does not exist yet); "
        + flags.SHARD_AUTO_HELP,
    )
    parser.add_argument(
        "--shard-by",
        choices=("cost", "count"),
        default="cost",
        help="balance shards as `run --shard-by` does (default %(default)s)",
    )
    parser.add_argument(
        "--group",
        metavar="ID",
        help="the run group of the shards (default: $BENCHBENCH_GROUP, $GITHUB_RUN_ID or "
        "$SLURM_ARRAY_JOB_ID, as for run)",
    )
    flags.add_store(parser)


def _history_store(args: argparse.Namespace) -> Store | None:
    """The store ``run`` would price shards with; None when none exists where it would
    look by default (a store named by --store or $BENCHBENCH_STORE must exist)."""
    if args.shard_by == "count":
        return None
    named = args.store or os.environ.get("BENCHBENCH_STORE")
    try:
        return flags.store_from(args)
    except StoreError:
        if named:
            raise
        return None


def _shard(args: argparse.Namespace, points: list[Any]) -> tuple[list[Any], dict[str, Any], str]:
    """The shard's points, its document and a sentence on how it was balanced."""
    from benchbench.run import runner, sharding
    from benchbench.store import normalize_url, safe_url

    shard, auto = sharding.parse_shard(args.shard, os.environ)
    store = _history_store(args)
    group = args.group or sharding.scheduler_group(os.environ)
    # No group: a fresh id, whose history is the store's recent runs, as for a first shard.
    group_id = sharding.group_id_for(group) if group else str(uuid.uuid4())
    mine, doc = runner.shard_points(points, shard, args.shard_by, store, group_id)
    if args.shard_by == "count":
        how = "by count (--shard-by count)"
    elif store is None:
        where = safe_url(normalize_url(args.store))
        how = f"by count: no store at {where} yet, so no earlier durations to balance by"
    elif doc["balanced_by"] == "cost":
        how = f"by the stored durations of {len(doc['cost_runs'])} run(s) in {store.url}"
    else:
        how = f"by count: {store.url} holds no durations of these points yet"
    note = f"shard {shard}: {len(mine)} of {len(points)} points, balanced {how}"
    return mine, doc, (f"{auto}\n{note}" if auto else note)


def run(args: argparse.Namespace) -> int:
    from benchbench.run import runner  # torch: here, so that `list --help` answers at once

    config = runner.RunConfig(suites=flags.suite_paths(args), selection=flags.selection_from(args))
    points = runner.plan(config)
    shard_doc = note = None
    if args.shard:
        points, shard_doc, note = _shard(args, points)
        shard_doc = {k: v for k, v in shard_doc.items() if k != "benchmark_ids"}
    if args.format == "json":
        listed = [
            {**p.point.to_dict(), "label": p.point.label, "tags": list(p.tags)} for p in points
        ]
        document: dict[str, Any] = {"points": listed}
        if shard_doc is not None:
            document["shard"] = shard_doc
        flags.print_json(document)
    else:
        rows = [(p.point.suite, p.point.label, ",".join(p.tags)) for p in points]
        flags.print_tables(args, [Grid.of(("suite", "point", "tags"), rows)])
    err = flags.stderr()
    if note:
        flags.print_note(note)
    elif args.format != "json":
        err.print(f"{len(points)} points")
    return 0
