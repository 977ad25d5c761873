"""Every command's --help, nested ones included, reads as plain text: no Sphinx markup."""

from __future__ import annotations

import argparse
import re

import pytest

from benchbench.cli import COMMANDS, GROUPS, build_parser, main
from tests.integration.cli import walk_parsers

MARKUP = re.compile(r"``|:(?:func|class|mod|meth|data|attr|exc|obj):`")


def test_every_help_is_free_of_sphinx_markup():
    walked = list(walk_parsers(build_parser()))
    assert len(walked) > len(COMMANDS)  # the top, every command, dashboard's build and serve
    for path, parser in walked:
        text = parser.format_help()
        found = MARKUP.search(text)
        assert found is None, f"benchbench {' '.join(path)} --help: {text[found.start() - 60 :]}"


@pytest.mark.parametrize("argv", [[name, "--help"] for name in COMMANDS] + [["--help"]])
def test_every_help_exits_0(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    assert "usage: benchbench" in capsys.readouterr().out


def test_the_top_help_groups_every_command_by_task_time_and_run_first():
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(COMMANDS) and grouped[:2] == ["time", "run"]
    text = build_parser().format_help()
    listed = [line.split()[0] for line in text.splitlines() if line.startswith("  ")]
    assert listed[:2] == ["time", "run"] and set(COMMANDS) <= set(listed)


def _prose_lines(parser: argparse.ArgumentParser) -> list[str]:
    """The lines of ``--help`` that are neither the usage nor an argument section."""
    titles = {f"{group.title}:" for group in parser._action_groups if group.title}
    prose, section = [], "usage"
    for line in parser.format_help().splitlines():
        if not line.strip():
            section = "" if section == "usage" else section
            continue
        if line in titles:
            section = "arguments"
        elif section == "arguments" and not line.startswith(" "):
            section = ""
        if section == "":
            prose.append(line)
    return prose


#: Every command below the top, nested ones included: ("run",), ("dashboard", "build").
COMMAND_PATHS = [path for path, _ in walk_parsers(build_parser()) if path]


@pytest.mark.parametrize("path", COMMAND_PATHS, ids="-".join)
def test_every_command_s_help_is_a_synopsis_a_paragraph_and_its_options(path, monkeypatch):
    """At 100 columns, at most 25 lines of prose around the options (pip's and pytest's
    shape); the rest of a command's text is on the generated reference page."""
    monkeypatch.setenv("COLUMNS", "100")
    parser = dict(walk_parsers(build_parser()))[path]
    name = " ".join(path)
    prose = _prose_lines(parser)
    assert prose, f"benchbench {name} --help says nothing of what it does"
    assert len(prose) <= 25, f"benchbench {name} --help: {len(prose)} lines of prose\n" + "\n".join(
        prose
    )


def test_every_help_fits_100_columns(monkeypatch):
    """The top help is printed as written (benchbench.cli.TOP_WIDTH), the others wrapped
    to the terminal: at 100 columns, no line of any of them is wider."""
    monkeypatch.setenv("COLUMNS", "100")
    wide = [
        f"benchbench {' '.join(path)} --help: {line}"
        for path, parser in walk_parsers(build_parser())
        for line in parser.format_help().splitlines()
        if len(line) > 100
    ]
    assert not wide, "\n".join(wide)
