"""Check what makes numbers noisy on this machine, with the fix for each.

CPU frequency governor, turbo boost, ASLR, load, swap, busy processes, thread
settings, torch debug build, CPU isolation, and per GPU persistence mode,
application clocks and other processes (in the spirit of
``python -m pyperf system show``). Exit 0 whatever it finds: it advises.
"""

from __future__ import annotations

import argparse

from rich.text import Text

from benchbench.cli import flags
from benchbench.machine.doctor import check_system
from benchbench.views.tables import Grid

HELP = "check this machine for sources of noise, with fixes"

_STYLE = {"ok": "green", "warn": "yellow", "info": "cyan", "unknown": "dim"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_format(parser)


def run(args: argparse.Namespace) -> int:
    checks = check_system()
    if args.format == "json":
        flags.print_json({"checks": [c.to_dict() for c in checks]})
        return 0
    rows = [
        (c.name, Text(c.status, style=_STYLE.get(c.status, "")), c.value, c.advice) for c in checks
    ]
    grid = Grid.of(("check", "status", "value", "fix"), rows, title="benchbench doctor")
    flags.print_tables(args, [grid])
    warned = sum(1 for c in checks if c.status == "warn")
    flags.stderr().print(f"{warned} warning(s) of {len(checks)} checks")
    return 0
