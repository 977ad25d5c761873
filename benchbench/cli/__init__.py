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
import atexit
import importlib
import os
import re
import sys
import textwrap
import threading
from collections.abc import Sequence
from typing import NoReturn

from benchbench.core import facts
from benchbench.core.errors import BenchbenchError, UsageError
from benchbench.core.version import __version__

#: Subcommand name -> module in benchbench.cli (each has HELP, add_arguments, run), in the
#: order ``benchbench --help`` lists them: by task, the first measurements first.
COMMANDS = {
    "time": "time",
    "run": "run",
    "list": "list_points",
    "ab": "ab",
    "bisect": "bisect",
    "accuracy": "accuracy",
    "runs": "runs",
    "show": "show",
    "compare": "compare",
    "plot": "plot",
    "claims": "claims",
    "regressions": "regressions",
    "annotate": "annotate",
    "dashboard": "dashboard",
    "capture": "capture",
    "breakdown": "breakdown",
    "probe": "probe",
    "doctor": "doctor",
    "export": "export",
    "import": "import_",
}

#: The tasks ``benchbench --help`` groups the commands by.
GROUPS = (
    ("measure", ("time", "run", "list", "ab", "bisect", "accuracy")),
    ("read and compare results", ("runs", "show", "compare", "plot", "claims")),
    ("history", ("regressions", "annotate", "dashboard")),
    ("where a model's time goes", ("capture", "breakdown")),
    ("this machine", ("probe", "doctor")),
    ("move runs between stores", ("export", "import")),
)

_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj):`~?([^`]+)`")


def plain(text: str | None) -> str | None:
    """Help text without the docstrings' Sphinx markup: ````x```` and ``:func:`x``` read
    as ```x```, as in the Markdown docs; ``{{ default.NAME }}`` filled in from the code
    (:mod:`benchbench.core.facts`)."""
    if text is None:
        return None
    return facts.fill(_ROLE.sub(r"`\1`", _LITERAL.sub(r"`\1`", text)))


#: Paragraphs of a command's docstring that its ``--help`` prints: the synopsis and one
#: paragraph, as pip's and pytest's help do; the rest (:func:`details`) is rendered on the
#: generated CLI reference page only (``benchbench.cli.reference``).
HELP_PARAGRAPHS = 2
_PARAGRAPH = re.compile(r"\n\s*\n")


def summary(doc: str | None) -> str:
    """A command's ``--help`` text: the first :data:`HELP_PARAGRAPHS` of its docstring."""
    return "\n\n".join(_PARAGRAPH.split((doc or "").strip())[:HELP_PARAGRAPHS])


def details(doc: str | None) -> str:
    """The rest of a command's docstring: its details, examples and exit codes."""
    return "\n\n".join(_PARAGRAPH.split((doc or "").strip())[HELP_PARAGRAPHS:])


#: Printed after every command's options.
MORE = "Details, examples and exit codes: the CLI reference (docs/reference/cli.md)."

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REGRESSION = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


#: The top help is printed as written (its groups keep their layout, whatever the
#: terminal), so it is wrapped here, at the width the CLI reference page is generated at.
TOP_WIDTH = 100


def _grouped(helps: dict[str, str]) -> str:
    width = max(len(name) for name in helps) + 2
    lines = []
    for title, names in GROUPS:
        lines.append(f"{title}:")
        for name in names:
            lines += textwrap.wrap(
                helps[name],
                TOP_WIDTH,
                initial_indent=f"  {name:<{width}}",
                subsequent_indent=" " * (width + 2),
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    helps = {
        name: importlib.import_module(f"benchbench.cli.{module}").HELP
        for name, module in COMMANDS.items()
    }
    parser = _Parser(
        prog="benchbench",
        description="Benchmark PyTorch operators on CPU, CUDA and MPS; store and compare "
        "results.\n\n" + _grouped(helps),
        epilog="Exit codes: 0 ok, 1 error, 2 usage, 3 regression found, 130/143 interrupted.\n"
        "`benchbench COMMAND --help` for a command's flags.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"benchbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"benchbench.cli.{module_name}")
        # No help= here: the grouped list in the description is the one list of commands.
        command = sub.add_parser(
            name,
            description=plain(summary(module.__doc__)),
            epilog=MORE,
            formatter_class=_PlainFormatter,
        )
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


class _PlainFormatter(argparse.RawDescriptionHelpFormatter):
    """A command's help: its description's prose paragraphs wrapped to the terminal (a
    filled-in fact may be longer than the line it sits in), an indented block as
    written, options' help without markup."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in _PARAGRAPH.split(text):
            if any(line.startswith(" ") for line in paragraph.splitlines()):
                paragraphs.append(textwrap.indent(paragraph, indent))
            else:
                paragraphs.append(
                    textwrap.fill(
                        " ".join(paragraph.split()),
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                    )
                )
        return "\n\n".join(paragraphs)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        # Before argparse's own %-formatting, so a filled "5 %" is written "5 %%".
        return None if text is None else facts.fill(text, lambda v: v.replace("%", "%%"))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action)) or ""


#: The environment before the settings file filled it in, for ``doctor``'s sources.
ENVIRONMENT_BEFORE_SETTINGS: dict[str, str] = {}


def _apply_settings() -> None:
    """The settings file (benchbench.toml or pyproject.toml's [tool.benchbench]) gives
    the variables it sets their values where they are unset; flags win over both."""
    from benchbench.core import config

    ENVIRONMENT_BEFORE_SETTINGS.clear()
    ENVIRONMENT_BEFORE_SETTINGS.update(os.environ)
    config.apply(config.find())


def _device_default(args: argparse.Namespace) -> None:
    """``--device`` of run, list and time, when not given: ``$BENCHBENCH_DEVICE`` (or the
    settings file's ``device``), else the suites' devices (``time``: the CPU)."""
    if args.command not in ("run", "list", "time") or getattr(args, "device", "") is not None:
        return
    if getattr(args, "resume", None):
        return  # the run being resumed says which devices
    args.device = os.environ.get("BENCHBENCH_DEVICE") or ("cpu" if args.command == "time" else None)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        _apply_settings()
        parser = build_parser()
        args = parser.parse_args(argv)
        _device_default(args)
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


def entry() -> NoReturn:
    """The ``benchbench`` command (and ``python -m benchbench``): :func:`main`, then the
    end of the process as the interpreter ends it (other threads joined, ``atexit``
    handlers run, output flushed) without tearing its modules down, which costs a command
    that loaded SQLAlchemy, numpy and rich ~0.25 s of CPU (BENCHMARKS.md, "A command's
    exit, and imports paid only where used"). In-process callers keep calling
    :func:`main`."""
    code = main()
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        code = 120  # what the interpreter exits with when its last flush fails
    os._exit(code)


def _store_failure(exc: Exception, store: str | None) -> str | None:
    """The one line of a store's failure (damaged, read-only, full, server gone), or None
    for any other exception; SQLAlchemy is only imported if a command loaded it."""
    if "sqlalchemy" not in sys.modules:
        return None
    from benchbench.store.failures import explain
    from benchbench.store.store import normalize_url, safe_url

    return explain(exc, safe_url(normalize_url(store)))


if __name__ == "__main__":
    entry()
