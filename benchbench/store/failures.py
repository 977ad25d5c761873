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

import os
import shutil
import sqlite3
from pathlib import Path

import sqlalchemy as sa

#: Free space a store's folder needs before a run writes to it: room for the write-ahead
#: log to reach its checkpoint (1,000 pages of 4 KiB) twice over, and for a night's
#: points (a point is ~1-50 KiB). ``run`` checks it before measuring.
MIN_FREE_BYTES = 16 * 2**20

#: (words in the driver's message, what it means, the fix); ``{where}`` is the store,
#: ``{folder}`` its folder, ``{room}`` the folder's free space and what it needs.
_SQLITE: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("malformed", "not a database", "encrypted", "corrupt"),
        "the file is damaged",
        "restore {where} from a backup, or recover what is readable with "
        "`sqlite3 {where} .recover | sqlite3 recovered.db` and give --store recovered.db "
        "(benchbench never repairs a store by deleting rows)",
    ),
    (
        ("readonly", "read-only", "unable to open"),
        "it cannot be written here",
        "make {where} and its folder {folder} writable by this user, or give --store PATH "
        "in a writable folder",
    ),
    (
        ("disk is full", "disk full", "disk i/o"),
        "its disk is full or failing",
        "free space on the disk of {where} ({room}) and run the command again (a run: "
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
        folder = Path(where).resolve().parent
        for words, meaning, fix in _SQLITE:
            if any(w in lowered for w in words):
                advice = fix.format(where=where, folder=folder, room=room(folder))
                return f"store {where}: {meaning} ({text}); {advice}"
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


#: Words of a PostgreSQL failure that is the server or the connection, not the statement:
#: a retry may succeed once the server is back (psycopg's and libpq's messages).
_GONE = (
    "connection refused",
    "server closed the connection",
    "terminating connection",
    "the database system is",  # ... starting up / shutting down / in recovery mode
    "connection is closed",
    "connection timeout",
    "timeout expired",
    "could not connect",
    "could not receive",
    "could not send",
    "connection reset",
    "broken pipe",
    "no route to host",
    "network is unreachable",
    "ssl syscall",
    "consuming input failed",
    "canceling statement due to statement timeout",
)


def room(folder: Path) -> str:
    """Words for ``folder``'s free space beside what a store there needs."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return f"its folder {folder} is gone or unreadable"
    return f"{folder} has {_size(free)} free, a run needs {_size(MIN_FREE_BYTES)}"


def unwritable(path: Path) -> str | None:
    """Why a run could not store its points in SQLite file ``path`` (a folder that is
    read-only or short of :data:`MIN_FREE_BYTES`), as the store's line; None when it can.
    Checked before anything is measured."""
    folder = path.resolve().parent
    where = str(path)
    if not folder.is_dir():
        return (
            f"store {where}: its folder {folder} is gone; create it or give --store PATH "
            "of an existing folder (an existing store's run: restore the folder and "
            "`benchbench run --resume RUN`)"
        )
    targets = [folder, *(p for p in (path, _wal(path)) if p.exists())]
    if not all(os.access(p, os.W_OK) for p in targets):
        return describe(f"sqlite:///{where}", "read-only: checked before measuring")
    if shutil.disk_usage(folder).free < MIN_FREE_BYTES:
        return describe(f"sqlite:///{where}", "disk full: checked before measuring")
    return None


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def server_gone(exc: sa.exc.DBAPIError) -> bool:
    """True when PostgreSQL error ``exc`` is the server or the connection going away (a
    write may succeed later), False for a failure of the statement itself."""
    if exc.connection_invalidated:
        return True
    text = str(exc.orig).lower()
    return any(words in text for words in _GONE)


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "unknown error"
