"""One table, several outputs: a rich table for a terminal, GitHub markdown, CSV.

Every command that prints results builds :class:`Grid` values and hands them to one
writer, so ``--format table|markdown|csv`` reads the same on every command (``json``
is each command's own document). Cells are plain strings or styled
:class:`rich.text.Text`; a plain string is never read as rich markup, so a label such
as ``sqrt:torch.sqrt[float32, cpu](n=1024)`` keeps its ``[float32, cpu]``.

A rich table never cuts a cell to ``…``: its columns fold (wrap at spaces, then
inside a word) when the terminal is too narrow, and :func:`console_for` prints at the
width the content needs when there is no terminal (a file, a CI log). What a machine's
measurements put under a table or beside its names (notes, a fit's crossovers) is wrapped
by construction: notes at :data:`NOTE_WIDTH`, a column declared with ``max_width`` (a
run's ``notes``, a fit's crossovers) within it, so that no machine's content makes a line
of a CI log wider than 160.
"""

from __future__ import annotations

import csv
import io
import os
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

#: The values of ``--format``.
FORMATS = ("table", "markdown", "csv", "json")

#: Width of a console with no terminal: wide enough that no table is cut or folded.
#: A rich table without ``expand`` takes only the width its content needs, so this is a
#: limit, not a width the output pads to.
UNLIMITED_WIDTH = 100_000
#: Notes under a table wrap at this many characters (a CI log, a terminal of 160): their
#: content depends on the machine (busy processes' names, retaken points), so a width
#: limit by construction, not a hope that one machine's words are short.
NOTE_WIDTH = 150

Cell = str | Text
Justify = Literal["left", "right"]


@dataclass(frozen=True)
class Column:
    """A column's header and alignment (numbers align right). ``max_width``: a text
    column whose content depends on the measurements (a fit's crossovers) wraps within
    it, so that the table's width depends on the names alone."""

    name: str
    justify: Justify = "left"
    max_width: int | None = None


@dataclass(frozen=True)
class Grid:
    """A titled table of cells with notes printed under it."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    title: str | None = None
    notes: tuple[str, ...] = ()
    #: Rules between rows, for rows of several lines (claims).
    row_lines: bool = False

    @classmethod
    def of(
        cls,
        columns: Sequence[str | Column],
        rows: Sequence[Sequence[Cell]],
        title: str | None = None,
        notes: Sequence[str] = (),
        *,
        row_lines: bool = False,
    ) -> Grid:
        """A grid from column names (or :class:`Column`) and row sequences."""
        cols = tuple(c if isinstance(c, Column) else Column(c) for c in columns)
        for row in rows:
            if len(row) != len(cols):
                raise ValueError(f"a row has {len(row)} cells for {len(cols)} columns: {row!r}")
        return cls(cols, tuple(tuple(r) for r in rows), title, tuple(notes), row_lines)


def plain(cell: Cell) -> str:
    """The text of a cell without its style."""
    return cell.plain if isinstance(cell, Text) else cell


def console_for(file: IO[str], *, stderr: bool = False) -> Console:
    """A console on ``file``: the terminal's width on a terminal (or ``$COLUMNS`` when set),
    else unlimited, so that a table written to a file or a CI log is never cut to 80."""
    console = Console(file=file, stderr=stderr, soft_wrap=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(file=file, stderr=stderr, soft_wrap=False, width=UNLIMITED_WIDTH)
    return console


def wrap_note(note: str, width: int = NOTE_WIDTH) -> list[str]:
    """A note as lines of at most ``width`` characters: wrapped at spaces (never at a
    hyphen: ``2^16``, ``1.2-1.3``), a word longer than the width cut inside, the lines
    after the first indented by two spaces; lines the note already has are kept."""
    lines = []
    for part in note.splitlines() or [""]:
        indent = part[: len(part) - len(part.lstrip(" "))] or ""
        wrapped = textwrap.wrap(
            part, width, subsequent_indent=indent or "  ", break_on_hyphens=False
        )
        lines += wrapped or [part]
    return lines


def rich_table(grid: Grid) -> Table:
    """The grid as a rich table that never ends a cell in ``…`` on a narrow terminal.

    Numbers (right-aligned columns) keep their full width on one line: ``10.9 µs`` cut
    into ``10.9`` and ``µs``, or ``0.188`` into ``0.18`` and ``8``, misreads. Text columns
    (names, notes) wrap at spaces, then inside a word, to make room for them.
    """
    table = Table(title=grid.title, header_style="bold", show_lines=grid.row_lines)
    for at, column in enumerate(grid.columns):
        if column.justify == "right":
            widest = max((len(plain(row[at])) for row in grid.rows), default=0)
            table.add_column(column.name, justify="right", no_wrap=True, min_width=widest)
        else:
            table.add_column(
                column.name, justify=column.justify, overflow="fold", max_width=column.max_width
            )
    for row in grid.rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    return table


#: Characters markdown would read as markup: ``[float32, cpu](n=1024)`` is a link,
#: ``2**10`` bold, ``|`` ends a cell.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def escape_markdown(text: str) -> str:
    """``text`` as literal markdown: special characters escaped, newlines as ``<br>``."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("\n", "<br>")


def _markdown_cell(text: str) -> str:
    return escape_markdown(text) or " "


def markdown(grid: Grid) -> str:
    """GitHub-flavoured markdown (a job summary, a PR comment): bold title, table, notes."""
    lines: list[str] = []
    if grid.title:
        lines += [f"**{_markdown_cell(grid.title)}**", ""]
    lines.append("| " + " | ".join(_markdown_cell(c.name) for c in grid.columns) + " |")
    rule = ("--:" if c.justify == "right" else ":--" for c in grid.columns)
    lines.append("|" + "|".join(rule) + "|")
    for row in grid.rows:
        lines.append("| " + " | ".join(_markdown_cell(plain(cell)) for cell in row) + " |")
    if grid.notes:
        lines.append("")
        lines += [f"{escape_markdown(note)}  " for note in grid.notes]
    return "\n".join(lines) + "\n"


def csv_text(grid: Grid) -> str:
    """A header line and one line per row; the title and notes are not part of a CSV. A
    cell's lines (a table's notes, one word a line) are joined by spaces: one record a line."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([c.name for c in grid.columns])
    writer.writerows([" ".join(plain(cell).splitlines()) for cell in row] for row in grid.rows)
    return buffer.getvalue()


def write(grids: Sequence[Grid], fmt: str, out: IO[str], err: IO[str]) -> None:
    """Write ``grids`` to ``out`` in ``fmt`` (table, markdown or csv).

    Several grids are separated by a blank line; in CSV each is its own block with a
    header. Notes go under each table, or to ``err`` for CSV so that ``out`` stays CSV.
    """
    if fmt == "table":
        console = console_for(out)
        for grid in grids:
            console.print(rich_table(grid))
            for note in grid.notes:
                for line in wrap_note(note):
                    console.print(Text(line), soft_wrap=True)
        return
    if fmt not in ("markdown", "csv"):
        raise ValueError(f"cannot write tables as {fmt!r}; use table, markdown or csv")
    for index, grid in enumerate(grids):
        if index:
            out.write("\n")
        out.write(markdown(grid) if fmt == "markdown" else csv_text(grid))
        if fmt == "csv":
            for note in grid.notes:
                err.write(note + "\n")
