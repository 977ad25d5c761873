"""The cache of sides built from commits: one folder per key, a size bound, eviction.

asv's users' most frequent complaint is environments rebuilt on every comparison (asv
issues 338, 1449, 1452). A side built here is kept under its key: the commit's tree, this
Python (its version and environment), the torch version and the install command
(:func:`side_key`); the second ``ab`` or ``bisect`` with the same commits builds nothing.

The folder is ``$BENCHBENCH_SIDES_CACHE``, else ``$XDG_CACHE_HOME/benchbench/sides``, else
``~/.cache/benchbench/sides``. Each entry holds the commit's checkout (``src``), its
virtual environment (``venv``), the build log and ``ready.json``, written last: an entry
without it is a build that did not finish, and is built again. An entry is locked
(``flock``) while it is built or used, so two commands never build one key at once and
eviction never removes an entry in use. After a build the least recently used entries
are removed until the cache holds at most ``$BENCHBENCH_SIDES_CACHE_GB`` gigabytes
(default 5; a side without torch is a few megabytes plus the checkout).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from benchbench.core import defaults
from benchbench.core.errors import UsageError

CACHE_VARIABLE = "BENCHBENCH_SIDES_CACHE"
SIZE_VARIABLE = "BENCHBENCH_SIDES_CACHE_GB"
DEFAULT_SIZE_GB = defaults.SIDES_CACHE_GB
READY = "ready.json"


def cache_root(environ: dict[str, str] | None = None) -> Path:
    """The folder the sides are cached in (see the module's docstring)."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_VARIABLE):
        return Path(env[CACHE_VARIABLE]).expanduser()
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "benchbench" / "sides"


def size_bound_bytes(environ: dict[str, str] | None = None) -> int:
    """The cache's size bound in bytes; a UsageError naming the variable when it is bad."""
    env = os.environ if environ is None else environ
    text = env.get(SIZE_VARIABLE)
    if not text:
        return int(DEFAULT_SIZE_GB * 1e9)
    try:
        gigabytes = float(text)
    except ValueError:
        gigabytes = -1.0
    if not gigabytes > 0:
        raise UsageError(f"${SIZE_VARIABLE}={text!r}: give a size in gigabytes > 0, e.g. 5")
    return int(gigabytes * 1e9)


def torch_version() -> str:
    """This environment's torch version, read from its metadata (torch is not imported)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def side_key(tree: str, install: str) -> str:
    """The cache key of a side: the commit's tree, this Python (version and environment),
    the torch version and the install command."""
    parts = {
        "tree": tree,
        "python": sys.version,
        "environment": sys.prefix,
        "torch": torch_version(),
        "install": install,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Entry:
    """One cached side's folder and what is in it."""

    folder: Path

    @property
    def source(self) -> Path:
        return self.folder / "src"

    @property
    def venv(self) -> Path:
        return self.folder / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def log(self) -> Path:
        return self.folder / "build.log"

    @property
    def ready(self) -> dict[str, Any] | None:
        """What ``ready.json`` holds, or None when the entry was never finished."""
        try:
            return dict(json.loads((self.folder / READY).read_text()))
        except (OSError, ValueError):
            return None

    def mark_ready(self, facts: dict[str, Any]) -> None:
        (self.folder / READY).write_text(json.dumps(facts, indent=1))

    def touch(self) -> None:
        """Mark the entry used now (eviction removes the least recently used first)."""
        with contextlib.suppress(OSError):
            os.utime(self.folder / READY)


@contextlib.contextmanager
def locked(root: Path, key: str) -> Iterator[Entry]:
    """The entry of ``key``, locked for this process while the block runs."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield Entry(root / key)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _size_bytes(folder: Path) -> int:
    total = 0
    for path, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(path, name)).st_size
    return total


def _try_lock(path: Path) -> IO[str] | None:
    handle = open(path, "a")  # noqa: SIM115 - held open while the entry is removed
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def remove(entry: Entry) -> None:
    """Remove an entry and its checkout's record in the repository it came from."""
    repo = (entry.ready or {}).get("repo")
    shutil.rmtree(entry.folder, ignore_errors=True)
    if repo and Path(repo).is_dir():
        subprocess.run(
            ["git", "-C", repo, "worktree", "prune"], capture_output=True, timeout=60, check=False
        )


def evict(root: Path, bound_bytes: int, keep: frozenset[str] = frozenset()) -> list[str]:
    """Remove the least recently used entries (not in ``keep``, not locked by another
    process) until the cache holds at most ``bound_bytes``; the keys removed."""
    if not root.is_dir():
        return []
    entries = [Entry(p) for p in root.iterdir() if p.is_dir()]
    sizes = {e.folder.name: _size_bytes(e.folder) for e in entries}
    total = sum(sizes.values())

    def last_used(entry: Entry) -> float:
        try:
            return (entry.folder / READY).stat().st_mtime
        except OSError:
            return 0.0  # never finished: the first to go

    removed = []
    for entry in sorted(entries, key=last_used):
        if total <= bound_bytes:
            break
        key = entry.folder.name
        if key in keep:
            continue
        handle = _try_lock(root / f"{key}.lock")
        if handle is None:
            continue  # in use by another command
        try:
            remove(entry)
        finally:
            handle.close()
        with contextlib.suppress(OSError):
            (root / f"{key}.lock").unlink()
        total -= sizes[key]
        removed.append(key)
    return removed
