"""Where docs and help texts state a default by hand, as tests see it.

A default a page or a help text states about current behaviour is markup
(``{{ default.rounds }}``, :mod:`benchbench.core.facts`), filled in from the code; a
sentence of a dated measurement carries ``{{ asof YYYY-MM-DD }}``; a pasted output is a
fenced block. Anything else that reads "(default 3)", "3 by default", "`--rounds` (3)",
"the 5 % minimum effect" or "its 300 s timeout" is a default typed by hand, bound to drift.
"""

from __future__ import annotations

import re

_FENCED = re.compile(r"^(\s*)(```+|~~~+).*?^\1\2\s*$", re.DOTALL | re.MULTILINE)
_MARKUP = re.compile(r"\{\{[^}]*\}\}")
_BY_HAND = (
    re.compile(r"\bdefaults?\b(?:\s+(?:is|of|to|at|was))?[\s:=]*[±~]?\d", re.IGNORECASE),
    re.compile(
        r"\d[\d.,]*\s*(?:%|s|ms|µs|rounds?|threads?|process(?:es)?)?\)?\s+by\s+default",
        re.IGNORECASE,
    ),
    re.compile(r"\d[\d.]*\s*%?\s+defaults?\b"),
    re.compile(r"`--[a-z-]+`\s*\(\s*(?:default\s*)?[±~]?\d"),
    re.compile(r"--[a-z-]+ \((?:default )?\d"),
    # The verdict's threshold and level, and the timeouts, named rather than flagged:
    # "the 5 % minimum effect" ("a 50 % min effect" is a value chosen for an example),
    # "the minimum effect (5 %)", "1 − alpha (95 %)", "its 300 s timeout",
    # "300 s rather than 60 s unless `--timeout`".
    re.compile(r"\b(?:the|its|[a-z]+'s)\s+\d[\d.]*\s*%\s+min(?:imum)?\s+effect\b", re.IGNORECASE),
    re.compile(r"\bmin(?:imum)?\s+effect\s*(?:of\s+|\(\s*)\d[\d.]*\s*%", re.IGNORECASE),
    re.compile(r"\balpha\s*\(\s*\d[\d.]*\s*%\s*\)", re.IGNORECASE),
    re.compile(r"\d[\d.]*\s*s\s+(?:timeout\b|rather\s+than\s+\d[\d.]*\s*s\b)"),
)


_NUMBER_CELL = re.compile(r"^[±~]?\d[\d.,]*\s*(?:%|s|ms)?$")


def _table_defaults(prose: str) -> list[str]:
    """Cells of a table's ``default`` column that are a bare number."""
    found, column = [], None
    for line in prose.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|"):
            column = None
        elif column is None:
            column = cells.index("default") if "default" in cells else -1
        elif column >= 0 and column < len(cells) and _NUMBER_CELL.match(cells[column]):
            found.append(line.strip())
    return found


def stated_by_hand(text: str) -> list[str]:
    """The sentences of ``text`` (prose, not fenced blocks) that type a default's value."""
    prose = _FENCED.sub("", text)
    found = _table_defaults(prose)
    for paragraph in re.split(r"\n\s*\n", prose):
        if "{{ asof" in paragraph:
            continue
        flat = re.sub(r"\s+", " ", _MARKUP.sub("N", paragraph))
        for pattern in _BY_HAND:
            for match in pattern.finditer(flat):
                found.append(flat[max(0, match.start() - 50) : match.end() + 20])
    return found
