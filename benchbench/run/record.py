"""A run's row and where its results go: :class:`RunRecord` and :func:`run_row`, shared by
``run``, ``time``, ``ab`` and the pytest fixture (:mod:`benchbench.run.jobs` re-exports
both)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbench.core.version import __version__
from benchbench.machine.environment import Environment
from benchbench.machine.vcs import git_state
from benchbench.store import Store
from benchbench.store.store import now


@dataclass(frozen=True)
class RunRecord:
    """Where results go: run ``run_id`` in ``store`` (None: they are not stored).

    ``new_row(environment)`` builds the row of a new run (see :func:`run_row`); None
    when the run exists already (``--resume``). ``environment``: one a worker described
    (:func:`benchbench.run.jobs.environment_of`), or None.
    """

    run_id: str
    store: Store | None
    new_row: Callable[[Environment], dict[str, Any]] | None = None
    environment: Environment | None = None


def run_row(
    run_id: str,
    env: Environment,
    *,
    kind: str,
    label: str | None,
    suites: list[dict[str, Any]],
    config: dict[str, Any],
    tags: Sequence[str] = (),
    group_id: str | None = None,
    repo: Path | None = None,
) -> dict[str, Any]:
    """The row of a new run: what every run records, plus its own ``config``.

    ``group_id`` defaults to the run's id; git state is read from ``repo`` (default:
    the current directory).
    """
    git = git_state(repo or Path.cwd())
    return {
        "id": run_id,
        "group_id": group_id or run_id,
        "kind": kind,
        "label": label,
        "status": "running",
        "started_at": now(),
        "finished_at": None,
        "suites": suites,
        "harness_version": __version__,
        "git_sha": git.sha,
        "git_branch": git.branch,
        "git_dirty": git.dirty,
        "tags": list(tags),
        "config": config,
        "environment_id": env.id,
    }
