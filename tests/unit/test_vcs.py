"""Git state of the code under test, and `run --repo` validation, on real checkouts."""

from __future__ import annotations

import subprocess

import pytest

from benchbench.cli.run_input import repo as _repo
from benchbench.core.errors import UsageError
from benchbench.machine.vcs import git_state


def _git(path, *args):
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


def test_git_state_reads_sha_branch_and_dirty(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "trunk")
    (tmp_path / "a.txt").write_text("1")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "one")
    state = git_state(tmp_path)
    assert state.branch == "trunk" and state.dirty is False
    assert state.sha is not None and len(state.sha) == 40
    (tmp_path / "a.txt").write_text("2")
    assert git_state(tmp_path).dirty is True
    assert _repo(str(tmp_path)) == tmp_path


def test_a_directory_that_is_not_a_checkout_has_no_state_and_is_refused_by_repo(tmp_path):
    assert git_state(tmp_path).sha is None
    with pytest.raises(UsageError, match="is not a git checkout"):
        _repo(str(tmp_path))
    assert _repo(None) is None
