"""MkDocs build hooks: pages generated when the site is built, so that they cannot drift.

- ``index.md`` is the README (the five recipes live there once), its links rewritten from
  the repository's root to the site's: ``docs/x.md`` becomes ``x.md``, and a file outside
  ``docs/`` (``BENCHMARKS.md``) is named as a repository file instead of linked.
- ``reference/cli.md`` is every command's ``--help``, from the argparse parsers.
- ``benchmarks.md`` is BENCHMARKS.md, the dated measurement journal that the page "How
  fast and how accurate benchbench is" (``trust.md``) quotes.
- Every page's ``{{ default.NAME }}``, ``{{ fact.NAME }}`` and ``{{ asof DATE }}`` are
  filled in from the code (:mod:`benchbench.core.facts`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from benchbench.cli.reference import markdown
from benchbench.core import facts

ROOT = Path(__file__).resolve().parent
CLI_PAGE = "reference/cli.md"
HOME_PAGE = "index.md"
JOURNAL_PAGE = "benchmarks.md"
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _site_link(match: re.Match[str]) -> str:
    bang, text, target = match.groups()
    if "://" in target or target.startswith("#"):
        return match.group(0)
    if target.startswith("docs/"):
        target = target[len("docs/") :] or "index.md"
        return f"{bang}[{text}]({target})"
    if target == "docs/" or target == "docs":
        return f"{bang}[{text}](index.md)"
    if target == "BENCHMARKS.md":
        return f"{bang}[{text}]({JOURNAL_PAGE})"
    return f"{text} (`{target}` in the repository)"


def home_page() -> str:
    text = (ROOT / "README.md").read_text()
    text = text.replace("](docs/)", "](index.md)")
    return _LINK.sub(_site_link, text)


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, HOME_PAGE, content=home_page()))
    files.append(File.generated(config, CLI_PAGE, content=markdown()))
    journal = (ROOT / "BENCHMARKS.md").read_text()
    files.append(File.generated(config, JOURNAL_PAGE, content=_LINK.sub(_site_link, journal)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Every page's ``{{ default.NAME }}`` and ``{{ fact.NAME }}`` from the code."""
    return facts.fill(markdown)
