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


def test_the_readme_is_a_landing_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference text to docs/"


def test_the_cli_reference_is_every_command_s_help():
    from benchbench.cli.reference import markdown

    page = markdown()
    parser = build_parser()
    assert parser.format_usage().split()[1] in page
    for name in COMMANDS:
        assert f"## benchbench {name}\n" in page
        assert f"usage: benchbench {name}" in page


def test_every_environment_variable_is_in_the_one_table():
    import re

    source = "\n".join(p.read_text() for p in (ROOT / "benchbench").rglob("*.py"))
    variables = set(re.findall(r"BENCHBENCH_[A-Z_]+", source))
    table = (ROOT / "docs" / "environment.md").read_text()
    missing = sorted(v for v in variables if f"`{v}`" not in table)
    assert not missing, f"docs/environment.md does not list {missing}"


def test_every_docs_page_is_in_the_site_s_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    missing = [p for p in pages if p not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


def test_no_recipe_runs_a_tag_as_a_suite():
    """`nightly` is a tag of the built-in suites, not a suite: `run nightly` exits 2."""
    files = [
        p
        for p in (ROOT / "docs").rglob("*")
        if p.is_file() and p.suffix != ".png" and "__pycache__" not in p.parts
    ]
    texts = [p.read_text() for p in files]
    texts.append((ROOT / "README.md").read_text())
    for text in texts:
        assert "run nightly" not in text and "run, nightly" not in text
