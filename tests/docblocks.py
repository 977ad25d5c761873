"""The fenced code blocks of the README and the docs, as tests see them.

Every fence names its language. ``bash``/``sh``/``shell`` and ``python`` blocks are code:
tests/integration/test_doc_blocks.py runs them, page by page, in order, in a fresh
directory. Any other language (``text`` for a command's output or a synopsis, ``yaml``,
``toml``, ``json``) is data and is not run. The line just above a code block may hold a
directive, an HTML comment that the rendered page does not show:

- ``<!-- doc-test: skip REASON -->``: not run here, and why (a GPU, Slurm, a cluster);
- ``<!-- doc-test: exit N -->``: the block's last command exits N (``compare`` finding a
  regression exits 3); ``exit 0 or 3 REASON`` where the verdict is the machine's to give
  (an A/A ``ab`` on real timings: a noisy machine may flag a point, and a test must not
  assert a verdict that a slower or busier machine can change);
- ``<!-- doc-test: file NAME -->``: the block is a file the page's later blocks use (a
  suite file): it is written to NAME instead of being run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = frozenset({"bash", "sh", "shell"})
PYTHON = frozenset({"python"})
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
_DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(skip|exit|file)\s*(.*?)\s*-->")
#: ``exit 3`` or ``exit 0 or 3 (why)``: the codes a block's last command may exit with.
_EXIT_CODES = re.compile(r"^\d+|(?<=or )\d+")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    skip: str | None = None  # the reason it is not run
    exit_codes: tuple[int, ...] = (0,)
    file: str | None = None  # written to this path for later blocks instead of run

    @property
    def runnable(self) -> bool:
        return self.language in SHELL | PYTHON

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_pages() -> list[Path]:
    """README.md and every Markdown page under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, language = match.groups()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line)
            i += 1
        i += 1
        skip, exit_codes, file = None, (0,), None
        previous = lines[start - 1] if start else ""
        directive = _DIRECTIVE.search(previous)
        if directive:
            kind, value = directive.groups()
            if kind == "skip":
                skip = value
            elif kind == "file":
                file = value
            else:
                exit_codes = tuple(int(n) for n in _EXIT_CODES.findall(value))
        code = "\n".join(body) + "\n"
        found.append(Block(path, start + 1, language, code, skip, exit_codes, file))
    return found


def all_blocks() -> list[Block]:
    return [block for page in doc_pages() for block in blocks(page)]
