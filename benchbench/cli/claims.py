"""Put each published claim (SEEDS A-D) beside what a run measured on this machine.

RUN is a run id, a unique prefix of one, a label or ``latest`` (default). Each row
gives the claim, the measured figure with its 95 % interval, and a verdict computed
from the stored points: holds, does not hold, inconclusive, not measurable here (with
the reason, e.g. no GPU) or not measured (with the suite and tag to run).
"""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table

from benchbench.analysis.claims import FAILS, HOLDS, INCONCLUSIVE, evaluate_claims
from benchbench.cli import flags

HELP = "check the published claims against a run's measurements"

_STYLE = {HOLDS: "green", FAILS: "red", INCONCLUSIVE: "yellow"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_ref", metavar="RUN", nargs="?", default="latest", help="run (default: latest)"
    )
    flags.add_store(parser)
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    store = flags.store_from(args)
    run_row = store.resolve_run(args.run_ref)
    results = evaluate_claims(store, run_row["id"])
    if args.json:
        flags.print_json({"run_id": run_row["id"], "claims": [r.to_dict() for r in results]})
        return 0
    table = Table(title=f"claims on run {run_row['id']}", header_style="bold", show_lines=True)
    for column in ("claim", "measured here", "verdict"):
        table.add_column(column, overflow="fold")
    for result in results:
        finding = result.finding
        style = _STYLE.get(finding.verdict, "dim")
        verdict = f"[{style}]{finding.verdict}[/{style}]"
        if finding.reason:
            verdict += f"\n{escape(finding.reason)}"
        table.add_row(
            f"[bold]{result.claim.id}[/bold] ({result.claim.section}) {escape(result.claim.text)}",
            escape(finding.figure) or "-",
            verdict,
        )
    flags.stdout().print(table)
    return 0
