"""List the points a run would measure, without measuring anything."""

from __future__ import annotations

import argparse

from rich.table import Table

from benchbench.cli import flags
from benchbench.run import runner

HELP = "list the points a run would measure"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_selection(parser)
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    config = runner.RunConfig(suites=flags.suite_paths(args), selection=flags.selection_from(args))
    points = runner.plan(config)
    if args.json:
        flags.print_json(
            {
                "points": [
                    {**p.to_dict(), "label": p.label, "tags": list(w.tags)} for _, w, p in points
                ]
            }
        )
        return 0
    table = Table(header_style="bold")
    for name in ("suite", "point", "tags"):
        table.add_column(name)
    for _, workload, point in points:
        table.add_row(point.suite, point.label, ",".join(workload.tags))
    flags.stdout().print(table)
    flags.stderr().print(f"{len(points)} points")
    return 0
