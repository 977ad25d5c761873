"""The pages that must follow the code: the troubleshooting page names every note a run
prints, and the site's navigation holds the tutorial, troubleshooting and changelog."""

from __future__ import annotations

import re
from pathlib import Path

from benchbench.views import run_notes

ROOT = Path(__file__).resolve().parents[2]


def test_troubleshooting_names_every_note_a_table_prints() -> None:
    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    words = {"unstable", *run_notes.PRIORITY, *(word for _, word in run_notes._WORDS)}
    missing = sorted(word for word in words if f"| `{word}`" not in page)
    assert not missing, f"docs/troubleshooting.md has no row for the notes {missing}"


def test_the_newcomer_s_pages_are_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in ("tutorial.md", "troubleshooting.md", "changelog.md", "trust.md"):
        assert f": {page}" in nav, f"mkdocs.yml's nav lacks {page}"


#: Words retired for one vocabulary (docs/concepts.md's glossary: base and head, round,
#: pass): the two sides of a comparison were also contender, A/B and #1/reference.
RETIRED = re.compile(
    r"(?<![`_])\bcontender\b(?![`_])|\brun [AB]\b|\bB/A\b|\bB versus A\b|CONTENDER"
)
#: Pages that quote the old words on purpose: the changelog says what was renamed.
QUOTING = {"changelog.md"}


#: The line above a pasted output taken before the words changed, and the date it says:
#: the output stays as it was printed, and the retired words in it are not the docs'.
OUTPUT_AS_OF = re.compile(
    r"<!-- output as of \d{4}-\d{2}-\d{2}[^>]*-->\n```text\n.*?\n```", re.DOTALL
)


def test_docs_and_help_speak_of_base_and_head() -> None:
    from benchbench.cli import COMMANDS, build_parser
    from tests.docblocks import doc_pages
    from tests.integration.cli import walk_parsers

    found = [
        f"{page.name}: {match.group(0)}"
        for page in doc_pages()
        if page.name not in QUOTING
        for match in RETIRED.finditer(OUTPUT_AS_OF.sub("", page.read_text()))
    ]
    walked = list(walk_parsers(build_parser()))  # the top, every command, nested ones too
    assert {("dashboard", "build"), ("dashboard", "serve")} | {(n,) for n in COMMANDS} <= {
        path for path, _ in walked
    }
    for path, parser in walked:
        found += [
            f"benchbench {' '.join(path)} --help: {m.group(0)}"
            for m in RETIRED.finditer(parser.format_help())
        ]
    assert not found, f"retired words (say base and head, docs/concepts.md): {found}"
