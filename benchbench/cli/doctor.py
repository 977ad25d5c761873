"""Check what makes numbers noisy on this machine, with the fix for each.

CPU frequency governor, turbo boost, ASLR, load, swap, busy processes, thread
settings, idle cores against torch's default thread count (fix: --threads or --cpus
on run and time), torch debug build, CPU isolation, and per GPU persistence mode,
application clocks and other processes (in the spirit of
``python -m pyperf system show``). Exit 0 whatever it finds: it advises.
"""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from benchbench.cli import flags
from benchbench.machine.doctor import check_system

HELP = "check this machine for sources of noise, with fixes"

_STYLE = {"ok": "green", "warn": "yellow", "info": "cyan", "unknown": "dim"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_json(parser)


def run(args: argparse.Namespace) -> int:
    checks = check_system()
    if args.json:
        flags.print_json({"checks": [c.to_dict() for c in checks]})
        return 0
    table = Table(header_style="bold", title="benchbench doctor")
    for name in ("check", "status", "value", "fix"):
        table.add_column(name)
    for check in checks:
        table.add_row(
            check.name,
            Text(check.status, style=_STYLE.get(check.status, "")),
            check.value,
            check.advice,
        )
    flags.stdout().print(table)
    warned = sum(1 for c in checks if c.status == "warn")
    flags.stderr().print(f"{warned} warning(s) of {len(checks)} checks")
    return 0
