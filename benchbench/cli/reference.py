"""The command-line reference as Markdown, generated from the argparse parsers.

The documentation site's "CLI reference" page is this text (a build hook writes it, see
``mkdocs_hooks.py``), so the page is each command's ``--help``, word for word, and cannot
drift from it; after each command's help come its details (the rest of its module's
docstring, :func:`benchbench.cli.details`), which the terminal's ``--help`` leaves out.
"""

from __future__ import annotations

import argparse
import importlib
import os

from benchbench.cli import COMMANDS, build_parser, details, plain

#: Help is wrapped at this width on the page, whatever the terminal that builds it.
WIDTH = 100


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def markdown() -> str:
    """The reference page: ``benchbench --help``, then every command's help in order."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        parser = build_parser()
        parts = [
            "# CLI reference\n",
            "Generated from the command line's own parsers when the site is built: each "
            "section is what `benchbench COMMAND --help` prints. Exit codes, output formats "
            "and the store are explained once in [Commands](../commands.md).\n",
            "## benchbench\n",
            "```text\n" + parser.format_help() + "```\n",
        ]
        commands = _subparsers(parser)
        for name, module in COMMANDS.items():
            parts.append(f"## benchbench {name}\n")
            parts.append("```text\n" + commands[name].format_help() + "```\n")
            more = plain(details(importlib.import_module(f"benchbench.cli.{module}").__doc__))
            if more:
                parts.append("```text\n" + more + "\n```\n")
            for sub_name, sub in _subparsers(commands[name]).items():
                parts.append(f"### benchbench {name} {sub_name}\n")
                parts.append("```text\n" + sub.format_help() + "```\n")
        return "\n".join(parts)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


if __name__ == "__main__":
    print(markdown())
