"""Commits of the user's repository named by git refs: ``ab --base-ref/--head-ref`` and
``bisect --good/--bad`` resolve their refs here, before anything is built.

A ref is anything ``git rev-parse`` takes (a branch, a tag, a sha, ``main~3``), or
:data:`WORKTREE` (also spelled ``.``): the working tree with its uncommitted changes,
untracked files that git does not ignore included. The working tree becomes a commit of
its own (parent ``HEAD``, fixed author and date) made through a temporary index, so the
user's index, branch and files are untouched, and the same working tree always gives the
same commit and tree: its side is built once, like any commit's.

Each commit carries its tree's id: the cache of built sides is keyed by tree, so two
commits with the same files share one environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchbench.core.errors import UsageError

#: The ref that names the working tree with its uncommitted changes (``.`` too).
WORKTREE = "WORKTREE"
WORKTREE_SPELLINGS = (WORKTREE, ".")
#: The working tree's commit: a fixed identity and date, so that its id depends only on
#: its files and its parent.
_SNAPSHOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "benchbench",
    "GIT_AUTHOR_EMAIL": "benchbench@localhost",
    "GIT_COMMITTER_NAME": "benchbench",
    "GIT_COMMITTER_EMAIL": "benchbench@localhost",
    "GIT_AUTHOR_DATE": "@0 +0000",
    "GIT_COMMITTER_DATE": "@0 +0000",
}


@dataclass(frozen=True)
class Commit:
    """A commit of the repository: the ref it was named by, its sha, its tree's sha and
    subject line."""

    ref: str
    sha: str
    tree: str
    subject: str
    #: The working tree's commit: the ``HEAD`` it was made over (what a run records).
    over: str | None = None

    @property
    def short(self) -> str:
        return self.sha[:10]

    @property
    def recorded(self) -> tuple[str, bool]:
        """The sha a run records and whether the code had uncommitted changes."""
        return (self.over, True) if self.over is not None else (self.sha, False)

    @property
    def name(self) -> str:
        """``main (3f2a1c0d9e)``: the ref and the commit, for messages."""
        return self.short if self.ref == self.sha else f"{self.ref} ({self.short})"


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``git -C repo ARGS``'s output; a UsageError naming the command when it fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        raise UsageError("git is not installed: install it to build sides from refs") from None
    if done.returncode != 0:
        raise UsageError(f"git {' '.join(args)} in {repo}: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def repository(path: Path | None) -> Path:
    """The top folder of the git repository at ``path`` (default: the current folder)."""
    where = (path or Path.cwd()).resolve()
    if not where.is_dir():
        raise UsageError(f"--repo {where}: no such folder; give a git repository's folder")
    try:
        return Path(git(where, "rev-parse", "--show-toplevel"))
    except UsageError:
        raise UsageError(
            f"--repo {where} is not a git repository; give the folder of your checkout "
            "(--repo PATH)"
        ) from None


def resolve(repo: Path, ref: str, flag: str) -> Commit:
    """The commit ``ref`` names; a UsageError naming ``flag`` and the ref when none does."""
    if ref in WORKTREE_SPELLINGS:
        return snapshot(repo, ref)
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise UsageError(
            f"{flag} {ref!r}: no such commit in {repo}; give a branch, tag or sha "
            f"(`git -C {repo} log --oneline` lists them), or {WORKTREE} for the working tree"
        )
    return _commit(repo, ref, done.stdout.strip())


def _commit(repo: Path, ref: str, sha: str) -> Commit:
    tree, _, subject = git(repo, "show", "-s", "--format=%T %s", sha).partition(" ")
    return Commit(ref, sha, tree, subject)


def snapshot(repo: Path, ref: str = WORKTREE) -> Commit:
    """The working tree, uncommitted changes and untracked files included, as a commit
    whose parent is ``HEAD``, made through a temporary index (the user's is untouched)."""
    head = git(repo, "rev-parse", "--verify", "HEAD")
    index = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    with tempfile.TemporaryDirectory(prefix="benchbench-index-") as folder:
        temporary = Path(folder) / "index"
        if index.exists():
            # Its stat cache makes `add -A` quick; copied with its mtime, or git's racy-entry
            # check (a file changed in the second the index was written is re-read) is lost
            # and an edit that keeps the file's size goes unseen.
            shutil.copy2(index, temporary)
        env = {**os.environ, "GIT_INDEX_FILE": str(temporary), **_SNAPSHOT_IDENTITY}
        git(repo, "add", "-A", env=env)
        tree = git(repo, "write-tree", env=env)
    message = f"benchbench: the working tree over {head[:10]}"
    identity = {**os.environ, **_SNAPSHOT_IDENTITY}
    sha = git(repo, "commit-tree", tree, "-p", head, "-m", message, env=identity)
    return Commit(ref, sha, tree, message, over=head)


def check_ancestor(repo: Path, good: Commit, bad: Commit) -> None:
    """UsageError unless ``good`` is an ancestor of ``bad`` (and not ``bad`` itself)."""
    if good.sha == bad.sha:
        raise UsageError(
            f"--good {good.ref!r} and --bad {bad.ref!r} are one commit; give a bad commit "
            "that comes after the good one"
        )
    done = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", good.sha, bad.sha],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise UsageError(
            f"--good {good.name} is not an ancestor of --bad {bad.name}; bisect searches the "
            "commits from good to bad: give a good commit the bad one descends from"
        )


def between(repo: Path, good: Commit, bad: Commit) -> list[Commit]:
    """The commits after ``good`` up to ``bad`` on ``bad``'s first-parent line, oldest
    first (a merged branch is one step, as the line a main branch's history follows)."""
    lines = git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        "--format=%H %T %s",
        f"{good.sha}..{bad.sha}",
    ).splitlines()
    commits = []
    for line in lines:
        sha, tree, subject = [*line.split(" ", 2), ""][:3]
        commits.append(Commit(bad.ref if sha == bad.sha else sha, sha, tree, subject))
    return commits
