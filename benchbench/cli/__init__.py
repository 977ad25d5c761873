"""The command line: parse arguments, call the library, map errors to exit codes.

Exit codes: 0 ok; 1 error (including a run in which a point failed or nothing
could be measured, and a store that is damaged, read-only, full or whose server went
away: one line naming it and the fix, never a traceback); 2 usage; 3 regression found;
130/143 interrupted.

:func:`build_parser` imports every command's module for its ``HELP`` and
``add_arguments``, so those modules import nothing heavy at their top: torch (~1.2 s),
scipy, matplotlib, pandas and SQLAlchemy come inside ``run()``, when the command acts.
``benchbench --help`` then answers in ~0.1x the time of ``import torch`` (BENCHMARKS.md,
"A CLI that answers at once"; tests/integration/test_cli_imports.py keeps it so).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from benchbench.core.errors import BenchbenchError, UsageError
from benchbench.core.version import __version__

#: Subcommand name -> module in benchbench.cli (each has HELP, add_arguments, run).
COMMANDS = {
    "run": "run",
    "list": "list_points",
    "runs": "runs",
    "show": "show",
    "probe": "probe",
    "plot": "plot",
    "doctor": "doctor",
    "regressions": "regressions",
    "annotate": "annotate",
    "time": "time",
    "dashboard": "dashboard",
    "compare": "compare",
    "ab": "ab",
    "export": "export",
    "import": "import_",
    "claims": "claims",
    "accuracy": "accuracy",
    "capture": "capture",
    "breakdown": "breakdown",
}

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REGRESSION = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="benchbench",
        description="Benchmark PyTorch operators on CPU, CUDA and MPS; store and compare results.",
        epilog="Exit codes: 0 ok, 1 error, 2 usage, 3 regression found, 130/143 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"benchbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"benchbench.cli.{module_name}")
        command = sub.add_parser(
            name,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "handler", None) is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        try:
            return int(args.handler(args))
        except Exception as exc:
            message = _store_failure(exc, getattr(args, "store", None))
            if message is None:
                raise
            print(f"benchbench: error: {message}", file=sys.stderr)
            return EXIT_ERROR
    except UsageError as exc:
        print(f"benchbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BenchbenchError as exc:
        print(f"benchbench: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("benchbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_ERROR


def _store_failure(exc: Exception, store: str | None) -> str | None:
    """The one line of a store's failure (damaged, read-only, full, server gone), or None
    for any other exception; SQLAlchemy is only imported if a command loaded it."""
    if "sqlalchemy" not in sys.modules:
        return None
    from benchbench.store.failures import explain
    from benchbench.store.store import normalize_url, safe_url

    return explain(exc, safe_url(normalize_url(store)))


if __name__ == "__main__":
    sys.exit(main())
