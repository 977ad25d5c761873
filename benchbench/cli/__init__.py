"""The command line: parse arguments, call the library, map errors to exit codes.

Exit codes: 0 ok; 1 error (including a run in which a point failed or nothing
could be measured); 2 usage; 3 regression found; 130/143 interrupted.
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
        return int(args.handler(args))
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


if __name__ == "__main__":
    sys.exit(main())
