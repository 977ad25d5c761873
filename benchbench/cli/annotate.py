"""Annotate a regression alert: acknowledge it, ignore it, or mark it expected.

An expected change resets the series' baseline: later detection judges only the
runs from the alert's first bad run on. Annotated alerts no longer make
`benchbench regressions --fail` exit 3.
"""

from __future__ import annotations

import argparse

from benchbench.cli import flags

HELP = "acknowledge, ignore or mark expected a regression alert"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "alert", type=int, metavar="ALERT", help="alert id (from `benchbench regressions`)"
    )
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--acknowledge", dest="kind", action="store_const", const="acknowledge")
    kind.add_argument("--ignore", dest="kind", action="store_const", const="ignore")
    kind.add_argument(
        "--expected",
        dest="kind",
        action="store_const",
        const="expected",
        help="an intended change: the new level becomes the baseline",
    )
    parser.add_argument("--note", default="", help="why (stored with the annotation)")
    flags.add_store(parser)


def run(args: argparse.Namespace) -> int:
    from benchbench.store.history import annotate

    store = flags.store_from(args)
    annotate(store, args.alert, args.kind, args.note)
    flags.stderr().print(f"alert {args.alert}: {args.kind}")
    return 0
