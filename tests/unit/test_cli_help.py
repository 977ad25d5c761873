"""Every command's --help, nested ones included, reads as plain text: no Sphinx markup."""

from __future__ import annotations

import argparse
import re

import pytest

from benchbench.cli import COMMANDS, GROUPS, build_parser, main

MARKUP = re.compile(r"``|:(?:func|class|mod|meth|data|attr|exc|obj):`")


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def test_every_help_is_free_of_sphinx_markup():
    walked = list(_walk(build_parser()))
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
