"""What may not change between a run and its ``--resume``, and the run that continues it.

A resumed run files its new points beside the ones it stored before, so they must come
from the same machine and code: the same environment (its comparability fields: machine
label, CPU, torch build, threads, allocator, ...), the same benchbench, the same suite
files (their stored hashes) and the same git sha of the code under test. A Slurm job
requeued after SIGTERM often lands on another node; without this check its points joined
the first node's history.

When something differs, ``--resume RUN`` is refused naming what differs; ``--resume RUN
--force`` measures the points RUN still lacks into a new run of RUN's group (a
*continuation*, its config's ``continues`` naming RUN) under its own environment, code
and suite hashes: each run's points keep the history of the machine and code that
measured them, and resuming the continuation measures none of RUN's points again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchbench.core.errors import UsageError
from benchbench.core.version import __version__
from benchbench.machine.environment import Environment
from benchbench.machine.vcs import git_state
from benchbench.store import Store
from benchbench.suite.load import file_hash


def code_changes(row: Mapping[str, Any], repo: Path | None) -> list[str]:
    """What differs between stored run ``row`` and the code here: benchbench's version,
    each suite file's hash, the git sha of ``repo`` (default: the current directory)."""
    out: list[str] = []
    if row.get("harness_version") != __version__:
        out.append(f"benchbench {row.get('harness_version')} -> {__version__}")
    for suite in row.get("suites") or []:
        path = Path(suite["path"])
        now = file_hash(path) if path.is_file() else "missing"
        if suite.get("hash") and now != suite["hash"]:
            out.append(f"suite file {path} hash {suite['hash']} -> {now}")
    sha = git_state(repo or Path.cwd()).sha
    if row.get("git_sha") != sha:
        out.append(f"git sha {_short(row.get('git_sha'))} -> {_short(sha)}")
    return out


def environment_changes(stored: Mapping[str, Any] | None, env: Environment) -> list[str]:
    """The comparability fields whose values differ between the run's environment
    (``stored``: its ``fields``) and ``env``, as ``name a -> b``."""
    before = dict(stored or {})
    names = sorted(set(before) | set(env.fields))
    return [
        f"environment {name} {before.get(name)!r} -> {env.fields.get(name)!r}"
        for name in names
        if before.get(name) != env.fields.get(name)
    ]


def refusal(run_id: str, changes: Sequence[str]) -> UsageError:
    """The usage error of a resume whose run came from other code or another machine."""
    return UsageError(
        f"--resume {run_id}: the run was measured elsewhere: {'; '.join(changes)}. Its points "
        "and new ones would not be comparable: resume where it started, start a new run, or "
        f"give --resume {run_id} --force to measure the rest into a new run of its group "
        "under this environment"
    )


def stored_fields(store: Store, row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The comparability fields of run ``row``'s environment (None when it has none)."""
    env_id = row.get("environment_id")
    found = store.environment(env_id) if env_id else None
    return dict(found["fields"]) if found else None


def done_ids(store: Store, row: Mapping[str, Any]) -> set[str]:
    """The benchmarks run ``row`` has stored, and the runs it continues (``--force``)."""
    done: set[str] = set()
    seen: set[str] = set()
    current: Mapping[str, Any] | None = row
    while current is not None and current["id"] not in seen:
        seen.add(current["id"])
        done |= store.done_benchmark_ids(current["id"])
        before = (current.get("config") or {}).get("continues")
        current = store.resolve_run(before) if before else None
    return done


def _short(sha: object) -> str:
    return str(sha)[:12] if sha else "none"
