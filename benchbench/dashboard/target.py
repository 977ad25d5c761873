"""The dashboard's output folder: refused unless it is ours, replaced whole or not at all.

A build writes into a temporary folder beside the target (``.NAME.building-PID``) and
swaps it in only when every file is written, so a build that fails or is killed leaves
the site as it was, and ``dashboard serve`` never serves half a site. On Linux the swap
is one ``renameat2(RENAME_EXCHANGE)``: the target is the old site or the new one at every
instant. Elsewhere it is two renames, with an instant in which the target is absent.

A folder is ours when it holds :data:`MARKER` (written by every build), or the pages,
``assets/`` and ``data/`` a build before the marker wrote. Anything else that is not
empty is refused, naming the folder: ``-o .`` in a project with a ``data/`` folder used to
delete it. Files a user put beside the site (a ``CNAME``, ``.nojekyll``) are carried over
into the new site.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from benchbench.core.errors import UsageError
from benchbench.core.version import __version__

#: The file that makes a folder a dashboard benchbench built.
MARKER = ".benchbench-dashboard"
#: What a build writes at the top of its folder (the marker aside).
WRITTEN = frozenset(
    {
        "index.html",
        "workload.html",
        "history.html",
        "compare.html",
        "environment.html",
        "breakdown.html",
        "assets",
        "data",
    }
)


def check_target(out_dir: Path) -> None:
    """A usage error unless ``out_dir`` is absent, an empty folder or a dashboard."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(
            f"dashboard output '{out_dir}' is a file; give -o a folder, e.g. -o dashboards/latest"
        )
    here = Path.cwd().resolve()
    if out_dir.resolve() in (here, *here.parents):
        raise UsageError(
            f"dashboard output '{out_dir}' is the current folder or holds it, and a build "
            "replaces the folder whole; give -o a folder inside it, e.g. -o dashboards/latest"
        )
    if not out_dir.is_dir() or _ours(out_dir):
        return
    entries = sorted(p.name for p in out_dir.iterdir())
    if entries:
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise UsageError(
            f"dashboard output '{out_dir}' is a folder that is not a dashboard (no {MARKER}; "
            f"it holds {shown}), and a build replaces the folder; give -o a new or empty "
            "folder, e.g. -o dashboards/latest"
        )


@contextlib.contextmanager
def building(out_dir: Path) -> Iterator[Path]:
    """The temporary folder to write the site into; swapped in for ``out_dir`` when the
    block completes, removed when it raises."""
    check_target(out_dir)
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(out_dir)
    new = out_dir.parent / f".{out_dir.name}.building-{os.getpid()}"
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir()
    try:
        yield new
        (new / MARKER).write_text(
            json.dumps(
                {"built_by": "benchbench", "version": __version__, "build": uuid.uuid4().hex}
            )
        )
        if out_dir.is_dir():
            _carry_over(out_dir, new)
        _swap(new, out_dir)
    finally:
        shutil.rmtree(new, ignore_errors=True)


def _ours(folder: Path) -> bool:
    if (folder / MARKER).is_file():
        return True
    # A dashboard built before the marker: its pages, assets and data.
    return all((folder / name).exists() for name in ("index.html", "assets", "data"))


def _carry_over(old: Path, new: Path) -> None:
    """The files a user put in the old site that no build writes, copied into the new."""
    for entry in old.iterdir():
        if entry.name in WRITTEN or entry.name == MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, new / entry.name, follow_symlinks=False)


def _swap(new: Path, target: Path) -> None:
    """``new`` becomes ``target``; the old ``target`` goes to ``new``'s name (and is
    removed by the caller)."""
    if not target.exists():
        new.rename(target)
        return
    if _exchange(new, target):
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    target.rename(old)
    new.rename(target)
    old.rename(new)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange ``a`` and ``b`` (Linux renameat2); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(
        _AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), ctypes.c_uint(_RENAME_EXCHANGE)
    )
    return bool(done == 0)


def _remove_leftovers(out_dir: Path) -> None:
    """Temporary folders of earlier builds of ``out_dir`` killed before their swap."""
    for pattern in (f".{out_dir.name}.building-*", f".{out_dir.name}.old-*"):
        for left in out_dir.parent.glob(pattern):
            pid = left.name.rpartition("-")[2]
            if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
                continue  # another build of the same folder is writing it
            shutil.rmtree(left, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
