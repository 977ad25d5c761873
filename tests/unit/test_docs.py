"""The README's commands are the ones CI runs, and every command is documented."""

from pathlib import Path

from benchbench.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    return [line for line in lines if line.startswith("python3 -m venv .venv")]


def test_ci_runs_the_readme_test_command_verbatim():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    test_command = next(c for c in commands if "pytest" in c)
    assert "benchbench run quick" in next(c for c in commands if "pytest" not in c)
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_command_has_help_and_appears_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    parser = build_parser()
    help_text = parser.format_help()
    for name in COMMANDS:
        assert name in help_text
        assert f"benchbench {name}" in readme, f"README does not mention `benchbench {name}`"
