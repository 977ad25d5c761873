"""Refs of a real (small, temporary) git repository resolved to commits and trees."""

from __future__ import annotations

import pytest

from benchbench.core.errors import UsageError
from benchbench.run import refs
from tests.synthetic_repo import git, make_repo, write_module


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    make_repo(path, [10, 10, 11, 11])
    return path


def test_a_ref_resolves_to_its_commit_and_tree(repo):
    head = refs.resolve(repo, "main", "--base-ref")
    assert head.sha == git(repo, "rev-parse", "main")
    assert head.tree == git(repo, "rev-parse", "main^{tree}")
    assert head.subject == "commit 3: 11 calls" and head.recorded == (head.sha, False)
    older = refs.resolve(repo, "main~2", "--base-ref")
    assert older.name == f"main~2 ({older.sha[:10]})"


def test_a_ref_that_names_no_commit_is_a_usage_error_naming_it(repo):
    with pytest.raises(UsageError, match=r"--head-ref 'no-such-branch': no such commit"):
        refs.resolve(repo, "no-such-branch", "--head-ref")


def test_a_folder_that_is_no_repository_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="is not a git repository"):
        refs.repository(tmp_path)
    with pytest.raises(UsageError, match="no such folder"):
        refs.repository(tmp_path / "missing")


def test_the_working_tree_is_a_commit_of_its_files_and_leaves_the_index_alone(repo):
    clean = refs.resolve(repo, refs.WORKTREE, "--head-ref")
    assert clean.tree == git(repo, "rev-parse", "HEAD^{tree}")  # nothing changed: HEAD's files
    write_module(repo, 12)
    (repo / "untracked.txt").write_text("new file\n")
    status = git(repo, "status", "--porcelain")
    dirty = refs.resolve(repo, ".", "--head-ref")
    again = refs.resolve(repo, refs.WORKTREE, "--head-ref")
    assert dirty.tree != clean.tree and dirty == dataclass_replace_ref(again, ".")
    assert dirty.recorded == (git(repo, "rev-parse", "HEAD"), True)
    assert "untracked.txt" in git(repo, "ls-tree", "--name-only", dirty.sha)
    assert "CALLS = 12" in git(repo, "show", f"{dirty.sha}:tinywork/__init__.py")
    assert git(repo, "status", "--porcelain") == status  # the user's index untouched


def dataclass_replace_ref(commit, ref):
    import dataclasses

    return dataclasses.replace(commit, ref=ref)


def test_between_lists_the_commits_after_good_up_to_bad(repo):
    good = refs.resolve(repo, "main~3", "--good")
    bad = refs.resolve(repo, "main", "--bad")
    found = refs.between(repo, good, bad)
    assert [c.subject for c in found] == [
        "commit 1: 10 calls",
        "commit 2: 11 calls",
        "commit 3: 11 calls",
    ]
    assert found[-1].ref == "main"
    refs.check_ancestor(repo, good, bad)


def test_a_good_commit_that_is_not_an_ancestor_is_a_usage_error_naming_it(repo):
    good = refs.resolve(repo, "main", "--good")
    bad = refs.resolve(repo, "main~2", "--bad")
    with pytest.raises(UsageError, match=r"--good main \(.*\) is not an ancestor of --bad main~2"):
        refs.check_ancestor(repo, good, bad)
    with pytest.raises(UsageError, match="are one commit"):
        refs.check_ancestor(repo, good, good)


def test_an_edit_that_keeps_the_size_right_after_a_commit_is_in_the_working_tree(tmp_path):
    # Within the second the index was written, only git's racy-entry check sees such an
    # edit: the temporary index must keep the real one's mtime.
    for trial in range(3):
        repo = tmp_path / f"r{trial}"
        make_repo(repo, [10, 20])
        write_module(repo, 99)  # "CALLS = 20" -> "CALLS = 99": the same size
        dirty = refs.resolve(repo, refs.WORKTREE, "--head-ref")
        assert "CALLS = 99" in git(repo, "show", f"{dirty.sha}:tinywork/__init__.py")
