"""Put each published claim (SEEDS A-D) beside what a run measured on this machine.

RUN is a run id, a unique prefix of one, a label or ``latest`` (default). Each row
gives the claim, the measured figure with its 95 % interval, and a verdict computed
from the stored points: holds, does not hold, inconclusive, not measurable here (with
the reason, e.g. no GPU) or not measured (with the suite and tag to run). Instruction
counts never decide a claim: a speedup whose points were also counted shows their
instruction ratio in its figure, and a run that only counted is not measured
(:mod:`benchbench.analysis.claims` says why).
"""

from __future__ import annotations

import argparse

from benchbench.cli import flags
from benchbench.views.tables import Column, Grid

HELP = "check the published claims against a run's measurements"
#: A claim's sentence, its figure and its verdict (with the reason and the command that
#: measures it) wrap within these widths: the table keeps to 160 characters in a CI log,
#: where the claims' whole sentences on one line made it 438 wide.
COLUMNS = (
    Column("claim", max_width=68),
    Column("measured here", max_width=30),
    Column("verdict", max_width=50),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_ref", metavar="RUN", nargs="?", default="latest", help="run (default: latest)"
    )
    flags.add_store(parser)
    flags.add_format(parser)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from benchbench.analysis.claims import FAILS, HOLDS, INCONCLUSIVE, evaluate_claims

    style = {HOLDS: "green", FAILS: "red", INCONCLUSIVE: "yellow"}
    store = flags.store_from(args)
    run_row = store.resolve_run(args.run_ref)
    results = evaluate_claims(store, run_row["id"])
    if args.format == "json":
        flags.print_json({"run_id": run_row["id"], "claims": [r.to_dict() for r in results]})
        return 0
    rows = []
    for result in results:
        finding, claim = result.finding, result.claim
        verdict = Text(finding.verdict, style=style.get(finding.verdict, "dim"))
        if finding.reason:
            verdict.append("\n" + finding.reason)
        rows.append(
            (
                Text.assemble((claim.id, "bold"), f" ({claim.section}) {claim.text}"),
                finding.figure or "-",
                verdict,
            )
        )
    title = f"claims on run {run_row['id']}"
    flags.print_tables(args, [Grid.of(COLUMNS, rows, title=title, row_lines=True)])
    return 0
