"""Git state of the code under test (sha, branch, dirty), recorded with each run."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitState:
    sha: str | None = None
    branch: str | None = None
    dirty: bool | None = None


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(repo: Path) -> GitState:
    """The checkout's state, or an empty state when ``repo`` is not a git checkout."""
    sha = _git(repo, "rev-parse", "HEAD")
    if sha is None:
        return GitState()
    branch = _git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return GitState(sha=sha, branch=branch, dirty=bool(status) if status is not None else None)
