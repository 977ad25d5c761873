"""What may not change between a run and its --resume (run/resume.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchbench.core.version import __version__
from benchbench.machine.environment import Environment
from benchbench.run.resume import code_changes, environment_changes, refusal
from benchbench.suite.load import file_hash


def _row(suite: Path, **kw: object) -> dict[str, object]:
    row = {
        "harness_version": __version__,
        "suites": [{"name": "s", "path": str(suite), "hash": file_hash(suite)}],
        "git_sha": None,
    }
    row.update(kw)
    return row


def test_the_same_code_has_no_changes_and_each_difference_is_named(tmp_path: Path) -> None:
    suite = tmp_path / "s.py"
    suite.write_text("x = 1\n")
    assert code_changes(_row(suite), tmp_path) == []
    assert code_changes(_row(suite, harness_version="0.0.1"), tmp_path) == [
        f"benchbench 0.0.1 -> {__version__}"
    ]
    before = file_hash(suite)
    suite.write_text("x = 2\n")
    (changed,) = code_changes(_row(suite, suites=[{"path": str(suite), "hash": before}]), tmp_path)
    assert changed == f"suite file {suite} hash {before} -> {file_hash(suite)}"


def test_a_new_commit_in_the_checkout_is_a_change(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True)
        return done.stdout.strip()

    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "1")
    suite = tmp_path / "s.py"
    suite.write_text("x = 1\n")
    row = _row(suite, git_sha=git("rev-parse", "HEAD"))
    assert code_changes(row, tmp_path) == []
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "2")
    (changed,) = code_changes(row, tmp_path)
    assert changed.startswith("git sha ") and git("rev-parse", "HEAD")[:12] in changed


def test_environment_changes_name_each_field_and_the_refusal_the_fix() -> None:
    here = Environment(fields={"machine": "node-b", "torch": "2.13.0", "threads": 2})
    stored = {"machine": "node-a", "torch": "2.13.0", "threads": 2}
    changes = environment_changes(stored, here)
    assert changes == ["environment machine 'node-a' -> 'node-b'"]
    message = str(refusal("abc", changes))
    assert message.startswith("--resume abc: the run was measured elsewhere: environment")
    assert "--resume abc --force" in message and "start a new run" in message
