"""A store's failures in words a user can act on: which store, what happened, the fix.

The SQL layer raises SQLAlchemy's and the drivers' errors from any read or write, long
after :func:`~benchbench.store.open_store` succeeded: a file whose pages past the header
were overwritten opens and then fails in ``show``; a full disk fails the write of one
point; a PostgreSQL server can go away between two points. The CLI hands such an error
to :func:`explain` and prints its one line (exit 1) instead of a traceback. Nothing is
half-written: every point is one transaction (a failed one is rolled back whole), a
bundle import is one transaction, and a run that stops on a store failure is finished
by ``benchbench run --resume RUN``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

#: (words in the driver's message, what it means, the fix); ``{where}`` is the store.
_SQLITE: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("malformed", "not a database", "encrypted", "corrupt"),
        "the file is damaged",
        "restore {where} from a backup, or recover what is readable with "
        "`sqlite3 {where} .recover | sqlite3 recovered.db` and give --store recovered.db",
    ),
    (
        ("readonly", "read-only", "unable to open"),
        "it cannot be written here",
        "make {where} and its folder writable by this user, or give --store PATH in a "
        "writable folder",
    ),
    (
        ("disk is full", "disk full", "disk i/o"),
        "its disk is full or failing",
        "free space on the disk of {where} and run the command again (a run: "
        "`benchbench run --resume RUN` measures the points it had not stored)",
    ),
)


def explain(exc: BaseException, url: str) -> str | None:
    """One line naming store ``url`` (as :func:`~benchbench.store.store.safe_url` gives
    it), what ``exc`` means and the fix; None when ``exc`` is not a store failure."""
    if isinstance(exc, sa.exc.DBAPIError):
        text = _first_line(str(exc.orig))
    elif isinstance(exc, (sa.exc.SQLAlchemyError, sqlite3.Error)):
        text = _first_line(str(exc))
    else:
        return None
    server = isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError))
    return describe(url, text, server=server)


def describe(url: str, text: str, *, server: bool = True) -> str:
    """The line of failure ``text`` (the driver's first line) of store ``url``;
    ``server``: a PostgreSQL failure may be the server or the connection."""
    if url.startswith("sqlite"):
        where = url.removeprefix("sqlite:///") or url
        if Path(where).is_dir():
            return (
                f"store {where}: it is a folder, not an SQLite file ({text}); give --store "
                f"PATH of a file, e.g. --store {Path(where) / 'benchbench.db'}"
            )
        lowered = text.lower()
        for words, meaning, fix in _SQLITE:
            if any(w in lowered for w in words):
                return f"store {where}: {meaning} ({text}); {fix.format(where=where)}"
        return (
            f"store {where}: {text}; check that it is an SQLite file of benchbench's you may "
            "read and write"
        )
    if server:
        return (
            f"store {url}: the server failed or went away ({text}); check that it runs and "
            "is reachable, then run the command again (every point written before is stored "
            "whole; a run: `benchbench run --resume RUN` measures the rest)"
        )
    return f"store {url}: {text}; check the store URL and the server's log"


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "unknown error"
